"""Open the warehouse: create it and its tables on first use, read-only for queries."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from metapilot.ground.paths import SQL_DIR, db_path

if TYPE_CHECKING:
    import polars as pl


def apply_ddl(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table and view the project defines (idempotent)."""
    for f in sorted((SQL_DIR / "ddl").glob("*.sql")):
        con.execute(f.read_text())
    for f in sorted((SQL_DIR / "marts").glob("*.sql")):
        con.execute(f.read_text())


def connect(db: str | Path | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Connect to the warehouse at `db` (see `metapilot.ground.paths.db_path`).

    Read-only connections refuse a missing database with an error that says what to run.
    """
    path = db_path(db)
    if read_only:
        if not path.exists():
            raise FileNotFoundError(f"no warehouse at {path}: run `metapilot ingest PATH...` first, or pass --db")
        return duckdb.connect(str(path), read_only=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    apply_ddl(con)
    return con


def connect_memory() -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse with the full schema: for tests and dry runs."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    apply_ddl(con)
    return con


def query_frame(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> "pl.DataFrame":
    """Run a parameterised query and return a polars frame (DuckDB 2's connection-level result)."""
    import polars as pl

    return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())
