"""The lookahead planner and the starvation guard (SPEC §7): the deployable teacher of the controller.

At each epoch boundary the planner takes the scheduler's view of the cluster (the running jobs
with their starts, the queued jobs; no future arrivals; requested times as run times:
`Engine.planning_view`), rolls a copy forward `horizon_h` hours under each objective of the menu,
and picks the one of lowest `A + lam * G` over the horizon: the aligned reward's cost (accrued
job-seconds of waiting; how far the largest wait in the horizon goes past the largest wait of
the replay so far). Ties keep the objective in
force. The starvation guard switches to the menu's tail-first objective while the oldest queued
job has waited more than `guard_h` hours. With no horizon (`horizon_h = 0`) there is no lookahead:
the `base` objective, with the guard (the one-line rule "SJF; WFP3 when the oldest job has waited
more than 6 h" is `PlannerConfig(0, base="SJF", guard_h=6)`); tuning chooses among both kinds, so
the teacher is never worse on the training window than the best rule of this form. With a
horizon and a `base`, the planner is anchored: it holds the base objective (from the start, in
epochs with nothing queued, and at every boundary) unless another objective's rollout cost is
lower than the base's by more than `margin`; an objective in force only by default (empty queue,
ties) then follows what tuning found best held fixed rather than whatever was chosen last. With
`forecast_h`, the view also holds a persistence forecast of the arrivals (the jobs submitted that
many hours earlier, arriving again): still only what the scheduler has seen; tuning decides
whether it helps. The oracle variant rolls the true future forward (the
real engine copied, future arrivals and true run times included): a reference bound for
the held-out replay, never published.

"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from metapilot.models.controller.objectives import Menu
from metapilot.models.simulator.engine import Engine, SettingCodes
from metapilot.models.simulator.horizon import horizon_cost_kernel
from metapilot.models.simulator.rules import guard_fires
from metapilot.transforms.state import AGGREGATES

WAIT_MAX = AGGREGATES.index("wait_max_s")
QUEUE_LEN = AGGREGATES.index("queue_len")


@dataclass(frozen=True)
class PlannerConfig:
    """The planner's settings, tuned on the training window only (`tune_planner`)."""

    horizon_h: float = 12.0
    lam: float = 50.0  # as the aligned reward's lam: jobs' worth of waiting per second of max wait
    guard_h: float | None = 24.0  # None: no starvation guard
    base: str | None = None  # horizon 0: the objective held (with the guard); None: the menu's first.
    # With a horizon: the anchor, kept unless another objective is cheaper by more than `margin`
    margin: float = 0.0  # with a horizon and a base: the relative cost advantage that leaves the base
    slowdown: float = 0.0  # beta: 0 counts every job's waiting alike (mean wait); 1 weighs it by the
    # job's slowdown (mean bounded slowdown; see `horizon_cost`)
    forecast_h: float = 0.0  # > 0: arrivals to come forecast by persistence, the jobs submitted this many
    # hours earlier arrive again (`Engine.view`); 0: no arrivals (SPEC §7's planner)
    oracle: bool = False  # see the true future (a bound, never published)

    def to_dict(self) -> dict:
        return asdict(self)


def horizon_cost(submit: np.ndarray, start: np.ndarray, t0: float, epoch_s: float, n_epochs: int,
                 lam: float, record: float = 0.0, weight: np.ndarray | None = None) -> float:
    """`A + lam * G` of a schedule over `[t0, t0 + n_epochs * epoch_s)`: the job-seconds queued in it,
    and how far the largest wait in it (of a job queued at a boundary, or started in it) goes past
    `record` (the aligned reward's terms, summed over the horizon's epochs). `weight`: per job, what
    a second of its waiting counts in `A` (default 1; `slowdown_weights` for bounded slowdown)."""
    w = _NO_WEIGHT if weight is None else np.ascontiguousarray(weight, dtype=np.float64)
    return float(horizon_cost_kernel(np.ascontiguousarray(submit, dtype=np.float64),
                                     np.ascontiguousarray(start, dtype=np.float64), w, float(t0), float(epoch_s),
                                     int(n_epochs), float(lam), float(record)))


_NO_WEIGHT = np.zeros(0, np.float64)


BSLD_FLOOR_S = 10.0  # bounded slowdown's floor on the run time (SPEC §6 metrics)
_FLOAT_MAX = float(np.finfo(np.float64).max)


def slowdown_weights(req: np.ndarray, beta: float) -> np.ndarray | None:
    """Per job, `(1 - beta) + beta * m / max(req, 10 s)`, `m` the mean of `max(req, 10 s)` over the
    jobs: a second of waiting adds `1 / max(run, 10)` to a job's bounded slowdown, so `beta = 1`
    makes `A` the slowdown accrued (requested times standing for run times, scaled by `m` to stay
    in job-seconds), `beta = 0` the plain wait. None when beta is 0."""
    if beta <= 0:
        return None
    # NaN -> the floor, +-inf -> the largest finite float (as `nan_to_num`), in two ufuncs: one per boundary
    r = np.fmax(np.minimum(np.asarray(req, dtype=np.float64), _FLOAT_MAX), BSLD_FLOOR_S)
    return (1.0 - beta) + beta * float(r.mean()) / r


