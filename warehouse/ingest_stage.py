"""Stage one log file for the warehouse: parse, validate and pseudonymise it into Parquet parts.

Staging never touches the warehouse, so a long file is parsed while queries and other loads go on;
`warehouse.ingest.commit_staged` then appends the parts in one short transaction. Chunks are
parsed, checked and written in threads, a few at a time and ahead of the consumer (polars releases
the GIL), and every chunk's lines are counted here in file order, so the commit can reconcile them.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl
from metapilot.ground.ahead import map_ahead
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


def _quarantine_frame(q: pl.DataFrame, path: str, now: datetime) -> pl.DataFrame:
    """Quarantined lines as staged (the commit adds the file's SHA-256 and cluster)."""
    return q.select(
        pl.lit(path).alias("path"),
        pl.col("line_no"),
        pl.col("raw"),
        pl.col("reason"),
        pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("quarantined_at"),
    )


KEY_RANGES = 16
_KEY_EDGES = np.array([r << 60 for r in range(1, KEY_RANGES)], dtype=np.uint64)


@dataclass
class KeyPart:
    """One chunk's key hashes, sorted, in a file of the stage folder, and where each range of the
    hash space starts in it (`KEY_RANGES` + 1 offsets)."""

    path: Path
    cuts: np.ndarray

    @classmethod
    def write(cls, keys: np.ndarray, path: Path) -> KeyPart:
        keys = np.sort(keys)
        keys.tofile(path)
        return cls(path, np.concatenate(([0], np.searchsorted(keys, _KEY_EDGES), [len(keys)])))

    def read(self, r: int) -> np.ndarray:
        start, end = int(self.cuts[r]), int(self.cuts[r + 1])
        return np.fromfile(self.path, dtype=np.uint64, count=end - start, offset=start * 8)


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
    key_parts: list[KeyPart] = field(default_factory=list)  # per chunk, until `close` folds them into keys_repeat
    keys_repeat: bool = False  # two staged rows share a key hash: the commit must merge within the file
    first_submit: datetime | None = None
    last_submit: datetime | None = None
    clusters: set[str] = field(default_factory=set)
    quarantine_parts: int = 0

    def close(self) -> None:
        """Once every chunk is in: whether any key repeats within the file.

        Each chunk's hashes lie sorted in the stage folder, cut into `KEY_RANGES` ranges of the hash
        space; each range's pieces are read and sorted together, so equal keys meet while at most
        a sixteenth of the keys is in memory (issue 53: kept in memory, 8 bytes a row grew the
        staging's RSS with the file, 160 MB at 20M rows)."""
        parts, self.key_parts = self.key_parts, []
        for r in range(KEY_RANGES):
            keys = np.concatenate([part.read(r) for part in parts] or [np.empty(0, dtype=np.uint64)])
            keys.sort()
            if (keys[1:] == keys[:-1]).any():
                self.keys_repeat = True
                return


@dataclass
class _Prepared:
    """One chunk ready to append: validated, pseudonymised rows and everything to quarantine."""

    res: ParseResult
    rows: pl.DataFrame | None
    quarantine: pl.DataFrame
    data_checks: dict
    last_line: int


def _prepare(res: ParseResult, raw_lines: pl.DataFrame | None, sha: str, now: datetime, key: bytes,
             opts: IngestOptions, name_cache: dict, redact=None, names_lock: threading.Lock | None = None) -> _Prepared:
    """Validate and pseudonymise one parsed chunk, quarantined lines included (no warehouse
    access: runs ahead in a thread; `names_lock` guards the name cache that chunks share)."""
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
    with names_lock or nullcontext():
        if redact is not None and q.height:
            q = redact(q)
        rows = None
        if jobs.height:
            # source_file_id, ingested_at: added by the commit. The cluster is the log's own where it names
            # one (sacct's Cluster field): --cluster only names logs that carry none (ParseOptions.cluster)
            rows = pseudonymise(jobs, key, opts.keep_names, name_cache)
    last = int(raw_lines["line_no"][-1]) if raw_lines is not None and raw_lines.height else 0
    return _Prepared(res, rows, q, outcome.summary, last)


@dataclass
class _StagedChunk:
    """What one chunk left in the stage folder, for the file's totals (its frames are gone)."""

    lines_read: int
    merged: int
    skipped: int
    quarantined: int
    warnings: list[str]
    capacity: list[dict]
    data_checks: dict
    last_line: int
    format: str | None
    rows: int = 0
    lines_with_rows: int = 0
    key_part: KeyPart | None = None
    first_submit: datetime | None = None
    last_submit: datetime | None = None
    clusters: list[str] = field(default_factory=list)
    quarantine_part: bool = False


def _write(p: _Prepared, index: int, path: str, now: datetime, stage: Path) -> _StagedChunk:
    """Stage one prepared chunk's rows and quarantine rows as Parquet parts numbered by the chunk
    (so chunks may be written in any order) and say what they hold. Staging keeps memory bounded
    and the warehouse free while a file is parsed: one INSERT from the staged parts in the commit
    writes row groups straight to disk."""
    res, rows, q = p.res, p.rows, p.quarantine
    out = _StagedChunk(res.lines_read, res.merged, res.skipped, q.height, res.warnings, res.capacity, p.data_checks,
                       p.last_line, res.jobs["source_format"][0] if res.jobs.height else None)
    if rows is not None:
        rows.write_parquet(stage / f"part-{index:06d}.parquet", compression="lz4", statistics=False)
        out.rows, out.lines_with_rows = rows.height, rows["source_line"].n_unique()
        out.key_part = KeyPart.write(rows.select(pl.struct("cluster", "job_id", "submit_time").hash(seed=0)).to_series().to_numpy(),
                                     stage / f"keys-{index:06d}.u64")
        out.first_submit, out.last_submit = rows["submit_time"].min(), rows["submit_time"].max()
        out.clusters = rows["cluster"].unique().to_list()
    if q.height:
        _quarantine_frame(q, path, now).write_parquet(stage / f"quarantine-{index:06d}.parquet",
                                                          compression="lz4", statistics=False)
        out.quarantine_part = True
    return out


def _append(c: _StagedChunk, tot: StageTotals) -> None:
    """Add one staged chunk to the file's totals (in file order)."""
    tot.data_checks.append(c.data_checks)
    if c.rows:
        tot.rows_staged += c.rows
        tot.lines_with_rows += c.lines_with_rows
        tot.key_parts.append(c.key_part)
        tot.first_submit = c.first_submit if tot.first_submit is None else min(tot.first_submit, c.first_submit)
        tot.last_submit = c.last_submit if tot.last_submit is None else max(tot.last_submit, c.last_submit)
        tot.clusters.update(c.clusters)
    tot.quarantine_parts += c.quarantine_part
    tot.lines_read += c.lines_read
    tot.merged += c.merged
    tot.skipped += c.skipped
    tot.quarantined += c.quarantined
    tot.warnings.extend(c.warnings)
    tot.capacity.extend(c.capacity)
    tot.last_line = max(tot.last_line, c.last_line)
    if c.format:
        tot.format = c.format


STAGE_WORKERS = 2  # chunks parsed, and chunks checked and written, at once (polars releases the GIL)


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
               t0: float | None = None, stop: threading.Event | None = None) -> StagedFile:
    """Parse, validate and pseudonymise `path` into Parquet parts in a temporary folder, without
    the warehouse. An error is kept in the result (the commit records it); Ctrl-C is not.

    Without `size` the file is hashed first; with `size` and no `sha` the caller hashes it
    meanwhile and sets `StagedFile.sha` before the commit (`StageAhead`). `stop` set: staging
    ends at the next chunk (the caller throws the result away)."""
    t0 = time.perf_counter() if t0 is None else t0
    if size is None:
        sha, size = identify_file(path)
    now = datetime.now(timezone.utc)
    cluster_default = opts.cluster or default_cluster_name(path)
    popts = ParseOptions(fmt=opts.fmt, cluster=cluster_default, timezone=opts.timezone,
                         delimiter=opts.delimiter, fields=opts.fields,
                         chunk_bytes=opts.chunk_bytes, encoding=opts.encoding, mem_unit=opts.mem_unit,
                         workers=STAGE_WORKERS)
    tot = StageTotals()
    name_cache = NameCache()
    redact = _redactor(path, popts, opts, key, name_cache)
    st = StagedFile(path=path, sha=sha or "", size=size, opts=opts, key=key, now=now, t0=t0,
                    cluster_default=cluster_default, tot=tot, detected=None,
                    stage_dir=tempfile.TemporaryDirectory(prefix="metapilot-stage-"))
    lock, shown = threading.Lock(), shown_path(path)

    def stage_chunk(item: tuple[int, tuple[ParseResult, pl.DataFrame | None]]) -> _StagedChunk:
        i, (res, raw) = item
        return _write(_prepare(res, raw, sha, now, key, opts, name_cache, redact, lock), i, shown, now, st.stage)

    # chunks are parsed `STAGE_WORKERS` at a time, then checked, pseudonymised and written as
    # many at a time, a few chunks ahead of the totals kept here in file order
    parsed = enumerate(iter_parse(path, popts))
    try:
        for c in map_ahead(stage_chunk, parsed, STAGE_WORKERS, name="stage"):
            _append(c, tot)
            if stop is not None and stop.is_set():
                break
    except (KeyboardInterrupt, SystemExit):
        st.cleanup()
        raise
    except BaseException as e:  # noqa: BLE001 - recorded as the file's failure by the commit
        st.error = e
    tot.close()
    tot.format = tot.format or popts.detected
    st.detected = popts.detected
    return st


class StageAhead:
    """Staging started before the file's hash is known: hashing (one core, ~1 GB/s) runs beside
    the parse instead of before it. `take` waits for the staged file; `drop` stops it at its next
    chunk and removes what it wrote (the file was loaded before, or could not be read)."""

    def __init__(self, path: Path, opts: IngestOptions, key: bytes, size: int, t0: float) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="stage-ahead")
        self._future = self._pool.submit(stage_file, path, opts, key, None, size, t0, self._stop)
        self.taken = False

    def take(self, sha: str) -> StagedFile:
        st = self._future.result()
        self._pool.shutdown()
        self.taken = True
        st.sha = sha
        return st

    def drop(self) -> None:
        self._stop.set()
        try:
            self._future.result().cleanup()
        except BaseException:  # noqa: BLE001 - nothing of it is kept either way
            pass
        self._pool.shutdown()
