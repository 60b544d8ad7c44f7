"""The weekly report (SPEC §9): `build_report` writes report.html (self-contained, plots embedded,
print-friendly), report.md and report.json for one cluster and ISO week, and publishes the
Markdown as a Prefect artifact when it runs inside a flow.

    from metapilot.models.reporting import build_report
    info = build_report(con, "KTH-SP2", "1997-W10", "warehouse/reports")
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metapilot.ground.files import safe_name

if TYPE_CHECKING:
    import duckdb
    from metapilot.models.roi import RoiConfig


def publish_markdown_artifact(md: str, key: str | None = None, description: str | None = None) -> Any:
    """Create a Prefect Markdown artifact when called inside a flow or task run; a no-op (None)
    anywhere else, so plain commands never need a Prefect server."""
    try:
        from prefect.context import FlowRunContext, TaskRunContext
    except ImportError:
        return None
    if FlowRunContext.get() is None and TaskRunContext.get() is None:
        return None
    from prefect.artifacts import create_markdown_artifact

    if key is not None:  # Prefect keys: lowercase letters, digits and dashes
        key = re.sub(r"[^a-z0-9-]+", "-", key.lower()).strip("-")
    return create_markdown_artifact(markdown=md, key=key, description=description)


def build_report(con: duckdb.DuckDBPyConnection, cluster: str, week: str | None, out_dir: str | Path, *,
                 roi_config: RoiConfig | None = None, generated_at: datetime | None = None) -> dict:
    """Write `<out_dir>/<cluster>/<week>/report.{html,md,json}` (week None: the last complete week
    in the data) and return the report data, with `files` naming what was written."""
    from metapilot.models.reporting.data import collect, last_complete_week
    from metapilot.models.reporting.render import render_html, render_markdown

    week = week or last_complete_week(con, cluster)
    report = collect(con, cluster, week, roi_config=roi_config, generated_at=generated_at)
    folder = Path(out_dir) / safe_name(cluster) / week
    folder.mkdir(parents=True, exist_ok=True)
    if report.get("data_quality"):
        from metapilot.warehouse.data_docs import link_from

        report["data_quality"]["docs_link"] = link_from(folder, report["data_quality"].get("docs_index"))
    html_text = render_html(report)
    md_text = render_markdown(report)
    files = {"html": str(folder / "report.html"), "md": str(folder / "report.md"), "json": str(folder / "report.json")}
    report["files"] = files
    Path(files["html"]).write_text(html_text, encoding="utf-8")
    Path(files["md"]).write_text(md_text, encoding="utf-8")
    Path(files["json"]).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    report["artifact"] = publish_markdown_artifact(md_text, key=f"report-{cluster}-{week}",
                                                   description=f"{cluster} weekly report {week}")
    return report


def score_recommendations(con: duckdb.DuckDBPyConnection, policy_id: str, week: str, *,
                          db: str | Path | None = None) -> int:
    """Score every epoch of the week with a published policy on the observed (as-run) state and
    store the recommended objectives (`recommendations`); returns the rows written. The loader
    verifies the artifact's checksums against the `policies` row first."""
    from datetime import timedelta

    import numpy as np
    import polars as pl
    from metapilot.models.controller.artifact import find_policy, load_policy
    from metapilot.models.controller.lookahead import asrun_states
    from metapilot.models.reporting.data import parse_week
    from metapilot.warehouse.asrun_queries import asrun_aggregates
    from metapilot.warehouse.policy_store import policy_row
    from metapilot.warehouse.validation_store import store_recommendations

    row = policy_row(con, policy_id)
    folder = Path(row["path"]) if row.get("path") and Path(row["path"]).is_dir() else find_policy(policy_id, db)
    policy = load_policy(folder, row.get("sums_sha256"))
    cfg = policy.state_config
    start = parse_week(week)
    partition = None if row["partition"] in (None, "*") else row["partition"]
    agg = asrun_aggregates(con, row["cluster"], start, start + timedelta(days=7), partition=partition, config=cfg)
    agg = agg.head(agg.height - 1)  # the closing boundary belongs to the next week
    states = asrun_states(con, row["cluster"], agg, partition=partition, state=cfg)
    q = policy.q_values(states)
    actions = np.argmax(q, axis=1)
    frame = pl.DataFrame({
        "cluster": row["cluster"], "partition": row["partition"] or "*",
        "epoch_start": (pl.Series(agg["epoch_start"].to_numpy().astype(np.int64)) * 1_000_000).cast(pl.Datetime("us", "UTC")),
        "epoch_s": int(cfg.epoch_s), "policy_id": policy_id, "action": actions.astype(np.int32),
        "objective": [cfg.menu[a] for a in actions], "q_values": [list(map(float, r)) for r in q],
    })
    return store_recommendations(con, frame)


__all__ = ["build_report", "publish_markdown_artifact", "score_recommendations"]
