"""scripts/slurm.sh: one command brings up a real one-node Slurm; stop leaves no process behind."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from slurm_fixtures import SCRIPT, parse_exports, slurm, slurm_session, start_cluster, stop_cluster  # noqa: F401


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


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
    assert all(_alive(p) for p in pids.values())
    subprocess.run(["sbatch", "-n", "1", "-o", "/dev/null", "--wrap", "sleep 600"], env=jenv, check=True, capture_output=True)
    end = time.monotonic() + 20
    while time.monotonic() < end and not _session_members({pids["slurmd"]}) [1:]:
        time.sleep(0.3)
    forked = [p for p in _session_members(set(pids.values())) if p not in pids.values()]
    stop = subprocess.run(["bash", str(SCRIPT), "stop", folder], env=jenv, capture_output=True, text=True, timeout=300)
    assert stop.returncode == 0, stop.stderr
    assert not [n for n, p in pids.items() if _alive(p)]
    assert not _session_members(set(pids.values())), "processes of the stopped cluster are left"
    assert not [p for p in forked if _alive(p)]
    # the session's cluster is untouched by the other one's stop
    assert set(slurm_session.run("sinfo", "-h", "-N", "-o", "%T").stdout.split()) == {"idle"}


def test_stop_refuses_a_folder_it_did_not_make(tmp_path):
    res = subprocess.run(["bash", str(SCRIPT), "stop", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode != 0 and "no pids file" in res.stderr
