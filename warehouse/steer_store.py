"""The steering loop's tables (sql/ddl/090_steering.sql): approvals, cycles, the jobs it set until
released, and the shadow rankings of dry runs. Every statement is a file under sql/steer/."""

from __future__ import annotations

import json
from datetime import datetime

import duckdb
import polars as pl

from metapilot.ground.paths import sql_text
from metapilot.warehouse.db import insert_frame, query_frame

STEERED_COLUMNS = ("cluster", "job_id", "site_factor", "rank", "group_key", "objective", "cycle_id", "set_at")


def site_facts(con: duckdb.DuckDBPyConnection, cluster: str) -> dict:
    """{'longest_timelimit_s', 'longest_wait_s'} of the cluster's jobs (None where none)."""
    row = con.execute(sql_text("steer/site_facts.sql"), {"cluster": cluster}).fetchall()[0]
    return {"longest_timelimit_s": row[0], "longest_wait_s": row[1]}


def record_approval(con: duckdb.DuckDBPyConnection, *, cluster: str, decision: str, kind: str, policy_id: str | None,
                    published_at: datetime | None, approved_by: str, approved_at: datetime, note: str | None,
                    claimed_by: str | None = None) -> None:
    """`approved_by`: the real uid's account; `claimed_by`: the sudo user the environment names, if any."""
    con.execute(sql_text("steer/record_approval.sql"), {
        "cluster": cluster, "decision": decision, "kind": kind, "policy_id": policy_id, "published_at": published_at,
        "approved_by": approved_by, "approved_at": approved_at, "note": note, "claimed_by": claimed_by})


def latest_approval(con: duckdb.DuckDBPyConnection, cluster: str) -> dict | None:
    rows = con.execute(sql_text("steer/latest_approval.sql"), {"cluster": cluster}).fetchall()
    if not rows:
        return None
    keys = ("decision", "kind", "policy_id", "published_at", "approved_by", "approved_at", "note", "claimed_by")
    return dict(zip(keys, rows[0]))


def record_cycle(con: duckdb.DuckDBPyConnection, row: dict) -> None:
    """One cycle's row; `rpc_counts` (a dict) is stored as JSON."""
    params = dict(row)
    params["rpc_counts"] = json.dumps(params.get("rpc_counts")) if params.get("rpc_counts") is not None else None
    con.execute(sql_text("steer/record_cycle.sql"), params)


def current_steered(con: duckdb.DuckDBPyConnection, cluster: str) -> pl.DataFrame:
    """Jobs set and not released: job_id, site_factor, rank, group_key, objective, cycle_id, set_at."""
    return query_frame(con, sql_text("steer/current_steered.sql"), {"cluster": cluster})


def _with_ids(con: duckdb.DuckDBPyConnection, statement: str, ids: list[str], params: dict) -> None:
    con.register("__ids", pl.DataFrame({"job_id": pl.Series(ids, dtype=pl.Utf8)}).to_arrow())
    try:
        con.execute(sql_text(statement), params)
    finally:
        con.unregister("__ids")


def write_ahead(con: duckdb.DuckDBPyConnection, rows: pl.DataFrame) -> None:
    """The factors a cycle is about to set (non-zero), recorded before Slurm is told: a loop killed
    between the update and its record leaves them to the next start's release, never set and
    unrecorded. Each job's earlier open row stays open until `confirm_steered`."""
    if not rows.is_empty():
        insert_frame(con, "steered_jobs", rows.select(STEERED_COLUMNS))


def confirm_steered(con: duckdb.DuckDBPyConnection, cluster: str, cycle_id: str, job_ids: list[str],
                    at: datetime) -> None:
    """Jobs the cycle `cycle_id` set: their earlier open rows are closed, the written-ahead ones stay."""
    if job_ids:
        _with_ids(con, "steer/supersede_steered.sql", job_ids, {"cluster": cluster, "stamp": at, "cycle_id": cycle_id})


def drop_written_ahead_jobs(con: duckdb.DuckDBPyConnection, cluster: str, cycle_id: str, job_ids: list[str]) -> None:
    """The written-ahead rows of these jobs, read back from Slurm as not set by the failed update."""
    if job_ids:
        _with_ids(con, "steer/drop_written_ahead_jobs.sql", job_ids, {"cluster": cluster, "cycle_id": cycle_id})


def mark_released(con: duckdb.DuckDBPyConnection, cluster: str, job_ids: list[str], at: datetime) -> None:
    if job_ids:
        _with_ids(con, "steer/release_steered.sql", job_ids, {"cluster": cluster, "stamp": at})


