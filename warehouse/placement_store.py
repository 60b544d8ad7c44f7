"""Read a cluster's nodes and pods for the node-level replay, and keep its runs (`placement_runs`)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import duckdb
import polars as pl

from metapilot.ground.paths import sql_text
from metapilot.ground.version import code_version
from metapilot.warehouse.db import query_frame


def load_nodes(con: duckdb.DuckDBPyConnection, cluster: str) -> pl.DataFrame:
    return query_frame(con, sql_text("placement/nodes.sql"), [cluster])


def load_pods(con: duckdb.DuckDBPyConnection, cluster: str) -> pl.DataFrame:
    return query_frame(con, sql_text("placement/pods.sql"), [cluster])


def missing_node_list(con: duckdb.DuckDBPyConnection, cluster: str) -> str | None:
    """What to tell a user whose cluster has no nodes, from the node lists ingested: its own load
    that failed or had no usable line, or lists loaded for other clusters (issue 33: never
    suggest again the ingest the user just ran). None when the cluster has nodes, or nothing is known."""
    rows = con.execute(sql_text("placement/node_list_loads.sql"), [cluster]).fetchall()
    if not rows or rows[0][7] > 0:
        return None
    own = [r for r in rows if r[0] == cluster]
    if own:
        _, path, outcome, read, loaded, quarantined, message, _ = own[0]
        if outcome == "failed":
            return f"cluster {cluster!r} has no node list: loading {path} failed ({message}); fix the file and ingest it again"
        if not quarantined:
            return (f"cluster {cluster!r} has no node list: {path} was loaded for it but holds no node line (only its "
                    "header); ingest a node list with sn,cpu_milli,memory_mib,gpu,model lines")
        return (f"cluster {cluster!r} has no node list: {path} was loaded for it but none of its {read} lines is a usable "
                f"node ({quarantined} quarantined; see why: metapilot sql \"select line_no, reason from quarantine "
                f"where cluster = '{cluster}'\"); ingest a node list with sn,cpu_milli,memory_mib,gpu,model lines")
    others = sorted({r[0] for r in rows if r[2] == "loaded"})
    if not others:
        return None
    return (f"cluster {cluster!r} has no node list; the warehouse has node lists for {', '.join(others)}: "
            f"ingest one for this cluster with --cluster {cluster} (the same file may serve several clusters)")


def store_run(con: duckdb.DuckDBPyConnection, cluster: str, result: dict) -> str:
    """Record one replay's result; returns its run id."""
    run_id = str(uuid.uuid4())
    cols = ("pods", "placed", "failed", "mean_wait_s", "gpu_alloc_share", "frag_gpu_share", "imbalance",
            "hot_node_share", "idle_share", "unfit", "unknown_gpu_model", "seconds")
    row = {"run_id": run_id, "cluster": cluster, "policy": result["policy"], "mode": result["mode"],
           "seed": int(result["seed"]), "created_at": datetime.now(timezone.utc),
           **{c: result.get(c) for c in cols}, "result_json": json.dumps(result), "code_version": code_version()}
    con.execute(sql_text("placement/store_run.sql"), row)
    return run_id


def pods_digest(nodes: pl.DataFrame, pods: pl.DataFrame) -> str:
    """SHA-256 of the node list and pods a placement policy was trained on (the card's dataset hash)."""
    import hashlib

    h = hashlib.sha256()
    for frame in (nodes, pods):
        h.update(frame.write_csv().encode())
    return h.hexdigest()
