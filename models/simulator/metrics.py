"""Replay metrics (SPEC §6): waits, bounded slowdown, utilisation, makespan, overall and per ISO
week (waits by submit week, completions by end week, utilisation by overlap with the week).

Bounded slowdown is `max(1, (wait + run) / max(run, 10))`. Its mean is also given over the jobs that ran
a minute or more: on real logs 23-63% of the jobs run under a minute (most of them fail at start, after
asking for hours), a few dozen of them carry most of a window's mean bounded slowdown, and whether
those few waited decides which rule has the lowest mean. Utilisation of a resource is used
resource-seconds / (capacity x span) where the span is last end - first submit, clipped to the
week for weekly figures; it is null where the capacity is 0 or unknown (GPUs, memory).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

import numpy as np
import polars as pl
from metapilot.models.simulator.capacity import Capacity
from metapilot.transforms.workload import Workload


class SimResult(Protocol):
    """What the metrics read of a replay (`result.SimResult`, which imports this module)."""

    workload: Workload
    capacity: Capacity
    policy: str
    backfill: str
    start: np.ndarray
    end: np.ndarray
    pool: np.ndarray
    cannot_fit: np.ndarray
    wall_s: float
    counters: dict[str, int]

    @property
    def wait(self) -> np.ndarray: ...

    @property
    def replayed(self) -> np.ndarray: ...

BSLD_BOUND = 10.0
SHORT_RUN_S = 60.0  # jobs that ran less are left out of `mean_bsld_1min`
RESOURCES = ("cores", "gpus", "mem")


def job_frame(result: SimResult) -> pl.DataFrame:
    """The replayed jobs (cannot-fit ones left out) with wait and bounded slowdown."""
    w = result.workload
    mask = result.replayed
    run = w.run[mask]
    wait = result.wait[mask]
    start_us = int(w.window_start.timestamp() * 1_000_000)
    df = pl.DataFrame({
        "job_id": w.job_ids[mask].astype(str),
        "submit": w.submit[mask], "start": result.start[mask], "end": result.end[mask],
        "wait": wait, "run": run,
        "bsld": np.maximum(1.0, (wait + run) / np.maximum(run, BSLD_BOUND)),
        "cores": w.cores[mask], "gpus": w.gpus[mask], "mem": w.mem[mask],
        "pool": result.pool[mask],
    })
    to_ts = lambda c: (pl.lit(start_us) + (pl.col(c) * 1e6).round().cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    return df.with_columns(to_ts("submit").alias("submit_ts"), to_ts("end").alias("end_ts"))


def wait_stats() -> list[pl.Expr]:
    """The wait and bounded-slowdown figures of a set of replayed jobs (`job_frame` rows): one
    definition for the run summaries, the weekly figures and the walk forward's choices."""
    return [
        pl.len().alias("jobs"),
        pl.col("wait").mean().alias("mean_wait"),
        pl.col("wait").median().alias("median_wait"),
        pl.col("wait").quantile(0.95, "linear").alias("p95_wait"),
        pl.col("wait").quantile(0.99, "linear").alias("p99_wait"),
        pl.col("wait").max().alias("max_wait"),
        pl.col("bsld").mean().alias("mean_bsld"),
        pl.col("bsld").filter(pl.col("run") >= SHORT_RUN_S).mean().alias("mean_bsld_1min"),
    ]


def _capacity_totals(result: SimResult) -> np.ndarray:
    cap = result.capacity.matrix.sum(axis=0)
    return np.where((cap > 0) & np.isfinite(cap), cap, np.nan)


