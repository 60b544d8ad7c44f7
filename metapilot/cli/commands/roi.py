"""`metapilot roi --heldout ID`: what the controller's held-out replay gains are worth, and its payback."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def roi_cmd(
    heldout: Annotated[str, typer.Option("--heldout", "--validation",
                                         help="Held-out replay id (`metapilot heldout` and `pipeline` print it; "
                                              "--validation is its old name).")],
    config: Annotated[Optional[str], typer.Option(help="ROI settings (TOML). Default: roi.toml beside the database.")] = None,
    cost_per_core_hour: Annotated[Optional[float], typer.Option(help="Cost of a core-hour.")] = None,
    cost_per_gpu_hour: Annotated[Optional[float], typer.Option(help="Cost of a GPU-hour.")] = None,
    value_per_wait_hour: Annotated[Optional[float], typer.Option(help="Value of a user wait-hour.")] = None,
    deployment_cost: Annotated[Optional[float], typer.Option(help="One-off cost of deploying the controller.")] = None,
    horizon_weeks: Annotated[Optional[float], typer.Option(help="Weeks over which the net value is counted.")] = None,
    currency: Annotated[Optional[str], typer.Option(help="Currency label.")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file.")] = None,
) -> None:
    """Recovered core/GPU-hours, wait-hours saved, max-wait reduction, earlier completion, and payback."""
    from metapilot.cli.console import console
    from metapilot.ground.paths import beside_db
    from metapilot.models.evaluation.roi import load_roi_config, roi_from_heldout
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import not_published_note, publication
    from metapilot.warehouse.heldout_store import load_heldout

    try:
        cfg = load_roi_config(config or beside_db(db, "roi.toml"), cost_per_core_hour=cost_per_core_hour,
                              cost_per_gpu_hour=cost_per_gpu_hour, value_per_wait_hour=value_per_wait_hour,
                              deployment_cost=deployment_cost, horizon_weeks=horizon_weeks, currency=currency)
        con = connect(db, read_only=True)
        try:
            v = load_heldout(con, heldout)
            results = roi_from_heldout(v.table, cfg)
            pub = publication(con, v.meta["cluster"], v.meta["policy_id"])
        finally:
            con.close()
    except (LookupError, ValueError, FileNotFoundError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    if not pub["published"]:  # the figures of a controller the gate did not publish are no case for deploying it
        console.print(f"[yellow]warning:[/yellow] {not_published_note(pub['decision'])}")
    print_roi(results, v.meta)


def print_roi(results, meta: dict) -> None:
    from rich.table import Table

    from metapilot.cli.console import console
    from metapilot.models.evaluation.roi import assumptions, roi_rows

    table = Table(title=f"ROI of the controller: {meta['cluster']}, checkpoint window "
                        f"{meta['window_from']:%Y-%m-%d} .. {meta['window_to']:%Y-%m-%d}")
    table.add_column("")
    for r in results:
        table.add_column(f"vs {r.reference_kind}", justify="right")
    for label, values in roi_rows(results):
        table.add_row(label, *values)
    console.print(table)
    console.print("Assumptions:")
    for line in assumptions(results[0].config, results[0].window_hours):
        console.print(f"  - {line}")


def register(app: typer.Typer) -> None:
    app.command("roi")(roi_cmd)
