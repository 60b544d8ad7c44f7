"""Stage one log file for the warehouse: parse, validate and pseudonymise it into Parquet parts.

Staging never touches the warehouse, so a long file is parsed while queries and other loads go on;
`warehouse.ingest.commit_staged` then appends the parts in one short transaction. Parsing and
data checks run a couple of chunks ahead in a thread (polars releases the GIL) and every chunk's
lines are counted here, so the commit can reconcile them.
"""

from __future__ import annotations

import queue
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from metapilot.transforms.canonical import ParseResult
from metapilot.transforms.lines import CHUNK_BYTES, read_head
from metapilot.transforms.parsers import ParseOptions, iter_parse
from metapilot.transforms.privacy import LineRedactor, NameCache, pseudonymise
from metapilot.transforms.data_checks import check_jobs

from metapilot.ground.files import sha256_file, shown_path


@dataclass
class IngestOptions:
    cluster: str | None = None
    fmt: str = "auto"
    timezone: str = "UTC"
    delimiter: str | None = None
    fields: list[str] | None = None
    keep_names: bool = False
    chunk_bytes: int = CHUNK_BYTES
    encoding: str | None = None  # text encoding of the logs (None: UTF-8); e.g. latin-1 for older sites' logs
    new_key: bool = False  # accept a site key other than the recorded one (recorded as a key change)
    key_file: str | None = None  # where the key came from, for the record and the messages
    # `ingest --cluster`: a log naming another cluster (sacct's Cluster column) is refused, naming
    # both, rather than loaded under its own name while the option is silently ignored (issue 54)
    cluster_must_match: bool = False
    mem_unit: str = "kb"  # the unit of SWF's memory fields (transforms.swf.MEM_UNITS_KB)


class ClusterMismatchError(ValueError):
    """--cluster names one cluster and the log's own cluster column another."""


def check_log_cluster(jobs: pl.DataFrame, given: str | None, fmt: str | None) -> None:
    """Refuse a chunk whose rows name clusters other than the one given on the command line:
    a log that names its cluster keeps that name (the load's identity), so say both and what to do."""
    if given is None or not jobs.height:
        return
    other = sorted(set(jobs["cluster"].drop_nulls().unique().to_list()) - {given})
    if other:
        named = ", ".join(other)
        raise ClusterMismatchError(
            f"the log names its cluster {named} (its {fmt or 'sacct'} cluster field) but --cluster says {given}: a log "
            f"that names its cluster is loaded under that name; drop --cluster (or give --cluster {other[0]}) to load "
            f"it as {named}, or export it again with the name you want in its Cluster column")



_YEAR_SUFFIX = re.compile(r"^(.*?)[-_](?:19|20)\d\d\b")


def default_cluster_name(path: Path) -> str:
    """A cluster name from a file name when neither the log nor --cluster gives one.

    `KTH-SP2-1996-2.1-cln.swf.gz` -> `KTH-SP2`; `pozidriv.log.gz` -> `pozidriv`.
    """
    stem = path.name.split(".")[0]
    m = _YEAR_SUFFIX.match(path.name)
    return m.group(1) if m else stem


def _quarantine_frame(q: pl.DataFrame, sha: str, path: str, now: datetime) -> pl.DataFrame:
    return q.select(
        pl.lit(sha).alias("file_sha256"),
        pl.lit(path).alias("path"),
        pl.col("line_no"),
        pl.col("raw"),
        pl.col("reason"),
        pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("quarantined_at"),
    )


@dataclass
class StageTotals:
    """What staging counted and kept for the commit: line counts, key hashes, capacity, data checks."""

    lines_read: int = 0
    merged: int = 0
    skipped: int = 0
    quarantined: int = 0
    rows_staged: int = 0
    lines_with_rows: int = 0  # distinct source lines among staged rows (a line never spans chunks)
    format: str | None = None
    warnings: list[str] = field(default_factory=list)
    capacity: list[dict] = field(default_factory=list)
    data_checks: list[dict] = field(default_factory=list)
    last_line: int = 0
    key_hashes: list[pl.Series] = field(default_factory=list)
    first_submit: datetime | None = None
    last_submit: datetime | None = None
    clusters: set[str] = field(default_factory=set)
    quarantine_parts: int = 0



