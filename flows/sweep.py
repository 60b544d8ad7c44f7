"""The 21-baseline sweep as parallel tasks: workers replay, the flow alone writes the warehouse."""

from __future__ import annotations

from datetime import datetime

from metapilot.flows.runners import task_runner
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE


@task(name="replay-baseline", cache_policy=NONE, retries=1)
def replay_baseline(workload, capacity, policy: str, backfill: str) -> dict:
    """One replay; returns plain data (overall row, weekly rows, counters) so any worker can run it."""
    from metapilot.models.simulator import simulate

    res = simulate(workload, capacity, policy, backfill)
    return {"policy": policy, "backfill": backfill, "overall": res.metrics(), "weekly": res.weekly(),
            "counters": res.counters, "wall_s": res.wall_s, "engine_s": res.engine_s}


@flow(name="baseline-sweep")
def baseline_sweep_flow(cluster: str, db: str | None = None, start: datetime | None = None,
                        end: datetime | None = None, partition: str | None = None) -> list[str]:
    """Replay the window under the 21 baselines in parallel and store every run; returns run ids."""
    from metapilot.models.simulator import RULE_PAIRS, Capacity
    from metapilot.transforms.workload import normalise
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.sim_store import load_capacity, load_window, store_run

    con = connect(db)
    try:
        jobs = load_window(con, cluster, start, end, partition)
        capacity = Capacity.from_rows(load_capacity(con, cluster, start or jobs["submit_time"].min()))
        workload = normalise(jobs, start)
    finally:
        con.close()
    futures = [replay_baseline.submit(workload, capacity, p, b) for p, b in RULE_PAIRS]
    results = [f.result() for f in futures]
    con = connect(db)
    try:
        ids = [store_run(con, cluster=cluster, partition=partition, window_from=start, window_to=end,
                         policy=r["policy"], backfill=r["backfill"],
                         objective_schedule={"fixed": f"{r['policy']}+{r['backfill']}"}, seed=None,
                         wall_s=r["wall_s"], counters=r["counters"], overall=r["overall"], weekly=r["weekly"],
                         engine_s=r["engine_s"])
               for r in results]
    finally:
        con.close()
    get_run_logger().info("stored %d baseline runs for %s", len(ids), cluster)
    return ids


def run_sweep(cluster: str, db: str | None = None, dask: str | None = None, **window) -> list[str]:
    """Run the sweep with the configured task runner (threads, or Dask when asked)."""
    return baseline_sweep_flow.with_options(task_runner=task_runner(dask, db))(cluster, db, **window)
