"""`metapilot sql "SELECT ..."`: read-only queries on the warehouse, printed as a table, CSV or JSON,
or written to a file with `--out` (CSV or Parquet).

The connection is sandboxed (SPEC §8): read-only, and it cannot reach files, other databases,
extensions or settings (`warehouse.db.connect_sandboxed`). Tables and marts are queryable as usual.
"""

from __future__ import annotations

import re
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


READ_ONLY_NOTE = "the warehouse is opened read-only: only queries are allowed"
_CANDIDATES = re.compile(r'(?:Candidate bindings|Did you mean)[: ]*(.*)')
_FROM = re.compile(r"\bfrom\s+([A-Za-z_][\w]*)", re.IGNORECASE)


def explain_sql_error(e: Exception, query: str) -> str:
    """The lines a user sees for a failed statement. Only a statement that tried to write is
    told the warehouse is read-only; a query DuckDB could not parse or bind gets DuckDB's own
    message, and a missing column or table the nearest names and how to list them (issue 33)."""
    import duckdb

    lines = [ln.rstrip() for ln in str(e).splitlines() if ln.strip()]
    first = lines[0] if lines else type(e).__name__
    if isinstance(e, duckdb.PermissionException):
        return f"error: refused: {first}\n({SANDBOX_NOTE})"
    if "read-only mode" in first:  # a statement that tried to write
        return f"error: refused: {first}\n({READ_ONLY_NOTE}; {SANDBOX_NOTE})"
    if "locked" in first or "lock_configuration" in first:  # a setting
        return f"error: refused: {first}\n({SANDBOX_NOTE})"
    if not isinstance(e, (duckdb.BinderException, duckdb.CatalogException)):
        return "error: " + "\n".join(lines)
    names = [m.group(1).strip().rstrip("?") for ln in lines if (m := _CANDIDATES.search(ln))]
    shown = [ln for ln in lines if not _CANDIDATES.search(ln)]
    out = ["error: " + "\n".join(shown)]
    if names and names[0]:
        out.append(f"nearest names: {names[0].replace(chr(34), '')}")
    if "column" in first.lower():
        table = next(iter(_FROM.findall(query)), "jobs")
        out.append(f'to list the columns: metapilot sql "describe {table}"')
    elif "table" in first.lower():
        out.append('to list the tables: metapilot sql "show tables" (and the columns: metapilot sql "describe jobs")')
    return "\n".join(out)


def _write_out(df, target: Path, kind: str) -> None:
    """Write the result; a failure (a full disk, above all) is one message whatever the format
    (polars reports Parquet's as a ComputeError, CSV's as an OSError), and no partial file is left."""
    import polars as pl

    try:
        if kind == "parquet":
            df.write_parquet(target)
        else:
            df.write_csv(target, separator="\t" if kind == "tsv" else ",")
    except (OSError, pl.exceptions.PolarsError) as e:
        target.unlink(missing_ok=True)
        text = str(e)
        why = ("the disk is full (no space left on device)" if "No space left" in text or getattr(e, "errno", None) == 28
               else f"it could not be written ({text.splitlines()[0] if text else type(e).__name__})")
        typer.echo(f"error: --out {target}: {why}: nothing was written; free some space or choose another folder, "
                   "then run the query again", err=True)
        raise typer.Exit(2) from None


def sql_cmd(
    query: Annotated[str, typer.Argument(help="A read-only SQL query, e.g. \"SELECT * FROM mart_daily LIMIT 5\".")],
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="table, csv or json.")] = OutputFormat.table,
    limit: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
    out: Annotated[Optional[str], typer.Option("--out", help="Write the whole result to FILE (.csv or .parquet) instead of printing it.")] = None,
    force: Annotated[bool, typer.Option("--force", help="With --out: replace FILE if it exists.")] = False,
) -> None:
    """Run a read-only SQL query against the warehouse (no file, database, extension or setting access)."""
    import duckdb

    from metapilot.warehouse.db import connect_sandboxed

    kind = _out_kind(out) if out else None
    if out and Path(out).exists() and not force:  # before the query: never overwrite a file (an input list...) by accident
        typer.echo(f"error: --out {out}: the file exists; add --force to replace it, or name another file", err=True)
        raise typer.Exit(2)
    if limit < 0:
        typer.echo(f"error: --limit {limit}: give the number of rows to show (0 or more; --format csv prints every row)", err=True)
        raise typer.Exit(2)
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
    except duckdb.Error as e:
        typer.echo(explain_sql_error(e, query), err=True)
        raise typer.Exit(2)
    finally:
        con.close()
    if kind is not None:
        target = Path(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_out(df, target, kind)
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
