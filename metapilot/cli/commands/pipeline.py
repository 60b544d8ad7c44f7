"""`metapilot pipeline`: the whole product end to end, by default on the bundled real samples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from metapilot.ground.paths import samples_dir

if TYPE_CHECKING:
    from metapilot.models.evaluation.walk_forward_result import NextDecision

SAMPLES_SOURCE = "the samples/logs folder of the MetaPilot repository (provenance in its samples/README.md)"


def pipeline_cmd(
    paths: Annotated[Optional[list[str]], typer.Argument(help="Logs to ingest (default: none, learn from what the warehouse holds; the bundled samples, under their own names, only into an empty warehouse).")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster to learn from, and the name of the LOGS given that carry none, as SWF (never renames a log that names its cluster; default: the longest history).")] = None,
    steps: Annotated[int, typer.Option(help="Gradient steps per training run.")] = 2000,
    seeds: Annotated[str, typer.Option(help="Training seeds, comma-separated (run in parallel). More seeds give the publish gate more candidates to pass by luck (README: Evidence).")] = "0",
    dask: Annotated[Optional[str], typer.Option(help="Dask scheduler address, local:N, or slurm[:N] (pbs, sge, lsf: worker jobs) (default: this machine's threads; $METAPILOT_DASK_ADDRESS).")] = None,
    sources: Annotated[str, typer.Option(help="MDP tuple sources: as-run (logged history), planner (the lookahead teacher), replay (behaviour rollouts; opt-in).")] = "as-run,planner",
    baselines: Annotated[str, typer.Option(help="Offline-RL baselines trained beside CQL for the model card (bc, dqn, bcq; empty: none).")] = "bc",
    backtest: Annotated[bool, typer.Option("--backtest", help="Walk forward instead of learning once: at each origin learn from the past only and follow the decision to the next (`metapilot backtest`'s defaults); the report shows it.")] = False,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Ingest, build the dataset, train, replay on held-out weeks, publish and report: prints where everything is."""
    import time

    from metapilot.cli.batch import prefect_session
    from metapilot.cli.commands.ingest import print_ingest_summary
    from metapilot.cli.console import console
    from metapilot.ground.paths import beside_db, db_path
    from metapilot.warehouse.ingest import expand_paths_checked
    from metapilot.warehouse.secret import load_site_key

    from metapilot.cli.commands.backtest import _check_dask

    _check_dask(dask)
    t0 = time.perf_counter()
    logs = [str(p) for p in paths or []]
    if not logs and not _holds_jobs(db):
        logs = [_bundled_samples()]  # an empty warehouse: the samples, under their own names (never --cluster)
        typer.echo(f"no logs named and no jobs in {db_path(db)}: loading the bundled samples ({logs[0]}) "
                   "under their own cluster names", err=True)
    elif not logs:
        typer.echo(f"no logs named: learning from the jobs {db_path(db)} holds (name LOGS to ingest more)", err=True)
    if logs:
        expand_paths_checked(logs)
        load_site_key(db, log=lambda m: typer.echo(m, err=True))
    ingest_cluster = cluster if paths else None
    if backtest:
        return _pipeline_backtest(logs, db, cluster, ingest_cluster, steps, dask, t0)
    with prefect_session(db, meanwhile=_preload):
        from metapilot.flows.pipeline import pipeline_flow

        out = pipeline_flow(logs, db=db, cluster=cluster,
                            seeds=tuple(int(s) for s in seeds.split(",") if s.strip()), steps=steps, dask=dask,
                            sources=tuple(s.strip() for s in sources.split(",") if s.strip()),
                            baselines=tuple(b.strip() for b in baselines.split(",") if b.strip()),
                            ingest_cluster=ingest_cluster)
    if out["ingest"]:
        print_ingest_summary(out["ingest"], str(db_path(db).resolve()))
    _print_heldout(db, out["heldout_id"])
    console.print(f"\n[bold]MetaPilot pipeline done in {time.perf_counter() - t0:.0f} s[/bold] (cluster {out['cluster']})")
    console.print(f"  warehouse  {db_path(db).resolve()}   (query: metapilot sql \"SELECT * FROM mart_weekly_cluster\")")
    decision = out["published"]
    style = "green" if decision["kind"] == "controller" else "yellow"
    console.print(f"\n[{style}]{'published' if decision['kind'] == 'controller' else 'warning'}:[/{style}] {decision['message']}")
    console.print(f"  policy     {beside_db(db, 'policies') / out['policy_id']}   (id {out['policy_id']}; "
                  f"{'published' if decision['kind'] == 'controller' else 'not published'}; pointer {decision['pointer']})")
    console.print(f"  held-out replay {out['heldout_id']}   (metapilot roi --heldout {out['heldout_id']})")
    files = out["report"]["files"]
    console.print(f"  report     {files['html']}")


