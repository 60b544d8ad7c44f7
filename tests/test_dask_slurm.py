"""`--dask slurm[:N]` on the project's real one-node Slurm (scripts/slurm.sh; skipped where it cannot
start): the walk forward's fold learned on a Dask worker that is a Slurm job, visible in squeue
while it runs and gone after, the result equal to the local run's; the jobs cancelled when the flow
fails and when the command is interrupted; `collect` sees the workers in sacct like any other job,
and `--exclude-job-name metapilot-dask` leaves them out (issue 52)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from dask_fixtures import HPC2N, figures, ingest, local_result, one_code_version, walk_forward  # noqa: F401
from slurm_fixtures import slurm, slurm_session  # noqa: F401

from metapilot.flows.batch_workers import JOB_NAME

pytestmark = [pytest.mark.usefixtures("prefect_harness"),
              pytest.mark.skipif(not HPC2N.exists(), reason="../shared/data is not beside the repository")]


def _workers(slurm, states: str = "PD,R,CG,S") -> dict[str, str]:
    """MetaPilot's worker jobs in squeue: id -> state."""
    out = slurm.run("squeue", "-h", "-n", JOB_NAME, "-t", states, "-o", "%i %T", check=False).stdout
    return dict(ln.split() for ln in out.splitlines() if ln.strip())


def _none_left(slurm, timeout_s: float = 30.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not _workers(slurm):
            return True
        time.sleep(0.3)
    return False


def _loaded_ids(db: str, cluster: str) -> set[str]:
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        return {str(r[0]) for r in con.execute("SELECT job_id FROM jobs WHERE cluster = ?", [cluster]).fetchall()}
    finally:
        con.close()


def test_folds_on_slurm_workers_equal_the_local_run_and_collect_sees_the_workers(slurm, local_result, tmp_path):
    from metapilot.flows.collect import collect_flow
    from test_slurm_collect import _wait_visible

    got: dict = {}
    run = threading.Thread(target=lambda: got.update(doc=walk_forward(tmp_path / "wf", "--dask", "slurm:2")),
                           name="walk-forward", daemon=True)
    (tmp_path / "wf").mkdir()
    run.start()
    seen: dict[str, set[str]] = {}  # every state each job was seen in, not only its last (CG follows R)
    while run.is_alive():
        for job, state in _workers(slurm).items():
            seen.setdefault(job, set()).add(state)
        time.sleep(0.3)
    run.join()
    assert "doc" in got, "the walk forward failed"
    assert any("RUNNING" in states for states in seen.values()), f"no worker job was seen running in squeue: {seen}"
    assert len(seen) == 1, f"one fold to learn: one job, not {seen}"  # slurm:2 is held to the folds to learn
    assert _none_left(slurm), f"worker jobs left in the queue: {_workers(slurm)}"
    assert figures(got["doc"]) == figures(local_result)
    assert list((tmp_path / "wf" / "dask-workers").glob(f"{JOB_NAME}-*.err")), "no job log beside the warehouse"

    ids = sorted(seen)
    _wait_visible(slurm, ids)
    db = str(tmp_path / "collected.duckdb")
    out = collect_flow(slurm.cluster, db=db, keep_names=True)
    assert out["outcome"] == "loaded" and set(ids) <= _loaded_ids(db, slurm.cluster), out
    db2 = str(tmp_path / "without-ours.duckdb")
    out = collect_flow(slurm.cluster, db=db2, exclude_names=[JOB_NAME])
    assert out["excluded"] >= len(ids)
    assert not set(ids) & _loaded_ids(db2, slurm.cluster)


def test_a_failing_flow_cancels_its_worker_jobs(slurm, tmp_path, monkeypatch):
    import json

    from prefect import flow, task

    from metapilot.flows.stages import with_runner

    monkeypatch.setenv("METAPILOT_DB", str(tmp_path / "w.duckdb"))  # the job logs go beside it
    parse = task(json.loads, name="parse")  # importable on the worker: runs there, fails there

    @flow(name="fails-on-a-worker")
    def fails() -> dict:
        return parse.submit("not json").result()

    with pytest.raises(json.JSONDecodeError):
        with_runner(fails, "slurm:1")()
    assert _none_left(slurm), f"worker jobs left in the queue: {_workers(slurm)}"
    assert list((tmp_path / "dask-workers").glob(f"{JOB_NAME}-*.err")), "the job never ran"


def test_ctrl_c_cancels_the_worker_jobs(slurm, tmp_path):
    db = ingest(tmp_path)
    env = {**slurm.env, "METAPILOT_WORKERS": "1"}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "metapilot.cli", "backtest", "--db", db, "--steps", "2000",
                             "--dask", "slurm:1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        end = time.monotonic() + 180
        while "RUNNING" not in _workers(slurm).values():
            assert time.monotonic() < end and proc.poll() is None, "no worker job ran"
            time.sleep(0.3)
        time.sleep(2)  # the fold is learning on it
        os.kill(proc.pid, signal.SIGINT)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 130, proc.stdout.read().decode(errors="replace")[-3000:]
    assert _none_left(slurm, 15), f"worker jobs left in the queue after Ctrl-C: {_workers(slurm)}"
