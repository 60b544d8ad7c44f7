"""Replay score of a candidate controller, for choosing the checkpoint in `metapilot train`.

`make_replay_evaluator(con, request)` loads the validation window once (jobs submitted in it,
capacity at its start) and returns `evaluate(policy) -> {"score": ..., ...}` where `policy` maps
states `(n, N_FEATURES)` to actions `(n,)` (`models.controller.train.greedy`). The window is
replayed from an empty cluster with the policy choosing the objective at every boundary
(`models.controller.replay.replay_objectives`), until every job has finished and at least over
the whole window.

score = mean SPEC §7 reward per epoch over the window's epochs (what the controller is trained to
maximise, on held-out data, through the simulator instead of an off-policy estimate); higher is
better. The other keys (waits, utilisation, how often U was chosen) go into the model card.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import numpy as np
from metapilot.models.controller.dataset import TupleRequest
from metapilot.models.controller.objectives import OBJECTIVES
from metapilot.models.controller.replay import (
    ObjectiveReplayResult,
    batch_policy,
    replay_objectives,
)
from metapilot.models.simulator.capacity import Capacity
from metapilot.transforms.asrun_state import epoch_grid
from metapilot.warehouse.sim_store import load_replay_window

PolicyFn = Callable[[np.ndarray], np.ndarray]


def backlog_epoch_utilisation(result: ObjectiveReplayResult) -> float:
    """Core utilisation over the epochs that open with a non-empty queue (where objectives can
    differ: SPEC §6); NaN when the queue is never non-empty at a boundary."""
    n = len(result.objectives)
    agg = result.boundary_aggregates[:n]
    busy = agg[:, 7] > 0
    cap = agg[busy, 4] * result.epoch_s
    if not busy.any() or not (cap > 0).all():
        return float("nan")
    return float(result.epoch_used_s[busy, 0].sum() / cap.sum())


def replay_summary(result: ObjectiveReplayResult, window_epochs: int | None = None) -> dict[str, float]:
    """Score and metrics of one objective replay (see the module docstring)."""
    rewards = result.epoch_rewards()
    win = rewards[:window_epochs] if window_epochs else rewards
    m = result.metrics().row(0, named=True)
    acts = result.objectives

    def num(x) -> float:
        return float("nan") if x is None else float(x)

    out = {
        "score": float(win.mean()) if win.size else float("nan"),
        "reward_mean_window": float(win.mean()) if win.size else float("nan"),
        "reward_mean_all": float(rewards.mean()) if rewards.size else float("nan"),
        "epochs": float(acts.size),
        "mean_wait_s": num(m["mean_wait"]),
        "max_wait_s": num(m["max_wait"]),
        "mean_bsld": num(m["mean_bsld"]),
        "util_cpu": num(m["util_cores"]),
        "util_cpu_backlog_epochs": backlog_epoch_utilisation(result),
        "switches": float(result.counters.get("switches", 0)),
        "wall_s": float(result.wall_s),
    }
    for i, name in enumerate(OBJECTIVES):
        out[f"share_{name}"] = float((acts == i).mean()) if acts.size else float("nan")
    return out


def make_replay_evaluator(con: duckdb.DuckDBPyConnection, request: TupleRequest) -> Callable[[PolicyFn], dict[str, float]]:
    """An evaluator of candidate policies on the request's (validation) window."""
    workload, rows = load_replay_window(con, request.cluster, request.window_from, request.window_to,
                                      request.partition)
    capacity = Capacity.from_rows(rows)
    e = int(request.state.epoch_s)
    n = len(epoch_grid(request.window_from, request.window_to, e))

    def evaluate(policy: PolicyFn) -> dict[str, float]:
        result = replay_objectives(workload, capacity, batch_policy(policy), epoch_s=e, state_config=request.state,
                                   reward_config=request.reward, partition=request.partition, horizon_s=n * e)
        return replay_summary(result, n)

    return evaluate