def record_shadow(con: duckdb.DuckDBPyConnection, rows: pl.DataFrame) -> None:
    if not rows.is_empty():
        insert_frame(con, "steer_shadow", rows)


def last_halt(con: duckdb.DuckDBPyConnection, cluster: str) -> dict | None:
    """The latest 'halted' or 'resumed' cycle row, or None."""
    rows = con.execute(sql_text("steer/last_halt.sql"), {"cluster": cluster}).fetchall()
    return dict(zip(("status", "at", "message"), rows[0])) if rows else None


def guard_trips(con: duckdb.DuckDBPyConnection, cluster: str, mode: str,
                since: datetime) -> list[tuple[datetime, str | None]]:
    """(when, job id or None) of each live tail guard trip of `mode` (live, dry-run) since `since`,
    oldest first."""
    rows = con.execute(sql_text("steer/guard_trips.sql"), {"cluster": cluster, "mode": mode, "since": since}).fetchall()
    return [tuple(r) for r in rows]


def last_exit(con: duckdb.DuckDBPyConnection, cluster: str) -> dict | None:
    """The latest live or release row, as written (see sql/steer/last_exit.sql), or None."""
    rows = con.execute(sql_text("steer/last_exit.sql"), {"cluster": cluster}).fetchall()
    return dict(zip(("status", "at", "message"), rows[0])) if rows else None


def explain_job(con: duckdb.DuckDBPyConnection, cluster: str, job_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(live settings of the job, newest first; its latest dry-run ranking)."""
    p = {"cluster": cluster, "job_id": job_id}
    return query_frame(con, sql_text("steer/explain_job.sql"), p), query_frame(con, sql_text("steer/explain_shadow.sql"), p)


def shadow_vs_starts(con: duckdb.DuckDBPyConnection, cluster: str, since: datetime) -> pl.DataFrame:
    return query_frame(con, sql_text("steer/shadow_vs_starts.sql"), {"cluster": cluster, "since": since})


def recent_cycles(con: duckdb.DuckDBPyConnection, cluster: str, n: int = 20) -> pl.DataFrame:
    return query_frame(con, sql_text("steer/recent_cycles.sql"), {"cluster": cluster, "n": n})


def steering_connector(db):
    """Opens the warehouse for one cycle's short read and write: the first time through `connect`
    (the schema made or migrated), then plainly (0.04 s instead of 0.2 s). Nothing is held between
    cycles, so collect and ingest write beside the loop."""
    from metapilot.ground.paths import db_path
    from metapilot.warehouse.db import _open, connect

    made = []

    def open_once():
        if not made:
            made.append(True)
            return connect(db)
        con = _open(db_path(db), False, None, None, None)
        con.execute("SET TimeZone = 'UTC'")
        return con

    return open_once


LOCK_KEYS = ("token", "holder", "host", "pid", "mode", "taken_at", "beat_at")


def lock_holder(con: duckdb.DuckDBPyConnection, cluster: str) -> dict | None:
    """The cluster's steering lock as held (LOCK_KEYS), or None."""
    rows = con.execute(sql_text("steer/lock_holder.sql"), {"cluster": cluster}).fetchall()
    return dict(zip(LOCK_KEYS, rows[0])) if rows else None


def take_lock(con: duckdb.DuckDBPyConnection, cluster: str, *, token: str, holder: str, host: str, pid: int,
              mode: str, at: datetime) -> None:
    """Replace whatever lock row the cluster has (free or stale: the caller decided, in the same
    transaction) with this holder's."""
    con.execute(sql_text("steer/lock_free.sql"), {"cluster": cluster, "token": None})
    con.execute(sql_text("steer/lock_take.sql"), {"cluster": cluster, "token": token, "holder": holder, "host": host,
                                                  "pid": pid, "mode": mode, "at": at})


def beat_lock(con: duckdb.DuckDBPyConnection, cluster: str, token: str, at: datetime) -> bool:
    """The holder's heartbeat; False when the lock is no longer its own (taken over as stale)."""
    rows = con.execute(sql_text("steer/lock_beat.sql"), {"cluster": cluster, "token": token, "at": at}).fetchall()
    return bool(rows and rows[0][0])


def free_lock(con: duckdb.DuckDBPyConnection, cluster: str, token: str) -> None:
    con.execute(sql_text("steer/lock_free.sql"), {"cluster": cluster, "token": token})