def _used_integral(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Event times, resources in use after each, and resource-seconds used up to each."""
    starts = df.select("start", *RESOURCES).to_numpy()
    ends = df.select("end", *RESOURCES).to_numpy()
    ends[:, 1:] *= -1
    ev = np.concatenate([starts, ends]) if len(starts) else np.zeros((0, 4))
    ev = ev[np.argsort(ev[:, 0], kind="stable")]
    level = np.cumsum(ev[:, 1:], axis=0)
    dt = np.diff(ev[:, 0], prepend=ev[0, 0] if len(ev) else 0.0)
    before = np.vstack([np.zeros((1, 3)), level[:-1]]) if len(ev) else np.zeros((0, 3))
    cum = np.cumsum(before * dt[:, None], axis=0)
    return ev[:, 0], level, cum


def _used_between(times: np.ndarray, level: np.ndarray, cum: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Resource-seconds used over each [a, b), shape (len(a), 3)."""

    def at(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(times, x, side="right") - 1
        out = np.zeros((len(x), 3))
        ok = i >= 0
        out[ok] = cum[i[ok]] + level[i[ok]] * (x[ok] - times[i[ok]])[:, None]
        return out

    return at(b) - at(a)


def overall(result: SimResult) -> pl.DataFrame:
    """One row: the run's policy, jobs, waits, bounded slowdown, utilisation, makespan, counters."""
    df = job_frame(result)
    stats = df.select(wait_stats())
    if df.height:
        first, last = float(df["submit"].min()), float(df["end"].max())
        used = df.select((pl.col(r) * (pl.col("end") - pl.col("start"))).sum() for r in RESOURCES).row(0)
        util = np.array(used) / (_capacity_totals(result) * (last - first)) if last > first else np.full(3, np.nan)
    else:
        first = last = float("nan")
        util = np.full(3, np.nan)
    extra = {
        "policy": result.policy, "backfill": result.backfill,
        **{f"util_{r}": float(u) for r, u in zip(RESOURCES, util, strict=True)},
        "makespan": last - first, "first_submit": first, "last_end": last,
        "cannot_fit": int(result.cannot_fit.size), "wall_s": result.wall_s,
    }
    for key in ("left_out", "clamped", "estimates_filled"):
        extra[key] = int(result.counters.get(key, 0))
    row = pl.DataFrame([extra]).with_columns(pl.col("^util_.*$").cast(pl.Float64).fill_nan(None))
    return row.hstack(stats).select(
        "policy", "backfill", "jobs", "mean_wait", "median_wait", "p95_wait", "p99_wait", "max_wait",
        "mean_bsld", "mean_bsld_1min", "util_cores", "util_gpus", "util_mem", "makespan", "first_submit", "last_end",
        "cannot_fit", "left_out", "clamped", "estimates_filled", "wall_s",
    )


def weekly(result: SimResult) -> pl.DataFrame:
    """One row per ISO week from the first submit to the last end: waits of the jobs submitted
    that week, jobs completed that week, and the week's utilisation (within the replay span)."""
    df = job_frame(result)
    if df.height == 0:
        return pl.DataFrame()
    week = lambda c: pl.col(c).dt.truncate("1w")  # noqa: E731  (Monday 00:00 UTC)
    waits = df.group_by(week("submit_ts").alias("week_start")).agg(wait_stats())
    done = df.group_by(week("end_ts").alias("week_start")).agg(pl.len().alias("jobs_completed"))
    first_wk = df["submit_ts"].min().replace(hour=0, minute=0, second=0, microsecond=0)
    first_wk -= timedelta(days=first_wk.weekday())
    last_wk = df["end_ts"].max()
    weeks = pl.DataFrame({"week_start": pl.datetime_range(first_wk, last_wk, "1w", eager=True)})

    origin = result.workload.window_start
    ws = np.array([(x - origin).total_seconds() for x in weeks["week_start"].to_list()])
    first, last = float(df["submit"].min()), float(df["end"].max())
    a = np.clip(ws, first, last)
    b = np.clip(ws + 7 * 86400.0, first, last)
    times, level, cum = _used_integral(df)
    used = _used_between(times, level, cum, a, b)
    span = (b - a)[:, None] * _capacity_totals(result)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(span > 0, used / span, np.nan)
    weeks = weeks.with_columns(
        *(pl.Series(f"util_{r}", util[:, i]).fill_nan(None) for i, r in enumerate(RESOURCES))
    )
    out = (
        weeks.join(waits, on="week_start", how="left")
        .join(done, on="week_start", how="left")
        .with_columns(pl.col("jobs").fill_null(0), pl.col("jobs_completed").fill_null(0))
        .with_columns(
            (pl.col("week_start").dt.iso_year().cast(pl.Utf8) + "-W"
             + pl.col("week_start").dt.week().cast(pl.Utf8).str.zfill(2)).alias("week")
        )
    )
    return out.select(
        "week", "week_start", "jobs", "mean_wait", "median_wait", "p95_wait", "p99_wait", "max_wait",
        "mean_bsld", "mean_bsld_1min", "jobs_completed", "util_cores", "util_gpus", "util_mem",
    ).sort("week_start")
