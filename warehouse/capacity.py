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


PARTITION_KEYS = {"name", "nodes", "cores_per_node", "gpus_per_node", "mem_per_node_mib", "valid_from", "note"}


class CapacityConfigError(ValueError):
    """A clusters.toml that cannot be loaded as it is: the message names the file, the entry and
    what to write instead."""


def _count(p: dict, key: str, where: str, default: int | None = None, least: int = 0) -> int | None:
    v = p.get(key, default)
    if v is None:
        if default is None and key in ("nodes", "cores_per_node"):
            raise CapacityConfigError(f"{where}: `{key}` is missing (a whole number)")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise CapacityConfigError(f"{where}: `{key} = {v!r}` must be a whole number >= {least}")
    return v


def read_capacity_config(path: str | Path) -> list[dict]:
    """Rows for the `capacity` table from a clusters.toml (see warehouse/clusters.example.toml).
    Refuses (CapacityConfigError, naming the file and the entry) TOML errors, unknown keys (a typo
    would silently fall back to a default), counts that are negative or not whole, and a file
    with no `[clusters.NAME]` table: nothing is loaded from a file that is wrong anywhere."""
    try:
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise CapacityConfigError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(cfg) - {"clusters"})
    if unknown or not isinstance(cfg.get("clusters"), dict) or not cfg["clusters"]:
        raise CapacityConfigError(f"{path}: expected [clusters.NAME] tables with `partitions = [...]`"
                                  f"{'; unknown table ' + ', '.join(unknown) if unknown else ''} "
                                  "(see warehouse/clusters.example.toml)")
    rows = []
    for cluster, spec in cfg["clusters"].items():
        if not isinstance(spec, dict) or not isinstance(spec.get("partitions"), list) or not spec["partitions"]:
            raise CapacityConfigError(f"{path}: [clusters.{cluster}] needs `partitions = [{{ nodes = ..., cores_per_node = ... }}]`")
        extra = sorted(set(spec) - {"partitions"})
        if extra:
            raise CapacityConfigError(f"{path}: [clusters.{cluster}]: unknown key {', '.join(extra)} (only `partitions`)")
        for i, p in enumerate(spec["partitions"]):
            where = f"{path}: clusters.{cluster}.partitions[{i}]"
            if not isinstance(p, dict):
                raise CapacityConfigError(f"{where}: expected {{ nodes = ..., cores_per_node = ... }}")
            typo = sorted(set(p) - PARTITION_KEYS)
            if typo:
                raise CapacityConfigError(f"{where}: unknown key {', '.join(typo)} (known: {', '.join(sorted(PARTITION_KEYS))})")
            nodes = _count(p, "nodes", where, least=1)
            cores = _count(p, "cores_per_node", where, least=1)
            gpus = _count(p, "gpus_per_node", where, default=0)
            mem = _count(p, "mem_per_node_mib", where, default=None) if "mem_per_node_mib" in p else None
            vf = p.get("valid_from", "1970-01-01")
            try:
                valid_from = vf if isinstance(vf, datetime) else datetime.fromisoformat(str(vf))
            except ValueError:
                raise CapacityConfigError(f"{where}: `valid_from = {vf!r}` is not an ISO date") from None
            if valid_from.tzinfo is None:
                valid_from = valid_from.replace(tzinfo=timezone.utc)
            rows.append({
                "cluster": cluster, "partition": p.get("name", "*"), "valid_from": valid_from, "nodes": nodes,
                "cores": nodes * cores, "gpus": nodes * gpus,
                "mem_mib": nodes * mem if mem is not None else None, "source": "config",
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
