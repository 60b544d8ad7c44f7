"""`metapilot forget FILE... | --file-id ID`: undo a load. A mistaken load (the wrong --cluster, a
wrong --format, the bundled samples loaded into a site's warehouse) must be reversible: this
removes exactly what the file's load wrote, and says how much."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def forget_cmd(
    files: Annotated[Optional[list[str]], typer.Argument(help="Files whose load to undo (known by their content: the SHA-256).")] = None,
    file_id: Annotated[Optional[list[str]], typer.Option("--file-id", help="The file's SHA-256 (or a unique start of it) as ingest_files shows it; repeatable.")] = None,
    cluster: Annotated[Optional[str], typer.Option(help="Only the load for this cluster (a file whose lines name no cluster can be loaded for several).")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Remove what a file's load wrote: its jobs, quarantined lines, data checks and record (then ingest it again if you like)."""
    from pathlib import Path

    from metapilot.ground.paths import db_path
    from metapilot.warehouse.ingest import forget_loads
    from metapilot.warehouse.ingest_stage import identify_file

    if not files and not file_id:
        raise typer.BadParameter("name a FILE or give --file-id ID (metapilot sql \"SELECT sha256, cluster, path FROM ingest_files\")")
    ids = list(file_id or [])
    for f in files or []:
        p = Path(f)
        if not p.is_file():
            raise FileNotFoundError(f"{f}: no such file: to forget a load whose file is gone, give --file-id with its SHA-256 "
                                    "(metapilot sql \"SELECT sha256, cluster, path FROM ingest_files\")")
        ids.append(identify_file(p)[0])
    done = forget_loads(db, ids, cluster, log=lambda m: typer.echo(m, err=True))
    for f in done:
        parts = [f"{f.jobs:,} jobs", f"{f.quarantined:,} quarantined lines", f"{f.data_checks:,} data-check runs"]
        if f.node_rows:
            parts.append(f"{f.node_rows:,} node rows")
        typer.echo(f"forgot {f.path} ({f.format or 'unknown format'}, {f.outcome}, cluster {f.cluster}, "
                   f"file id {f.sha256[:12]}): removed {', '.join(parts)}")
    typer.echo(f"warehouse: {db_path(db).resolve()}")


def register(app: typer.Typer) -> None:
    app.command("forget")(forget_cmd)
