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
