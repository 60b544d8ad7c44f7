"""The numbers of the weekly report: every figure comes from one query in `sql/reports/`, run on
the warehouse as it is; the renderers only format them. `collect` returns plain JSON-able data
(report.json is exactly this)."""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta, timezone
from typing import Any

import duckdb
import polars as pl
from metapilot.warehouse.db import has_table, query_frame
from metapilot.warehouse.jobs_store import require_jobs

from metapilot.ground.paths import sql_text
from metapilot.ground.weeks import parse_week

_PARAM = re.compile(r"\$([A-Za-z_]\w*)")


def report_sql(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> pl.DataFrame:
    """Run `sql/reports/<name>.sql` with the named parameters it uses (others are ignored)."""
    text = sql_text(f"reports/{name}.sql")
    used = set(_PARAM.findall("\n".join(ln.split("--")[0] for ln in text.splitlines())))
    return query_frame(con, text, {k: v for k, v in params.items() if k in used})


def last_complete_week(con: duckdb.DuckDBPyConnection, cluster: str) -> str:
    """The default week of the report: the last complete ISO week in the cluster's data."""
    df = report_sql(con, "last_complete_week", cluster=cluster)
    if df.height == 0 or df["week"][0] is None:
        require_jobs(con, cluster)
        raise LookupError(f"cluster {cluster!r} has no complete ISO week of data yet: give --week")
    return str(df["week"][0])


def _json(v: Any) -> Any:
    if isinstance(v, datetime):
        return (v if v.tzinfo else v.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).isoformat()
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    return v


def rows(df: pl.DataFrame) -> list[dict]:
    """A frame as JSON-able row dicts (timestamps as ISO strings in UTC)."""
    return [_json(r) for r in df.iter_rows(named=True)]


def collect(con: duckdb.DuckDBPyConnection, cluster: str, week: str, *, roi_config=None,
            generated_at: datetime | None = None) -> dict:
    """Every number of the report for `cluster` and ISO `week`, as plain data."""
    from metapilot.ground.version import code_version

    week_start = parse_week(week)
    p = {"cluster": cluster, "week_start": week_start}
    glance = report_sql(con, "week_at_a_glance", **p)
    if glance.height == 0:
        require_jobs(con, cluster)
        span = report_sql(con, "week_span", cluster=cluster).row(0, named=True)
        raise LookupError(f"week {week} is outside the data of {cluster} ({span['first_week']} .. {span['last_week']})")
    decision = _decision(con, cluster)
    report: dict[str, Any] = {
        "cluster": cluster,
        "week": week,
        "week_start": _json(week_start),
        "week_end": _json(week_start + timedelta(days=7)),
        "generated_at": _json(generated_at or datetime.now(timezone.utc).replace(microsecond=0)),
        "code_version": code_version(),
        "capacity": rows(report_sql(con, "capacity_week", **p)),
        "glance": rows(glance),
        "daily": rows(report_sql(con, "daily_utilisation", **p)),
        "queue_hourly": rows(report_sql(con, "queue_hourly", **p).drop("hour_utc")),
        "wait_by_size": rows(report_sql(con, "wait_by_size", **p)),
        "recommendations": _recommendations(con, cluster, week_start, decision),
    }
    report["heldout"] = _heldout(con, cluster)
    report["decision"] = decision
    from metapilot.warehouse.data_docs import data_quality

    report["data_quality"] = data_quality(con, cluster)  # ingest quarantine, validation, GX data docs
    report["roi"] = _roi(report["heldout"], roi_config)
    if report["roi"]["status"] == "ok":
        from metapilot.warehouse.publish_store import not_published_note, publication

        pub = publication(con, cluster, report["heldout"]["policy_id"])
        if not pub["published"]:  # a refused controller's ROI is no case for deploying it
            report["roi"]["note"] = not_published_note(pub["decision"])
    from metapilot.models.reporting.backtest import backtest_section

    report["backtest"] = backtest_section(con, cluster, rows, roi_config)  # "If you had followed MetaPilot"
    placement = _placement(con, cluster)
    if placement:
        report["placement"] = placement
    return report


def _placement(con: duckdb.DuckDBPyConnection, cluster: str) -> list[dict]:
    """The latest node-placement replay of each policy and mode (SPEC §11); [] when there is none."""
    if not has_table(con, "placement_runs"):
        return []
    return rows(report_sql(con, "placement_runs", cluster=cluster))


def _decision(con: duckdb.DuckDBPyConnection, cluster: str) -> dict:
    """What to run, in words: the latest publish decision (SPEC §7 gate), or that there is none."""
    from metapilot.warehouse.publish_store import latest_decision

    d = latest_decision(con, cluster)
    if d is None:
        return {"kind": None, "message": "No controller has been trained and checked for this cluster yet: "
                                         "keep the scheduler's current policy."}
    msg = d["message"] or (f"Run the MetaPilot controller {d['policy_id']}." if d["kind"] == "controller" else
                           f"Keep {d['recommendation']}.")
    return {"kind": d["kind"], "recommendation": d["recommendation"], "policy_id": d["policy_id"], "message": msg,
            "published_at": _json(d["published_at"])}


def _recommendations(con: duckdb.DuckDBPyConnection, cluster: str, week_start: datetime, decision: dict) -> dict:
    """The week's stored recommendations; `published`: whether their policy is the controller the publish gate
    kept (None when no publish decision was taken), so that a refused controller's are never read as advice."""
    recs = (report_sql(con, "recommendations", cluster=cluster, week_start=week_start) if has_table(con, "recommendations")
            else pl.DataFrame())
    policies = report_sql(con, "cluster_policies", cluster=cluster) if has_table(con, "policies") else pl.DataFrame()
    if recs.height == 0:
        if policies.height == 0:
            msg = (f"No controller policy exists yet for {cluster}: there is no recommendation to show. "
                   "Train and publish one with `metapilot train`.")
            return {"status": "no-policy", "message": msg, "policy_id": None, "rows": [], "share": {}, "switches": 0}
        pid = policies["policy_id"][0]
        if decision["kind"] == "fixed":
            pid = decision["policy_id"] or pid
            msg = (f"No controller is published for {cluster}: the publish gate refused {pid} (see 'What to run'), "
                   "so there is no recommendation to follow. To see what it would have chosen this week anyway: "
                   f"`metapilot report --cluster {cluster} --week ... --policy {pid}`.")
        else:
            msg = (f"No recommendations are stored for this week. Score the week with policy {pid}: "
                   f"`metapilot report --cluster {cluster} --week ... --policy {pid}`.")
        return {"status": "no-rows", "message": msg, "policy_id": pid, "rows": [], "share": {}, "switches": 0}
    counts = recs.group_by("objective").len().sort("objective")
    share = {r["objective"]: r["len"] / recs.height for r in counts.iter_rows(named=True)}
    switches = 0
    for _, part in recs.group_by("partition", maintain_order=True):
        obj = part.sort("epoch_start")["objective"].to_list()
        switches += sum(1 for a, b in zip(obj, obj[1:]) if a != b)
    pid = recs["policy_id"][0]
    published = None if decision["kind"] is None else (decision["kind"] == "controller" and decision["policy_id"] == pid)
    return {"status": "ok", "message": None, "policy_id": pid, "rows": rows(recs), "share": share,
            "switches": switches, "epochs": recs.height, "published": published}


def _heldout(con: duckdb.DuckDBPyConnection, cluster: str) -> dict:
    from metapilot.models.evaluation.heldout import shown_metrics, verdict, winners

    table = report_sql(con, "latest_heldout", cluster=cluster) if has_table(con, "heldout_replays") else pl.DataFrame()
    if table.height == 0:
        return {"status": "none", "message": f"No held-out replay has been run for {cluster} yet: "
                                             "`metapilot heldout --policy ID`.", "rows": []}
    vid = table["heldout_id"][0]
    diffs = report_sql(con, "heldout_diffs", heldout_id=vid)
    first = table.row(0, named=True)
    return {
        "status": "ok",
        "heldout_id": vid,
        "policy_id": first["policy_id"],
        "window_from": _json(first["window_from"]),
        "window_to": _json(first["window_to"]),
        "created_at": _json(first["created_at"]),
        "metrics": [m.column for m in shown_metrics(table)],
        "rows": rows(table.drop("heldout_id")),
        "winners": winners(table),
        "diffs": rows(diffs.drop("heldout_id")),
        "weeks": rows(report_sql(con, "heldout_weeks", heldout_id=vid).drop("heldout_id")),
        "verdict": verdict(table, diffs),
        "_table": table,  # for the ROI; dropped before writing JSON
    }


def _roi(heldout: dict, roi_config) -> dict:
    from metapilot.models.evaluation.roi import RoiConfig, assumptions, roi_from_heldout

    cfg = roi_config or RoiConfig()
    out = {"config": cfg.to_dict()}
    table = heldout.pop("_table", None)
    if heldout["status"] != "ok":
        return {**out, "status": "unavailable", "message": "No ROI: no held-out replay has been run yet.",
                "results": [], "assumptions": assumptions(cfg)}
    try:
        results = roi_from_heldout(table, cfg)
    except ValueError as e:
        return {**out, "status": "unavailable", "message": f"No ROI for held-out replay {heldout['heldout_id']}: {e}",
                "results": [], "assumptions": assumptions(cfg)}
    return {**out, "status": "ok", "message": None, "heldout_id": heldout["heldout_id"],
            "results": [_json(r.to_dict()) for r in results],
            "assumptions": assumptions(cfg, results[0].window_hours)}
