"""Walk-forward I/O: who submitted the span's jobs in, `backtests` / `backtest_periods` out
(DDL: sql/ddl/080_backtests.sql)."""

from __future__ import annotations

from datetime import datetime, timezone

import duckdb
import polars as pl

from metapilot.ground.paths import sql_text
from metapilot.ground.version import code_version
from metapilot.warehouse.db import has_table, insert_frame, query_frame

CONTENDER_COLUMNS: tuple[str, ...] = (
    "backtest_id", "cluster", "span_from", "span_to", "current_rule", "reference", "reference_any", "contender", "kind",
    "status", "note", "jobs", "wait_mean_s", "wait_p95_s", "wait_p99_s", "wait_max_s", "bsld_mean", "bsld_mean_1min",
    "util_cpu_backlog", "gain_wait_mean", "gain_bsld", "regret_bsld", "regret_bsld_lo", "regret_bsld_hi",
    "regret_wait_mean", "regret_wait_mean_lo", "regret_wait_mean_hi", "regret_bsld_any", "regret_wait_mean_any",
    "admissible", "worst_user_wait_s", "worst_account_wait_s", "jain_users", "code_version", "created_at",
    "asrun_kendall_tau",
)
FIGURE_COLUMNS: tuple[str, ...] = (
    "backtest_id", "contender", "period", "jobs", "wait_mean_s", "wait_max_s", "bsld_mean", "wait_sum_s", "bsld_sum",
)
PERIOD_COLUMNS: tuple[str, ...] = (
    "backtest_id", "period", "period_from", "period_to", "decision", "rule", "guard_h", "policy_id", "leader",
    "guarded_leader", "guarded_leader_h", "fold_policy_id", "fold_gate", "fold_note", "jobs",
    "fidelity_wait_mean_replay_s", "fidelity_wait_mean_asrun_s", "fidelity_waited_replay", "fidelity_waited_asrun",
    "fidelity_kendall_tau", "fidelity_far", "why",
)


def job_owners(con: duckdb.DuckDBPyConnection, cluster: str, span_from: datetime, span_to: datetime) -> pl.DataFrame:
    """job_id, user, account (hashed) of the jobs submitted in the span."""
    return query_frame(con, sql_text("backtest/job_owners.sql"),
                       {"cluster": cluster, "span_from": span_from, "span_to": span_to})


def store_backtest(con: duckdb.DuckDBPyConnection, backtest_id: str, contenders: pl.DataFrame,
                   periods: pl.DataFrame, figures: pl.DataFrame | None = None) -> None:
    """Write one walk forward (its contenders, periods and per-period figures of every contender) in
    one transaction: all or nothing."""
    now = datetime.now(timezone.utc)
    stamp = [pl.lit(backtest_id).alias("backtest_id"), pl.lit(code_version()).alias("code_version"),
             pl.lit(now).cast(pl.Datetime("us", "UTC")).alias("created_at")]
    rows = contenders.with_columns(stamp)
    per = periods.with_columns(pl.lit(backtest_id).alias("backtest_id"))
    con.execute("BEGIN TRANSACTION")
    try:
        insert_frame(con, "backtests", rows.select([c for c in CONTENDER_COLUMNS if c in rows.columns]))
        insert_frame(con, "backtest_periods", per.select([c for c in PERIOD_COLUMNS if c in per.columns]))
        if figures is not None and figures.height:
            fig = figures.rename({"name": "contender"}).with_columns(pl.lit(backtest_id).alias("backtest_id"))
            insert_frame(con, "backtest_contender_periods", fig.select(FIGURE_COLUMNS))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def latest_backtest(con: duckdb.DuckDBPyConnection, cluster: str | None) -> str | None:
    """The id of the cluster's most recent walk forward (any cluster's: None), None when there is none."""
    rows = con.execute(sql_text("backtest/latest_id.sql"), {"cluster": cluster}).fetchall()
    return rows[0][0] if rows else None


def load_backtest(con: duckdb.DuckDBPyConnection, backtest_id: str) -> dict:
    """One stored walk forward: `contenders`, `periods`, per-period `figures`, and the cores in force
    at its start (`capacity_cores`, for the ROI). LookupError when unknown."""
    from metapilot.warehouse.sim_store import load_capacity

    p = {"backtest_id": backtest_id}
    out: dict = {name: query_frame(con, sql_text(f"backtest/{name}.sql"), p) for name in ("contenders", "periods")}
    # walk forwards stored before the per-period figures were kept have none (read-only: no DDL applied)
    out["figures"] = (query_frame(con, sql_text("backtest/figures.sql"), p)
                      if has_table(con, "backtest_contender_periods") else pl.DataFrame())
    c = out["contenders"]
    if c.height == 0:
        raise LookupError(f"no walk forward {backtest_id!r} in this warehouse: `metapilot sql "
                          "\"SELECT DISTINCT backtest_id, cluster, created_at FROM backtests\"` lists them")
    try:
        cap = load_capacity(con, c["cluster"][0], c["span_from"][0])
        whole = cap.filter(pl.col("partition") == "*")
        out["capacity_cores"] = float((whole if whole.height else cap)["cores"].sum())
    except LookupError:
        out["capacity_cores"] = 0.0
    return out
