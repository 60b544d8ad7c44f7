"""Replay of a workload with the scheduler's objective chosen per decision epoch (SPEC §6).

`replay_objectives` is what the held-out replay (`models.evaluation.heldout`), the checkpoint choice of training
(`models.evaluation.checkpoint`) and the benchmarks call: an objective of the menu held for
the whole window (fixed-SJF replays exactly as SJF+EASY, ...) or a controller that sees the §7
state at every boundary and picks the next epoch's objective.
It reads the cluster through `models.simulator.epoch_replay.EpochReplay`, the path the gym env and the
rollouts use, so the controller sees exactly the states it was trained on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import polars as pl
from metapilot.models.controller.lookahead import LookaheadProbe
from metapilot.models.controller.planner import LookaheadPlanner
from metapilot.models.controller.objectives import Menu
from metapilot.models.simulator import SimResult
from metapilot.models.simulator.capacity import Capacity
from metapilot.models.simulator.engine import Engine
from metapilot.models.simulator.epoch_replay import N_SUMS, EpochReplay, StateEncoder, aggregates_frame
from metapilot.transforms.reward import ControllerRewardConfig, reward_from_frame
from metapilot.transforms.state import StateConfig, lookahead_features
from metapilot.transforms.workload import Workload

StatePolicy = Callable[[np.ndarray], int]


class EnginePolicy(Protocol):
    """A policy that reads the engine itself at each boundary (the lookahead planner, the guard
    rule: `models.controller.planner`)."""

    name: str

    def reset(self) -> None: ...

    def plan(self, engine: Engine, aggregates: np.ndarray, settings: Sequence[tuple[int, int, bool]]) -> int: ...


@dataclass(frozen=True)
class ObjectiveReplayResult(SimResult):
    """A `SimResult` (metrics, weekly) plus what was decided per epoch.

    `objectives[k]` is the action of epoch k (`[k * epoch_s, (k + 1) * epoch_s)` since the window
    start); `boundary_aggregates` has the n + 1 boundaries' aggregates (AGGREGATES order) and
    `epoch_used_s` the resource-seconds (cores, GPUs, MiB) used in each of the n epochs."""

    epoch_s: int = 3600
    objectives: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    boundary_aggregates: np.ndarray = field(default_factory=lambda: np.zeros((0, 16)))
    epoch_sums: np.ndarray = field(default_factory=lambda: np.zeros((0, N_SUMS)))
    state_config: StateConfig = StateConfig()
    reward_config: ControllerRewardConfig = ControllerRewardConfig()
    lookahead_costs: np.ndarray | None = None  # (n + 1, menu size) at the boundaries, when the state has them

    def aggregates(self) -> pl.DataFrame:
        """The boundaries as a frame (AGGREGATES + the epoch sums + u_* of the epoch each opens)."""
        return aggregates_frame(self.boundary_aggregates, self.epoch_sums, self.epoch_s)

    def epoch_rewards(self, config: ControllerRewardConfig | None = None) -> np.ndarray:
        """SPEC §7 reward of every epoch (the definition, vectorised), under the replay's reward
        or another one (`config`)."""
        return reward_from_frame(self.aggregates(), config or self.reward_config)

    def objective_schedule(self) -> list[dict]:
        """Runs of the same objective: [{"from_epoch", "epochs", "objective"}] (for sim_runs)."""
        a = np.asarray(self.objectives)
        if a.size == 0:
            return []
        cuts = np.r_[0, np.flatnonzero(np.diff(a)) + 1, a.size]
        names = self.state_config.menu
        return [{"from_epoch": int(lo), "epochs": int(hi - lo), "objective": names[int(a[lo])]}
                for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]


def replay_objectives(
    workload: Workload,
    capacity: Capacity,
    objective: int | StatePolicy | EnginePolicy,
    epoch_s: int = 3600,
    state_config: StateConfig | None = None,
    reward_config: ControllerRewardConfig | None = None,
    *,
    partition: str | None = None,
    horizon_s: float | None = None,
    settings: Sequence[tuple[int, int, bool]] | None = None,
    lookahead: bool | None = None,
) -> ObjectiveReplayResult:
    """Replay the workload to its end, epoch by epoch, under `objective`: an action index held
    throughout, or `state -> action` called at every boundary with the state (float32,
    (n_features,)) of `transforms.state` (lookahead features included when the state config has
    them), or an `EnginePolicy` (the planner) asked at every boundary. `horizon_s`: keep deciding
    at least this long after the window start (e.g. to score a whole checkpoint window even after
    the last job ends). `settings`: raw engine settings per action instead of the menu's (what-if
    benchmarks; see `models.simulator.epoch_replay.EpochReplay`). `lookahead`: record the lookahead costs
    of every boundary (default: when a state policy needs them; tuple sources ask for them)."""
    sc = replace(state_config or StateConfig(), epoch_s=int(epoch_s))
    rc = reward_config or ControllerRewardConfig()
    menu = Menu.of(sc)
    names = menu.names
    planner = hasattr(objective, "plan")
    fixed = not planner and not callable(objective)
    if fixed and not (isinstance(objective, (int, np.integer)) and 0 <= int(objective) < len(menu)):
        raise ValueError(f"objective must be an index into the menu {names} or a state -> action callable, "
                         f"got {objective!r}")
    t0 = time.perf_counter()
    rp = EpochReplay(workload, capacity, epoch_s=sc.epoch_s, long_tail_s=sc.long_tail_s, partition=partition,
                     objectives=menu.specs, settings=settings)
    encode = None if fixed or planner else StateEncoder(sc, rp.origin_s, sc.epoch_s)
    if lookahead is None:
        lookahead = encode is not None and sc.lookahead_h > 0
    probe = LookaheadProbe(sc) if lookahead else None
    if planner:
        objective.reset()
    rows = [rp.reset()]
    costs: list[np.ndarray] = []  # the lookahead costs of every boundary
    # a planner (or an epsilon-planner around one) that looked ahead as the probe does: its own costs
    teacher = getattr(objective, "planner", objective) if planner else None
    teacher = teacher if isinstance(teacher, LookaheadPlanner) else None
    used: list[np.ndarray] = []
    actions: list[int] = []
    min_k = 0 if horizon_s is None else int(np.ceil(horizon_s / sc.epoch_s))
    while not rp.done or rp.k < min_k:
        if fixed:
            a = int(objective)
        elif planner:
            a = int(objective.plan(rp.engine, rows[-1], rp.settings))
        else:
            s = encode(rows[-1], rp.k)
            if probe is not None:
                costs.append(probe.costs(rp.engine, rows[-1], rp.settings))
                s = np.concatenate([s, lookahead_features(costs[-1], sc.epoch_s)[0]])
            a = int(objective(s))
            if not 0 <= a < len(menu):
                raise ValueError(f"the controller chose {a}, not an index into the menu {names}")
        if probe is not None and len(costs) == len(rows) - 1:
            costs.append(probe.costs(rp.engine, rows[-1], rp.settings, teacher))
        used.append(rp.advance(a))
        rows.append(rp.aggregates())
        actions.append(a)
    if probe is not None:
        costs.append(probe.costs(rp.engine, rows[-1], rp.settings))
    wall = time.perf_counter() - t0
    eng = rp.engine
    acts = np.asarray(actions, dtype=np.int64)
    counters = dict(workload.report.as_dict()) if workload.report is not None else {}
    counters["cannot_fit"] = int(eng.cannot_fit.size)
    counters["epochs"] = int(acts.size)
    counters |= {f"epochs_{name}": int((acts == i).sum()) for i, name in enumerate(names)}
    counters["switches"] = int((np.diff(acts) != 0).sum()) if acts.size > 1 else 0
    pool = eng.jobs.pool.copy()
    pool[eng.cannot_fit] = -1
    modes = {menu.specs[a].backfill for a in np.unique(acts).tolist()} or {"easy"}
    backfill = "custom" if settings is not None else (modes.pop() if len(modes) == 1 else "mixed")
    return ObjectiveReplayResult(
        workload=workload, capacity=capacity,
        policy=(f"fixed-{names[int(objective)]}" if fixed else objective.name if planner else "objective-switching"),
        backfill=backfill,
        start=eng.start.copy(), end=eng.end.copy(), pool=pool, cannot_fit=eng.cannot_fit,
        wall_s=wall, events=rp.events, counters=counters,
        epoch_s=sc.epoch_s, objectives=acts, boundary_aggregates=np.stack(rows),
        epoch_sums=np.stack(used) if used else np.zeros((0, N_SUMS)), state_config=sc, reward_config=rc,
        lookahead_costs=np.stack(costs) if costs else None,
    )


def batch_policy(policy: Callable[[np.ndarray], np.ndarray]) -> StatePolicy:
    """A `states (n, n_features) -> actions (n,)` function (d3rlpy, the TorchScript artifact) as
    the one-state callable `replay_objectives` takes."""

    def one(state: np.ndarray) -> int:
        out = np.asarray(policy(np.asarray(state, dtype=np.float32).reshape(1, -1)))
        return int(out.reshape(-1)[0])

    return one