class LookaheadPlanner:
    """Decides the next epoch's objective from the engine at a boundary (see the module docstring)."""

    def __init__(self, menu: Menu, config: PlannerConfig = PlannerConfig(), epoch_s: int = 3600) -> None:
        self.menu = menu
        self.config = config
        self.epoch_s = int(epoch_s)
        self.n_epochs = int(math.ceil(config.horizon_h * 3600.0 / self.epoch_s))
        self.base = menu.index(config.base) if config.base is not None else 0
        self.anchor = self.base if config.base is not None and self.n_epochs > 0 else None
        self.tail = menu.tail_first
        self.last = self._first
        self.costs = np.zeros(len(menu))  # the last decision's rollout cost of every objective
        self.fresh = False  # `costs` were computed at the last boundary asked (not a guard or rule epoch)
        self.record = 0.0  # the largest wait of the replay so far (started jobs, queued ones at boundaries)
        self._codes: SettingCodes | None = None  # the settings last asked, as `Engine.fork_costs` takes them

    @property
    def forecast(self) -> tuple[float, float]:
        """`Engine.view`'s forecast arguments: the persistence period and the span it covers (the
        horizon), in seconds."""
        return self.config.forecast_h * 3600.0, float(self.n_epochs * self.epoch_s)

    @property
    def name(self) -> str:
        if self.n_epochs == 0:
            c = self.config
            guard = f"; {self.menu.names[self.tail]} after {c.guard_h:g} h" if c.guard_h is not None else ""
            return f"{self.menu.names[self.base]}{guard}"
        return "oracle" if self.config.oracle else "planner"

    @property
    def _first(self) -> int:
        """What the planner runs from its start until it first plans: its base objective (the
        anchor, or the menu's first), never a default of its own (issue 48: a reset that ran FCFS
        until the first boundary with a queue ran 40 h of FCFS through a burst)."""
        return self.base

    def reset(self) -> None:
        self.last = self._first
        self.record = 0.0

    def views(self, engine: Engine) -> list[Engine]:
        """What the rollouts start from; an objective's cost is the mean over them. The oracle: the
        engine itself (the true future). A view built already (the as-run history's): as it is.
        Otherwise the scheduler's view, with the persistence forecast when `forecast_h` is set. A
        planner that samples futures returns several (`bench/bench_deployable_knowledge.py`)."""
        if self.config.oracle or engine.is_view:
            return [engine]
        return [engine.planning_view(*self.forecast)[0]]

    def _seeds_view(self, engine: Engine) -> bool:
        """The rollouts start from the plain scheduler's view (`views`' default, no forecast), which
        `Engine.seeded_view` builds without leaving compiled code."""
        return (not self.config.oracle and not engine.is_view and self.config.forecast_h <= 0
                and type(self).views is LookaheadPlanner.views)

    def _setting_codes(self, settings) -> SettingCodes:
        if self._codes is None or self._codes.settings != tuple(settings):
            self._codes = SettingCodes(settings)
        return self._codes

    def plan(self, engine: Engine, aggregates: np.ndarray, settings) -> int:
        """The objective for the epoch that starts at the engine's clock. `aggregates`: the
        boundary's aggregates (`transforms.state.AGGREGATES` order); `settings`: the engine
        settings of each action."""
        cfg = self.config
        self.fresh = False
        self.record = max(self.record, float(aggregates[WAIT_MAX]))
        if aggregates[QUEUE_LEN] <= 0 and not cfg.oracle:
            self.costs[:] = 0.0
            self.fresh = True
            if self.anchor is not None:  # nothing waits: the arrivals of the epoch meet the anchor
                self.last = self.anchor
            return self.last  # unanchored: keep the one in force
        if guard_fires(float(aggregates[WAIT_MAX]), cfg.guard_h):  # its own guard: the menu's tail-first objective
            self.last = self.tail
            return self.tail
        if self.n_epochs == 0:
            self.last = self.base
            return self.base
        if cfg.lam > 0:  # the waits of every job started so far: only a rollout's cost needs them
            waits = engine.start - engine.jobs.submit
            if np.isfinite(waits).any():
                self.record = max(self.record, float(np.nanmax(waits)))
        now = engine.now
        t_end = now + self.n_epochs * self.epoch_s
        codes = self._setting_codes(settings)
        if self._seeds_view(engine):  # the scheduler's view, seeded in compiled code (same costs)
            view = engine.seeded_view()
            weight = slowdown_weights(view.req, cfg.slowdown)
            self.costs[:] = view.fork_costs(codes, t_end, _NO_WEIGHT if weight is None else weight, self.epoch_s,
                                            self.n_epochs, cfg.lam, self.record)
        else:
            views = self.views(engine)
            self.costs[:] = 0.0
            for base in views:  # each objective's fork of the snapshot, rolled to the horizon's end and priced
                weight = slowdown_weights(base.jobs.req, cfg.slowdown)
                self.costs += base.fork_costs(codes, t_end, _NO_WEIGHT if weight is None else weight, self.epoch_s,
                                              self.n_epochs, cfg.lam, self.record)
            self.costs /= len(views)
        self.fresh = True
        best = float(self.costs.min())
        if self.anchor is not None and self.costs[self.anchor] <= best * (1.0 + cfg.margin):
            self.last = self.anchor
            return self.anchor
        if self.costs[self.last] <= best:
            return self.last
        self.last = int(np.argmin(self.costs))
        return self.last


def oracle_of(config: PlannerConfig) -> PlannerConfig:
    """The same planner seeing the true future."""
    return replace(config, oracle=True)
