"""Ingest flow: load log files into the warehouse, one task per file.

Each file is parsed and staged with no database connection open and committed in one short
transaction under the writer lock, so queries answer during a long ingest and a second ingest
started meanwhile waits only for the other's commit (saying so). The batch logic is
`warehouse.ingest.ingest_batch`; this flow runs it with each file as a Prefect task.
`landing_ingest_flow` is the daily run of a landing folder, whose final state tells the operator
what happened (issue 41): a quiet day succeeds, a file that could not load fails the run.
"""

from __future__ import annotations

from pathlib import Path

from metapilot.flows.common import is_transient
from metapilot.ground.files import shown_path
from metapilot.ground.landing import settle_seconds, settled
from metapilot.warehouse.ingest import (
    FileReport,
    IngestOptions,
    describe,
    expand_paths,
    ingest_batch,
    ingest_file_to,
)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE
from prefect.states import Completed, Failed


@task(name="ingest-file", cache_policy=NONE, retries=2, retry_delay_seconds=2, retry_condition_fn=is_transient)
def ingest_file_task(path: str, db: str | None, opts: IngestOptions, key: bytes) -> FileReport:
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


def landing_summary(reports: list[dict], waiting: list[tuple[str, str]]) -> tuple[list[str], str]:
    """(lost files with why, one line for the run) of a landing-folder run: a file that failed or
    of which no line loaded is lost until someone acts; files still being written wait."""
    lost = [f"{r['path']}: {r.get('message') or r['outcome']}" for r in reports if r["outcome"] in ("failed", "quarantined")]
    loaded = sum(r["outcome"] == "loaded" for r in reports)
    skipped = sum(r["outcome"] == "skipped" for r in reports)
    parts = [f"{loaded} file(s) loaded" if loaded else "nothing new"]
    if skipped:
        parts.append(f"{skipped} loaded before")
    if waiting:
        parts.append(f"{len(waiting)} still being written (left for the next run)")
    if lost:
        parts.append(f"{len(lost)} not loaded")
    return lost, ", ".join(parts)


@flow(name="landing-ingest", log_prints=True)
def landing_ingest_flow(landing: str, db: str | None = None, settle_s: float | None = None):
    """The daily ingest of a landing folder, as an operator watches it: a quiet day (no file, or
    only files loaded before) is a Completed run saying "nothing new"; files still being written
    (`.part`, or changing over the settle interval: `metapilot.ground.landing`) are left for the
    next run; every other file is loaded, then the run ends Failed, naming each file that failed
    or of which no line loaded and why (they stay listed by `serve --list` and in the weekly
    report's Data quality section until loaded)."""
    log = get_run_logger()
    folder = Path(landing)
    if not folder.is_dir():
        return Failed(message=f"the landing folder {shown_path(folder)} does not exist or is not a folder: "
                              "create it or point the deployment's `landing` at the right one")
    ready, waiting = settled([f for f in expand_paths([str(folder)]) if f.is_file()], settle_seconds(settle_s))
    held = [(shown_path(f), why) for f, why in waiting]
    for path, why in held:
        log.info("%s: %s", path, why)
    reports = ingest_batch([str(f) for f in ready], db, IngestOptions(), log=log.info, warn=log.warning,
                           per_file=ingest_file_task) if ready else []
    lost, line = landing_summary(reports, held)
    if lost:
        return Failed(message=f"{line}: " + "; ".join(lost), data=reports)
    log.info(line)
    return Completed(message=line, data=reports)
