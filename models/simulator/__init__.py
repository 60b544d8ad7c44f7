"""Trace-replay scheduling simulator (SPEC §6): priority rule x backfilling, per-pool resources.

    from models.simulator import simulate, Capacity, BASELINES
    result = simulate(workload, Capacity.single(100), "FCFS", "easy")
    result.metrics()        # one-row polars frame; result.weekly() per ISO week

`Engine` is the same replay, advanceable slice by slice (`Engine.advance(until_t, policy,
backfill)`), for the objective-switching gym env.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from models.simulator.capacity import WHOLE_CLUSTER, Capacity
from models.simulator.engine import BACKFILL_CODES, Engine, backfill_code, warm_up
from models.simulator.policies import POLICIES, policy_code
from transforms.workload import Workload

BACKFILLS: tuple[str, ...] = tuple(BACKFILL_CODES)
# The 21 baselines: seven priority rules x three backfilling modes.
BASELINES: tuple[tuple[str, str], ...] = tuple((p, b) for b in BACKFILLS for p in POLICIES)


@dataclass(frozen=True)
class SimResult:
    """Start and end of every job of the workload (NaN for jobs that could never fit)."""

    workload: Workload
    capacity: Capacity
    policy: str
    backfill: str
    start: np.ndarray
    end: np.ndarray
    pool: np.ndarray  # pool index (into capacity.pools) of each job
    cannot_fit: np.ndarray  # indices of jobs that can never fit their pool (not replayed)
    wall_s: float
    events: int
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def wait(self) -> np.ndarray:
        return self.start - self.workload.submit

    @property
    def replayed(self) -> np.ndarray:
        """Mask of the jobs that were replayed."""
        return ~np.isnan(self.start)

    @property
    def cannot_fit_ids(self) -> list[str]:
        return [str(x) for x in self.workload.job_ids[self.cannot_fit]]

    def schedule(self) -> pl.DataFrame:
        """One row per job: id, submit, start, end, wait, run, requested time, sizes, pool."""
        w = self.workload
        return pl.DataFrame({
            "job_id": w.job_ids.astype(str), "submit": w.submit, "start": self.start, "end": self.end,
            "wait": self.wait, "run": w.run, "req_time": w.req_time, "cores": w.cores, "gpus": w.gpus,
            "mem": w.mem, "pool": [self.capacity.pools[p] if p >= 0 else None for p in self.pool],
        })

    def metrics(self) -> pl.DataFrame:
        from models.simulator.metrics import overall

        return overall(self)

    def weekly(self) -> pl.DataFrame:
        from models.simulator.metrics import weekly

        return weekly(self)


def simulate(
    workload: Workload, capacity: Capacity, policy: str = "FCFS", backfill: str = "easy", *, fit_first: bool = False,
) -> SimResult:
    """Replay the whole workload under one priority rule and backfilling mode (`fit_first`: see
    `Engine.advance`)."""
    code = policy_code(policy)
    bf = backfill_code(backfill)
    t0 = time.perf_counter()
    engine = Engine(workload, capacity, code, bf, fit_first=fit_first)
    events = engine.run()
    wall = time.perf_counter() - t0
    counters = dict(workload.report.as_dict()) if workload.report is not None else {}
    counters["cannot_fit"] = int(engine.cannot_fit.size)
    pool = engine.jobs.pool.copy()
    pool[engine.cannot_fit] = -1
    return SimResult(
        workload=workload, capacity=capacity, policy=POLICIES[code], backfill=BACKFILLS[bf],
        start=engine.start.copy(), end=engine.end.copy(), pool=pool, cannot_fit=engine.cannot_fit,
        wall_s=wall, events=events, counters=counters,
    )


__all__ = [
    "BACKFILLS", "BASELINES", "POLICIES", "WHOLE_CLUSTER", "Capacity", "Engine", "SimResult",
    "simulate", "warm_up",
]
