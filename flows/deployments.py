"""Schedules kept in the repo: daily ingest of a landing directory, hourly collection from sacct,
the weekly report on Monday morning, a monthly retrain (`pipeline` without its ingest and report:
tune, dataset, train, held-out replay, publish), and a monthly walk forward the day after (what
following MetaPilot's decisions would have done; the weekly report shows the latest). Served by `metapilot serve` (Prefect's `serve`: one
long-running process, local server or none) or, with a Prefect server and work pool, by
`prefect deploy --all` from `prefect.yaml`."""

from __future__ import annotations

from dataclasses import dataclass

from metapilot.flows.backtest import backtest_flow, publish_next_task
from metapilot.flows.collect import collect_all_flow
from metapilot.flows.ingest import landing_ingest_flow
from metapilot.flows.pipeline import learn_flow, plan_windows
from metapilot.flows.stages import weekly_report_flow
from prefect import flow


@dataclass(frozen=True)
class Schedules:
    """Cron expressions (server-local time zone given separately)."""

    ingest: str = "15 2 * * *"  # every day 02:15
    collect: str = "5 * * * *"  # every hour at :05 (sacct, incremental from the cursor)
    weekly_report: str = "0 7 * * 1"  # Monday 07:00
    retrain: str = "0 3 1 * *"  # 1st of the month 03:00
    backtest: str = "0 3 2 * *"  # 2nd of the month 03:00 (the walk forward)
    timezone: str = "UTC"


@flow(name="retrain")
def retrain_flow(cluster: str | None = None, db: str | None = None, seeds: tuple[int, ...] = (0,), steps: int = 2000,
                 dask: str | None = None) -> dict:
    """Monthly: learn on the latest history, replay on the newest held-out weeks, publish: what
    `pipeline` does after its ingest, with its defaults."""
    chosen, windows = plan_windows(db, cluster)
    return learn_flow(chosen, windows, db=db, seeds=tuple(seeds), steps=steps, dask=dask)


@flow(name="backtest_all")
def backtest_all_flow(db: str | None = None, cluster: str | None = None, steps: int = 2000,
                      dask: str | None = None) -> list[dict]:
    """Monthly: the walk forward of each cluster (or the one named) with `metapilot backtest`'s
    defaults. A cluster whose history is still too short is skipped, saying how much it needs; a
    failure on one cluster fails the run after the others have been walked. Returns, per cluster walked,
    its result (`backtest`) and what was published from it (`published`), as `pipeline --backtest` does."""
    from prefect import get_run_logger

    from metapilot.flows.backtest import plan_origins

    log = get_run_logger()
    out, failed = [], []
    for c in _clusters(db, cluster):
        try:
            plan_origins(db, c, 4, None, None, None)
        except ValueError as e:
            log.info("%s: no walk forward yet: %s", c, e)
            continue
        try:
            result = backtest_flow(db=db, cluster=c, steps=steps, dask=dask)
            out.append({"backtest": result, "published": publish_next_task(db, result)})
        except Exception as e:  # noqa: BLE001 - the other clusters are still walked; the run fails below
            log.error("%s: the walk forward failed: %s: %s", c, type(e).__name__, e)
            failed.append(c)
    if failed:
        raise RuntimeError(f"the walk forward failed for {', '.join(failed)} (see the log); the others were stored")
    return out


def _clusters(db: str | None, cluster: str | None) -> list[str]:
    from metapilot.ground.paths import sql_text
    from metapilot.warehouse.db import connect, query_frame

    if cluster:
        return [cluster]
    con = connect(db)
    try:
        return query_frame(con, sql_text("pipeline/clusters.sql"))["cluster"].to_list()
    finally:
        con.close()


@flow(name="weekly_report_all")
def weekly_report_all_flow(db: str | None = None, cluster: str | None = None) -> list[dict]:
    """Monday: the last complete week's report for each cluster (or the one named)."""
    return [weekly_report_flow(c, None, db=db) for c in _clusters(db, cluster)]


def deployments(landing: str, db: str | None = None, schedules: Schedules = Schedules(),
                collect_clusters: tuple[str, ...] | list[str] = ()) -> list:
    """The five scheduled deployments, ready for `prefect.serve`. The hourly collect runs for
    `collect_clusters` (else the clusters in $METAPILOT_COLLECT_CLUSTERS when it runs)."""
    from prefect.schedules import Cron

    return [
        landing_ingest_flow.to_deployment(name="daily-ingest", parameters={"landing": landing, "db": db},
                                  schedule=Cron(schedules.ingest, timezone=schedules.timezone),
                                  tags=["metapilot", "warehouse-writer"]),
        collect_all_flow.to_deployment(name="hourly-collect", parameters={"clusters": list(collect_clusters), "db": db},
                                       schedule=Cron(schedules.collect, timezone=schedules.timezone),
                                       tags=["metapilot", "warehouse-writer"]),
        weekly_report_all_flow.to_deployment(name="weekly-report", parameters={"db": db},
                                             schedule=Cron(schedules.weekly_report, timezone=schedules.timezone),
                                             tags=["metapilot"]),
        retrain_flow.to_deployment(name="monthly-retrain", parameters={"db": db},
                                   schedule=Cron(schedules.retrain, timezone=schedules.timezone),
                                   tags=["metapilot", "warehouse-writer"]),
        backtest_all_flow.to_deployment(name="monthly-backtest", parameters={"db": db},
                                        schedule=Cron(schedules.backtest, timezone=schedules.timezone),
                                        tags=["metapilot", "warehouse-writer"]),
    ]
