"""The outcome of a replay: start and end of every job, with its metrics (SPEC §6)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
from metapilot.models.simulator import metrics
from metapilot.models.simulator.capacity import Capacity
from metapilot.transforms.workload import Workload


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
    engine_s: float = float("nan")  # the event loop alone, after the compiled code is loaded
    notes: tuple[str, ...] = ()  # what the replay had to assume (the `slurm` mode: see slurm.SlurmSchedule)
    applied: tuple[tuple[float, int], ...] = ()  # a followed replay's priority rules: (from when, rule code)

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
        return metrics.overall(self)

    def weekly(self) -> pl.DataFrame:
        return metrics.weekly(self)
