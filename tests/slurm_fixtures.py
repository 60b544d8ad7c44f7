"""A real one-node Slurm for the tests that need one (issue 39), started once per session by
`scripts/slurm.sh start` and stopped at the end.

Skipped, with the reason, where Slurm's Debian packages are absent (install them, or let the
script do it: METAPILOT_SLURM_INSTALL=1, what `.ci/run` sets, installs them as root with apt-get).
A cluster already started by the caller (`eval "$(bash scripts/slurm.sh start)"`, so
METAPILOT_SLURM_DIR is set) is used as it is and left running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "slurm.sh"
TOOLS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "sinfo", "sbatch", "scontrol", "sacct")


@dataclass(frozen=True)
class SlurmCluster:
    folder: Path
    conf: Path
    cluster: str
    env: dict[str, str]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, check=check, timeout=60)

    def sbatch(self, *opts: str, wrap: str = "sleep 1") -> str:
        out = self.run("sbatch", "--parsable", f"--chdir={self.folder}", "--output=/dev/null", *opts,
                       "--wrap", wrap).stdout.strip()
        return out.split(";")[0]

    def cancel_all(self, timeout_s: float = 30.0) -> None:
        """Cancel every job and wait until none is left running or pending (a clean slate per test)."""
        ids = self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
        if ids:
            self.run("scancel", *ids, check=False)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if not self.run("squeue", "-h", "-t", "PD,R,CG,S", "-o", "%i", check=False).stdout.strip():
                return
            time.sleep(0.3)


def alive(pid: int) -> bool:
    """Whether the process `pid` (one a script started) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(pred, timeout_s: float = 60.0, what: str = "") -> None:
    """Poll `pred` every 0.3 s until it holds; fail naming `what` after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def parse_exports(text: str) -> dict[str, str]:
    """The `export NAME=VALUE` lines the start prints (and nothing else is allowed on stdout)."""
    out = {}
    for line in text.splitlines():
        assert line.startswith("export ") and "=" in line, f"not an export line on stdout: {line!r}"
        name, _, value = line[len("export "):].partition("=")
        out[name] = value
    return out


def missing_tools() -> list[str]:
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [t for t in TOOLS if shutil.which(t, path=path) is None]


def start_cluster(settings: dict[str, str] | None = None) -> tuple[SlurmCluster, bool]:
    """(cluster, started here). Skips the calling test when Slurm cannot be had. `settings`: scripts/slurm.sh's
    environment for a cluster of its own (e.g. METAPILOT_SLURM_NODES): always started here, beside any other."""
    folder = os.environ.get("METAPILOT_SLURM_DIR")
    if not settings and folder and (Path(folder) / "slurm.conf").exists() and not (Path(folder) / "stopped").exists():
        env = {**os.environ, "SLURM_CONF": str(Path(folder) / "slurm.conf")}
        return SlurmCluster(Path(folder), Path(folder) / "slurm.conf",
                            os.environ.get("METAPILOT_SLURM_CLUSTER", "mini"), env), False
    miss = missing_tools()
    if miss and os.environ.get("METAPILOT_SLURM_INSTALL") != "1":
        reason = (f"real-Slurm tests skipped: {', '.join(miss)} not installed (apt-get install slurm-wlm slurmdbd "
                  "munge mariadb-server as root, or METAPILOT_SLURM_INSTALL=1 to let scripts/slurm.sh do it)")
        warnings.warn(reason, stacklevel=2)
        pytest.skip(reason)
    env = {**os.environ, "METAPILOT_SLURM_NO_INSTALL": "0" if os.environ.get("METAPILOT_SLURM_INSTALL") == "1" else "1",
           **(settings or {})}
    res = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        pytest.fail(f"scripts/slurm.sh start failed:\n{res.stderr[-4000:]}")
    exports = parse_exports(res.stdout)
    folder = Path(exports["METAPILOT_SLURM_DIR"])
    env = {**os.environ, **exports, "PATH": os.environ.get("PATH", "") + ":/usr/sbin"}
    return SlurmCluster(folder, Path(exports["SLURM_CONF"]), exports["METAPILOT_SLURM_CLUSTER"], env), True


def stop_cluster(cluster: SlurmCluster) -> subprocess.CompletedProcess:
    """Stop a cluster the tests started, and remove its folder once everything in it has stopped
    (`scripts/slurm.sh stop` keeps the folder, and its logs, for an operator)."""
    res = subprocess.run(["bash", str(SCRIPT), "stop", str(cluster.folder)], capture_output=True, text=True,
                         timeout=300, env=cluster.env)
    if res.returncode == 0:
        shutil.rmtree(cluster.folder, ignore_errors=True)
    return res


_SHARED: list[SlurmCluster] = []
_STARTED: list[SlurmCluster] = []  # the session's cluster, when started here: stopped once, by `stop_shared`


def shared_cluster() -> SlurmCluster:
    """The session's one cluster: started on first use, stopped when the session ends (each test module
    imports the fixtures, so pytest may make one fixture instance per module; they all share this
    cluster), or, failing that, when the test process exits."""
    if not _SHARED:
        cluster, started = start_cluster()
        os.environ["SLURM_CONF"] = str(cluster.conf)
        os.environ["METAPILOT_SLURM_CLUSTER"] = cluster.cluster
        if started:
            import atexit

            _STARTED.append(cluster)
            atexit.register(stop_shared)
        _SHARED.append(cluster)
    return _SHARED[0]


def stop_shared() -> None:
    """Stop the session's cluster if it was started here, once. At the session's end, not only at
    exit: an xdist worker may be ended while its exit hooks run, and the stop, which runs on in a
    session of its own, then finished without its folder being removed."""
    while _STARTED:
        stop_cluster(_STARTED.pop())


@pytest.fixture(scope="session")
def slurm_session():
    """One real Slurm for the whole session (its SLURM_CONF exported while it runs)."""
    yield shared_cluster()
    stop_shared()


@pytest.fixture
def slurm(slurm_session):
    """The session's Slurm with an empty queue before and after the test."""
    slurm_session.cancel_all()
    yield slurm_session
    slurm_session.cancel_all()