@dataclass
class _Prepared:
    """One chunk ready to append: validated, pseudonymised rows and everything to quarantine."""

    res: ParseResult
    rows: pl.DataFrame | None
    quarantine: pl.DataFrame
    data_checks: dict
    last_line: int


def _prepare(res: ParseResult, raw_lines: pl.DataFrame | None, sha: str, now: datetime, key: bytes,
             opts: IngestOptions, name_cache: dict, redact=None) -> _Prepared:
    """Validate and pseudonymise one parsed chunk, quarantined lines included (no warehouse
    access: runs ahead in a thread)."""
    outcome = check_jobs(res.jobs, now=now)  # times after the ingest time (plus a margin) are refused
    jobs = res.jobs
    q = res.quarantine
    if outcome.failed.height:
        bad_lines = outcome.failed.group_by("source_line", maintain_order=True).agg(pl.col("reason").unique().str.join("; "))
        jobs = jobs.join(bad_lines.select("source_line"), on="source_line", how="anti")
        if raw_lines is not None:
            bad = bad_lines.join(raw_lines.rename({"line_no": "source_line", "line": "raw"}), on="source_line", how="left")
        else:
            bad = bad_lines.with_columns(pl.lit(None, dtype=pl.Utf8).alias("raw"))
        q = pl.concat([q, bad.select(pl.col("source_line").alias("line_no"), "raw", "reason")], how="vertical_relaxed")
    if opts.cluster_must_match:
        check_log_cluster(jobs, opts.cluster, jobs["source_format"][0] if jobs.height else None)
    if redact is not None and q.height:
        q = redact(q)
    rows = None
    if jobs.height:
        # source_file_id, ingested_at: added by the commit. The cluster is the log's own where it names
        # one (sacct's Cluster field): --cluster only names logs that carry none (ParseOptions.cluster)
        rows = pseudonymise(jobs, key, opts.keep_names, name_cache)
    last = int(raw_lines["line_no"][-1]) if raw_lines is not None and raw_lines.height else 0
    return _Prepared(res, rows, q, outcome.summary, last)


def _append(p: _Prepared, sha: str, path: str, now: datetime, tot: StageTotals, stage: Path) -> None:
    """Stage one prepared chunk's rows and quarantine rows (Parquet parts). Staging keeps memory
    bounded and the warehouse free while a file is parsed: one INSERT from the staged parts in the
    commit writes row groups straight to disk."""
    res, rows, q = p.res, p.rows, p.quarantine
    tot.data_checks.append(p.data_checks)
    if rows is not None:
        rows.write_parquet(stage / f"part-{len(tot.key_hashes):06d}.parquet", compression="lz4", statistics=False)
        tot.rows_staged += rows.height
        tot.lines_with_rows += rows["source_line"].n_unique()
        tot.key_hashes.append(rows.select(pl.struct("cluster", "job_id", "submit_time").hash(seed=0)).to_series())
        lo, hi = rows["submit_time"].min(), rows["submit_time"].max()
        tot.first_submit = lo if tot.first_submit is None else min(tot.first_submit, lo)
        tot.last_submit = hi if tot.last_submit is None else max(tot.last_submit, hi)
        tot.clusters.update(rows["cluster"].unique().to_list())
    if q.height:
        _quarantine_frame(q, sha, path, now).write_parquet(stage / f"quarantine-{tot.quarantine_parts:06d}.parquet",
                                                          compression="lz4", statistics=False)
        tot.quarantine_parts += 1
    tot.lines_read += res.lines_read
    tot.merged += res.merged
    tot.skipped += res.skipped
    tot.quarantined += q.height
    tot.warnings.extend(res.warnings)
    tot.capacity.extend(res.capacity)
    tot.last_line = max(tot.last_line, p.last_line)
    if res.jobs.height:
        tot.format = res.jobs["source_format"][0]


