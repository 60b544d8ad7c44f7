"""`metapilot roi --heldout ID`: what the controller's held-out replay gains are worth, and its payback;
`metapilot roi --backtest ID|latest`: what following MetaPilot over a walk forward's span was worth."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def roi_cmd(
    heldout: Annotated[Optional[str], typer.Option("--heldout", "--validation",
                                                   help="Held-out replay id (`metapilot heldout` and `pipeline` print it; "
                                                        "--validation is its old name).")] = None,
    backtest: Annotated[Optional[str], typer.Option(help="Walk forward id (`metapilot backtest` prints it), or 'latest': "
                                                         "price following MetaPilot over its span.")] = None,
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
    if (heldout is None) == (backtest is None):
        raise typer.BadParameter("give one of --heldout ID (a held-out replay) or --backtest ID|latest (a walk forward)")
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
            if backtest is not None:
                return _backtest_roi(con, backtest, cfg)
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


def _backtest_roi(con, backtest: str, cfg) -> None:
    """Price a stored walk forward (LookupError/ValueError: the caller's one-line error)."""
    from metapilot.models.evaluation.roi import BACKTEST_SPAN, roi_from_backtest
    from metapilot.warehouse.backtest_store import latest_backtest, load_backtest

    bid = latest_backtest(con, None) if backtest == "latest" else backtest
    if bid is None:
        raise LookupError("no walk forward in this warehouse yet: run `metapilot backtest --cluster C` first")
    bt = load_backtest(con, bid)
    results = roi_from_backtest(bt["contenders"], cfg, bt["capacity_cores"])
    first = bt["contenders"].row(0, named=True)
    print_roi(results, {"cluster": first["cluster"], "window_from": first["span_from"], "window_to": first["span_to"]},
              title=f"ROI of following MetaPilot (walk forward {bid})", window=BACKTEST_SPAN)


def print_roi(results, meta: dict, title: str = "ROI of the controller", window: str = "the checkpoint window") -> None:
    from rich.table import Table

    from metapilot.cli.console import console
    from metapilot.models.evaluation.roi import assumptions, roi_rows

    span = "span" if window != "the checkpoint window" else "checkpoint window"
    table = Table(title=f"{title}: {meta['cluster']}, {span} {meta['window_from']:%Y-%m-%d} .. {meta['window_to']:%Y-%m-%d}")
    table.add_column("")
    for r in results:
        table.add_column(f"vs {r.reference_kind}", justify="right")
    for label, values in roi_rows(results):
        table.add_row(label, *values)
    console.print(table)
    console.print("Assumptions:")
    for line in assumptions(results[0].config, results[0].window_hours, window):
        console.print(f"  - {line}")


def register(app: typer.Typer) -> None:
    app.command("roi")(roi_cmd)
