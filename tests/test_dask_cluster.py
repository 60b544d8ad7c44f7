"""The walk forward's folds on a real Dask cluster of separate processes (issue 52): a scheduler and
two workers started by `scripts/dask-cluster.sh` in a folder of their own, reached through
`--dask tcp://...`. The result equals the local run's figure for figure; a worker killed while it
learns the fold: the fold is learned again on the other worker and the result is still the same."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from dask_fixtures import HPC2N, dask_cluster, figures, local_result, one_code_version, walk_forward  # noqa: F401
from slurm_fixtures import alive

pytestmark = [pytest.mark.usefixtures("prefect_harness"),
              pytest.mark.skipif(not HPC2N.exists(), reason="../shared/data is not beside the repository")]


def _folds_done(client, since: float) -> list[str]:
    """The workers (by name) that finished a fold's task since `since` (the scheduler's task stream)."""
    names = {addr: w["name"] for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()}
    return [names.get(r["worker"], r["worker"]) for r in client.get_task_stream(start=since)
            if str(r["key"]).startswith("fold_task-")]


def test_the_script_stops_what_it_started_by_pid(dask_cluster):
    pids = dask_cluster.pids()
    assert len(pids) == 2 and all(alive(p) for p in pids.values())
    assert (dask_cluster.folder / "scheduler.pid").is_file()


def test_folds_on_a_dask_cluster_equal_the_local_run(dask_cluster, local_result, tmp_path):
    from distributed import Client

    with Client(dask_cluster.address, timeout=30) as client:
        since = time.time()
        client.get_task_stream(start=since)  # the scheduler records tasks from now on
        doc = walk_forward(tmp_path, "--dask", dask_cluster.address)
        assert len(_folds_done(client, since)) == 1, "the fold did not run on the cluster"
    assert figures(doc) == figures(local_result)
    assert doc["periods"][0]["fold_policy_id"], "the fold learned nothing"


def test_a_worker_killed_mid_fold_its_fold_is_learned_elsewhere_and_the_result_is_the_same(
        dask_cluster, local_result, tmp_path):
    from distributed import Client

    got: dict = {}
    run = threading.Thread(target=lambda: got.update(doc=walk_forward(tmp_path, "--dask", dask_cluster.address)),
                           name="walk-forward", daemon=True)
    pids = dask_cluster.pids()
    with Client(dask_cluster.address, timeout=30) as client:
        since = time.time()
        client.get_task_stream(start=since)
        run.start()
        names = {addr: w["name"] for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()}
        busy = _wait(lambda: [names[a] for a, keys in client.processing().items() if keys], 120, "a fold to start")
        victim = busy[0]
        # mid-run: the fold's own warehouse is being written
        _wait(lambda: list(tmp_path.glob("backtests/folds/*/*/warehouse.duckdb")), 120, "the fold's warehouse")
        time.sleep(2)
        os.kill(pids[victim], signal.SIGKILL)
        run.join(300)
        assert not run.is_alive() and "doc" in got, "the walk forward did not finish after the kill"
        done = _folds_done(client, since)
    other = next(w for w in pids if w != victim)
    assert done == [other], f"the fold was not learned again on the other worker: {done}"
    assert figures(got["doc"]) == figures(local_result)


def _wait(pred, timeout_s: float, what: str):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")
