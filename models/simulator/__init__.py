"""Trace-replay scheduling simulator (SPEC §6): priority rule x backfilling, per-pool resources.

    from metapilot.models.simulator import simulate, Capacity, RULE_PAIRS
    result = simulate(workload, Capacity.single(100), "FCFS", "easy")
    result.metrics()        # one-row polars frame; result.weekly() per ISO week

`Engine` is the same replay, advanceable slice by slice (`Engine.advance(until_t, policy,
backfill)`), for the objective-switching gym env.
"""

from __future__ import annotations

import time

from metapilot.models.simulator.capacity import WHOLE_CLUSTER, Capacity
from metapilot.models.simulator.engine import (
    Engine,
    backfill_code,
)
from metapilot.models.simulator.policies import POLICIES, policy_code
from metapilot.models.simulator.result import SimResult
from metapilot.models.simulator.rules import BACKFILLS, RULE_PAIRS
from metapilot.models.simulator.warm import warm_up
from metapilot.transforms.workload import Workload



def simulate(
    workload: Workload, capacity: Capacity, policy: str = "FCFS", backfill: str = "easy", *, fit_first: bool = False,
) -> SimResult:
    """Replay the whole workload under one priority rule and backfilling mode (`fit_first`: see
    `Engine.advance`)."""
    code = policy_code(policy)
    bf = backfill_code(backfill)
    t0 = time.perf_counter()
    engine = Engine(workload, capacity, code, bf, fit_first=fit_first)
    t1 = time.perf_counter()
    events = engine.run()
    t2 = time.perf_counter()
    wall, engine_s = t2 - t0, t2 - t1
    counters = dict(workload.report.as_dict()) if workload.report is not None else {}
    counters["cannot_fit"] = int(engine.cannot_fit.size)
    pool = engine.jobs.pool.copy()
    pool[engine.cannot_fit] = -1
    return SimResult(
        workload=workload, capacity=capacity, policy=POLICIES[code], backfill=BACKFILLS[bf],
        start=engine.start.copy(), end=engine.end.copy(), pool=pool, cannot_fit=engine.cannot_fit,
        wall_s=wall, events=events, counters=counters, engine_s=engine_s,
    )


__all__ = [
    "BACKFILLS", "POLICIES", "RULE_PAIRS", "WHOLE_CLUSTER", "Capacity", "Engine", "SimResult",
    "simulate", "warm_up",
]
