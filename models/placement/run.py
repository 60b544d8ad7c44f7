"""One placement replay from the warehouse: the cluster's nodes and pods, a policy, a mode, a seed."""

from __future__ import annotations

from pathlib import Path

import duckdb

from metapilot.models.placement.engine import POLICIES, build_cluster, build_workload, replay
from metapilot.warehouse.placement_store import load_nodes, load_pods


def replay_cluster(con: duckdb.DuckDBPyConnection, cluster: str, policy: str, mode: str = "time",
                   seed: int = 0, db: str | Path | None = None) -> dict:
    """Replay cluster `cluster` under a heuristic (or a published PPO policy id); the result dict."""
    nodes = load_nodes(con, cluster)
    if nodes.height == 0:
        raise ValueError(f"cluster {cluster!r} has no node list: ingest one first "
                         f"(metapilot ingest NODES.csv PODS.csv --cluster {cluster})")
    pods = load_pods(con, cluster)
    if pods.height == 0:
        raise ValueError(f"cluster {cluster!r} has no pods: ingest a pod list (metapilot ingest PODS.csv --cluster {cluster})")
    c = build_cluster(nodes)
    w = build_workload(pods, c)
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    out = replay(c, w, policy, mode, seed)
    if mode == "time" and not w.timed:
        out["warning"] = "the pod list has no deletion times: every pod stays once placed (use --mode inflate)"
    return out
