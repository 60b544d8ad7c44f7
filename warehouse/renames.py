"""Old warehouses keep working after a table or column gets a new name: renamed in place, rows kept."""

from __future__ import annotations

import duckdb

from metapilot.ground.paths import sql_statements, sql_text


NEW_COLUMN = {"validation_id": "heldout_id", "validated_at": "checked_at"}


def rename_legacy(con: duckdb.DuckDBPyConnection) -> None:
    """Give an older warehouse's held-out replay and data-check tables and columns their current
    names (issue 36: one meaning per name). Idempotent; runs before the DDL."""
    for stmt in sql_statements("migrate/renamed_tables.sql"):
        con.execute(stmt)
    for table, column in con.execute(sql_text("migrate/renamed_columns.sql")).fetchall():
        con.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{NEW_COLUMN[column]}"')
