"""Per-epoch aggregates of the as-run history: the input of `transforms.state` for real logs.

The work is done by DuckDB range joins of epochs x jobs (`sql/mdp/*.sql`); nothing loops over
jobs in Python. Works on the warehouse connection or on a polars `jobs` frame (registered in a
private in-memory DuckDB). Capacity comes from the `capacity` table (dated entries, SPEC §5).
"""

from __future__ import annotations

import warnings
from datetime import datetime, timezone

import duckdb
import numpy as np
import polars as pl

from metapilot.config import sql_text
from transforms.reward import utilisation
from transforms.state import StateConfig

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


def query_pl(con: duckdb.DuckDBPyConnection, query: str, params: dict | None = None) -> pl.DataFrame:
    """Run a parameterised query and return a polars frame (DuckDB 2 wants results consumed)."""
    return con.sql(query, params=params or None).pl()


def _with_jobs(source: duckdb.DuckDBPyConnection | pl.DataFrame) -> duckdb.DuckDBPyConnection:
    if isinstance(source, pl.DataFrame):
        from transforms.canonical import conform  # a frame may carry only some canonical columns

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
    return query_pl(
        con,
        "SELECT partition, epoch(valid_from)::BIGINT AS valid_from_s, cores, gpus, mem_mib "
        "FROM capacity WHERE cluster = $cluster ORDER BY partition, valid_from",
        {"cluster": cluster},
    )


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
    agg = query_pl(con, _compose("asrun_epoch_aggregates"), params)
    if capacity is None:
        capacity = capacity_frame(con, cluster)
    caps = capacity_at(capacity, agg["epoch_start"].to_numpy(), partition)
    agg = agg.with_columns(pl.Series(k, v) for k, v in caps.items())
    return agg.with_columns(
        pl.Series("u_cpu", utilisation(agg["used_cpu_s"].to_numpy(), caps["cap_cpu"], e)),
        pl.Series("u_gpu", utilisation(agg["used_gpu_s"].to_numpy(), caps["cap_gpu"], e)),
        pl.Series("u_mem", utilisation(agg["used_mem_s"].to_numpy(), caps["cap_mem"], e)),
    )


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
    return query_pl(con, _compose("asrun_epoch_queue"), params)
