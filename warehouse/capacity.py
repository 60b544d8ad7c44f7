"""Cluster capacity from a TOML config (SPEC §5): dated entries per partition, stored in `capacity`.

Config rows win over SWF headers and inferred peaks for the same cluster, which they replace.
"""

from __future__ import annotations

import tomllib
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl

from metapilot.ground.paths import sql_text
from metapilot.warehouse.db import query_frame


CAPACITY_COLUMNS: tuple[str, ...] = (
    "cluster", "partition", "valid_from", "nodes", "cores", "gpus", "mem_mib", "source", "note",
)


def read_capacity_config(path: str | Path) -> list[dict]:
    """Rows for the `capacity` table from a clusters.toml (see warehouse/clusters.example.toml)."""
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    rows = []
    for cluster, spec in (cfg.get("clusters") or {}).items():
        for p in spec.get("partitions", []):
            nodes = int(p["nodes"])
            vf = p.get("valid_from", "1970-01-01")
            valid_from = vf if isinstance(vf, datetime) else datetime.fromisoformat(str(vf))
            if valid_from.tzinfo is None:
                valid_from = valid_from.replace(tzinfo=timezone.utc)
            mem = p.get("mem_per_node_mib")
            rows.append({
                "cluster": cluster, "partition": p.get("name", "*"), "valid_from": valid_from, "nodes": nodes,
                "cores": nodes * int(p["cores_per_node"]), "gpus": nodes * int(p.get("gpus_per_node", 0)),
                "mem_mib": nodes * int(mem) if mem is not None else None, "source": "config",
                "note": p.get("note"),
            })
    return rows


def store_capacity_config(con: duckdb.DuckDBPyConnection, rows: list[dict]) -> int:
    """Replace each configured cluster's capacity with the config's rows."""
    con.execute("BEGIN TRANSACTION")
    try:
        for c in sorted({r["cluster"] for r in rows}):
            con.execute(sql_text("capacity/forget_cluster.sql"), {"cluster": c})
        for r in rows:
            upsert_capacity(con, r)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return len(rows)


def upsert_capacity(con: duckdb.DuckDBPyConnection, row: dict) -> None:
    """Write one dated entry (keys: the `capacity` columns), replacing one of the same date."""
    con.execute(sql_text("capacity/upsert.sql"), {k: row.get(k) for k in CAPACITY_COLUMNS})


def forget_inferred(con: duckdb.DuckDBPyConnection, cluster: str) -> None:
    """Drop a cluster's inferred capacity (about to be computed again)."""
    con.execute(sql_text("capacity/forget_inferred.sql"), [cluster])


def forget_derived(con: duckdb.DuckDBPyConnection, cluster: str) -> None:
    """Drop the capacity a cluster's logs gave it (SWF header, inferred) once it has no jobs left."""
    con.execute(sql_text("capacity/forget_derived.sql"), [cluster])


def capacity_listing(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every entry, by cluster, partition and date."""
    return query_frame(con, sql_text("capacity/listing.sql"))
