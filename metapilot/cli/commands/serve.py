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

    from metapilot.flows.common import configure_prefect_storage

    configure_prefect_storage(db)
    from metapilot.flows.deployments import Schedules, deployments

    Path(landing).mkdir(parents=True, exist_ok=True)
    deps = deployments(str(Path(landing).resolve()), db, Schedules(timezone=timezone), collect_clusters=tuple(collect or ()))
    for d in deps:
        crons = ", ".join(s.schedule.cron for s in d.schedules)
        typer.echo(f"{d.name:16s} {crons:12s} ({timezone})  {d.flow_name}")
    if list_only:
        return
    from prefect import serve

    from metapilot.cli.batch import prefect_session

    with prefect_session(db) as url:
        typer.echo(f"serving against the Prefect API at {url} (Ctrl-C stops)")
        serve(*deps)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
