"""Shadow mode's evidence: a dry run's rankings against the order Slurm really started the jobs in."""

from __future__ import annotations

import numpy as np
import polars as pl

from metapilot.models.steering.rank import kendall_tau


def shadow_agreement(frame: pl.DataFrame) -> dict:
    """Per (cycle, group) with >= 2 jobs started: Kendall's tau between the shadow rank and the start
    order, and whether the shadow's first started first. `frame`: sql/steer/shadow_vs_starts.sql."""
    taus, heads, jobs = [], [], 0
    cycles = frame["cycle_id"].n_unique() if not frame.is_empty() else 0
    started = frame.filter(pl.col("start_time").is_not_null())
    for _, g in started.group_by(["cycle_id", "group_key"]):
        if g.height < 2:
            continue
        rank = g["rank"].to_numpy().astype(np.float64)
        start = g["start_time"].dt.epoch("s").to_numpy().astype(np.float64)
        taus.append(kendall_tau(rank, start))
        heads.append(bool(start[np.argmin(rank)] == start.min()))
        jobs += g.height
    arr = np.array([t for t in taus if np.isfinite(t)])
    return {"cycles": cycles, "groups": len(taus), "jobs": jobs,
            "tau_median": float(np.median(arr)) if len(arr) else float("nan"),
            "tau_mean": float(arr.mean()) if len(arr) else float("nan"),
            "head_agree": float(np.mean(heads)) if heads else float("nan")}
