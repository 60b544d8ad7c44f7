"""Ingest flow: load log files into the warehouse, one task per file.

Each file is parsed and staged with no database connection open and committed in one short
transaction under the writer lock, so queries answer during a long ingest and a second ingest
started meanwhile waits only for the other's commit (saying so).
"""

from __future__ import annotations

from dataclasses import asdict

from metapilot.flows.common import is_transient, warehouse_writer
from metapilot.warehouse.db import connect
from metapilot.warehouse.ingest import (
    FileReport,
    IngestOptions,
    expand_paths_checked,
    infer_missing_capacity,
    ingest_file_to,
)
from metapilot.warehouse.secret import load_site_key, secret_path
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE


@task(name="ingest-file", cache_policy=NONE, retries=2, retry_delay_seconds=2, retry_condition_fn=is_transient)
def ingest_file_task(path: str, db: str | None, opts: IngestOptions, key: bytes) -> FileReport:
    from pathlib import Path

    log = get_run_logger()
    rep = ingest_file_to(db, Path(path), opts, key, log=log.info)
    if rep.outcome == "failed":
        log.error(rep.message)
    else:
        log.info("%s: %s (%s, %d lines: %d loaded, %d merged, %d quarantined, %d skipped)", path, rep.outcome,
                 rep.format, rep.lines_read, rep.rows_loaded, rep.rows_merged, rep.rows_quarantined, rep.lines_skipped)
    return rep


@flow(name="ingest", log_prints=True)
def ingest_flow(paths: list[str], db: str | None = None, opts: IngestOptions | None = None) -> list[dict]:
    """Ingest files, globs and directories; files already loaded (same SHA-256) are skipped.

    Raises NothingToIngestError when the paths give no file, SiteKeyError when the site key is
    missing or not the warehouse's (see `warehouse.secret`)."""
    opts = opts or IngestOptions()
    log = get_run_logger()
    files, empty = expand_paths_checked(list(paths))
    key = load_site_key(db, new_key=opts.new_key, log=log.info)
    if opts.key_file is None:
        from dataclasses import replace

        opts = replace(opts, key_file=str(secret_path(db)))
    reports: list[FileReport] = list(empty)
    for f in files:
        reports.append(ingest_file_task(str(f), db, opts, key))
    warnings: list[str] = []
    if any(r.outcome == "loaded" for r in reports):
        with warehouse_writer(db, log=log.info):
            con = connect(db, log=log.info)
            try:
                warnings = infer_missing_capacity(con)
            finally:
                con.close()
    for w in warnings:
        log.warning(w)
    out = [asdict(r) for r in reports]
    from metapilot.warehouse.data_docs import render_after_ingest

    render_after_ingest(db, out, log=log.warning)  # GX data docs, when GX ran (else on demand / weekly report)
    if warnings:
        out.append({"path": "(all clusters)", "sha256": "", "bytes": 0, "outcome": "capacity", "format": None,
                    "cluster": None, "lines_read": 0, "rows_loaded": 0, "jobs_written": 0, "rows_merged": 0,
                    "rows_quarantined": 0, "lines_skipped": 0, "seconds": 0.0, "message": None,
                    "warnings": warnings, "validation": None})
    return out
