"""`metapilot dataset`: build the controller's MDP tuples for a window and export them to Parquet."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def dataset_cmd(
    cluster: Annotated[str, typer.Option(help="Cluster whose history to turn into tuples.")],
    train_from: Annotated[str, typer.Option(help="Training window start (ISO date/time, UTC).")],
    train_to: Annotated[str, typer.Option(help="Training window end (exclusive).")],
    valid_from: Annotated[Optional[str], typer.Option("--checkpoint-from", "--valid-from", help="Checkpoint window start (>= --train-to): the weeks that choose which training checkpoint to keep. Default: right after training.")] = None,
    valid_to: Annotated[Optional[str], typer.Option("--checkpoint-to", "--valid-to", help="Checkpoint window end. Default: a quarter of the training length.")] = None,
    partition: Annotated[Optional[str], typer.Option(help="One partition only (default: the whole cluster).")] = None,
    sources: Annotated[str, typer.Option(help="Tuple sources, comma-separated: as-run, planner (the lookahead teacher, tuned on the training window), replay (behaviour rollouts; opt-in).")] = "as-run,planner",
    menu: Annotated[str, typer.Option(help="Objective menu: default (SJF,SAF,F1,WFP3,FCFS), uw (the seed's two), or names.")] = "default",
    reward: Annotated[str, typer.Option(help="Reward: aligned (SPEC §7 default) or paper (the seed's).")] = "aligned",
    older_fraction: Annotated[float, typer.Option(help="Share of the training set drawn from older windows' stored tuples.")] = 0.1,
    epoch: Annotated[int, typer.Option(help="Decision epoch length in seconds.")] = 3600,
    long_tail: Annotated[int, typer.Option(help="A queued job waiting longer than this (s) is long-tail.")] = 86_400,
    timezone_name: Annotated[str, typer.Option("--timezone", help="Local time for the hour/day features (IANA name or +HH:MM).")] = "UTC",
    out: Annotated[Optional[str], typer.Option(help="Parquet folder (default: <db folder>/datasets/<cluster>-<from>-<to>).")] = None,
    seed: Annotated[int, typer.Option(help="Seed for sampling older tuples (and replay rollouts).")] = 0,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Derive state/action/reward tuples (SPEC §7), store them in mdp_transitions, export Parquet."""
    import json

    from metapilot.cli.console import console
    from metapilot.ground.paths import beside_db
    from metapilot.models.controller.dataset import (
        DatasetConfig,
        build_dataset,
        dataset_hash,
        export_parquet,
    )
    from metapilot.transforms.reward import ControllerRewardConfig
    from metapilot.transforms.state import StateConfig
    from metapilot.warehouse.db import connect, require_warehouse

    from metapilot.models.controller.objectives import menu_names
    from metapilot.models.controller.tuning import tuned_config

    cfg = DatasetConfig(
        state=StateConfig(epoch_s=epoch, long_tail_s=long_tail, timezone=timezone_name, menu=menu_names(menu)),
        reward=ControllerRewardConfig(kind=reward),
        sources=tuple(s.strip() for s in sources.split(",") if s.strip()),
        older_fraction=older_fraction,
        seed=seed,
    )
    require_warehouse(db)  # a mistyped --db must not create an empty warehouse
    con = connect(db)
    try:
        cfg, _ = tuned_config(con, cluster, train_from, train_to, cfg, partition=partition,
                              log=lambda m: console.print(f"[dim]{m}[/dim]"))
        splits = build_dataset(con, cluster, train_from, train_to, valid_from, valid_to, partition=partition, config=cfg)
    except (ValueError, KeyError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    finally:
        con.close()
    folder = out or beside_db(db, "datasets") / f"{cluster}-{splits.train_window[0]:%Y%m%d}-{splits.train_window[1]:%Y%m%d}"
    paths = export_parquet(splits, folder)
    summary = splits.summary()
    console.print_json(json.dumps(summary | {"dataset_sha256": dataset_hash(splits.train)}))
    console.print(f"tuples stored in mdp_transitions; Parquet: {paths['train']}, {paths['checkpoint']}")


def register(app: typer.Typer) -> None:
    app.command("dataset")(dataset_cmd)
