"""Shared fixtures. Prefect's test harness starts once per session, and only for flow tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
REPO = TESTS.parent
SAMPLES = REPO / "samples"
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

# Under pytest-xdist (scripts/test.sh runs the suite in two processes) each worker gets a Prefect home
# of its own for the session: the temporary Prefect APIs that commands start keep their SQLite
# database there, and two workers' APIs must not share one database (nor see each other's
# deployments). The settings (profiles.toml) stay those of the default home.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_TEMPORARY: list[str] = []  # folders this session made in /tmp, removed when it ends (`pytest_unconfigure`)
if XDIST_WORKER and not os.environ.get("PREFECT_HOME"):
    import shutil
    import tempfile

    _home = tempfile.mkdtemp(prefix=f"metapilot-prefect-home-{XDIST_WORKER}-")
    _profiles = Path.home() / ".prefect" / "profiles.toml"
    if _profiles.is_file():
        shutil.copy2(_profiles, Path(_home) / "profiles.toml")
    os.environ["PREFECT_HOME"] = _home
    _TEMPORARY.append(_home)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "whole_machine: the test loads every core on purpose; under xdist no other test runs beside it")


def pytest_unconfigure(config):
    """Remove the session's temporary Prefect folders: every run left its results folder in /tmp,
    and full runs their workers' Prefect homes too (an atexit hook, which did not always run)."""
    import shutil

    while _TEMPORARY:
        shutil.rmtree(_TEMPORARY.pop(), ignore_errors=True)


# The scheduling of `-n 2 --dist loadfile` (scripts/test.sh): loadfile's, a module per unit of work,
# so that a module's module-scoped fixtures (an ingest, a trained controller, a served deployment) are
# built in one worker only, with two changes:
# - the modules that use the real Slurm (those that import tests/slurm_fixtures.py) are one unit:
#   they share the session's one cluster and expect its queue to be theirs alone. (xdist's own
#   `xdist_group` + `--dist loadgroup` would do that, but pytest-xdist 3.8 renames `item._nodeid`,
#   which pytest 9.2 no longer reads: the marks are silently ignored and the tests spread.)
# - the longest units go first, so that no long module starts last while the other worker idles.
#   Only an order: a module missing here, or renamed, still runs, in collection order after these.
SLURM_UNIT = "real-slurm"
LONGEST_FIRST = (  # by their time in a full run (--durations=0), longest first
    "tests/test_wheel.py", "tests/test_flows.py", "tests/test_cli_errors.py", "tests/test_backtest_cli.py",
    "tests/test_scheduled_runs.py", SLURM_UNIT, "tests/test_prefect_api.py", "tests/test_hostile_pass.py",
    "tests/test_controller.py", "tests/test_concurrency.py",
)


def _uses_real_slurm(root: Path, module: str, seen: dict[str, bool] = {}) -> bool:  # noqa: B006 (a cache)
    if module not in seen:
        try:
            seen[module] = "slurm_fixtures" in (root / module).read_text()
        except OSError:
            seen[module] = False
    return seen[module]


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    root = config.rootpath

    class SuiteScheduling(LoadFileScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SLURM_UNIT if _uses_real_slurm(root, module) else module

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:  # the queue is complete before the first unit is handed out
                first = {scope: i for i, scope in enumerate(LONGEST_FIRST)}
                units = sorted(self.workqueue.items(), key=lambda unit: first.get(unit[0], len(first)))
                self.workqueue.clear()
                self.workqueue.update(units)
                self._ordered = True
            super()._assign_work_unit(node)

    return SuiteScheduling(config, log)


_LOCKS: list = []


def _machine_locks(config):
    """Two lock files shared by the workers of this run: in the run's base temporary folder, the
    parent of each worker's own (pytest keeps the last few runs' and removes older ones)."""
    if not _LOCKS:
        base = getattr(config.option, "basetemp", None)
        if not (XDIST_WORKER and base):
            _LOCKS.append(None)
        else:
            shared = Path(base).parent
            _LOCKS.append((open(shared / "metapilot-gate.lock", "a"), open(shared / "metapilot-machine.lock", "a")))
    return _LOCKS[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under xdist, a `whole_machine` test runs alone: it waits for the test running in the other
    worker to end (module fixtures' set-up and tear-down included) and holds the others off until it
    ends. Every other test shares the machine lock; the gate keeps a waiting `whole_machine` test
    from being starved by the others' back-to-back tests."""
    locks = _machine_locks(item.config)
    if locks is None:
        yield
        return
    import fcntl

    gate, machine = locks
    alone = item.get_closest_marker("whole_machine") is not None
    fcntl.flock(gate, fcntl.LOCK_EX)
    fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    if not alone:
        fcntl.flock(gate, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(machine, fcntl.LOCK_UN)
        if alone:
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def prefect_harness():
    """A throwaway Prefect API (SQLite) for the whole session: flows run without a real server."""
    import tempfile

    os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = tempfile.mkdtemp(prefix="metapilot-prefect-results-")
    _TEMPORARY.append(os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"])
    import metapilot.flows  # noqa: F401  (quiet, offline Prefect defaults)
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture
def site_key() -> bytes:
    return bytes(range(32))


@pytest.fixture
def mem_con():
    from metapilot.warehouse.db import connect_memory

    con = connect_memory()
    yield con
    con.close()
