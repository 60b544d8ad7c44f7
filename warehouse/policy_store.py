"""The policy registry: rows of `policies` (DDL: sql/ddl/011_policies.sql) that tie an artifact folder
to its training window and checksums. Controllers and placement policies share it; what to run is
`published_policies` (publish_store.py)."""

from __future__ import annotations

import duckdb

from metapilot.ground.paths import sql_text
from metapilot.warehouse.db import has_table, query_frame


def register_controller(con: duckdb.DuckDBPyConnection, row: dict) -> None:
    """Insert (or replace) a controller policy's row (the columns of sql/policies/register_controller.sql)."""
    con.execute(sql_text("policies/register_controller.sql"), row)


def register_placement(con: duckdb.DuckDBPyConnection, row: dict) -> None:
    """Insert (or replace) a placement policy's row (algorithm 'PPO'; sql/policies/register_placement.sql)."""
    con.execute(sql_text("policies/register_placement.sql"), row)


def policy_row(con: duckdb.DuckDBPyConnection, policy_id: str) -> dict:
    """The policy's `policies` row (training window, cluster, artifact path); a clear error if unknown."""
    rows = query_frame(con, sql_text("policies/policy.sql"), {"policy_id": policy_id})
    if rows.height == 0:
        known = [r[0] for r in con.execute(sql_text("policies/recent.sql")).fetchall()]
        hint = f"known: {', '.join(known)}" if known else "no policy is registered yet: train one with `metapilot train`"
        raise LookupError(f"no policy {policy_id!r} in the policies table ({hint})")
    return rows.row(0, named=True)


def registered_sums(con: duckdb.DuckDBPyConnection, policy_id: str) -> str | None:
    """The SHA256SUMS hash recorded for a policy (None if it is not registered, or the warehouse
    predates the registry: then only the folder's own sums apply)."""
    if not has_table(con, "policies"):
        return None
    rows = query_frame(con, sql_text("policies/policy.sql"), {"policy_id": policy_id})
    return rows["sums_sha256"][0] if rows.height else None
