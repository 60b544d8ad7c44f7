"""Per-row cost of `transforms.data_checks.check_jobs` on synthetic canonical batches.

The ingest target is >= 100,000 jobs/s end to end (5M-row file, 2 cores), so validation must stay
well under ~3 us/row at the batch sizes the loader uses (~100k-500k rows per 32 MiB chunk).

Run: .venv/bin/python bench/bench_data_checks.py [--sizes 100000,500000] [--repeat 3] [--full]
Scenarios: clean batch; 0.1% of rows with one negative count; "dirty" batch where every row-level
expectation of the suite has a few violators (the fast path's worst case per expectation).
`--full` also times mode="full" (GX over every row), the reference the fast path is tested against.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metapilot.transforms.canonical import conform  # noqa: E402
from metapilot.transforms.data_checks import check_jobs  # noqa: E402


def synthetic(n: int, seed: int = 0) -> pl.DataFrame:
    """Valid canonical rows shaped like a sacct export."""
    rng = np.random.default_rng(seed)
    sec = np.timedelta64(1, "s")
    sub = np.datetime64("2024-01-01", "us") + rng.integers(0, 365 * 86400, n) * sec
    wait, run = rng.integers(0, 7200, n), rng.integers(0, 86400, n)
    start = sub + wait * sec
    cpus = rng.integers(1, 64, n)
    df = pl.DataFrame({
        "cluster": ["c1"] * n, "job_id": np.arange(1_000_000, 1_000_000 + n).astype(str),
        "source_format": ["sacct"] * n, "source_line": np.arange(2, n + 2), "user_name": ["u"] * n,
        "partition": ["batch"] * n, "state": rng.choice(["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"], n),
        "exit_code": ["0:0"] * n, "submit_time": sub, "eligible_time": sub, "start_time": start,
        "end_time": start + run * sec, "wait_s": wait, "run_s": run, "timelimit_s": np.full(n, 86400),
        "req_cpus": cpus, "req_nodes": np.ones(n, dtype=np.int64), "req_mem_mib": cpus * 2000,
        "req_gpus": np.zeros(n, dtype=np.int64), "alloc_cpus": cpus, "alloc_nodes": np.ones(n, dtype=np.int64),
        "alloc_mem_mib": cpus * 2000, "alloc_gpus": np.zeros(n, dtype=np.int64), "node_list": ["n[01-02]"] * n,
    }).with_columns(pl.col("submit_time", "eligible_time", "start_time", "end_time").dt.replace_time_zone("UTC"))
    return conform(df)


def sprinkle(df: pl.DataFrame, column: str, value: object, every: int, offset: int = 0) -> pl.DataFrame:
    hit = (pl.int_range(pl.len()) % every) == offset
    return df.with_columns(pl.when(hit).then(pl.lit(value)).otherwise(pl.col(column)).cast(df.schema[column]).alias(column))


def dirty(df: pl.DataFrame) -> pl.DataFrame:
    """A few violators for every row-level expectation kind of the suite (~0.2% of rows)."""
    every = max(df.height // 20, 1)
    for k, (c, v) in enumerate([("cluster", None), ("job_id", "1 2"), ("source_format", "csv"), ("state", "DONE"),
                                ("wait_s", -1), ("run_s", -1), ("timelimit_s", -1), ("req_cpus", -1), ("req_nodes", -1),
                                ("req_mem_mib", -1), ("req_gpus", -1), ("alloc_cpus", -1), ("alloc_nodes", -1),
                                ("alloc_mem_mib", -1), ("alloc_gpus", -1), ("array_task_id", -1), ("het_offset", -1),
                                ("source_line", 0)]):
        df = sprinkle(df, c, v, every, k)
    hit = (pl.int_range(pl.len()) % every) == 19
    return df.with_columns(pl.when(hit).then(pl.col("submit_time") - pl.duration(hours=1)).otherwise(pl.col("end_time"))
                           .alias("end_time"))


def time_it(df: pl.DataFrame, mode: str, repeat: int) -> tuple[float, dict]:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = check_jobs(df, mode=mode)
        best = min(best, time.perf_counter() - t)
    return best, out.summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,500000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--full", action="store_true", help="also time mode='full' (GX over every row)")
    a = ap.parse_args()

    t = time.perf_counter()
    check_jobs(synthetic(10))
    print(f"first call (GX import, context, suite): {time.perf_counter() - t:.2f} s, once per process")
    print(f"{'rows':>8} {'scenario':<10} {'mode':<5} {'seconds':>8} {'us/row':>7} {'failed':>7} {'gx_rows':>8}")
    for n in (int(s) for s in a.sizes.split(",")):
        base = synthetic(n)
        for name, df in (("clean", base), ("0.1% bad", sprinkle(base, "wait_s", -1, 1000)), ("dirty", dirty(base))):
            for mode in ("fast", "full") if a.full else ("fast",):
                dt, s = time_it(df, mode, a.repeat if mode == "fast" else 1)
                print(f"{n:>8} {name:<10} {mode:<5} {dt:>8.3f} {dt / n * 1e6:>7.2f} {s['failed_rows']:>7} {s['gx_rows']:>8}")


if __name__ == "__main__":
    main()
