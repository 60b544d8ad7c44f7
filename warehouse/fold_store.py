"""A walk-forward fold's private warehouse: the past of one origin, copied out of the operator's
warehouse (sql/backtest/fold_*.sql). Folds learn there, in parallel if asked, without holding the
operator's warehouse or leaving their policies and held-out replays among the operator's own."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from metapilot.ground.paths import sql_text
from metapilot.warehouse.db import connect, insert_frame, query_frame


def fold_fingerprint(db: str | Path | None, cluster: str, before: datetime) -> str:
    """The past a fold learns from, in a few numbers (sql/backtest/fold_fingerprint.sql)."""
    con = connect(db, read_only=True)
    try:
        row = con.execute(sql_text("backtest/fold_fingerprint.sql"), {"cluster": cluster, "before": before}).fetchall()[0]
    finally:
        con.close()
    return "|".join(str(v) for v in row)


def make_fold_warehouse(db: str | Path | None, cluster: str, before: datetime, path: str | Path) -> Path:
    """Create `path` holding `cluster`'s jobs submitted before `before` and its capacity rows."""
    path = Path(path)
    path.unlink(missing_ok=True)
    src = connect(db, read_only=True)
    try:
        p = {"cluster": cluster, "before": before}
        jobs = query_frame(src, sql_text("backtest/fold_jobs.sql"), p)
        capacity = query_frame(src, sql_text("backtest/fold_capacity.sql"), {"cluster": cluster})
    finally:
        src.close()
    con = connect(path)
    try:
        con.execute("BEGIN TRANSACTION")
        insert_frame(con, "jobs", jobs)
        insert_frame(con, "capacity", capacity)
        con.execute("COMMIT")
    finally:
        con.close()
    return path
