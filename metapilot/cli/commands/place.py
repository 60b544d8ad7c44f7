"""`metapilot place replay`: node-level placement replay (SPEC §11) under a heuristic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

place_app = typer.Typer(no_args_is_help=True, help="Node placement (SPEC §11): which node runs each pod.")


def replay_cmd(
    cluster: Annotated[str, typer.Option(help="Cluster whose node list and pods are in the warehouse.")],
    policy: Annotated[str, typer.Option(help="random | first-fit | best-fit | least-loaded | fgd")] = "fgd",
    mode: Annotated[str, typer.Option(help="time (arrivals and departures from the trace) | inflate (the FGD paper's experiment)")] = "time",
    seed: Annotated[int, typer.Option(help="Seed of the random choices (inflation draws, ties, random policy).")] = 0,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to this file.")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Replay the cluster's pods on its nodes under a placement policy; record the run."""
    from rich.table import Table

    from metapilot.cli.console import console
    from metapilot.models.placement.run import replay_cluster
    from metapilot.warehouse.db import connect, writer_lock
    from metapilot.warehouse.placement_store import store_run

    if mode not in ("time", "inflate"):
        raise typer.BadParameter(f"--mode {mode!r}: use time or inflate")
    con = connect(db, read_only=True)
    try:
        result = replay_cluster(con, cluster, policy, mode, seed, db)
    finally:
        con.close()
    with writer_lock(db):
        con = connect(db)
        try:
            result["run_id"] = store_run(con, cluster, result)
        finally:
            con.close()
    if json_out:
        Path(json_out).write_text(json.dumps(result, indent=2) + "\n")
    t = Table(title=f"placement replay: {cluster}, {policy}, {mode} mode, seed {seed}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k in ("pods", "placed", "failed", "unfit", "unknown_gpu_model", "mean_wait_s", "gpu_alloc_share",
              "frag_gpu_share", "imbalance", "hot_node_share", "idle_share", "seconds"):
        v = result.get(k)
        t.add_row(k, "—" if v is None else (f"{v:,}" if isinstance(v, int) else f"{v:.4f}"))
    console.print(t)
    if result.get("warning"):
        console.print(f"[yellow]warning:[/yellow] {result['warning']}")


def register(app: typer.Typer) -> None:
    from metapilot.cli.errors import guarded

    place_app.command("replay")(guarded(replay_cmd))
    app.add_typer(place_app, name="place")
