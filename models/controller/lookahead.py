"""The lookahead features' input (SPEC §7 planner costs in the state): every objective's rollout
cost over the next hours, from the scheduler's view at a boundary.

The same probe serves the replay (`LookaheadProbe`, reading the engine at a boundary: rollouts,
the planner's own trajectories, the held-out replay, the gym env) and the as-run history
(`asrun_lookahead_costs`, building that view from the warehouse's real start times: the as-run
tuples and the advice), so a feature means the same in every tuple and at decision time. The
view holds the jobs submitted in the window that are queued or running at the boundary
(requested times as run times, no future arrivals, or those forecast from the jobs already seen):
what a scheduler knows then.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import polars as pl

from metapilot.models.controller.objectives import Menu
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig
from metapilot.models.simulator.capacity import Capacity
from metapilot.models.simulator.engine import Engine
from metapilot.transforms.asrun_state import TimeLike, to_epoch_s
from metapilot.transforms.state import AGGREGATES, StateConfig, lookahead_features, state_from_frame
from metapilot.warehouse.sim_store import load_replay_window_starts

LOOKBACK_S = 30 * 86_400  # a moment's view holds the jobs submitted in the 30 days before it
QUEUE_LEN = AGGREGATES.index("queue_len")


def probe_config(state: StateConfig) -> PlannerConfig:
    """The planner whose per-objective costs the features read (no guard: costs of every objective)."""
    return PlannerConfig(horizon_h=float(state.lookahead_h), lam=float(state.lookahead_lam), guard_h=None,
                         slowdown=float(state.lookahead_slowdown), forecast_h=float(state.lookahead_forecast_h))


class LookaheadProbe:
    """Rollout costs of every objective at a boundary of a replay (zeros when nothing waits)."""

    def __init__(self, state: StateConfig) -> None:
        if state.lookahead_h <= 0:
            raise ValueError("the state configuration has no lookahead features (lookahead_h = 0)")
        self.menu = Menu.of(state)
        self.planner = LookaheadPlanner(self.menu, probe_config(state), state.epoch_s)

    def reset(self) -> None:
        self.planner.reset()

    def costs(self, engine: Engine, aggregates: np.ndarray, settings: Sequence[tuple[int, int, bool]],
              planner: LookaheadPlanner | None = None) -> np.ndarray:
        """The costs at this boundary; `planner`: one that has just decided at it, whose own rollouts
        are the same numbers when it looked ahead with the same horizon, lam and weights (the
        teacher's trajectories: no second set of rollouts)."""
        if planner is not None and planner.fresh and self.same_cost(planner):
            self.planner.record = planner.record
            return planner.costs.copy()
        self.planner.plan(engine, aggregates, settings)
        return self.planner.costs.copy()

    def same_cost(self, planner: LookaheadPlanner) -> bool:
        a, b = planner.config, self.planner.config
        return (not a.oracle and planner.n_epochs == self.planner.n_epochs and planner.epoch_s == self.planner.epoch_s
                and a.lam == b.lam and a.slowdown == b.slowdown and a.forecast_h == b.forecast_h
                and len(planner.costs) == len(self.planner.costs))


def asrun_lookahead_costs(con: duckdb.DuckDBPyConnection, cluster: str, window_from: TimeLike, window_to: TimeLike,
                          grid: np.ndarray, aggregates: pl.DataFrame, *, partition: str | None = None,
                          state: StateConfig = StateConfig()) -> np.ndarray:
    """Costs `(len(grid), n_objectives)` at the as-run boundaries `grid` (epoch seconds) of the
    window: the real queue and running jobs at each, rolled forward under every objective.
    `aggregates`: the as-run aggregates of the same boundaries (their queue length and max wait)."""
    probe = LookaheadProbe(state)
    out = np.zeros((len(grid), len(probe.menu)))
    workload, rows, start_abs = load_replay_window_starts(con, cluster, window_from, window_to, partition)
    if len(workload) == 0:
        return out
    engine = Engine(workload, Capacity.from_rows(rows))
    origin = float(to_epoch_s(window_from))
    start = start_abs - origin  # NaN: ran at a time the log does not give (SWF wait -1): never queued here
    end = start + workload.run
    live = np.setdiff1d(np.arange(len(workload)), engine.cannot_fit)
    submit, st, en = workload.submit[live], start[live], end[live]
    # the largest wait of the jobs started so far (the cost's record), by start time
    by_start = np.argsort(np.nan_to_num(st, nan=np.inf), kind="stable")
    started_at = np.nan_to_num(st, nan=np.inf)[by_start]
    record = np.maximum.accumulate(np.nan_to_num(st - submit, nan=0.0)[by_start]) if live.size else np.zeros(0)
    agg = aggregates.select(AGGREGATES).to_numpy().astype(np.float64)
    settings = probe.menu.settings
    forecast_s, span_s = probe.planner.forecast
    for k, t_abs in enumerate(np.asarray(grid, dtype=np.float64)):
        if agg[k, QUEUE_LEN] <= 0:
            continue
        t = t_abs - origin
        run_m = (st <= t) & (en > t)
        queued = live[(submit <= t) & (st > t)]  # as sql/mdp/asrun_jobs.sql: unknown starts are not queued
        if queued.size == 0:
            continue
        running = live[run_m]
        order = np.argsort(st[run_m], kind="stable")
        view, _ = engine.view(running[order], st[run_m][order], queued, t, forecast_s=forecast_s, span_s=span_s)
        i = int(np.searchsorted(started_at, t, side="right"))
        probe.planner.record = float(record[i - 1]) if i else 0.0
        out[k] = probe.costs(view, agg[k], settings)
    return out


def asrun_states(con: duckdb.DuckDBPyConnection, cluster: str, aggregates: pl.DataFrame, *,
                 partition: str | None = None, state: StateConfig = StateConfig()) -> np.ndarray:
    """The full states `(n, n_features)` of as-run boundaries (the advice, the weekly report's
    recommendations): the base features of `aggregates`, then the lookahead ones of the moment's
    view (the jobs submitted in the `LOOKBACK_S` before the first boundary and up to the last)."""
    s = state_from_frame(aggregates, state)
    if state.lookahead_h <= 0 or aggregates.height == 0:
        return s
    t = aggregates["epoch_start"].to_numpy().astype(np.float64)
    costs = asrun_lookahead_costs(con, cluster, float(t.min()) - LOOKBACK_S, float(t.max()) + 1, t, aggregates,
                                  partition=partition, state=state)
    return np.concatenate([s, lookahead_features(costs, state.epoch_s)], axis=1)
