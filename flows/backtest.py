"""The walk forward as a flow: at each origin, the learning stages of `pipeline` on the past only,
then every fold's decision followed over the span and judged (`models.evaluation.backtest`).

Each fold learns in its own warehouse, holding only the jobs submitted before its origin
(`warehouse.fold_store`): it cannot see the future by construction, folds run in parallel without
waiting on one another's locks, and their policies and held-out replays never mix with the
operator's (the weekly report reads those). The fold warehouses sit under
`backtests/<backtest_id>/` beside the warehouse and are removed once judged, unless kept.

A fold whose learning fails is recorded with its reason and followed by the guarded leader; the
other folds are still learned and reported. Nothing is stored in the operator's warehouse until the
whole comparison is ready, and then in one transaction."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

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
def judge_task(db: str | None, cluster: str, folds: list, span_end: datetime, current: str, planner: bool,
               backtest_id: str) -> dict:
    from metapilot.models.evaluation.backtest import run_backtest
    from metapilot.warehouse.db import connect

    log = get_run_logger()
    with warehouse_writer(db, log=log.info):
        con = connect(db)
        try:
            return run_backtest(con, cluster, folds, span_end, current=current, planner=planner, log=log.info,
                                backtest_id=backtest_id)
        finally:
            con.close()


def fold_dir(db: str | None, backtest_id: str) -> Path:
    """Where one walk forward's fold warehouses live while it runs (beside the operator's warehouse)."""
    from metapilot.ground.paths import db_path

    return db_path(db).parent / "backtests" / backtest_id


def learn_fold(db: str | None, cluster: str, first: datetime, busy: list[datetime], origin: datetime,
               steps: int, folder: str) -> "Fold":
    """The learning stages of `pipeline`, in a warehouse of their own that holds only the jobs
    submitted before `origin`; a failure is the fold's verdict, with its reason, never the walk
    forward's end."""
    from metapilot.models.evaluation.backtest import Fold
    from metapilot.transforms.windows import split_history
    from metapilot.warehouse.fold_store import make_fold_warehouse

    fold_db = str(Path(folder) / f"fold-{origin:%Y-%m-%d}" / "warehouse.duckdb")
    try:
        windows = split_history(first, origin, busy_weeks=[w for w in busy if w < origin])
        make_fold_warehouse(db, cluster, origin, fold_db)
        learned = learn_flow(cluster, windows, db=fold_db, steps=steps, dask=None, publish=False)
        decision = learned["published"]
        return Fold(origin, learned["policy_id"], decision["kind"], decision["message"], fold_db)
    except Exception as e:  # noqa: BLE001 - one fold's failure is reported, the others still run
        get_run_logger().warning("fold at %s: learning failed: %s: %s", origin.date(), type(e).__name__, e)
        return Fold(origin, None, "failed", f"learning failed: {type(e).__name__}: {e}", fold_db)


@task(name="walk-forward-fold", cache_policy=NONE)
def fold_task(db: str | None, cluster: str, first: datetime, busy: list[datetime], origin: datetime, steps: int,
              folder: str):
    return learn_fold(db, cluster, first, busy, origin, steps, folder)


@flow(name="walk-forward-folds")
def folds_flow(db: str | None, cluster: str, first: datetime, busy: list[datetime], origins: list[datetime],
               steps: int, folder: str) -> list:
    """Every origin's fold at once, on the flow's task runner (Dask workers with `--dask`)."""
    futures = [fold_task.submit(db, cluster, first, busy, t, steps, folder) for t in origins]
    return [f.result() for f in futures]


@flow(name="backtest", log_prints=True)
def backtest_flow(db: str | None = None, cluster: str | None = None, every_weeks: int = 4,
                  warmup_weeks: int | None = None, start: datetime | None = None, end: datetime | None = None,
                  current: str = "FCFS+EASY", steps: int = 2000, dask: str | None = None, planner: bool = True,
                  keep_folds: bool = False) -> dict:
    """Walk forward over the cluster's history (see the module docstring); returns the result.
    Without `dask` the folds learn one after another (each already uses the machine's cores); with
    it, in parallel on the Dask cluster, each fold's own training on that worker's threads."""
    from metapilot.flows.stages import with_runner
    from metapilot.models.evaluation.backtest import new_backtest_id
    from metapilot.models.evaluation.walk_forward import parse_rule

    parse_rule(current)  # a mistyped rule stops here, before any learning
    log = get_run_logger()
    cluster, first, busy, origins, span_end = plan_origins(db, cluster, every_weeks, warmup_weeks, start, end)
    log.info("walk forward on %s: %d origins from %s, every %d weeks, to %s", cluster, len(origins),
             origins[0].date(), every_weeks, span_end.date())
    backtest_id = new_backtest_id()
    folder = fold_dir(db, backtest_id)
    try:
        if dask:
            folds = with_runner(folds_flow, dask)(db, cluster, first, busy, origins, steps, str(folder))
        else:
            folds = [learn_fold(db, cluster, first, busy, t, steps, str(folder)) for t in origins]
        out = judge_task(db, cluster, folds, span_end, current, planner, backtest_id)
    finally:
        if not keep_folds:
            shutil.rmtree(folder, ignore_errors=True)
    if keep_folds:
        out["folds_kept"] = str(folder)
    return out


@flow(name="pipeline-backtest", log_prints=True)
def pipeline_backtest_flow(paths: list[str], db: str | None = None, cluster: str | None = None, steps: int = 2000,
                           dask: str | None = None, ingest_cluster: str | None = None,
                           current: str = "FCFS+EASY") -> dict:
    """`pipeline --backtest`: ingest, then the walk forward instead of the one-window learning, then
    the weekly report, whose section "If you had followed MetaPilot" shows it."""
    from metapilot.flows.ingest import ingest_flow
    from metapilot.flows.stages import weekly_report_flow
    from metapilot.warehouse.ingest import IngestOptions

    ingest = ingest_flow(list(paths), db=db, opts=IngestOptions(cluster=ingest_cluster)) if paths else []
    out = backtest_flow(db=db, cluster=cluster, steps=steps, dask=dask, current=current)
    report = weekly_report_flow(out["cluster"], None, db=db)
    return {"ingest": ingest, "backtest": out, "report": report}
