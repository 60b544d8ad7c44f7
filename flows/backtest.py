"""The walk forward as a flow: at each origin, the learning stages of `pipeline` on the past only,
then every fold's decision followed over the span and judged (`models.evaluation.backtest`).

A fold whose learning fails is recorded with its reason and followed by the guarded leader; the
other folds are still learned and reported. Nothing is stored until the whole comparison is
ready, and then in one transaction."""

from __future__ import annotations

from datetime import datetime, timedelta

from metapilot.flows.pipeline import choose_cluster, learn_flow
from metapilot.flows.common import warehouse_writer
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE


def plan_origins(db: str | None, cluster: str | None, every_weeks: int, warmup_weeks: int | None,
                 start: datetime | None, end: datetime | None) -> tuple[str, datetime, list[datetime], list[datetime], datetime]:
    """The cluster, its first submit, the weeks with jobs, the origins and the span's end."""
    from metapilot.transforms.windows import walk_forward_origins

    cluster, first, last, busy = choose_cluster(db, cluster)
    span_end = last + timedelta(seconds=1)
    if end is not None:
        span_end = min(span_end, end)
    origins = walk_forward_origins(busy, span_end, every_weeks, warmup_weeks, start, end)
    return cluster, first, busy, origins, span_end


@task(name="walk-forward-judge", cache_policy=NONE)
def judge_task(db: str | None, cluster: str, folds: list, span_end: datetime, current: str, planner: bool) -> dict:
    from metapilot.models.evaluation.backtest import run_backtest
    from metapilot.warehouse.db import connect

    log = get_run_logger()
    with warehouse_writer(db, log=log.info):
        con = connect(db)
        try:
            return run_backtest(con, cluster, folds, span_end, current=current, db=db, planner=planner, log=log.info)
        finally:
            con.close()


@flow(name="backtest", log_prints=True)
def backtest_flow(db: str | None = None, cluster: str | None = None, every_weeks: int = 4,
                  warmup_weeks: int | None = None, start: datetime | None = None, end: datetime | None = None,
                  current: str = "FCFS+EASY", steps: int = 2000, dask: str | None = None, planner: bool = True) -> dict:
    """Walk forward over the cluster's history (see the module docstring); returns the result."""
    from metapilot.models.evaluation.backtest import Fold
    from metapilot.models.evaluation.walk_forward import parse_rule
    from metapilot.transforms.windows import split_history

    parse_rule(current)  # a mistyped rule stops here, before any learning
    log = get_run_logger()
    cluster, first, busy, origins, span_end = plan_origins(db, cluster, every_weeks, warmup_weeks, start, end)
    log.info("walk forward on %s: %d origins from %s, every %d weeks, to %s", cluster, len(origins),
             origins[0].date(), every_weeks, span_end.date())
    folds = []
    for t in origins:
        try:
            windows = split_history(first, t, busy_weeks=[w for w in busy if w < t])
            learned = learn_flow(cluster, windows, db=db, steps=steps, dask=dask, publish=False)
            decision = learned["published"]
            folds.append(Fold(t, learned["policy_id"], decision["kind"], decision["message"]))
        except Exception as e:  # noqa: BLE001 - one fold's failure is reported, the others still run
            log.warning("fold at %s: learning failed: %s: %s", t.date(), type(e).__name__, e)
            folds.append(Fold(t, None, "failed", f"learning failed: {type(e).__name__}: {e}"))
    return judge_task(db, cluster, folds, span_end, current, planner)
