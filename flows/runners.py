"""Where parallel tasks run: threads on this machine by default, a Dask cluster when the user
points MetaPilot at one (`METAPILOT_DASK_ADDRESS=tcp://scheduler:8786`, or `--dask ADDRESS`;
`local:N` starts a temporary local Dask cluster of N workers; `slurm[:N]`, `pbs`, `sge`, `lsf`
start N workers as the site's batch jobs: `flows.batch_workers`, issue 52)."""

from __future__ import annotations

import os

from metapilot.ground.cores import workers
from prefect.task_runners import ThreadPoolTaskRunner


def task_runner(dask: str | None = None, db: str | None = None):
    """The task runner for the sweep, multi-seed training and walk-forward flows (`db`: where a
    batch cluster's settings file and job logs are, beside the warehouse)."""
    from metapilot.flows.batch_workers import batch_runner, parse_batch

    address = dask or os.environ.get("METAPILOT_DASK_ADDRESS")
    if not address:
        return ThreadPoolTaskRunner(max_workers=workers())
    if parse_batch(address):
        return batch_runner(address, db)
    from prefect_dask import DaskTaskRunner

    if address.startswith("local:"):
        n = int(address.split(":", 1)[1] or 2)
        # each worker's own pools get its share of the cores, not all of them (issue 54)
        share = str(max(1, workers() // n))
        return DaskTaskRunner(cluster_kwargs={"n_workers": n, "threads_per_worker": 1, "processes": True,
                                              "dashboard_address": None, "env": {"METAPILOT_WORKERS": share}})
    return DaskTaskRunner(address=address)
