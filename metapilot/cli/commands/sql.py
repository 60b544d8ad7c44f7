"""`metapilot sql "SELECT ..."`: read-only queries on the warehouse, printed as a table, CSV or JSON,
or written to a file with `--out` (CSV or Parquet).

The connection is sandboxed (SPEC §8): read-only, and it cannot reach files, other databases,
extensions or settings (`warehouse.db.connect_sandboxed`). Tables and marts are queryable as usual.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

SANDBOX_NOTE = ("`metapilot sql` is read-only and cannot reach files, other databases, extensions or settings; "
                "to save a result, use --out FILE.csv or --out FILE.parquet")


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def _out_kind(out: str) -> str:
    suffix = Path(out).suffix.lower()
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    if suffix in (".parquet", ".pq"):
        return "parquet"
    typer.echo(f"error: --out {out}: give a file ending in .csv or .parquet", err=True)
    raise typer.Exit(2)


def sql_cmd(
    query: Annotated[str, typer.Argument(help="A read-only SQL query, e.g. \"SELECT * FROM mart_daily LIMIT 5\".")],
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="table, csv or json.")] = OutputFormat.table,
    limit: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
    out: Annotated[Optional[str], typer.Option("--out", help="Write the whole result to FILE (.csv or .parquet) instead of printing it.")] = None,
) -> None:
    """Run a read-only SQL query against the warehouse (no file, database, extension or setting access)."""
    import duckdb

    from metapilot.warehouse.db import connect_sandboxed

    kind = _out_kind(out) if out else None
    try:
        con = connect_sandboxed(db, log=lambda m: typer.echo(m, err=True))
    except FileNotFoundError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)
    try:
        rel = con.sql(query)
        if rel is None:
            typer.echo("(statement returned no rows)")
            return
        df = rel.pl()
    except duckdb.PermissionException as e:
        typer.echo(f"error: refused: {str(e).splitlines()[0]}\n({SANDBOX_NOTE})", err=True)
        raise typer.Exit(2)
    except duckdb.Error as e:
        msg = str(e).splitlines()[0]
        if "read-only" in msg or "locked" in msg or "lock_configuration" in msg:
            typer.echo(f"error: refused: {msg}\n(the warehouse is opened read-only: only queries are allowed; "
                       f"{SANDBOX_NOTE})", err=True)
        else:
            typer.echo(f"error: {msg}\n(the warehouse is opened read-only: only queries are allowed)", err=True)
        raise typer.Exit(2)
    finally:
        con.close()
    if kind is not None:
        target = Path(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "parquet":
            df.write_parquet(target)
        else:
            df.write_csv(target, separator="\t" if kind == "tsv" else ",")
        typer.echo(f"{df.height:,} rows written to {target}", err=True)
        return
    if fmt is OutputFormat.csv:
        sys.stdout.write(df.write_csv())
    elif fmt is OutputFormat.json:
        sys.stdout.write(df.write_json() + "\n")
    else:
        from metapilot.cli.console import print_frame

        print_frame(df, limit=limit)


def register(app: typer.Typer) -> None:
    app.command("sql")(sql_cmd)
