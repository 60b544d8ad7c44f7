"""Collect flow: ask `sacct` for a cluster's jobs since the cursor and load them through the
ingest flow (warehouse/collect.py says how the window and the cursor are chosen). Scheduled hourly
by `flows/deployments.py` / `prefect.yaml` (`collect_all_flow`, for the clusters named there or
in $METAPILOT_COLLECT_CLUSTERS)."""

from __future__ import annotations

import os
from datetime import datetime

from metapilot.flows.ingest import ingest_flow
from metapilot.transforms.sacct import XDMOD_FIELDS
from metapilot.warehouse.collect import (
    collect_overlap,
    collected_path,
    drop_job_names,
    exclude_job_names,
    find_sacct,
    plan_window,
    run_sacct,
    sacct_args,
    sacct_time,
    window_after,
)
from metapilot.warehouse.ingest import IngestOptions
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE


@task(name="sacct", cache_policy=NONE)
def sacct_task(args: list[str], out: str) -> dict:
    """Run sacct into `out` (no retries: a failing sacct says why, and the next hour tries again)."""
    from pathlib import Path

    lines, stderr = run_sacct(args, Path(out))
    if stderr:
        get_run_logger().warning("sacct said: %s", stderr[:2000])
    return {"lines": lines, "stderr": stderr}


@flow(name="collect", log_prints=True)
def collect_flow(cluster: str, db: str | None = None, since: datetime | None = None,
                 until: datetime | None = None, sacct: str | None = None, keep_names: bool = False,
                 overlap: str | None = None, exclude_names: list[str] | None = None) -> dict:
    """Collect one Slurm cluster: sacct over [the cursor less `overlap` (a late record is still
    collected; $METAPILOT_COLLECT_OVERLAP, else one hour) or `since`, `until` or now), then ingest.

    Returns what was asked and loaded: cluster, start, end, cursor, command, file, lines and the
    ingest reports; `outcome` is `loaded`, `skipped` (same output as an earlier collect),
    `nothing` (no time after the cursor, or no jobs in the window). Raises SacctError when sacct
    fails (the warehouse is then unchanged). Jobs whose name starts with one of `exclude_names`
    (or $METAPILOT_COLLECT_EXCLUDE_JOB_NAMES) are left out, MetaPilot's own workers for one."""
    log = get_run_logger()
    window = plan_window(db, cluster, since, until, overlap=collect_overlap(overlap))
    out: dict = {"excluded": 0, "cluster": cluster, "start": sacct_time(window.start), "end": sacct_time(window.end),
                 "cursor": sacct_time(window.cursor) if window.cursor else None,
                 "overlap_s": int(window.overlap.total_seconds()), "command": None, "file": None,
                 "lines": 0, "reports": [], "outcome": "nothing", "message": None}
    if window.empty:
        out["message"] = (f"nothing to collect: the window ends ({out['end']} UTC) at or before it starts "
                          f"({out['start']} UTC); the clock is behind the data, or --until is too early")
        log.info(out["message"])
        return out
    args = sacct_args(find_sacct(sacct), cluster, window.start, window.end)
    path = collected_path(db, window)
    out["command"], out["file"] = args, str(path)
    res = sacct_task(args, str(path))
    dropped = drop_job_names(path, exclude_job_names(exclude_names)) if res["lines"] else 0
    out["lines"], out["excluded"] = res["lines"] - dropped, dropped
    if dropped:
        log.info("left out %d jobs named %s", dropped, ", ".join(exclude_job_names(exclude_names)))
    if res["stderr"]:
        out["message"] = f"sacct said: {res['stderr'][:500]}"
    log.info(window_after(window, res["lines"]))
    if res["lines"] == 0:
        path.unlink(missing_ok=True)
        out["file"] = None
        out["message"] = (out["message"] + "; " if out["message"] else "") + "no jobs in the window"
        return out
    opts = IngestOptions(cluster=cluster, fmt="sacct", timezone="UTC", delimiter="|", fields=list(XDMOD_FIELDS),
                         keep_names=keep_names)
    reports = ingest_flow([str(path)], db=db, opts=opts)
    out["reports"] = reports
    files = [r for r in reports if r.get("path") == str(path)]
    out["outcome"] = files[0]["outcome"] if files else "failed"
    return out


def clusters_to_collect(clusters: list[str] | None) -> list[str]:
    """The clusters named, else those in $METAPILOT_COLLECT_CLUSTERS (comma-separated)."""
    if clusters:
        return list(clusters)
    env = os.environ.get("METAPILOT_COLLECT_CLUSTERS", "")
    return [c.strip() for c in env.split(",") if c.strip()]


@flow(name="collect_all")
def collect_all_flow(clusters: list[str] | None = None, db: str | None = None, sacct: str | None = None,
                     overlap: str | None = None) -> list[dict]:
    """Hourly: collect every cluster named (or in $METAPILOT_COLLECT_CLUSTERS). A cluster whose
    sacct fails is reported and the others still run; the flow fails at the end if any did."""
    names = clusters_to_collect(clusters)
    log = get_run_logger()
    if not names:
        log.warning("no cluster to collect: name them in the deployment's `clusters` parameter, "
                    "`metapilot serve --collect C`, or $METAPILOT_COLLECT_CLUSTERS")
        return []
    results, errors = [], []
    for c in names:
        try:
            results.append(collect_flow(c, db=db, sacct=sacct, overlap=overlap))
        except Exception as e:  # noqa: BLE001 - one cluster's failure must not stop the others
            log.error("%s: %s", c, e)
            errors.append(f"{c}: {e}")
            results.append({"cluster": c, "outcome": "failed", "message": str(e)})
    if errors:
        raise RuntimeError("collect failed for " + "; ".join(errors))
    return results
