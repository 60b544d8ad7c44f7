"""`metapilot heldout --policy ID`: replay the held-out weeks under the controller, the 21 fixed
rules, the planner, its oracle bound and the as-run history; store and print the comparison.
`metapilot validate` is the old name, kept as a hidden alias for one release."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from metapilot.cli.options import window_options


def heldout_cmd(
    policy: Annotated[str, typer.Option(help="Policy id (the `policies` table).")],
    start: Annotated[Optional[str], typer.Option("--from", help="Window start (ISO, UTC), by submit time. Default: where the policy stopped seeing data.")] = None,
    end: Annotated[Optional[str], typer.Option("--to", help="Window end (exclusive). Default: as long as the training window.")] = None,
    epoch_s: Annotated[Optional[int], typer.Option(min=60, help="Decision epoch (s), at least 60. Default: the policy's.")] = None,
    n_boot: Annotated[int, typer.Option(min=1, help="Bootstrap resamples over weeks (at least 1).")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file.")] = None,
) -> None:
    """Replay a policy on held-out weeks it never saw, against every fixed rule and the real history."""
    from metapilot.cli.console import console
    from metapilot.models.evaluation.heldout import run_heldout
    from metapilot.warehouse.db import connect, require_warehouse
    from metapilot.warehouse.heldout_store import load_heldout

    w_from, w_to = window_options(start, end)  # checked before the replay starts
    require_warehouse(db)  # a mistyped --db must not create an empty warehouse
    con = connect(db)
    try:
        vid = run_heldout(con, policy, w_from, w_to, db=db, epoch_s=epoch_s, n_boot=n_boot, seed=seed,
                             log=lambda m: console.print(m))
    except (LookupError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    print_heldout(load_heldout(con, vid))


def print_heldout(v) -> None:
    """The contender table with each column's winners in bold green, then the verdict in words."""
    import polars as pl
    from rich.table import Table

    from metapilot.cli.console import console
    from metapilot.ground.units import fmt_duration
    from metapilot.models.evaluation.heldout import fmt_value, shown_metrics, verdict, winners

    t = v.table
    meta = v.meta
    metrics = shown_metrics(t)
    won = winners(t)
    title = (f"Held-out replay {v.heldout_id}: {meta['cluster']}"
             f"{'/' + meta['partition'] if meta['partition'] else ''}, policy {meta['policy_id']}, "
             f"{meta['window_from']:%Y-%m-%d %H:%M} .. {meta['window_to']:%Y-%m-%d %H:%M} UTC")
    table = Table(title=title)
    table.add_column("contender")
    table.add_column("kind")
    short = {"mean bounded slowdown": "mean bsld", "core utilisation": "core util.",
             "core utilisation while jobs wait": "core util. (backlog)", "GPU utilisation": "GPU util.",
             "memory utilisation": "mem util."}
    for m in metrics:
        table.add_column(short.get(m.label, m.label), justify="right")
    table.add_column("jobs", justify="right")
    for r in t.iter_rows(named=True):
        if r["status"] != "ok":
            table.add_row(r["contender"], r["kind"], *["unavailable" if i == 0 else "" for i in range(len(metrics))], "")
            continue
        cells = []
        for m in metrics:
            text = fmt_value(r[m.column], m.unit) if m.column != "makespan_s" else fmt_duration(r[m.column])
            cells.append(f"[bold green]{text}[/bold green]" if r["contender"] in won.get(m.column, []) else text)
        table.add_row(r["contender"], r["kind"], *cells, f"{r['jobs']:,}")
    console.print(table)
    console.print("[dim]bold green = best in its column (ties all marked); makespan = last end - first submit[/dim]")
    console.print("best per column: " + "; ".join(
        f"{m.label} {', '.join(won[m.column][:3])}{' +' + str(len(won[m.column]) - 3) if len(won[m.column]) > 3 else ''}"
        for m in metrics if m.column in won))
    notes: dict[str, list[str]] = {}
    for r in t.filter(pl.col("note").is_not_null()).iter_rows(named=True):
        notes.setdefault(r["note"], []).append(r["contender"])
    for note, names in notes.items():
        console.print(f"{', '.join(names)}: {note}")
    console.print()
    for line in verdict(t, v.diffs):
        console.print(line)
    console.print(f"stored as held-out replay {v.heldout_id} (tables heldout_replays, heldout_weeks, heldout_diffs)")


def _validate_alias(**kwargs) -> None:
    from metapilot.cli.console import console

    console.print("[yellow]note:[/yellow] `metapilot validate` is now `metapilot heldout`; "
                  "the old name goes in the next release")
    heldout_cmd(**kwargs)


def register(app: typer.Typer) -> None:
    import functools

    app.command("heldout")(heldout_cmd)
    # the old name, hidden from --help: same options, and one line saying the new one
    app.command("validate", hidden=True, help="Old name of `metapilot heldout`.")(
        functools.wraps(heldout_cmd)(_validate_alias))
