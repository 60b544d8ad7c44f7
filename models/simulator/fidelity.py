"""How far to trust a replay: simulated waits next to the logged waits of the same jobs."""

from __future__ import annotations

import numpy as np
import polars as pl
from metapilot.models.simulator import SimResult
from scipy import stats


def fidelity(result: SimResult, jobs: pl.DataFrame) -> pl.DataFrame:
    """Two rows (logged, replay) with mean/median/p95/max wait over the replayed jobs that really
    started, plus the Wasserstein-1 distance (s) and the Kolmogorov-Smirnov statistic between the
    two wait distributions (same on both rows)."""
    sim = result.schedule().filter(pl.col("start").is_not_nan()).select("job_id", pl.col("wait").alias("sim_wait"))
    real = jobs.filter(pl.col("start_time").is_not_null()).select(
        pl.col("job_id").cast(pl.Utf8),
        ((pl.col("start_time") - pl.col("submit_time")).dt.total_seconds()).cast(pl.Float64).alias("real_wait"),
    ).unique("job_id", keep="last")
    both = sim.join(real, on="job_id", how="inner")
    r, s = both["real_wait"].to_numpy(), both["sim_wait"].to_numpy()
    if both.height == 0:
        w1 = ks = float("nan")
    else:
        w1 = float(stats.wasserstein_distance(r, s))
        ks = float(stats.ks_2samp(r, s).statistic)

    def row(name: str, x: np.ndarray) -> dict:
        has = x.size > 0
        return {"source": name, "jobs": int(x.size),
                "mean_wait": float(x.mean()) if has else None, "median_wait": float(np.median(x)) if has else None,
                "p95_wait": float(np.quantile(x, 0.95)) if has else None, "max_wait": float(x.max()) if has else None,
                "wasserstein_s": w1, "ks_statistic": ks}

    return pl.DataFrame([row("logged (as run)", r), row(f"replay {result.policy}+{result.backfill}", s)])
