"""Validation and recommendation I/O: policies in, `heldout_replays` / `heldout_weeks` /
`heldout_diffs` / `recommendations` out (DDL: sql/ddl/030_heldout.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import duckdb
import polars as pl
from metapilot.warehouse.db import insert_frame, query_frame

from metapilot.ground.paths import sql_statements, sql_text
from metapilot.ground.version import code_version

HELDOUT_COLUMNS: tuple[str, ...] = (
    "heldout_id", "policy_id", "contender", "wait_mean_s", "wait_median_s", "wait_p95_s", "wait_p99_s",
    "wait_max_s", "bsld_mean", "bsld_mean_1min", "util_cpu", "util_gpu", "util_mem", "makespan_s", "util_cpu_backlog", "kind", "status", "note", "jobs",
    "jobs_not_run", "first_submit", "last_end", "cluster", "partition", "window_from", "window_to", "epoch_s",
    "capacity_cores", "capacity_gpus", "capacity_mem_mib", "code_version", "created_at",
)
WEEK_COLUMNS: tuple[str, ...] = (
    "heldout_id", "contender", "week", "week_start", "jobs", "wait_mean_s", "wait_median_s", "wait_p95_s",
    "wait_p99_s", "wait_max_s", "bsld_mean", "bsld_mean_1min", "jobs_completed", "util_cpu", "util_gpu", "util_mem",
)
DIFF_COLUMNS: tuple[str, ...] = (
    "heldout_id", "metric", "reference_kind", "reference", "controller_value", "reference_value", "diff",
    "rel_diff", "weeks", "weekly_mean_diff", "ci_low", "ci_high", "n_boot", "seed", "better", "significant",
)
RECOMMENDATION_COLUMNS: tuple[str, ...] = (
    "cluster", "partition", "epoch_start", "epoch_s", "policy_id", "action", "objective", "q_values", "created_at",
)


def _insert(con: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame, columns: tuple[str, ...]) -> None:
    if frame.height:
        insert_frame(con, table, frame.select(columns))


def store_heldout(con: duckdb.DuckDBPyConnection, heldout_id: str, *, policy_id: str | None,
                     table: pl.DataFrame, weekly: pl.DataFrame, diffs: pl.DataFrame, meta: dict) -> None:
    """Write one validation (all contenders, their weeks, the controller's differences) atomically."""
    now = datetime.now(timezone.utc)
    rows = table.with_columns(
        pl.lit(heldout_id).alias("heldout_id"), pl.lit(policy_id, pl.Utf8).alias("policy_id"),
        pl.lit(meta["cluster"]).alias("cluster"), pl.lit(meta.get("partition"), pl.Utf8).alias("partition"),
        pl.lit(meta["window_from"]).cast(pl.Datetime("us", "UTC")).alias("window_from"),
        pl.lit(meta["window_to"]).cast(pl.Datetime("us", "UTC")).alias("window_to"),
        pl.lit(int(meta["epoch_s"]), pl.Int64).alias("epoch_s"),
        pl.lit(meta.get("capacity_cores"), pl.Float64).alias("capacity_cores"),
        pl.lit(meta.get("capacity_gpus"), pl.Float64).alias("capacity_gpus"),
        pl.lit(meta.get("capacity_mem_mib"), pl.Float64).alias("capacity_mem_mib"),
        pl.lit(code_version()).alias("code_version"), pl.lit(now).cast(pl.Datetime("us", "UTC")).alias("created_at"),
    )
    con.execute("BEGIN TRANSACTION")
    try:
        _insert(con, "heldout_replays", rows, HELDOUT_COLUMNS)
        if weekly.height:
            _insert(con, "heldout_weeks", weekly.with_columns(pl.lit(heldout_id).alias("heldout_id")), WEEK_COLUMNS)
        if diffs.height:
            _insert(con, "heldout_diffs", diffs.with_columns(pl.lit(heldout_id).alias("heldout_id")), DIFF_COLUMNS)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


@dataclass(frozen=True)
class StoredHeldOut:
    """One validation as stored: the contender table (in stored order), its weeks and differences."""

    heldout_id: str
    table: pl.DataFrame
    weekly: pl.DataFrame
    diffs: pl.DataFrame

    @property
    def meta(self) -> dict:
        r = self.table.row(0, named=True)
        keys = ("policy_id", "cluster", "partition", "window_from", "window_to", "epoch_s", "capacity_cores",
                "capacity_gpus", "capacity_mem_mib", "code_version", "created_at")
        return {k: r[k] for k in keys}


_KIND_ORDER = "CASE kind WHEN 'controller' THEN 0 WHEN 'objective' THEN 1 WHEN 'baseline' THEN 2 ELSE 3 END"


def load_heldout(con: duckdb.DuckDBPyConnection, heldout_id: str) -> StoredHeldOut:
    """Read a stored validation back (contenders: controller, objectives, baselines, history)."""
    table = query_frame(con, f"SELECT * FROM heldout_replays WHERE heldout_id = ? ORDER BY {_KIND_ORDER}, rowid",
                        [heldout_id])
    if table.height == 0:
        known = [r[0] for r in con.execute(
            "SELECT DISTINCT heldout_id, max(created_at) FROM heldout_replays GROUP BY 1 ORDER BY 2 DESC LIMIT 5").fetchall()]
        hint = f"recent: {', '.join(known)}" if known else "none stored yet: run `metapilot validate --policy ID`"
        raise LookupError(f"no validation {heldout_id!r} ({hint})")
    weekly = query_frame(con, "SELECT * FROM heldout_weeks WHERE heldout_id = ? ORDER BY contender, week_start",
                         [heldout_id])
    diffs = query_frame(con, "SELECT * FROM heldout_diffs WHERE heldout_id = ? ORDER BY reference_kind DESC, rowid",
                        [heldout_id])
    return StoredHeldOut(heldout_id, table, weekly, diffs)


def latest_heldout_id(con: duckdb.DuckDBPyConnection, cluster: str | None = None) -> str | None:
    """The most recent validation (of a cluster), or None."""
    row = con.execute(sql_text("heldout/latest_id.sql"), {"cluster": cluster}).fetchall()
    return row[0][0] if row else None


def store_recommendations(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> int:
    """Insert (or replace) recommended objectives: `cluster, partition, epoch_start, epoch_s,
    policy_id, action, objective[, q_values]` per row; returns the rows written."""
    if frame.height == 0:
        return 0
    if "q_values" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.List(pl.Float64)).alias("q_values"))
    if "created_at" not in frame.columns:
        frame = frame.with_columns(pl.lit(datetime.now(timezone.utc)).cast(pl.Datetime("us", "UTC")).alias("created_at"))
    con.execute("BEGIN TRANSACTION")
    try:
        con.register("_mp_rec", frame.select(RECOMMENDATION_COLUMNS).to_arrow())
        for stmt in sql_statements("heldout/replace_recommendations.sql"):
            con.execute(stmt)
        con.unregister("_mp_rec")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return frame.height
