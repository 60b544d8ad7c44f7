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
    from metapilot.models.evaluation.roi import RoiConfig


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


__all__ = ["build_report", "publish_markdown_artifact"]
