"""One placement replay from the warehouse: the cluster's nodes and pods, a policy (a heuristic or
a trained PPO agent's id), a mode, a seed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb

from metapilot.models.placement.engine import POLICIES, Cluster, Workload, build_cluster, build_workload, replay
from metapilot.models.placement.rollout import Obs, PlacementEnv, play
from metapilot.warehouse.placement_store import load_nodes, load_pods


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the body with `n` torch threads: one decision scores a few dozen rows, where more threads
    only add overhead (and contend on a shared machine)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def replay_agent(cluster: Cluster, w: Workload, choose: Callable[[Obs], int], policy: str, mode: str = "time",
                 seed: int = 0, typical: tuple | None = None) -> dict:
    """Replay the whole cluster and list with an agent choosing every node; the metrics of SPEC §11."""
    from metapilot.models.placement.engine import typical_pods

    t0 = time.perf_counter()
    with torch_threads(1):
        out = play(PlacementEnv(cluster, w, mode, seed, typical if typical is not None else typical_pods(w)),
                   choose, policy)
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out


def load_cluster(con: duckdb.DuckDBPyConnection, cluster: str) -> tuple[Cluster, Workload]:
    """The cluster's node list and pods from the warehouse, as the replay's arrays."""
    nodes = load_nodes(con, cluster)
    if nodes.height == 0:
        raise ValueError(f"cluster {cluster!r} has no node list: ingest one first "
                         f"(metapilot ingest NODES.csv PODS.csv --cluster {cluster})")
    pods = load_pods(con, cluster)
    if pods.height == 0:
        raise ValueError(f"cluster {cluster!r} has no pods: ingest a pod list (metapilot ingest PODS.csv --cluster {cluster})")
    c = build_cluster(nodes)
    return c, build_workload(pods, c)


def refuse_without_gpus(c: Cluster, cluster: str, mode: str = "inflate") -> None:
    """Inflation and training need GPUs (`engine.without_gpus`): refused in one sentence naming the
    cluster and what works instead."""
    from metapilot.models.placement.engine import without_gpus

    if mode == "inflate" and (why := without_gpus(c, cluster)) is not None:
        raise ValueError(why)


def load_registered_agent(con: duckdb.DuckDBPyConnection, policy_id: str, db: str | Path | None = None):
    """A PPO placement policy by id: its `policies` row, its folder verified against the row's hash."""
    from metapilot.models.placement.artifact import ALGORITHM, find_policy, load_agent
    from metapilot.warehouse.policy_store import policy_row

    row = policy_row(con, policy_id)
    if row["algorithm"] != ALGORITHM:
        raise ValueError(f"policy {policy_id!r} is a {row['algorithm']} controller, not a placement policy: "
                         f"use one of {', '.join(POLICIES)} or a PPO policy id (metapilot place train)")
    folder = Path(row["path"]) if row.get("path") and Path(row["path"]).is_dir() else find_policy(policy_id, db)
    return load_agent(folder, row["sums_sha256"])


def replay_cluster(con: duckdb.DuckDBPyConnection, cluster: str, policy: str, mode: str = "time",
                   seed: int = 0, db: str | Path | None = None) -> dict:
    """Replay cluster `cluster` under a heuristic (or a registered PPO policy id); the result dict."""
    c, w = load_cluster(con, cluster)
    refuse_without_gpus(c, cluster, mode)
    if policy in POLICIES:
        out = replay(c, w, policy, mode, seed)
    else:
        agent = load_registered_agent(con, policy, db)
        out = replay_agent(c, w, agent.choose, policy, mode, seed)
        out["trained_on"] = agent.card["cluster"]
    if mode == "inflate" and out.get("not_drawn_unfit"):
        out["warning"] = (f"{out['not_drawn_unfit']:,} pods of the list fit no node of the empty cluster (too large, or a "
                          "GPU model no node has): left out of the inflation draws; a time replay counts them as unfit")
    if mode == "time" and not w.timed:
        out["warning"] = "the pod list has no deletion times: every pod stays once placed" + (
            " (use --mode inflate)" if c.gpu_milli else "")
    return out
