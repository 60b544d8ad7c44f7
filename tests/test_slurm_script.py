"""scripts/slurm.sh: one command brings up a real one-node Slurm; stop leaves no process behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from slurm_fixtures import SCRIPT, alive, parse_exports, slurm, slurm_session, start_cluster, stop_cluster  # noqa: F401


def _session_members(sids: set[int]) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True).stdout.split("\n")
    return [int(p) for p, s in (ln.split() for ln in out if ln.strip()) if int(s) in sids]


def test_session_cluster_runs_jobs_and_accounts_them(slurm):
    assert set(slurm.run("sinfo", "-h", "-N", "-o", "%T").stdout.split()) == {"idle"}
    conf = slurm.conf.read_text()
    for line in ("PriorityType=priority/multifactor", "bf_interval=1", "sched_min_interval=", "config_overrides"):
        assert line in conf
    job = slurm.sbatch("-n", "1", "-t", "1", wrap="true")
    end = time.monotonic() + 30
    while time.monotonic() < end:
        out = slurm.run("sacct", "-n", "-X", "-j", job, "-o", "state", "-P").stdout.split()
        if out == ["COMPLETED"]:
            break
        time.sleep(0.5)
    assert out == ["COMPLETED"]


def test_start_prints_only_exports_and_stop_leaves_no_process(slurm_session):
    """A second cluster beside the session's: start's stdout is export lines only (what `eval` needs);
    a job still running at stop is cancelled, and every daemon and everything they forked is gone."""
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "METAPILOT_SLURM_DIR")}
    env["METAPILOT_SLURM_NO_INSTALL"] = "1"
    res = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    exports = parse_exports(res.stdout)
    assert set(exports) == {"SLURM_CONF", "METAPILOT_SLURM_DIR", "METAPILOT_SLURM_CLUSTER"}
    folder = exports["METAPILOT_SLURM_DIR"]
    jenv = {**env, **exports}
    pids = {ln.split()[0]: int(ln.split()[1]) for ln in open(f"{folder}/pids").read().splitlines()}
    assert set(pids) == {"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"}
    assert all(alive(p) for p in pids.values())
    subprocess.run(["sbatch", "-n", "1", "-o", "/dev/null", "--wrap", "sleep 600"], env=jenv, check=True, capture_output=True)
    end = time.monotonic() + 20
    while time.monotonic() < end and not _session_members({pids["slurmd"]}) [1:]:
        time.sleep(0.3)
    forked = [p for p in _session_members(set(pids.values())) if p not in pids.values()]
    stop = subprocess.run(["bash", str(SCRIPT), "stop", folder], env=jenv, capture_output=True, text=True, timeout=300)
    assert stop.returncode == 0, stop.stderr
    assert not [n for n, p in pids.items() if alive(p)]
    assert not _session_members(set(pids.values())), "processes of the stopped cluster are left"
    assert not [p for p in forked if alive(p)]
    # the session's cluster is untouched by the other one's stop
    assert set(slurm_session.run("sinfo", "-h", "-N", "-o", "%T").stdout.split()) == {"idle"}
    shutil.rmtree(folder, ignore_errors=True)


def test_stop_refuses_a_folder_it_did_not_make(tmp_path):
    res = subprocess.run(["bash", str(SCRIPT), "stop", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode != 0 and "no pids file" in res.stderr


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit status waits for init to collect it)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _ours(folder: str) -> list[int]:
    """Processes a cluster's start launched (they carry its mark) or recorded in its pids file."""
    import psutil

    recorded = {int(ln.split()[1]) for ln in open(f"{folder}/pids").read().splitlines() if ln.strip()}
    out = [p for p in recorded if _running(p)]
    for p in psutil.process_iter():
        try:
            if p.environ().get("METAPILOT_SLURM_OWNER") == folder and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.Error:
            pass
    return sorted(set(out))


def _gone(folder: str, timeout_s: float) -> list[int]:
    end = time.monotonic() + timeout_s
    while (left := _ours(folder)) and time.monotonic() < end:
        time.sleep(0.5)
    return left


@pytest.fixture
def short_tmp():
    """A short temporary folder: munged's socket path must stay under 108 bytes, which pytest's own
    tmp_path (deep under /tmp/pytest-of-root/.../popen-gwN/<test name>) exceeds in CI."""
    d = Path(tempfile.mkdtemp(prefix="mps", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _start_in(tmp_path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(["bash", str(SCRIPT), "start"], env={**env, "TMPDIR": str(tmp_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_stop_while_start_is_still_starting_leaves_nothing(short_tmp, slurm_session):
    """Issue 54, item 4: a stop while start still waits for MariaDB ends the start first (it launches
    nothing more), then munged and every daemon already launched, and what start ran beside them."""
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "METAPILOT_SLURM_DIR")}
    env["METAPILOT_SLURM_NO_INSTALL"] = "1"
    start = _start_in(short_tmp, env)
    try:
        end = time.monotonic() + 120
        folder = None
        while time.monotonic() < end:
            found = list(short_tmp.glob("metapilot-slurm.*/pids"))
            if found and "mariadbd" in found[0].read_text():
                folder = str(found[0].parent)
                break
            assert start.poll() is None, start.stderr.read()[-2000:]
            time.sleep(0.1)
        assert folder is not None, "start never launched MariaDB"
        assert "slurmctld" not in open(f"{folder}/pids").read()  # still starting
        stop = subprocess.run(["bash", str(SCRIPT), "stop", folder], env=env, capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stderr
        assert start.wait(timeout=30) != 0  # ended by the stop: no exports printed
        assert _gone(folder, 5) == []
        time.sleep(2)
        names = [ln.split()[0] for ln in open(f"{folder}/pids").read().splitlines()]
        assert "slurmctld" not in names and _ours(folder) == []  # nothing launched after the stop
    finally:
        if start.poll() is None:
            start.kill()


def test_a_stop_whose_caller_goes_away_still_ends_munged_and_the_rest(short_tmp, slurm_session):
    """Issue 54, item 4: munged outlived the tests' Slurm when the stop's caller ended mid-stop (its
    pipes closed, the next message killed the stop before munged, the last). The stop runs on in a
    session of its own, and a closed stderr, SIGTERM or SIGINT do not cut it short."""
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "METAPILOT_SLURM_DIR")}
    env["METAPILOT_SLURM_NO_INSTALL"] = "1"
    start = _start_in(short_tmp, env)
    out, err = start.communicate(timeout=300)
    assert start.returncode == 0, err[-3000:]
    folder = parse_exports(out)["METAPILOT_SLURM_DIR"]
    pids = {ln.split()[0]: int(ln.split()[1]) for ln in open(f"{folder}/pids").read().splitlines()}
    assert set(pids) == {"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"} and all(map(alive, pids.values()))
    stop = subprocess.Popen(["bash", str(SCRIPT), "stop", folder], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    stop.stdout.close()
    stop.stderr.close()  # the caller stops reading: every message of the stop now meets a closed pipe
    time.sleep(0.5)
    os.killpg(stop.pid, signal.SIGINT)
    os.killpg(stop.pid, signal.SIGTERM)
    stop.kill()  # and the caller's process itself goes
    stop.wait()
    assert _gone(folder, 90) == [], "processes of the stopped cluster are left"
    assert not [n for n, p in pids.items() if _running(p)]
    end = time.monotonic() + 60
    while not os.path.exists(f"{folder}/stopped") and time.monotonic() < end:  # the stop's own last checks
        time.sleep(0.5)
    assert os.path.exists(f"{folder}/stopped")
