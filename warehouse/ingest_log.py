"""What ingest records about each file, whatever its kind (job logs, node and pod lists, metrics):
`ingest_files` (loaded or failed, with the line counts) and `validation_runs` (its data checks)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any

import duckdb

from metapilot.ground.paths import sql_statements, sql_text


def record_loaded(con: duckdb.DuckDBPyConnection, rep: Any, started_at: datetime) -> None:
    """A loaded file, from its report (`warehouse.ingest.FileReport`)."""
    con.execute(sql_text("ingest/record_loaded.sql"), {
        "sha256": rep.sha256, "path": rep.path, "bytes": rep.bytes, "format": rep.format, "cluster": rep.cluster,
        "lines_read": rep.lines_read, "rows_loaded": rep.rows_loaded, "jobs_written": rep.jobs_written,
        "rows_merged": rep.rows_merged, "rows_quarantined": rep.rows_quarantined, "lines_skipped": rep.lines_skipped,
        "started_at": started_at, "finished_at": datetime.now(timezone.utc), "message": "; ".join(rep.warnings) or None,
    })


def record_failed(con: duckdb.DuckDBPyConnection, rep: Any, fmt: str | None, cluster: str | None,
                  started_at: datetime) -> None:
    """A file that failed, after its transaction was rolled back: `rep.message` says why."""
    con.execute(sql_text("ingest/record_failed.sql"), {
        "sha256": rep.sha256, "path": rep.path, "bytes": rep.bytes, "format": fmt, "cluster": cluster,
        "started_at": started_at, "finished_at": datetime.now(timezone.utc), "message": rep.message,
    })


def record_validation(con: duckdb.DuckDBPyConnection, sha: str, suite: str, success: bool, evaluated: int,
                      failed_rows: int, results: list) -> None:
    """One file's data checks."""
    con.execute(sql_text("ingest/record_validation.sql"), {
        "run_id": str(uuid.uuid4()), "file_sha256": sha, "suite_name": suite, "success": bool(success),
        "evaluated": int(evaluated), "failed_rows": int(failed_rows), "results_json": json.dumps(results, default=str),
        "validated_at": datetime.now(timezone.utc),
    })


def prior_load(con: duckdb.DuckDBPyConnection, sha: str) -> tuple[str, str | None, str | None] | None:
    """(outcome, cluster, format) of an earlier load of the same content, or None."""
    found = con.execute(sql_text("ingest/prior_load.sql"), {"sha256": sha}).fetchall()
    return found[0] if found else None


def undecodable_lines(con: duckdb.DuckDBPyConnection, sha: str, prefix: str) -> int:
    """How many of the file's quarantined lines were not valid text (their reason starts with `prefix`)."""
    return int(con.execute(sql_text("ingest/undecodable_lines.sql"), {"sha256": sha, "prefix": prefix}).fetchall()[0][0])


def forget_file(con: duckdb.DuckDBPyConnection, sha: str) -> None:
    """Remove what an earlier load of a file wrote (inside the new load's transaction)."""
    for stmt in sql_statements("ingest/forget_file.sql"):
        con.execute(stmt, [sha])


def file_rows(con: duckdb.DuckDBPyConnection, sha: str) -> tuple[int, int, list[str]]:
    """(job rows, lines they came from, clusters) that a file's load left in `jobs`."""
    return con.execute(sql_text("ingest/file_rows.sql"), [sha]).fetchall()[0]
