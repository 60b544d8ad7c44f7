"""The simulator's I/O: read a window of jobs and its capacity from the warehouse, store runs."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

import duckdb
import numpy as np
import polars as pl
from metapilot.warehouse.db import query_frame
from metapilot.warehouse.jobs_store import clusters_with_jobs

from metapilot.ground.paths import sql_text
from metapilot.ground.version import code_version, dependency_versions_json
from metapilot.transforms.asrun_state import TimeLike, to_epoch_s
from metapilot.transforms.workload import Workload, normalise


def load_window(con: duckdb.DuckDBPyConnection, cluster: str, start: datetime | None = None,
                end: datetime | None = None, partition: str | None = None) -> pl.DataFrame:
    """Canonical rows of the jobs submitted in the window, in submit order."""
    return query_frame(con, sql_text("sim/window_jobs.sql"), [cluster, start, end, partition])


def load_capacity(con: duckdb.DuckDBPyConnection, cluster: str, at: datetime | None = None) -> pl.DataFrame:
    """Capacity rows (one per partition, '*' = whole cluster) in force at `at`."""
    rows = query_frame(con, sql_text("sim/capacity_at.sql"), [cluster, at])
    if rows.height == 0:
        known = clusters_with_jobs(con)
        raise LookupError(f"no capacity known for cluster {cluster!r}: ingest its logs or load a config with "
                          f"`metapilot capacity --config clusters.toml` (clusters with jobs: {', '.join(known) or 'none'})")
    return rows


def load_replay_window(con: duckdb.DuckDBPyConnection, cluster: str, window_from: TimeLike, window_to: TimeLike,
                       partition: str | None = None) -> tuple[Workload, pl.DataFrame]:
    """Jobs submitted in the window (normalised, time zero = window start) and the capacity rows
    in force at its start: the partition's own pool, else the whole cluster's (as validation does).
    The simulator takes both as they are (`Capacity.from_rows`)."""
    jobs, rows, start = _window_rows(con, cluster, window_from, window_to, partition)
    return normalise(jobs, start), rows


def load_replay_window_starts(con: duckdb.DuckDBPyConnection, cluster: str, window_from: TimeLike,
                              window_to: TimeLike, partition: str | None = None
                              ) -> tuple[Workload, pl.DataFrame, np.ndarray]:
    """`load_replay_window`, plus every replayed job's real start (epoch seconds, NaN: never
    started): the as-run history's view of the same jobs."""
    jobs, rows, start = _window_rows(con, cluster, window_from, window_to, partition)
    workload = normalise(jobs, start)
    starts = (jobs.select(pl.col("job_id").cast(pl.Utf8), pl.col("start_time").dt.epoch("s").cast(pl.Float64).alias("s"))
              .unique("job_id", keep="first"))
    order = pl.DataFrame({"job_id": workload.job_ids.astype(str)}).with_row_index("i")
    s = order.join(starts, on="job_id", how="left").sort("i")["s"].fill_null(float("nan")).to_numpy()
    return workload, rows, s.astype(np.float64)


def _window_rows(con: duckdb.DuckDBPyConnection, cluster: str, window_from: TimeLike, window_to: TimeLike,
                 partition: str | None) -> tuple[pl.DataFrame, pl.DataFrame, datetime]:
    start = datetime.fromtimestamp(to_epoch_s(window_from), tz=timezone.utc)
    end = datetime.fromtimestamp(to_epoch_s(window_to), tz=timezone.utc)
    jobs = load_window(con, cluster, start, end, partition)
    rows = load_capacity(con, cluster, start)
    if partition is not None:
        own = rows.filter(pl.col("partition") == partition)
        rows = own if own.height else rows.filter(pl.col("partition") == "*")
        if rows.height == 0:
            raise LookupError(f"no capacity for partition {partition!r} of {cluster} (nor for '*')")
    return jobs, rows, start


def store_run(con: duckdb.DuckDBPyConnection, *, cluster: str, partition: str | None, window_from: datetime | None,
              window_to: datetime | None, policy: str, backfill: str, objective_schedule: dict | list | None,
              seed: int | None, wall_s: float, counters: dict, overall: pl.DataFrame, weekly: pl.DataFrame,
              engine_s: float | None = None) -> str:
    """Write one `sim_runs` row and its `sim_metrics` (overall and per ISO week); return the run id.
    `wall_s`: the whole call; `engine_s`: the replay's event loop alone."""
    run_id = str(uuid.uuid4())
    o = overall.row(0, named=True)
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "INSERT INTO sim_runs (run_id, cluster, partition, window_from, window_to, policy, backfill, "
            "objective_schedule, seed, code_version, wall_s, jobs_replayed, jobs_left_out, runs_clamped, "
            "estimates_filled, cannot_fit, created_at, engine_s, versions) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [run_id, cluster, partition, window_from, window_to, policy, backfill,
             json.dumps(objective_schedule) if objective_schedule is not None else None, seed, code_version(),
             wall_s, int(o["jobs"] or 0), int(counters.get("left_out", 0)), int(counters.get("clamped", 0)),
             int(counters.get("estimates_filled", 0)), int(counters.get("cannot_fit", 0)), datetime.now(timezone.utc),
             engine_s, dependency_versions_json()],
        )
        rows = [("overall", "all", None, o)] + [("week", w["week"], w["week_start"], w) for w in weekly.iter_rows(named=True)]
        for scope, label, start, r in rows:
            con.execute(
                "INSERT INTO sim_metrics (run_id, scope, period_label, period_start, jobs, wait_mean_s, wait_median_s, "
                "wait_p95_s, wait_p99_s, wait_max_s, bsld_mean, bsld_mean_1min, util_cpu, util_gpu, util_mem, makespan_s) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [run_id, scope, label, start, int(r.get("jobs") or 0), r.get("mean_wait"), r.get("median_wait"),
                 r.get("p95_wait"), r.get("p99_wait"), r.get("max_wait"), r.get("mean_bsld"), r.get("mean_bsld_1min"),
                 r.get("util_cores"), r.get("util_gpus"), r.get("util_mem"), r.get("makespan") if scope == "overall" else None],
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return run_id