_DONE = object()


def _read_ahead(items: Iterator, depth: int = 2) -> Iterator:
    """Run a generator in a thread, `depth` items ahead: parsing and data checks (polars, which
    releases the GIL) overlap with DuckDB's appends. Exceptions re-raise in the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        try:
            for it in items:
                if stop.is_set():
                    return
                q.put(it)
            q.put(_DONE)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put(e)

    t = threading.Thread(target=work, name="ingest-read-ahead", daemon=True)
    t.start()
    try:
        while True:
            it = q.get()
            if it is _DONE:
                return
            if isinstance(it, BaseException):
                raise it
            yield it
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                t.join(0.05)



def _redactor(path: Path, popts: ParseOptions, opts: IngestOptions, key: bytes, cache: dict):
    """Quarantined lines with identity fields hashed (SPEC §8), unless names are kept; built on
    first use, once the format is known."""
    if opts.keep_names:
        return None
    made: list[LineRedactor] = []

    def redact(q: pl.DataFrame) -> pl.DataFrame:
        if not made:
            head = read_head(path) if popts.detected == "sacct" else None
            made.append(LineRedactor(popts.detected, key, cache, head, opts.delimiter, opts.fields))
        return made[0].frame(q)

    return redact


@dataclass
class StagedFile:
    """A file parsed, validated and pseudonymised into Parquet parts, not yet in the warehouse
    (or the error that stopped it, to be recorded by the commit)."""

    path: Path
    sha: str
    size: int
    opts: IngestOptions
    key: bytes
    now: datetime
    t0: float
    cluster_default: str
    tot: StageTotals
    detected: str | None
    stage_dir: tempfile.TemporaryDirectory
    error: BaseException | None = None

    @property
    def stage(self) -> Path:
        return Path(self.stage_dir.name)

    def cleanup(self) -> None:
        self.stage_dir.cleanup()


def identify_file(path: Path) -> tuple[str, int]:
    """(SHA-256, size): a file is known by its content."""
    return sha256_file(path), path.stat().st_size


def stage_file(path: Path, opts: IngestOptions, key: bytes, sha: str | None = None, size: int | None = None,
               t0: float | None = None) -> StagedFile:
    """Parse, validate and pseudonymise `path` into Parquet parts in a temporary folder, without
    the warehouse. An error is kept in the result (the commit records it); Ctrl-C is not."""
    t0 = time.perf_counter() if t0 is None else t0
    if sha is None or size is None:
        sha, size = identify_file(path)
    now = datetime.now(timezone.utc)
    cluster_default = opts.cluster or default_cluster_name(path)
    popts = ParseOptions(fmt=opts.fmt, cluster=cluster_default, timezone=opts.timezone,
                         delimiter=opts.delimiter, fields=opts.fields,
                         chunk_bytes=opts.chunk_bytes, encoding=opts.encoding, mem_unit=opts.mem_unit)
    tot = StageTotals()
    name_cache = NameCache()
    redact = _redactor(path, popts, opts, key, name_cache)
    st = StagedFile(path=path, sha=sha, size=size, opts=opts, key=key, now=now, t0=t0,
                    cluster_default=cluster_default, tot=tot, detected=None,
                    stage_dir=tempfile.TemporaryDirectory(prefix="metapilot-stage-"))
    prepared = (_prepare(res, raw, sha, now, key, opts, name_cache, redact) for res, raw in iter_parse(path, popts))
    try:
        for p in _read_ahead(prepared):
            _append(p, sha, shown_path(path), now, tot, st.stage)
    except (KeyboardInterrupt, SystemExit):
        st.cleanup()
        raise
    except BaseException as e:  # noqa: BLE001 - recorded as the file's failure by the commit
        st.error = e
    tot.format = tot.format or popts.detected
    st.detected = popts.detected
    return st
