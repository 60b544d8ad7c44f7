"""`metapilot sql "SELECT ..."`: read-only queries on the warehouse, printed as a table, CSV or JSON."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated, Optional

import typer


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def sql_cmd(
    query: Annotated[str, typer.Argument(help="A read-only SQL query, e.g. \"SELECT * FROM mart_daily LIMIT 5\".")],
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="table, csv or json.")] = OutputFormat.table,
    limit: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
) -> None:
    """Run a read-only SQL query against the warehouse."""
    import duckdb

    from metapilot.warehouse.db import connect

    try:
        con = connect(db, read_only=True)
    except FileNotFoundError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)
    try:
        rel = con.sql(query)
        if rel is None:
            typer.echo("(statement returned no rows)")
            return
        df = rel.pl()
    except duckdb.Error as e:
        typer.echo(f"error: {e}\n(the warehouse is opened read-only: only queries are allowed)", err=True)
        raise typer.Exit(2)
    if fmt is OutputFormat.csv:
        sys.stdout.write(df.write_csv())
    elif fmt is OutputFormat.json:
        sys.stdout.write(df.write_json() + "\n")
    else:
        from metapilot.cli.console import print_frame

        print_frame(df, limit=limit)


def register(app: typer.Typer) -> None:
    app.command("sql")(sql_cmd)
