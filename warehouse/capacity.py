"""Cluster capacity from a TOML config (SPEC §5): dated entries per partition, stored in `capacity`.

Config rows win over SWF headers and inferred peaks for the same cluster, which they replace.
"""

from __future__ import annotations

import tomllib
from datetime import datetime, timezone
from pathlib import Path

import duckdb


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
            con.execute("DELETE FROM capacity WHERE cluster = ?", [c])
        for r in rows:
            con.execute("INSERT OR REPLACE INTO capacity VALUES (?,?,?,?,?,?,?,?,?)",
                        [r["cluster"], r["partition"], r["valid_from"], r["nodes"], r["cores"], r["gpus"],
                         r["mem_mib"], r["source"], r["note"]])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return len(rows)
