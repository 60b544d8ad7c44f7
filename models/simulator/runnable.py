"""Which jobs of a window can run at all on the capacity (SPEC §5, §6), and one sentence when none
can (issue 54): a replay of a window in which no job fits its pool finishes nothing, so every
figure would be empty; the commands refuse it instead, saying why and what to do."""

from __future__ import annotations

import numpy as np

from metapilot.ground.units import fmt_mib
from metapilot.models.simulator.capacity import Capacity
from metapilot.transforms.workload import Workload

DIMENSIONS = (("cores", "{:,.0f} cores"), ("GPUs", "{:,.0f} GPUs"), ("memory", None))
NOTHING_RUNS_ADVICE = ("give the cluster's real capacity in warehouse/clusters.toml (`metapilot capacity --config FILE`), "
                       "or, when the log's memory is not in its format's unit (SWF: KB per processor), `metapilot forget` "
                       "the file and ingest it again with --mem-unit (b for bytes)")


def runnable(workload: Workload, capacity: Capacity) -> np.ndarray:
    """Per job: whether it fits its pool when the pool is empty (a job that does not never runs)."""
    need = np.stack([workload.cores, workload.gpus, workload.mem], axis=1).astype(np.float64)
    cap = capacity.matrix
    pool = capacity.pool_index(workload.partitions)[workload.partition]
    return (pool >= 0) & np.all(need <= cap[pool], axis=1)  # (pool -1 reads the last row: masked)


def _fmt(dim: int, value: float) -> str:
    return fmt_mib(value) if dim == 2 else DIMENSIONS[dim][1].format(value)


def too_big(workload: Workload, capacity: Capacity) -> str:
    """What the jobs ask for beyond the largest pool, per dimension: 'memory up to 40.0 TiB against
    the cluster's 1,531 MiB'."""
    need = np.stack([workload.cores, workload.gpus, workload.mem], axis=1).astype(np.float64)
    cap = capacity.matrix.max(axis=0)
    parts = [f"{DIMENSIONS[d][0]} up to {_fmt(d, need[:, d].max())} against the cluster's {_fmt(d, cap[d])}"
             for d in range(3) if len(need) and need[:, d].max() > cap[d]]
    return ", ".join(parts) or "a partition without capacity"


def nothing_runs(workload: Workload, capacity: Capacity, where: str) -> str | None:
    """One sentence when no job of the window `where` can run (None when some can): how many jobs,
    what they ask for against what the cluster has, and what to do."""
    if len(workload) == 0:
        rep = workload.report
        out = f" ({rep.left_out:,} left out: never ran, zero run time or no size)" if rep is not None and rep.left_out else ""
        return f"no job of {where} can be replayed{out}: choose a window with jobs that ran"
    if runnable(workload, capacity).any():
        return None
    return (f"none of the {len(workload):,} jobs of {where} can run on the cluster's capacity, as each asks for more "
            f"than it has ({too_big(workload, capacity)}): {NOTHING_RUNS_ADVICE}")
