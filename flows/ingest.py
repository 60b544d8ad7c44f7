"""Ingest flow: load log files into the warehouse, one task per file (one writer at a time)."""

from __future__ import annotations

from dataclasses import asdict

from metapilot.flows.common import is_transient, warehouse_writer
from metapilot.warehouse.db import connect
from metapilot.warehouse.ingest import (
    FileReport,
    IngestOptions,
    expand_paths,
    infer_missing_capacity,
    ingest_file,
)
from metapilot.warehouse.secret import load_or_create_secret
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE


@task(name="ingest-file", cache_policy=NONE, retries=2, retry_delay_seconds=2, retry_condition_fn=is_transient)
def ingest_file_task(con, path: str, opts: IngestOptions, key: bytes) -> FileReport:
    from pathlib import Path

    rep = ingest_file(con, Path(path), opts, key)
    log = get_run_logger()
    if rep.outcome == "failed":
        log.error(rep.message)
    else:
        log.info("%s: %s (%s, %d lines: %d loaded, %d merged, %d quarantined, %d skipped)", path, rep.outcome,
                 rep.format, rep.lines_read, rep.rows_loaded, rep.rows_merged, rep.rows_quarantined, rep.lines_skipped)
    return rep


@flow(name="ingest", log_prints=True)
def ingest_flow(paths: list[str], db: str | None = None, opts: IngestOptions | None = None) -> list[dict]:
    """Ingest files, globs and directories; files already loaded (same SHA-256) are skipped."""
    opts = opts or IngestOptions()
    key = load_or_create_secret(db)
    with warehouse_writer(db, log=get_run_logger().info):
        return _ingest_all(paths, db, opts, key)


def _ingest_all(paths: list[str], db: str | None, opts: IngestOptions, key: bytes) -> list[dict]:
    con = connect(db)
    try:
        reports = []
        for f in expand_paths(paths):
            if not f.exists():
                reports.append(FileReport(path=str(f), sha256="", bytes=0, outcome="failed",
                                          message=f"{f}: no such file or directory: check the path or glob"))
                continue
            reports.append(ingest_file_task(con, str(f), opts, key))
        warnings = infer_missing_capacity(con)
        for w in warnings:
            get_run_logger().warning(w)
        out = [asdict(r) for r in reports]
        if warnings:
            out.append({"path": "(all clusters)", "sha256": "", "bytes": 0, "outcome": "capacity", "format": None,
                        "cluster": None, "lines_read": 0, "rows_loaded": 0, "jobs_written": 0, "rows_merged": 0,
                        "rows_quarantined": 0, "lines_skipped": 0, "seconds": 0.0, "message": None,
                        "warnings": warnings, "validation": None})
        return out
    finally:
        con.close()
