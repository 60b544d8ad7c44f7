"""Old warehouses keep working after a table or column gets a new name: renamed in place, rows kept."""

from __future__ import annotations

import duckdb

from metapilot.ground.paths import sql_statements, sql_text


def rename_legacy(con: duckdb.DuckDBPyConnection) -> None:
    """Give an older warehouse's held-out replay tables and id column their current names (issue 36:
    one meaning per name). Idempotent; runs before the DDL."""
    for stmt in sql_statements("migrate/renamed_tables.sql"):
        con.execute(stmt)
    for (table,) in con.execute(sql_text("migrate/renamed_columns.sql")).fetchall():
        con.execute(f'ALTER TABLE "{table}" RENAME COLUMN validation_id TO heldout_id')