def _pipeline_backtest(logs: list[str], db: str | None, cluster: str | None, ingest_cluster: str | None,
                       steps: int, dask: str | None, t0: float) -> None:
    """`pipeline --backtest`: the walk forward in place of the one-window learning."""
    import time

    from metapilot.cli.batch import prefect_session
    from metapilot.cli.commands.backtest import print_backtest
    from metapilot.cli.commands.ingest import print_ingest_summary
    from metapilot.cli.console import console
    from metapilot.ground.paths import db_path

    from metapilot.ground.interrupt import stop_on_interrupt

    with stop_on_interrupt(), prefect_session(db, meanwhile=_preload):  # Ctrl-C reaches the folds' processes
        from metapilot.flows.backtest import pipeline_backtest_flow

        out = pipeline_backtest_flow(logs, db=db, cluster=cluster, steps=steps, dask=dask, ingest_cluster=ingest_cluster)
    result = out["backtest"]
    print_published(result.cluster, result.next if out.get("published") else None)
    if out["ingest"]:
        print_ingest_summary(out["ingest"], str(db_path(db).resolve()))
    print_backtest(result)
    console.print(f"\n[bold]MetaPilot walk forward done in {time.perf_counter() - t0:.0f} s[/bold] "
                  f"(cluster {result.cluster}; metapilot roi --backtest {result.backtest_id})")
    console.print(f"  report     {out['report']['files']['html']}")


def print_published(cluster: str, published: NextDecision | None) -> None:
    """The main job's first line: what the walk forward backs for the next period (`published`: the
    decision it published, None when nothing was), with its record."""
    from metapilot.cli.console import console

    if not published:
        console.print(f"[yellow]nothing published for {cluster}:[/yellow] the walk forward decided nothing for the "
                      "next period (its periods and figures follow)")
        return
    console.print(f"[bold]What to run on {cluster} next:[/bold] {published.decision.describe()} — "
                  f"{published.record.words} (published; a person approves it with `metapilot approve --cluster "
                  f"{cluster}`, then `metapilot steer --policy published` or `metapilot export` applies it)")
    console.print(f"  why: {published.decision.source}")


def _holds_jobs(db: str | None) -> bool:
    """Whether the warehouse exists and holds jobs: then `pipeline` with no LOGS learns from them
    and never mixes the bundled samples into a site's data."""
    from metapilot.ground.paths import db_path
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.jobs_store import clusters_with_jobs

    if not db_path(db).exists():
        return False
    con = connect(db, read_only=True)
    try:
        return bool(clusters_with_jobs(con))
    finally:
        con.close()


def _bundled_samples() -> str:
    """The bundled sample logs (package data of the wheel); when they are missing, say where
    to get them rather than fail on an empty path."""
    folder = samples_dir()
    if not folder.is_dir() or not any(folder.rglob("*.*")):
        raise FileNotFoundError(f"no bundled sample logs at {folder}: name your logs (metapilot pipeline LOGS...), "
                                f"or copy {SAMPLES_SOURCE} there")
    return str(folder)


def _preload() -> None:
    """What the pipeline's stages import and load anyway (torch and d3rlpy for training, the
    compiled engine), done while the temporary Prefect API starts."""
    from metapilot.models.controller.d3 import import_d3rlpy
    from metapilot.models.simulator import warm_up

    warm_up()
    import_d3rlpy()


def _print_heldout(db, heldout_id: str) -> None:
    """The held-out comparison, as `metapilot heldout` prints it (winners and verdict)."""
    from metapilot.cli.commands.heldout import print_heldout
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.heldout_store import load_heldout

    con = connect(db, read_only=True)
    try:
        print_heldout(load_heldout(con, heldout_id))
    finally:
        con.close()


def register(app: typer.Typer) -> None:
    app.command("pipeline")(pipeline_cmd)
