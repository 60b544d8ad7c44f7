"""Resource pools for the replay (SPEC §5, §6): per pool, cores, GPUs and memory.

Built from rows shaped like the warehouse `capacity` table (`partition, cores, gpus, mem_mib`).
A partition without a row of its own falls into the whole-cluster pool `'*'`. Unknown memory
(NULL `mem_mib`) means memory does not constrain that pool (infinite capacity).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

WHOLE_CLUSTER = "*"


@dataclass(frozen=True)
class Capacity:
    """Capacity of each pool; arrays are indexed like `pools`."""

    pools: tuple[str, ...]
    cores: np.ndarray  # float64
    gpus: np.ndarray  # float64
    mem: np.ndarray  # float64, inf where unknown

    def __post_init__(self) -> None:
        n = len(self.pools)
        if len(set(self.pools)) != n:
            raise ValueError(f"duplicate pools in capacity: {self.pools}")
        for name in ("cores", "gpus", "mem"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (n,):
                raise ValueError(f"capacity.{name} must have one value per pool")
            if np.any(np.isnan(arr)) or np.any(arr < 0):
                raise ValueError(f"capacity.{name} must be >= 0")
            object.__setattr__(self, name, arr)

    @classmethod
    def single(cls, cores: float, gpus: float = 0, mem_mib: float | None = None) -> Capacity:
        """One whole-cluster pool, e.g. from an SWF header's MaxProcs."""
        return cls.from_rows([{"partition": WHOLE_CLUSTER, "cores": cores, "gpus": gpus, "mem_mib": mem_mib}])

    @classmethod
    def from_rows(cls, rows: pl.DataFrame | Iterable[Mapping]) -> Capacity:
        """Build from `partition, cores[, gpus][, mem_mib]` rows (one point in time, one row per
        partition; pick the rows valid for the window before calling)."""
        records = rows.to_dicts() if isinstance(rows, pl.DataFrame) else [dict(r) for r in rows]
        if not records:
            raise ValueError("capacity needs at least one row")
        pools, cores, gpus, mem = [], [], [], []
        for rec in records:
            part = rec.get("partition")
            pools.append(WHOLE_CLUSTER if part is None else str(part))
            if rec.get("cores") is None:
                raise ValueError(f"capacity row for {pools[-1]!r} has no cores")
            cores.append(float(rec["cores"]))
            gpus.append(float(rec.get("gpus") or 0))
            m = rec.get("mem_mib")
            mem.append(np.inf if m is None else float(m))
        return cls(tuple(pools), np.array(cores), np.array(gpus), np.array(mem))

    @property
    def matrix(self) -> np.ndarray:
        """(pools, 3) array of cores, GPUs, memory, as the engine wants it."""
        return np.stack([self.cores, self.gpus, self.mem], axis=1)

    def pool_index(self, partitions: Sequence[str | None]) -> np.ndarray:
        """Pool of each partition name: its own row, else `'*'`, else -1 (no capacity at all)."""
        index = {name: i for i, name in enumerate(self.pools)}
        fallback = index.get(WHOLE_CLUSTER, -1)
        return np.array([index.get(p, fallback) if p is not None else fallback for p in partitions], dtype=np.int64)
