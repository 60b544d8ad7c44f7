"""The published lookahead planner run on the live queue (issue 50): what the walk forward followed
is what `steer` runs.

Each cycle builds the planner's view from `squeue`/`sinfo` as `Engine.planning_view` builds it in
the replay (SPEC §7): the running jobs since their start, in start order, each to end at its time
limit; the pending jobs with their submit time, time limit and cores; the cores of the nodes as one
pool; requested times as run times and no arrivals to come. The planner then forks every objective
of its menu from that view to its horizon and picks one, exactly as it does at a replay's epoch
boundary (`LookaheadPlanner.plan`); `steer` ranks the queue by it. Times are kept in seconds since
an origin one second before the oldest job, so the rules keyed on time see the order they see live.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from metapilot.models.controller.objectives import Menu
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig
from metapilot.models.simulator import Capacity
from metapilot.models.simulator.engine import Engine
from metapilot.models.steering.live_state import live_aggregates
from metapilot.transforms.state import AGGREGATES, StateConfig
from metapilot.transforms.workload import Workload

RUNNING_STATES = ("RUNNING", "COMPLETING")
UNLIMITED_S = 365 * 86400.0  # a job with no time limit: a year, as the rank's own default
EPOCH_S = 3600  # the planner's epoch in the walk forward that backs it


@dataclass(frozen=True)
class LiveView:
    """The engine's view of the live cluster and the boundary's aggregates (AGGREGATES order)."""

    engine: Engine
    aggregates: np.ndarray
    origin_s: float


def live_view(jobs: pl.DataFrame, nodes: pl.DataFrame, now_s: float, origin_s: float | None = None) -> LiveView:
    """The planning view of the live queue (see the module docstring); a running job with no start
    time in the answer is taken to have started now. `origin_s`: time zero of the view (F1 counts its
    seconds from it; the walk forward's span start for a decision it backs)."""
    run = jobs.filter(pl.col("state").is_in(list(RUNNING_STATES)))
    pend = jobs.filter(pl.col("state") == "PENDING")
    run_start = run["start_s"].fill_null(int(now_s)).cast(pl.Float64).to_numpy()
    order = np.argsort(run_start, kind="stable")
    run_start = run_start[order]
    limit = lambda f: f["time_limit_s"].cast(pl.Float64).fill_null(UNLIMITED_S).to_numpy()  # noqa: E731
    cores = lambda f: np.maximum(f["cpus"].cast(pl.Float64).fill_null(1.0).to_numpy(), 1.0)  # noqa: E731
    submit = np.r_[run["submit_s"].cast(pl.Float64).fill_null(now_s).to_numpy()[order],
                   pend["submit_s"].cast(pl.Float64).fill_null(now_s).to_numpy()]
    if origin_s is not None:
        origin = float(origin_s)
    else:
        origin = float(min(submit.min(), run_start.min() if run_start.size else now_s, now_s)) - 1.0 if submit.size else now_s - 1.0
    req = np.maximum(np.r_[limit(run)[order], limit(pend)], 1.0)
    need = np.r_[cores(run)[order], cores(pend)]
    cap = float(nodes["cpus"].sum()) if not nodes.is_empty() else float(need.sum())
    cap = max(cap, float(need.max()) if need.size else 1.0, 1.0)  # a job wider than sinfo says still plans
    wl = Workload.from_arrays(submit=submit - origin, run=req, req_time=req, cores=need)
    # from_arrays sorts by submit: find each job again by its position in the arrays given
    pos = np.argsort(wl.job_ids.astype(np.int64), kind="stable") if wl.job_ids is not None else np.arange(len(wl))
    full = Engine(wl, Capacity.single(cap))
    n_run = run.height
    view, _ = full.view(pos[:n_run], run_start - origin, pos[n_run:], float(now_s - origin))
    agg = live_aggregates(jobs, nodes, now_s, StateConfig())
    return LiveView(view, np.array([float(agg[k]) for k in AGGREGATES]), origin)


class LivePlanner:
    """The published planner, with its settings, deciding each `steer` cycle from the live queue."""

    def __init__(self, settings: dict, epoch_s: int | None = None, origin_s: float | None = None) -> None:
        """`settings`: `PlannerConfig` fields, and `epoch_s` when the decision was made at another epoch
        than the walk forward's hour (a compressed benchmark)."""
        self.origin_s = origin_s
        fields = PlannerConfig.__dataclass_fields__
        self.config = PlannerConfig(**{k: v for k, v in settings.items() if k in fields})
        self.menu = Menu()
        self.planner = LookaheadPlanner(self.menu, self.config, int(epoch_s or settings.get("epoch_s") or EPOCH_S))
        self.last_s = 0.0  # the last cycle's own time (view + lookahead)

    def decide(self, jobs: pl.DataFrame, nodes: pl.DataFrame, now_s: float) -> str:
        """The objective (a menu name, e.g. 'SJF') the planner picks for this cycle."""
        t0 = time.perf_counter()
        v = live_view(jobs, nodes, now_s, self.origin_s)
        i = self.planner.plan(v.engine, v.aggregates, self.menu.settings)
        self.last_s = time.perf_counter() - t0
        return self.menu.names[i]
