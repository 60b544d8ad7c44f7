"""`metapilot report --cluster C [--week 2024-W10]`: the weekly report (HTML, Markdown, JSON)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def report_cmd(
    cluster: Annotated[str, typer.Option(help="Cluster to report on.")],
    week: Annotated[Optional[str], typer.Option(help="ISO week, e.g. 2024-W10. Default: the last complete week in the data.")] = None,
    policy: Annotated[Optional[str], typer.Option(help="Score the week's recommended objectives with this policy first.")] = None,
    out: Annotated[Optional[str], typer.Option(help="Reports folder. Default: reports/ beside the database.")] = None,
    roi_config: Annotated[Optional[str], typer.Option(help="ROI settings (TOML). Default: roi.toml beside the database.")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file.")] = None,
) -> None:
    """Write report.html, report.md and report.json for one cluster and week."""
    from metapilot.cli.console import console
    from metapilot.ground.paths import beside_db
    from metapilot.models.reporting import build_report
    from metapilot.models.reporting.data import last_complete_week
    from metapilot.models.evaluation.roi import load_roi_config
    from metapilot.warehouse.db import connect

    try:
        cfg = load_roi_config(roi_config or beside_db(db, "roi.toml"))
        con = connect(db, read_only=policy is None)
        week = week or last_complete_week(con, cluster)
        if policy is not None:
            from metapilot.models.controller.advice import score_recommendations

            n = score_recommendations(con, policy, week, db=db)
            console.print(f"scored {n} epochs of {week} with policy {policy}")
        report = build_report(con, cluster, week, out or beside_db(db, "reports"), roi_config=cfg)
    except (LookupError, ValueError, FileNotFoundError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    _summary(report)


def _summary(report: dict) -> None:
    from metapilot.cli.console import console
    from metapilot.models.reporting.render import headline

    console.print(f"[bold]{report['cluster']} {report['week']}[/bold] "
                  f"({report['week_start'][:10]} .. {report['week_end'][:10]})")
    for label, value, prev in headline(report):
        console.print(f"  {label:<18} {value:>12}   {prev}")
    rec, val, roi = report["recommendations"], report["heldout"], report["roi"]
    console.print(f"  recommendations: {rec['status'] if rec['status'] != 'ok' else rec['policy_id']}"
                  f"{' - ' + rec['message'] if rec['message'] else ''}")
    console.print(f"  held-out replay: {val.get('heldout_id') or val['message']}")
    if val["status"] == "ok":
        for line in val["verdict"][:2]:
            console.print(f"    {line}")
    console.print(f"  ROI: {'see report' if roi['status'] == 'ok' else roi['message']}")
    for kind, path in report["files"].items():
        console.print(f"  {kind}: {path}")


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
