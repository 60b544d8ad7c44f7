"""The published lookahead planner run on the live queue (issue 50): what the walk forward followed
is what `steer` runs. The view it plans from is `live_state.live_view`.

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

import polars as pl

from metapilot.models.controller.objectives import Menu
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig
from metapilot.models.steering.live_state import live_view

EPOCH_S = 3600  # the planner's epoch in the walk forward that backs it


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
