"""`metapilot place replay` and `place train`: node-level placement replay (SPEC §11) under a
heuristic or a trained PPO agent, and training that agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

place_app = typer.Typer(no_args_is_help=True, help="Node placement (SPEC §11): which node runs each pod.")


def replay_cmd(
    cluster: Annotated[str, typer.Option(help="Cluster whose node list and pods are in the warehouse.")],
    policy: Annotated[str, typer.Option(help="random | first-fit | best-fit | least-loaded | fgd | a PPO policy id (metapilot place train)")] = "fgd",
    mode: Annotated[str, typer.Option(help="time (arrivals and departures from the trace) | inflate (the FGD paper's experiment)")] = "time",
    seed: Annotated[int, typer.Option(help="Seed of the random choices (inflation draws, ties, random policy).")] = 0,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to this file.")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Replay the cluster's pods on its nodes under a placement policy (a heuristic or a trained
    PPO agent); record the run."""
    from rich.table import Table

    from metapilot.cli.console import console
    from metapilot.models.placement.run import replay_cluster
    from metapilot.warehouse.db import connect, writer_lock
    from metapilot.warehouse.placement_store import missing_node_list, store_run

    if mode not in ("time", "inflate"):
        raise typer.BadParameter(f"--mode {mode!r}: use time or inflate")
    con = connect(db, read_only=True)
    try:
        if (why := missing_node_list(con, cluster)) is not None:
            raise ValueError(why)
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


def train_cmd(
    cluster: Annotated[str, typer.Option(help="Cluster whose node list and pods are in the warehouse.")],
    steps: Annotated[Optional[int], typer.Option(help="Placement decisions to train on (default: PPOConfig.total_steps).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of everything random in training (same seed, same weights).")] = 0,
    dask: Annotated[Optional[str], typer.Option(help="Dask scheduler address, or local:N, for the rollouts (default: inline; $METAPILOT_DASK_ADDRESS).")] = None,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the outcome (policy id, training, evaluation) as JSON to this file.")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Train the PPO placement agent on the cluster's nodes and pods; publish it (TorchScript, model
    card, checksums, a `policies` row) and store its replays in both modes."""
    import os

    from rich.table import Table

    from metapilot.cli.console import console
    from metapilot.flows.placement import run_placement_training

    config: dict = {"seed": seed}
    if steps is not None:
        if steps < 1:
            raise typer.BadParameter(f"--steps {steps}: give a positive number of decisions")
        config["total_steps"] = steps
    dask = dask or os.environ.get("METAPILOT_DASK_ADDRESS")
    say = lambda m: console.print(f"[dim]{m}[/dim]")  # noqa: E731
    if dask:
        from metapilot.cli.batch import prefect_session

        with prefect_session(db):
            out = run_placement_training(cluster, db, config, dask=dask)
    else:
        out = run_placement_training(cluster, db, config, log=say)
    if json_out:
        Path(json_out).write_text(json.dumps(out, indent=2, default=str) + "\n")
    tr = out["training"]
    console.print(f"policy [bold]{out['policy_id']}[/bold] ({tr['decisions']:,} decisions, {tr['seconds']:.0f} s) in {out['path']}")
    t = Table(title=f"PPO agent on {cluster}: replay of the whole list")
    t.add_column("metric")
    for mode in ("time", "inflate"):
        t.add_column(mode, justify="right")
    for k in ("pods", "placed", "failed", "mean_wait_s", "gpu_alloc_share", "frag_gpu_share", "imbalance",
              "hot_node_share", "idle_share", "seconds"):
        cells = []
        for mode in ("time", "inflate"):
            v = out["evaluation"][mode].get(k)
            cells.append("—" if v is None else (f"{v:,}" if isinstance(v, int) else f"{v:.4f}"))
        t.add_row(k, *cells)
    console.print(t)
    kept = next((r for r in tr.get("checkpoints") or [] if r["snapshot"] == tr.get("checkpoint")), None)
    if kept is not None:
        missed = kept["missed"]
        console.print(f"kept checkpoint: {kept['snapshot']} of {len(tr['checkpoints'])} "
                      f"({'meets every goal' if not missed else f'misses {missed} of 3 goals'} on this list against the "
                      f"heuristics: time mode dominated by {', '.join(kept['dominated_by']) or 'none'}; inflate allocation "
                      f"{100 * kept['alloc']:.2f}% vs FGD {100 * kept['alloc_ref']:.2f}%, imbalance "
                      f"{kept['imbalance']:.4f} vs {kept['imbalance_ref']:.4f})")


def register(app: typer.Typer) -> None:
    from metapilot.cli.errors import guarded

    place_app.command("replay")(guarded(replay_cmd))
    place_app.command("train")(guarded(train_cmd))
    app.add_typer(place_app, name="place")
