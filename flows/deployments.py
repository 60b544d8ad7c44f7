"""Schedules kept in the repo: daily ingest of a landing directory, hourly collection from sacct,
the weekly report on Monday morning, a monthly retrain (`pipeline` without its ingest and report:
tune, dataset, train, held-out replay, publish). Served by `metapilot serve` (Prefect's `serve`: one
long-running process, local server or none) or, with a Prefect server and work pool, by
`prefect deploy --all` from `prefect.yaml`."""

from __future__ import annotations

from dataclasses import dataclass

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
    timezone: str = "UTC"


@flow(name="retrain")
def retrain_flow(cluster: str | None = None, db: str | None = None, seeds: tuple[int, ...] = (0,), steps: int = 2000,
                 dask: str | None = None) -> dict:
    """Monthly: learn on the latest history, replay on the newest held-out weeks, publish: what
    `pipeline` does after its ingest, with its defaults."""
    chosen, windows = plan_windows(db, cluster)
    return learn_flow(chosen, windows, db=db, seeds=tuple(seeds), steps=steps, dask=dask)


@flow(name="weekly_report_all")
def weekly_report_all_flow(db: str | None = None, cluster: str | None = None) -> list[dict]:
    """Monday: the last complete week's report for each cluster (or the one named)."""
    from metapilot.warehouse.db import connect, query_frame

    from metapilot.ground.paths import sql_text

    con = connect(db)
    try:
        clusters = [cluster] if cluster else query_frame(con, sql_text("pipeline/clusters.sql"))["cluster"].to_list()
    finally:
        con.close()
    return [weekly_report_flow(c, None, db=db) for c in clusters]


def deployments(landing: str, db: str | None = None, schedules: Schedules = Schedules(),
                collect_clusters: tuple[str, ...] | list[str] = ()) -> list:
    """The four scheduled deployments, ready for `prefect.serve`. The hourly collect runs for
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
    ]
