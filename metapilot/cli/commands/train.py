"""`metapilot train`: learn the objective controller offline and publish it as a policy artifact."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

def train_cmd(
    cluster: Annotated[str, typer.Option(help="Cluster to learn a controller for.")],
    train_from: Annotated[str, typer.Option(help="Training window start (ISO date/time, UTC).")],
    train_to: Annotated[str, typer.Option(help="Training window end (exclusive).")],
    valid_from: Annotated[Optional[str], typer.Option("--checkpoint-from", "--valid-from", help="Checkpoint window start (>= --train-to): the weeks that choose which training checkpoint to keep. Default: right after training.")] = None,
    valid_to: Annotated[Optional[str], typer.Option("--checkpoint-to", "--valid-to", help="Checkpoint window end. Default: a quarter of the training length.")] = None,
    partition: Annotated[Optional[str], typer.Option(help="One partition only (default: the whole cluster).")] = None,
    steps: Annotated[int, typer.Option(help="Gradient steps of the controller (and of each Q-learning baseline).")] = 10_000,
    seed: Annotated[int, typer.Option(help="Seed: the same seed and data give the same policy.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, or cuda:0 for a GPU.")] = "cpu",
    algorithm: Annotated[str, typer.Option(help="Published algorithm: cql or dqn.")] = "cql",
    baselines: Annotated[str, typer.Option(help="Baselines scored on the same data (comma-separated: bc,dqn,bcq; empty for none).")] = "bc,dqn,bcq",
    fqe_steps: Annotated[int, typer.Option(help="DiscreteFQE steps per evaluated policy.")] = 4_000,
    sources: Annotated[str, typer.Option(help="Tuple sources, comma-separated: as-run, planner, replay (opt-in).")] = "as-run,planner",
    menu: Annotated[str, typer.Option(help="Objective menu: default (SJF,SAF,F1,WFP3,FCFS), uw (the seed's two), or names.")] = "default",
    reward: Annotated[str, typer.Option(help="Reward: aligned (SPEC §7 default) or paper (the seed's).")] = "aligned",
    epoch: Annotated[int, typer.Option(help="Decision epoch length in seconds.")] = 3600,
    timezone_name: Annotated[str, typer.Option("--timezone", help="Local time for the hour/day features.")] = "UTC",
    replay: Annotated[bool, typer.Option(help="Choose the checkpoint by replay in the simulator when it is available.")] = True,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Train DiscreteCQL (+ BC, DQN, BCQ baselines), choose the checkpoint by replay, write the policy artifact.

    The checkpoint is the one the publish gate scores best on the checkpoint window (replayed
    against the 21 baselines; by FQE with `--no-replay`); `pipeline` then applies the gate."""
    import polars as pl

    from metapilot.cli.console import console, print_frame
    from metapilot.models.controller.artifact import publish
    from metapilot.models.controller.gate import ope_says_better
    from metapilot.models.controller.dataset import (
        DatasetConfig,
        TupleRequest,
        build_dataset,
    )
    from metapilot.models.controller.train import TrainConfig, train_policy
    from metapilot.transforms.reward import ControllerRewardConfig
    from metapilot.transforms.state import StateConfig
    from metapilot.warehouse.db import connect, require_warehouse

    from metapilot.models.controller.objectives import Menu, menu_names
    from metapilot.models.controller.tuning import tuned_config, tuning_weeks
    from metapilot.models.evaluation.checkpoint import make_replay_evaluator

    dcfg = DatasetConfig(state=StateConfig(epoch_s=epoch, timezone=timezone_name, menu=menu_names(menu)),
                         reward=ControllerRewardConfig(kind=reward),
                         sources=tuple(s.strip() for s in sources.split(",") if s.strip()), seed=seed)
    tcfg = TrainConfig(
        algorithm=algorithm, baselines=tuple(b.strip() for b in baselines.split(",") if b.strip()),
        n_steps=steps, n_steps_per_epoch=max(1, steps // 10), fqe_steps=fqe_steps, seed=seed, device=device,
        show_progress=progress,
    )
    require_warehouse(db)  # a mistyped --db must not create an empty warehouse
    con = connect(db)
    try:
        with console.status("tuning the planner and building the dataset"):
            dcfg, tuning = tuned_config(con, cluster, train_from, train_to, dcfg, partition=partition,
                                        log=lambda m: console.print(f"[dim]{m}[/dim]"))
            splits = build_dataset(con, cluster, train_from, train_to, valid_from, valid_to, partition=partition, config=dcfg)
        evaluator = None
        if replay and splits.checkpoint_window:
            evaluator = make_replay_evaluator(con, TupleRequest(cluster, partition, splits.checkpoint_window[0], splits.checkpoint_window[1],
                                                            dcfg.state, dcfg.reward, seed, dcfg.planner),
                                          tuning_weeks(train_from, train_to), tuning)
        for note in splits.notes:
            console.print(f"[yellow]note:[/yellow] {note}")
        result = train_policy(splits.train, splits.checkpoint, tcfg, replay_evaluator=evaluator,
                              log=lambda m: console.print(f"[dim]{m}[/dim]"), menu=Menu.of(dcfg.state))
        art = publish(result, splits, db=db, cluster=cluster, partition=partition, con=con,
                      replay=result.chosen.replay, tuning=tuning)
    except (ValueError, KeyError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    finally:
        con.close()  # the warehouse is released before the command returns (a caller may open it next)
    rows = [result.chosen] + list(result.baselines.values())
    table = pl.DataFrame({
        "policy": [f"{r.name} (published)" if r is result.chosen else r.name for r in rows],
        "step": [r.step for r in rows],
        "fqe_value": [r.fqe_value for r in rows],
        "fqe_initial_value": [r.fqe_initial_value for r in rows],
        **{f"share_{n}": [r.action_shares.get(n) for r in rows] for n in dcfg.state.menu},
        "matches_logged": [r.behaviour_match for r in rows],
    })
    print_frame(table, title=f"Off-policy evaluation on {result.checkpoint_source} ({result.n_checkpoint} tuples)")
    if result.behaviour_mc_return is not None:
        console.print(f"logged behaviour, discounted return per state: {result.behaviour_mc_return:,.4g}")
    ope_ok, ope_words = ope_says_better(art.card["ope"])
    console.print(f"off-policy condition of the publish gate: {'passes' if ope_ok else 'FAILS'} ({ope_words})")
    console.print(f"policy [bold]{art.policy_id}[/bold] -> {art.folder}")
    console.print("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in result.seconds.items()))


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)
