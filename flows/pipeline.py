"""The whole product as one flow: ingest -> tune -> dataset -> train -> held-out replay -> publish -> report.

`learn_flow` runs the learning stages on the windows its caller hands it (`LearningWindows`): it
never looks at the rest of the history, so a caller that may learn only from the past up to a
cut-off (a fold of the walk forward) passes windows that end there. `pipeline` and the monthly
retrain split the whole history (`plan_windows`) and pass the split in."""

from __future__ import annotations

from metapilot.flows.ingest import ingest_flow
from metapilot.flows.stages import (
    DEFAULT_SOURCES,
    build_dataset_flow,
    decide_task,
    publish_flow,
    train_flow,
    tune_flow,
    heldout_flow,
    weekly_report_flow,
    with_runner,
)
from metapilot.transforms.windows import LearningWindows
from metapilot.warehouse.ingest import IngestOptions
from prefect import flow, get_run_logger


def choose_cluster(db: str | None, cluster: str | None):
    """The cluster to learn from (the one asked for, else the longest usable history), its span and
    the weeks it has jobs in (`warehouse.jobs_store.busy_weeks`: what `split_history` splits)."""
    from metapilot.warehouse.db import connect, query_frame
    from metapilot.warehouse.jobs_store import busy_weeks

    from metapilot.ground.paths import sql_text

    con = connect(db)
    try:
        df = query_frame(con, sql_text("pipeline/clusters.sql"))
        if df.height == 0:
            raise LookupError("the warehouse holds no jobs: ingest logs first")
        if cluster:
            known = df["cluster"].to_list()
            df = df.filter(df["cluster"] == cluster)
            if df.height == 0:
                raise LookupError(f"no jobs for cluster {cluster!r}: the warehouse holds {', '.join(known)} "
                                  "(the log names its own cluster); run again with one of these as --cluster")
        row = df.row(0, named=True)
        return row["cluster"], row["first_submit"], row["last_submit"], busy_weeks(con, row["cluster"])
    finally:
        con.close()


def plan_windows(db: str | None, cluster: str | None) -> tuple[str, LearningWindows]:
    """The cluster to learn from and its whole history split into train, checkpoint and held-out
    windows over the weeks that have jobs (`split_history`): what `pipeline` and the retrain learn on."""
    from metapilot.transforms.windows import split_history

    cluster, first, last, busy = choose_cluster(db, cluster)
    return cluster, split_history(first, last, busy_weeks=busy)


@flow(name="learn", log_prints=True)
def learn_flow(cluster: str, windows: LearningWindows, db: str | None = None, seeds: tuple[int, ...] = (0,),
               steps: int = 2000, dask: str | None = None, baselines: tuple[str, ...] = ("bc",),
               sources: tuple[str, ...] = DEFAULT_SOURCES, publish: bool = True) -> dict:
    """On the windows the caller hands it: tune the teacher, build the dataset, train, replay the
    policy on the held-out weeks and apply the publish gate (`publish=False`: decide without
    publishing, as a fold of the walk forward does). `pipeline` runs it after the ingest, the
    monthly retrain on its own, with the same defaults (more seeds only give the gate more
    candidates to pass by luck: README, Evidence)."""
    log = get_run_logger()
    train, checkpoint, held_out = windows = LearningWindows(*windows)
    log.info("cluster %s: train %s..%s, checkpoint %s..%s, held-out %s..%s", cluster, train[0].date(),
             train[1].date(), checkpoint[0].date(), checkpoint[1].date(), held_out[0].date(), held_out[1].date())
    tuning = tune_flow(cluster, train, db=db)
    dataset = build_dataset_flow(cluster, train, checkpoint, db=db, sources=tuple(sources), tuning=tuning)
    policy_id = with_runner(train_flow, dask, db)(cluster, train, checkpoint, db=db, seeds=tuple(seeds), steps=steps,
                                                  baselines=tuple(baselines), sources=tuple(sources), tuning=tuning)
    heldout_id = heldout_flow(policy_id, db=db, start=held_out[0], end=held_out[1])
    decision = publish_flow(policy_id, heldout_id, db=db) if publish else decide_task(db, policy_id)
    return {"cluster": cluster, "dataset": dataset, "policy_id": policy_id, "heldout_id": heldout_id,
            "published": decision, "windows": windows.to_dict()}


@flow(name="pipeline", log_prints=True)
def pipeline_flow(paths: list[str], db: str | None = None, cluster: str | None = None, seeds: tuple[int, ...] = (0,),
                  steps: int = 2000, dask: str | None = None, baselines: tuple[str, ...] = ("bc",),
                  sources: tuple[str, ...] = DEFAULT_SOURCES, ingest_cluster: str | None = None) -> dict:
    """Run every stage on `paths` (none: learn from what the warehouse holds); returns where
    everything is. `ingest_cluster` names the logs that carry no cluster name of their own (SWF),
    as `ingest --cluster` does; `cluster` is the one to learn from."""
    ingest = ingest_flow(list(paths), db=db, opts=IngestOptions(cluster=ingest_cluster)) if paths else []
    chosen, windows = plan_windows(db, cluster)
    learned = learn_flow(chosen, windows, db=db, seeds=tuple(seeds), steps=steps, dask=dask,
                         baselines=tuple(baselines), sources=tuple(sources))
    decision = learned["published"]
    published = learned["policy_id"] if decision["kind"] == "controller" else None
    report = weekly_report_flow(learned["cluster"], None, db=db, policy_id=published)
    return {"ingest": ingest, **learned, "report": report}
