"""As-run tuples: the real history labelled with the objective that best explains each epoch.

For every epoch `[t, t + epoch_s)`, the jobs queued at `t` are ordered by each objective of the
menu (`objectives.sort_keys`: the engine's own priority score at `t`), and that order is compared
with the real one: jobs by real start time, those not started in the epoch tied last. The
agreement is Kendall's tau-b; the action is the objective with the highest tau. An epoch that
says nothing (no queued job started, or a tie for the best tau) keeps the previous epoch's action
(the scheduler's configuration does not change without evidence); the first such epochs take the
menu's user-first (FCFS-like) objective, as real schedulers mostly are.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl
from metapilot.models.controller.lookahead import LOOKBACK_S, asrun_lookahead_costs
from metapilot.models.controller.objectives import Menu
from metapilot.models.simulator.objectives import sort_keys
from metapilot.models.controller.tuples import tuples_from_aggregates
from metapilot.transforms.asrun_state import TimeLike, epoch_grid, to_epoch_s
from metapilot.transforms.reward import ControllerRewardConfig
from metapilot.transforms.state import StateConfig
from metapilot.warehouse.asrun_queries import asrun_aggregates, asrun_queues


@dataclass(frozen=True)
class InferenceConfig:
    """How as-run actions are inferred."""

    default_action: int | None = None  # before the first informative epoch; None: the menu's user-first
    min_margin: float = 1e-9  # taus closer than this are a tie (hold the previous action)


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two rankings (ties allowed); NaN when either is constant.

    O(n^2) in numpy for the queues of one epoch up to 2,000 jobs, scipy's O(n log n) beyond.
    """
    n = len(x)
    if n < 2:
        return float("nan")
    if n > 2000:
        from scipy.stats import kendalltau

        return float(kendalltau(x, y, variant="b").statistic)
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    iu = np.triu_indices(n, 1)
    dx, dy = dx[iu], dy[iu]
    n0 = len(dx)
    tx, ty = np.count_nonzero(dx == 0), np.count_nonzero(dy == 0)
    denom = np.sqrt(float(n0 - tx) * float(n0 - ty))
    if denom == 0:
        return float("nan")
    return float(np.sum(dx * dy) / denom)


def infer_actions(
    queues: pl.DataFrame,
    grid: np.ndarray,
    epoch_s: int,
    config: InferenceConfig = InferenceConfig(),
    menu: Menu = Menu(),
    origin_s: float | None = None,
) -> pl.DataFrame:
    """One row per epoch of `grid`: epoch_start, tau_<objective>..., n_started, action, inferred.

    `queues` from `warehouse.asrun_queries.asrun_queues`. `origin_s`: the window start F1 counts from (default: the
    first epoch). Loops over epochs (not jobs), each one vectorised.
    """
    n = len(grid)
    origin = float(grid[0]) if origin_s is None else float(origin_s)
    taus = np.full((n, len(menu)), np.nan)
    n_started = np.zeros(n, dtype=np.int64)
    pos = {int(t): i for i, t in enumerate(grid)}
    if queues.height:
        t_col = queues["epoch_start"].to_numpy()
        cols = {c: queues[c].to_numpy() for c in ("job_seq", "submit_s", "start_s", "req_time_s", "cores", "gpus", "mem")}
        started = queues["started_in_epoch"].to_numpy()
        bounds = np.flatnonzero(np.diff(t_col)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(t_col)]):
            t = int(t_col[lo])
            i = pos.get(t)
            if i is None:
                continue
            st = started[lo:hi]
            n_started[i] = int(st.sum())
            real = np.where(st, np.nan_to_num(cols["start_s"][lo:hi], nan=np.inf), t + epoch_s + 1.0)
            for a, name in enumerate(menu.names):
                keys = sort_keys(
                    name,
                    submit_s=cols["submit_s"][lo:hi],
                    req_time_s=np.nan_to_num(cols["req_time_s"][lo:hi]),
                    cores=cols["cores"][lo:hi], job_seq=cols["job_seq"][lo:hi],
                    now_s=float(t), origin_s=origin,
                )
                rank = np.empty(hi - lo)
                rank[np.lexsort(keys[::-1])] = np.arange(hi - lo)
                taus[i, a] = kendall_tau_b(real, rank)
    actions = np.full(n, -1, dtype=np.int64)
    decided = np.zeros(n, dtype=bool)
    prev = menu.user_first if config.default_action is None else config.default_action
    for i in range(n):
        row = taus[i]
        if np.all(np.isfinite(row)):
            best = int(np.argmax(row))
            if row[best] - np.max(np.delete(row, best)) > config.min_margin:
                prev, decided[i] = best, True
        actions[i] = prev
    out = {"epoch_start": grid.astype(np.int64)}
    out |= {f"tau_{name}": taus[:, a] for a, name in enumerate(menu.names)}
    out |= {"n_started": n_started, "action": actions, "inferred": decided}
    return pl.DataFrame(out)


def asrun_tuples(
    con: duckdb.DuckDBPyConnection | pl.DataFrame,
    cluster: str,
    window_from: TimeLike,
    window_to: TimeLike,
    *,
    partition: str | None = None,
    state_config: StateConfig = StateConfig(),
    reward_config: ControllerRewardConfig = ControllerRewardConfig(),
    inference: InferenceConfig = InferenceConfig(),
    capacity: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The as-run tuples of a window: one per epoch, source 'as-run', with the inferred actions."""
    agg = asrun_aggregates(con, cluster, window_from, window_to, partition=partition,
                           config=state_config, capacity=capacity)
    grid = epoch_grid(window_from, window_to, state_config.epoch_s)
    queues = asrun_queues(con, cluster, window_from, window_to, partition=partition, config=state_config)
    acts = infer_actions(queues, grid, state_config.epoch_s, inference, Menu.of(state_config))
    costs = None
    if state_config.lookahead_h > 0:
        if not isinstance(con, duckdb.DuckDBPyConnection):
            raise ValueError("lookahead features of the as-run history need the warehouse (a connection), not a frame")
        bounds = np.r_[grid, grid[-1] + state_config.epoch_s] if len(grid) else grid
        # the view of each boundary holds what the scheduler held then, jobs submitted before the window
        # included (the states' queue does), as the advice builds it at decision time (`asrun_states`)
        costs = asrun_lookahead_costs(con, cluster, float(to_epoch_s(window_from)) - LOOKBACK_S, window_to, bounds,
                                      agg, partition=partition, state=state_config)
    return tuples_from_aggregates(
        agg, acts["action"].to_numpy(),
        cluster=cluster, partition=partition, window_from=window_from, window_to=window_to,
        source="as-run", behaviour_policy="as-run-inferred", seed=None,
        state_config=state_config, reward_config=reward_config, lookahead_costs=costs,
    )
