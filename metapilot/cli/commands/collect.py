"""`metapilot collect --cluster C`: pull a Slurm cluster's jobs from sacct since the cursor and
load them like any ingested log (a Prefect flow; warehouse/collect.py explains the cursor)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def collect_cmd(
    cluster: Annotated[str, typer.Option(help="Slurm cluster (sacct --clusters) and the warehouse's cluster name.")],
    since: Annotated[Optional[str], typer.Option(help="Ask sacct from this UTC time (ISO, e.g. 2024-05-01 or 2024-05-01T06:00) instead of the cursor.")] = None,
    until: Annotated[Optional[str], typer.Option(help="Ask sacct up to this UTC time (default: now).")] = None,
    overlap: Annotated[Optional[str], typer.Option(help="Start this long before the cursor, e.g. 30m, 2h, 0 (default $METAPILOT_COLLECT_OVERLAP, else 1h): a job whose record reaches sacct late is still collected; jobs seen again merge.")] = None,
    sacct: Annotated[Optional[str], typer.Option(help="The sacct executable (default: sacct on PATH).")] = None,
    exclude_job_name: Annotated[Optional[list[str]], typer.Option("--exclude-job-name", help="Leave out jobs whose name starts with this (repeatable; default $METAPILOT_COLLECT_EXCLUDE_JOB_NAMES, comma-separated), e.g. metapilot-dask: MetaPilot's own Dask workers.")] = None,
    keep_names: Annotated[bool, typer.Option("--keep-names", help="Store raw user/account/group/job names instead of keyed hashes.")] = False,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Collect jobs from sacct incrementally; re-running asks only from the cursor and changes nothing."""
    from metapilot.cli.batch import prefect_session
    from metapilot.cli.commands.ingest import print_ingest_summary
    from metapilot.cli.console import console
    from metapilot.ground.paths import db_path
    from metapilot.warehouse.collect import SacctError, collect_overlap, find_sacct, parse_time

    try:
        start = parse_time(since) if since else None
        end = parse_time(until) if until else None
    except ValueError as e:
        raise typer.BadParameter(f"not an ISO date or date-time: {e}") from None
    try:
        collect_overlap(overlap)  # a bad --overlap (or $METAPILOT_COLLECT_OVERLAP): said before any work
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--overlap") from None
    try:
        find_sacct(sacct)  # no sacct: say so before starting anything
        with prefect_session(db):
            from metapilot.flows.collect import collect_flow

            out = collect_flow(cluster, db=db, since=start, until=end, sacct=sacct, keep_names=keep_names, overlap=overlap,
                              exclude_names=exclude_job_name)
    except SacctError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    whence = ("--since" if since else f"cursor {out['cursor']} less {out['overlap_s']:,} s overlap" if out["cursor"]
              else "no data yet")
    console.print(f"{cluster}: asked sacct for {out['start']} .. {out['end']} UTC ({whence}): {out['lines']:,} lines")
    if out.get("excluded"):
        console.print(f"[dim]left out {out['excluded']:,} jobs by name (--exclude-job-name)[/dim]")
    if out.get("message"):
        console.print(f"[dim]{out['message']}[/dim]")
    if out["reports"]:
        failed = print_ingest_summary(out["reports"], str(db_path(db).resolve()))
        if failed:
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("collect")(collect_cmd)
