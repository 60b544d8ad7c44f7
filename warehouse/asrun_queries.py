"""Per-epoch aggregates of the as-run history: the input of `transforms.state` for real logs.

The work is done by DuckDB range joins of epochs x jobs (`sql/mdp/*.sql`); nothing loops over
jobs in Python. Works on the warehouse connection or on a polars `jobs` frame (registered in a
private in-memory DuckDB). Capacity comes from the `capacity` table (dated entries, SPEC §5).
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
from metapilot.transforms.asrun_state import TimeLike, epoch_grid, with_capacity
from metapilot.transforms.state import StateConfig

from metapilot.ground.paths import sql_text
from metapilot.warehouse.db import query_frame


def _with_jobs(source: duckdb.DuckDBPyConnection | pl.DataFrame) -> duckdb.DuckDBPyConnection:
    if isinstance(source, pl.DataFrame):
        from metapilot.transforms.canonical import (
            conform,  # a frame may carry only some canonical columns
        )

        con = duckdb.connect(":memory:")
        con.execute("SET TimeZone = 'UTC'")
        con.register("jobs", conform(source).to_arrow())
        return con
    return source


def _compose(name: str) -> str:
    return "WITH asrun_jobs AS (\n" + sql_text("mdp/asrun_jobs.sql") + "\n),\n" + sql_text(f"mdp/{name}.sql")


def _job_params(cluster: str, partition: str | None, t_lo: float, t_hi: float) -> dict:
    return {"cluster": cluster, "partition": partition, "t_lo": float(t_lo), "t_hi": float(t_hi)}


def capacity_frame(con: duckdb.DuckDBPyConnection, cluster: str) -> pl.DataFrame:
    """The cluster's capacity rows (partition, valid_from as epoch seconds, cores, gpus, mem_mib)."""
    return query_frame(con, sql_text("mdp/capacity_history.sql"), {"cluster": cluster})


def asrun_aggregates(
    source: duckdb.DuckDBPyConnection | pl.DataFrame,
    cluster: str,
    window_from: TimeLike,
    window_to: TimeLike,
    *,
    partition: str | None = None,
    config: StateConfig = StateConfig(),
    capacity: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Aggregates at every epoch boundary of the window, the closing boundary included.

    One row per boundary `t` (n_epochs + 1 rows): the `transforms.state.AGGREGATES` columns, plus
    `u_cpu`, `u_gpu`, `u_mem`, the utilisation over `[t, t + epoch_s)` (the reward's terms).
    `capacity` overrides the `capacity` table (required with a frame that has no such table).
    """
    grid = epoch_grid(window_from, window_to, config.epoch_s)
    return aggregates_at(source, cluster, np.append(grid, grid[-1] + config.epoch_s),
                         partition=partition, config=config, capacity=capacity)


def aggregates_at(
    source: duckdb.DuckDBPyConnection | pl.DataFrame,
    cluster: str,
    boundaries: np.ndarray,
    *,
    partition: str | None = None,
    config: StateConfig = StateConfig(),
    capacity: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Aggregates at evenly spaced boundaries (`boundaries[0] + k * epoch_s`); see asrun_aggregates.

    With one boundary this is the state of the cluster at an instant (`metapilot advise --at`).
    """
    con = _with_jobs(source)
    t0, t1 = int(boundaries[0]), int(boundaries[-1])
    e = int(config.epoch_s)
    params = _job_params(cluster, partition, t0 - e, t1 + e) | {
        "t0": t0, "t1": t1, "epoch_s": e, "long_tail_s": float(config.long_tail_s),
    }
    agg = query_frame(con, _compose("asrun_epoch_aggregates"), params)
    if capacity is None:
        capacity = capacity_frame(con, cluster)
    return with_capacity(agg, capacity, partition, e)


def asrun_queues(
    source: duckdb.DuckDBPyConnection | pl.DataFrame,
    cluster: str,
    window_from: TimeLike,
    window_to: TimeLike,
    *,
    partition: str | None = None,
    config: StateConfig = StateConfig(),
) -> pl.DataFrame:
    """The queue at the start of every epoch that started some of it (for action inference).

    Columns: epoch_start, job_seq, submit_s, start_s, started_in_epoch, req_time_s, cores, gpus, mem.
    """
    con = _with_jobs(source)
    grid = epoch_grid(window_from, window_to, config.epoch_s)
    t0, t1, e = int(grid[0]), int(grid[-1]) + config.epoch_s, int(config.epoch_s)
    params = _job_params(cluster, partition, t0 - e, t1 + e) | {"t0": t0, "t1": t1, "epoch_s": e}
    return query_frame(con, _compose("asrun_epoch_queue"), params)


def data_span(con: duckdb.DuckDBPyConnection, cluster: str, partition: str | None = None):
    """(first submit, last event) of a cluster's jobs (a partition's, if given), as UTC datetimes;
    None when it has no jobs. The last event is the latest submit, start or end."""
    row = con.execute(
        "SELECT min(submit_time), max(greatest(submit_time, coalesce(start_time, submit_time), "
        "coalesce(end_time, submit_time))) FROM jobs WHERE cluster = $cluster "
        "AND ($partition IS NULL OR partition = $partition)",
        {"cluster": cluster, "partition": partition}).fetchall()[0]
    if row[0] is None:
        return None
    from datetime import timezone

    return tuple(t.astimezone(timezone.utc) for t in row)
