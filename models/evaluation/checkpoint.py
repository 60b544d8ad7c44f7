"""Replay score of a candidate controller, for choosing the checkpoint in `metapilot train`.

`make_replay_evaluator(con, request)` loads the checkpoint window once (jobs submitted in it,
capacity at its start) and returns `evaluate(policy) -> {"score": ..., ...}` where `policy` maps
states `(n, N_FEATURES)` to actions `(n,)` (`models.controller.train.greedy`). The window is
replayed from an empty cluster with the policy choosing the objective at every boundary
(`models.controller.replay.replay_objectives`), until every job has finished and at least over
the whole window.

score = minus the publish gate's score against the 21 fixed baselines of the same window
(`models.controller.gate`: the worse of the distances to the best fixed mean and max wait, plus a
penalty per failed gate condition), so the checkpoint chosen is the one the gate would publish;
higher is better. The mean SPEC §7 reward over the window's epochs, the waits, the utilisation
and how often each objective was chosen go into the model card with the gate's verdict.

With `training` (the last weeks of the training window, `tuning.tuning_weeks`), the evaluator
can also replay the chosen candidate there (`check_training`), judged by the same gate; the publish
gate asks for both (`gate.publish_decision`). Only the checkpoint window chooses among candidates
(SPEC §7), so the training weeks stay a test no candidate was picked for passing. Why the second
window: on a rolling CEA-Curie window a controller that led its two checkpoint weeks by 22% lost
the next five by 25%, and it had lost its last training weeks; one short window is not evidence of
a lasting lead. Neither check corrects for the number of candidates: with three seeds two such
losers passed both (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import duckdb
import numpy as np
from metapilot.models.controller.dataset import TupleRequest
from metapilot.models.controller.gate import Outcome, gate
from metapilot.models.controller.replay import (
    ObjectiveReplayResult,
    batch_policy,
    replay_objectives,
)
from metapilot.models.controller.tuning import fixed_of, fixed_outcomes
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
    return float(result.epoch_sums[busy, 0].sum() / cap.sum())


def replay_summary(result: ObjectiveReplayResult, window_epochs: int | None = None,
                   fixed: list[Outcome] | None = None) -> dict:
    """Score and metrics of one objective replay (see the module docstring); without `fixed`
    contenders the score is the mean reward."""
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
    for i, name in enumerate(result.state_config.menu):
        out[f"share_{name}"] = float((acts == i).mean()) if acts.size else float("nan")
    if fixed:
        verdict = gate(Outcome.of("controller", m), fixed)
        out["score"] = -verdict.score
        out["gate"] = verdict.to_dict()
    return out


def _window_evaluator(con: duckdb.DuckDBPyConnection, request: TupleRequest,
                      fixed: list[Outcome] | None = None) -> Callable[[PolicyFn], dict]:
    """Replay a candidate over the request's window against the 21 fixed baselines of that window
    (`fixed`: their outcomes, when already replayed)."""
    workload, rows = load_replay_window(con, request.cluster, request.window_from, request.window_to,
                                      request.partition)
    if len(workload) == 0:
        raise LookupError(f"no jobs of cluster {request.cluster!r} were submitted in {request.window_from}.."
                          f"{request.window_to}: nothing to score a policy on there; choose windows that hold jobs "
                          "(`metapilot pipeline` splits the weeks that have jobs)")
    capacity = Capacity.from_rows(rows)
    e = int(request.state.epoch_s)
    n = len(epoch_grid(request.window_from, request.window_to, e))
    fixed = fixed or fixed_outcomes(workload, capacity)

    def evaluate(policy: PolicyFn) -> dict:
        result = replay_objectives(workload, capacity, batch_policy(policy), epoch_s=e, state_config=request.state,
                                   reward_config=request.reward, partition=request.partition, horizon_s=n * e)
        return replay_summary(result, n, fixed)

    return evaluate


class CheckpointEvaluator:
    """Scores candidates on the checkpoint window (`__call__`); `check_training` replays one on the
    training weeks, where given (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, request: TupleRequest,
                 training: tuple[datetime, datetime] | None = None, training_fixed: list[Outcome] | None = None) -> None:
        self._checkpoint = _window_evaluator(con, request)
        self.training_window = training
        self._training = (None if training is None else
                          _window_evaluator(con, replace(request, window_from=training[0], window_to=training[1]),
                                            training_fixed))

    def __call__(self, policy: PolicyFn) -> dict:
        return self._checkpoint(policy)

    def check_training(self, policy: PolicyFn) -> dict | None:
        """The policy's waits, slowdown and gate verdict on the training weeks (None without them)."""
        if self._training is None:
            return None
        tr = self._training(policy)
        lo, hi = self.training_window
        return {"window": [lo.isoformat(), hi.isoformat()],
                **{k: tr.get(k) for k in ("mean_wait_s", "max_wait_s", "mean_bsld", "gate")}}


def make_replay_evaluator(con: duckdb.DuckDBPyConnection, request: TupleRequest,
                          training: tuple[datetime, datetime] | None = None,
                          tuning: dict | None = None) -> CheckpointEvaluator:
    """An evaluator of candidate policies on the request's (checkpoint) window that can also
    check the chosen one on the `training` weeks (with the fixed contenders' outcomes there from
    `tuning`, a `Tuning.to_dict()`, when it was tuned on the same weeks)."""
    fixed = None if training is None else fixed_of(tuning, training, request.partition)
    return CheckpointEvaluator(con, request, training, fixed)
