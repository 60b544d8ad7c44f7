"""`metapilot serve`: run the scheduled deployments (daily ingest, hourly sacct collect, Monday
report, monthly retrain)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def serve_cmd(
    landing: Annotated[str, typer.Option(help="Landing directory that the daily ingest picks new logs from.")] = "warehouse/landing",
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
    timezone: Annotated[str, typer.Option(help="Time zone of the schedules.")] = "UTC",
    list_only: Annotated[bool, typer.Option("--list", help="Print the deployments and schedules, then exit.")] = False,
    collect: Annotated[Optional[list[str]], typer.Option("--collect", help="Slurm cluster to collect from sacct every hour (repeat for several; default $METAPILOT_COLLECT_CLUSTERS).")] = None,
) -> None:
    """Serve MetaPilot's scheduled flows from this process.

    With a Prefect server (`prefect server start`, then PREFECT_API_URL=http://127.0.0.1:4200/api) the
    runs show in its UI; without one, Prefect runs a temporary local API for as long as this serves.
    """
    from pathlib import Path

    from metapilot.cli.options import OptionError, timezone_option
    from metapilot.flows.common import configure_prefect_storage

    timezone_option(timezone)  # Mars/Olympus: one sentence, not pydantic's validation error
    folder = Path(landing)
    if folder.exists() and not folder.is_dir():
        raise OptionError(f"{landing} is a file: name the folder that new logs are dropped into", param_hint="--landing")
    configure_prefect_storage(db)
    from metapilot.flows.deployments import Schedules, deployments

    if not list_only:  # --list only looks: it creates nothing
        folder.mkdir(parents=True, exist_ok=True)
    deps = deployments(str(folder.resolve()), db, Schedules(timezone=timezone), collect_clusters=tuple(collect or ()))
    for d in deps:
        crons = ", ".join(s.schedule.cron for s in d.schedules)
        typer.echo(f"{d.name:16s} {crons:12s} ({timezone})  {d.flow_name}")
    _print_lost_files(db)
    if list_only:
        return
    from prefect import serve

    from metapilot.cli.batch import prefect_session

    with prefect_session(db) as url:
        typer.echo(f"serving against the Prefect API at {url} (Ctrl-C stops)")
        serve(*deps)


def _print_lost_files(db: str | None) -> None:
    """Files that a run could not load (failed, or no line loaded) and that no later load replaced:
    what the operator has to act on, with why."""
    from metapilot.ground.paths import db_path

    if not db_path(db).exists():
        return
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest_log import lost_files

    con = connect(db, read_only=True)
    try:
        lost = lost_files(con)
    finally:
        con.close()
    if lost:
        typer.echo(f"not loaded ({len(lost)} file(s); fix each and drop it in the landing folder again, or "
                   "`metapilot forget --file-id SHA` to clear it):")
        for f in lost:
            typer.echo(f"  {f.path}: {f.message or f.outcome}")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
