"""Replay of a workload with the scheduler's objective chosen per decision epoch (SPEC §6).

`replay_objectives` is what validation (`models.validation`), the checkpoint choice of training
(`models.simulator.controller_eval`) and the benchmarks call: an objective held for the whole
window (fixed U, fixed W: W replays exactly as FCFS+EASY, U exactly as LAF+EASY with fit-first)
or a controller that sees the §7 state at every boundary and picks the next epoch's objective.
It reads the cluster through `models.simulator.env.EpochReplay`, the path the gym env and the
rollouts use, so the controller sees exactly the states it was trained on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl
from metapilot.models.controller.objectives import OBJECTIVE_SPECS, OBJECTIVES
from metapilot.models.simulator import SimResult
from metapilot.models.simulator.capacity import Capacity
from metapilot.models.simulator.env import EpochReplay, StateEncoder, aggregates_frame
from metapilot.transforms.reward import RewardConfig, reward_from_aggregates
from metapilot.transforms.state import N_FEATURES, StateConfig
from metapilot.transforms.workload import Workload

StatePolicy = Callable[[np.ndarray], int]


@dataclass(frozen=True)
class ObjectiveReplayResult(SimResult):
    """A `SimResult` (metrics, weekly) plus what was decided per epoch.

    `objectives[k]` is the action of epoch k (`[k * epoch_s, (k + 1) * epoch_s)` since the window
    start); `boundary_aggregates` has the n + 1 boundaries' aggregates (AGGREGATES order) and
    `epoch_used_s` the resource-seconds (cores, GPUs, MiB) used in each of the n epochs."""

    epoch_s: int = 3600
    objectives: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    boundary_aggregates: np.ndarray = field(default_factory=lambda: np.zeros((0, 16)))
    epoch_used_s: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    state_config: StateConfig = StateConfig()
    reward_config: RewardConfig = RewardConfig()

    def aggregates(self) -> pl.DataFrame:
        """The boundaries as a frame (AGGREGATES + used_*_s + u_* of the epoch each opens)."""
        return aggregates_frame(self.boundary_aggregates, self.epoch_used_s, self.epoch_s)

    def epoch_rewards(self) -> np.ndarray:
        """SPEC §7 reward of every epoch (the definition, vectorised)."""
        agg = self.aggregates()
        n = len(self.objectives)
        cur, nxt = agg.head(n), agg.tail(n)
        return reward_from_aggregates(
            queue_len_end=nxt["queue_len"].to_numpy(), wait_mean_end_s=nxt["wait_mean_s"].to_numpy(),
            u_cpu=cur["u_cpu"].to_numpy(), u_gpu=cur["u_gpu"].to_numpy(), u_mem=cur["u_mem"].to_numpy(),
            cap_gpu=cur["cap_gpu"].to_numpy(), cap_mem=cur["cap_mem"].to_numpy(), config=self.reward_config,
        )

    def objective_schedule(self) -> list[dict]:
        """Runs of the same objective: [{"from_epoch", "epochs", "objective"}] (for sim_runs)."""
        a = np.asarray(self.objectives)
        if a.size == 0:
            return []
        cuts = np.r_[0, np.flatnonzero(np.diff(a)) + 1, a.size]
        return [{"from_epoch": int(lo), "epochs": int(hi - lo), "objective": OBJECTIVES[int(a[lo])]}
                for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]


def replay_objectives(
    workload: Workload,
    capacity: Capacity,
    objective: int | StatePolicy,
    epoch_s: int = 3600,
    state_config: StateConfig | None = None,
    reward_config: RewardConfig | None = None,
    *,
    partition: str | None = None,
    horizon_s: float | None = None,
    settings: Sequence[tuple[int, int, bool]] | None = None,
) -> ObjectiveReplayResult:
    """Replay the workload to its end, epoch by epoch, under `objective`: an action index held
    throughout, or `state -> action` called at every boundary with the state (float32,
    (N_FEATURES,)) of `transforms.state`. `horizon_s`: keep deciding at least this long after the
    window start (e.g. to score a whole validation window even after the last job ends).
    `settings`: another menu of engine settings per action (what-if benchmarks; see
    `models.simulator.env.EpochReplay`); default: the objectives' definitions."""
    sc = replace(state_config or StateConfig(), epoch_s=int(epoch_s))
    rc = reward_config or RewardConfig()
    fixed = not callable(objective)
    if fixed and not (isinstance(objective, (int, np.integer)) and 0 <= int(objective) < len(OBJECTIVES)):
        raise ValueError(f"objective must be an index into {OBJECTIVES} or a state -> action callable, got {objective!r}")
    t0 = time.perf_counter()
    rp = EpochReplay(workload, capacity, epoch_s=sc.epoch_s, long_tail_s=sc.long_tail_s, partition=partition,
                     settings=settings)
    encode = None if fixed else StateEncoder(sc, rp.origin_s, sc.epoch_s)
    rows = [rp.reset()]
    used: list[np.ndarray] = []
    actions: list[int] = []
    min_k = 0 if horizon_s is None else int(np.ceil(horizon_s / sc.epoch_s))
    while not rp.done or rp.k < min_k:
        if fixed:
            a = int(objective)
        else:
            a = int(objective(encode(rows[-1], rp.k)))
            if not 0 <= a < len(OBJECTIVES):
                raise ValueError(f"the controller chose {a}, not an index into {OBJECTIVES}")
        used.append(rp.advance(a))
        rows.append(rp.aggregates())
        actions.append(a)
    wall = time.perf_counter() - t0
    eng = rp.engine
    acts = np.asarray(actions, dtype=np.int64)
    counters = dict(workload.report.as_dict()) if workload.report is not None else {}
    counters["cannot_fit"] = int(eng.cannot_fit.size)
    counters["epochs"] = int(acts.size)
    counters |= {f"epochs_{name}": int((acts == i).sum()) for i, name in enumerate(OBJECTIVES)}
    counters["switches"] = int((np.diff(acts) != 0).sum()) if acts.size > 1 else 0
    pool = eng.jobs.pool.copy()
    pool[eng.cannot_fit] = -1
    modes = {OBJECTIVE_SPECS[OBJECTIVES[a]].backfill for a in np.unique(acts).tolist()} or {"easy"}
    backfill = "custom" if settings is not None else (modes.pop() if len(modes) == 1 else "mixed")
    return ObjectiveReplayResult(
        workload=workload, capacity=capacity,
        policy=f"fixed-{OBJECTIVES[int(objective)]}" if fixed else "objective-switching",
        backfill=backfill,
        start=eng.start.copy(), end=eng.end.copy(), pool=pool, cannot_fit=eng.cannot_fit,
        wall_s=wall, events=rp.events, counters=counters,
        epoch_s=sc.epoch_s, objectives=acts, boundary_aggregates=np.stack(rows),
        epoch_used_s=np.stack(used) if used else np.zeros((0, 3)), state_config=sc, reward_config=rc,
    )


def batch_policy(policy: Callable[[np.ndarray], np.ndarray]) -> StatePolicy:
    """A `states (n, N_FEATURES) -> actions (n,)` function (d3rlpy, the TorchScript artifact) as
    the one-state callable `replay_objectives` takes."""

    def one(state: np.ndarray) -> int:
        out = np.asarray(policy(np.asarray(state, dtype=np.float32).reshape(1, N_FEATURES)))
        return int(out.reshape(-1)[0])

    return one
