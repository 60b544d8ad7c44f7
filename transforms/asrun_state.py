"""Epochs of the as-run history, pure: the epoch grid, the capacity in force at each boundary,
and the utilisation terms of the reward. The queries that produce the per-epoch aggregates live
in `warehouse.asrun_queries`."""

from __future__ import annotations

import warnings
from datetime import datetime, timezone

import numpy as np
import polars as pl
from metapilot.transforms.reward import utilisation

TimeLike = datetime | str | int | float


def to_epoch_s(t: TimeLike) -> int:
    """UTC seconds since the Unix epoch for a datetime (naive = UTC), ISO string or number."""
    if isinstance(t, (int, float, np.integer, np.floating)):
        return int(t)
    if isinstance(t, str):
        t = datetime.fromisoformat(t.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp())


def epoch_grid(window_from: TimeLike, window_to: TimeLike, epoch_s: int) -> np.ndarray:
    """Epoch starts `from, from + epoch_s, ...` strictly before `to` (int64 seconds)."""
    t0, t1 = to_epoch_s(window_from), to_epoch_s(window_to)
    if t1 <= t0:
        raise ValueError(f"empty window: {window_from} .. {window_to}")
    return np.arange(t0, t1, epoch_s, dtype=np.int64)


def capacity_at(cap: pl.DataFrame, epochs: np.ndarray, partition: str | None = None) -> dict[str, np.ndarray]:
    """Capacity (`cap_cpu`, `cap_gpu`, `cap_mem`) in force at each epoch boundary.

    A partition uses its own rows, else the whole cluster's ('*') with a warning. No partition:
    the '*' rows, else the sum over partitions. Before the first dated entry, the first applies.
    """
    if cap.height == 0:
        raise ValueError(
            "no capacity rows for this cluster: load a cluster config or an SWF header "
            "(capacity table, SPEC §5) before deriving states"
        )
    if "valid_from_s" not in cap.columns:
        cap = cap.with_columns(pl.col("valid_from").dt.epoch("s").alias("valid_from_s"))
    parts = cap["partition"].unique().to_list()
    if partition is not None and partition in parts:
        chosen = [partition]
    elif "*" in parts:
        if partition is not None:
            warnings.warn(f"no capacity for partition {partition!r}: using the whole cluster's", stacklevel=2)
        chosen = ["*"]
    else:
        if partition is not None:
            raise ValueError(f"no capacity for partition {partition!r} (have {sorted(parts)})")
        chosen = sorted(parts)
    out = {k: np.zeros(len(epochs), dtype=np.float64) for k in ("cap_cpu", "cap_gpu", "cap_mem")}
    for p in chosen:
        rows = cap.filter(pl.col("partition") == p).sort("valid_from_s")
        idx = np.clip(np.searchsorted(rows["valid_from_s"].to_numpy(), epochs, side="right") - 1, 0, None)
        for key, c in (("cap_cpu", "cores"), ("cap_gpu", "gpus"), ("cap_mem", "mem_mib")):
            out[key] += np.nan_to_num(rows[c].cast(pl.Float64).to_numpy()[idx])
    return out


def with_capacity(agg: pl.DataFrame, capacity: pl.DataFrame, partition: str | None, epoch_s: int) -> pl.DataFrame:
    """Per-boundary aggregates plus the capacity in force (`cap_*`) and the utilisation over each
    epoch `[t, t + epoch_s)` (`u_cpu`, `u_gpu`, `u_mem`: the reward's terms)."""
    caps = capacity_at(capacity, agg["epoch_start"].to_numpy(), partition)
    agg = agg.with_columns(pl.Series(k, v) for k, v in caps.items())
    return agg.with_columns(
        pl.Series("u_cpu", utilisation(agg["used_cpu_s"].to_numpy(), caps["cap_cpu"], epoch_s)),
        pl.Series("u_gpu", utilisation(agg["used_gpu_s"].to_numpy(), caps["cap_gpu"], epoch_s)),
        pl.Series("u_mem", utilisation(agg["used_mem_s"].to_numpy(), caps["cap_mem"], epoch_s)),
    )
