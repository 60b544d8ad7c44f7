"""Ingest flow: load log files into the warehouse, one task per file.

Each file is parsed and staged with no database connection open and committed in one short
transaction under the writer lock, so queries answer during a long ingest and a second ingest
started meanwhile waits only for the other's commit (saying so). The batch logic is
`warehouse.ingest.ingest_batch`; this flow runs it with each file as a Prefect task.
"""

from __future__ import annotations

from metapilot.flows.common import is_transient
from metapilot.warehouse.ingest import (
    FileReport,
    IngestOptions,
    describe,
    ingest_batch,
    ingest_file_to,
)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE


@task(name="ingest-file", cache_policy=NONE, retries=2, retry_delay_seconds=2, retry_condition_fn=is_transient)
def ingest_file_task(path: str, db: str | None, opts: IngestOptions, key: bytes) -> FileReport:
    from pathlib import Path

    log = get_run_logger()
    rep = ingest_file_to(db, Path(path), opts, key, log=log.info)
    if rep.outcome == "failed":
        log.error(describe(rep))
    else:
        log.info(describe(rep))
    return rep


@flow(name="ingest", log_prints=True)
def ingest_flow(paths: list[str], db: str | None = None, opts: IngestOptions | None = None) -> list[dict]:
    """Ingest files, globs and directories; files already loaded (same SHA-256) are skipped.

    Raises NothingToIngestError when the paths give no file, SiteKeyError when the site key is
    missing or not the warehouse's (see `warehouse.secret`)."""
    log = get_run_logger()
    return ingest_batch(list(paths), db, opts, log=log.info, warn=log.warning, per_file=ingest_file_task)
