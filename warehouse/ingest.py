"""Load log files into the warehouse, one atomic transaction per file, every line accounted for.

For each file: hash it (a file already loaded is skipped), detect its format, stream it in chunks
through its parser and the validation suite, pseudonymise names, append rows and quarantine, merge
duplicate keys, then record the file in `ingest_files` and commit. Any error rolls the file back
and is reported with the line it happened at and what to do.
"""

from __future__ import annotations

import glob
import json
import queue
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl
from metapilot.transforms.canonical import ParseResult
from metapilot.transforms.parsers import ParseOptions, UnknownFormatError, iter_parse
from metapilot.transforms.privacy import pseudonymise
from metapilot.transforms.validation import validate_jobs

from metapilot.ground.files import sha256_file
from metapilot.ground.paths import sql_statements, sql_text


class IngestError(Exception):
    """A file could not be loaded; the warehouse is unchanged. The message says where and what to do."""


@dataclass
class IngestOptions:
    cluster: str | None = None
    fmt: str = "auto"
    timezone: str = "UTC"
    delimiter: str | None = None
    fields: list[str] | None = None
    keep_names: bool = False
    chunk_bytes: int = 8 * 1024 * 1024


@dataclass
class FileReport:
    path: str
    sha256: str
    bytes: int
    outcome: str  # loaded | skipped (already ingested) | failed
    format: str | None = None
    cluster: str | None = None
    lines_read: int = 0
    rows_loaded: int = 0
    jobs_written: int = 0
    rows_merged: int = 0
    rows_quarantined: int = 0
    lines_skipped: int = 0
    seconds: float = 0.0
    message: str | None = None
    warnings: list[str] = field(default_factory=list)
    validation: dict | None = None

    @property
    def reconciles(self) -> bool:
        return self.lines_read == self.rows_loaded + self.rows_merged + self.rows_quarantined + self.lines_skipped


def expand_paths(paths: list[str]) -> list[Path]:
    """Files, globs and directories (recursively, hidden files excluded), sorted, without repeats."""
    out: list[Path] = []
    for p in paths:
        matches = [Path(m) for m in sorted(glob.glob(p, recursive=True))] or [Path(p)]
        for m in matches:
            if m.is_dir():
                out.extend(sorted(f for f in m.rglob("*") if f.is_file() and not any(part.startswith(".") for part in f.relative_to(m).parts)))
            else:
                out.append(m)
    seen: set[Path] = set()
    unique = []
    for f in out:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(f)
    return unique



_YEAR_SUFFIX = re.compile(r"^(.*?)[-_](?:19|20)\d\d\b")


def default_cluster_name(path: Path) -> str:
    """A cluster name from a file name when neither the log nor --cluster gives one.

    `KTH-SP2-1996-2.1-cln.swf.gz` -> `KTH-SP2`; `pozidriv.log.gz` -> `pozidriv`.
    """
    stem = path.name.split(".")[0]
    m = _YEAR_SUFFIX.match(path.name)
    return m.group(1) if m else stem


def _insert_frame(con: duckdb.DuckDBPyConnection, table: str, df: pl.DataFrame) -> None:
    con.register("__frame", df.to_arrow())
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM __frame")
    finally:
        con.unregister("__frame")


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
class _Totals:
    lines_read: int = 0
    merged: int = 0
    skipped: int = 0
    quarantined: int = 0
    rows_staged: int = 0
    lines_with_rows: int = 0  # distinct source lines among staged rows (a line never spans chunks)
    format: str | None = None
    warnings: list[str] = field(default_factory=list)
    capacity: list[dict] = field(default_factory=list)
    validation: list[dict] = field(default_factory=list)
    last_line: int = 0
    key_hashes: list[pl.Series] = field(default_factory=list)
    first_submit: datetime | None = None
    last_submit: datetime | None = None
    clusters: set[str] = field(default_factory=set)


@dataclass
class _Prepared:
    """One chunk ready to append: validated, pseudonymised rows and everything to quarantine."""

    res: ParseResult
    rows: pl.DataFrame | None
    quarantine: pl.DataFrame
    validation: dict
    last_line: int


def _prepare(res: ParseResult, raw_lines: pl.DataFrame | None, sha: str, now: datetime, key: bytes,
             opts: IngestOptions, name_cache: dict) -> _Prepared:
    """Validate and pseudonymise one parsed chunk (no warehouse access: runs ahead in a thread)."""
    outcome = validate_jobs(res.jobs)
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
    rows = None
    if jobs.height:
        rows = pseudonymise(jobs, key, opts.keep_names, name_cache).with_columns(
            pl.lit(sha).alias("source_file_id"),
            pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("ingested_at"),
        )
        if opts.cluster:
            rows = rows.with_columns(pl.lit(opts.cluster).alias("cluster"))
    last = int(raw_lines["line_no"][-1]) if raw_lines is not None and raw_lines.height else 0
    return _Prepared(res, rows, q, outcome.summary, last)


def _append(con: duckdb.DuckDBPyConnection, p: _Prepared, sha: str, path: str, now: datetime, tot: _Totals,
            stage: Path) -> None:
    """Stage one prepared chunk's rows (a Parquet part) and append its quarantine rows (inside the
    file's transaction). Staging keeps memory bounded: DuckDB holds uncommitted small appends in
    memory, while one INSERT from the staged parts at the end writes row groups straight to disk."""
    res, rows, q = p.res, p.rows, p.quarantine
    tot.validation.append(p.validation)
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
        _insert_frame(con, "quarantine", _quarantine_frame(q, sha, path, now))
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
    """Run a generator in a thread, `depth` items ahead: parsing and validation (polars, which
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


def _needs_dedupe(con: duckdb.DuckDBPyConnection, sha: str, tot: _Totals) -> bool:
    """Whether any key may repeat: within the file (equal key hashes) or against rows already in
    the warehouse for the same clusters and submit range. Skipping the merge when nothing can
    repeat keeps a first load of millions of rows in bounded memory."""
    if not tot.key_hashes:
        return False
    hashes = pl.concat(tot.key_hashes)
    if hashes.n_unique() != hashes.len():
        return True
    n = con.execute(
        "SELECT count(*) FROM jobs WHERE source_file_id <> ? AND cluster IN (SELECT unnest(?)) "
        "AND submit_time BETWEEN ? AND ?", [sha, sorted(tot.clusters), tot.first_submit, tot.last_submit]).fetchall()[0][0]
    return n > 0


def _merge_validation(parts: list[dict]) -> dict:
    """One suite result for the file from the per-chunk results."""
    if not parts:
        return {"suite_name": "metapilot_jobs", "success": True, "evaluated": 0, "failed_rows": 0, "results": []}
    by_name: dict[tuple, dict] = {}
    for p in parts:
        for r in p.get("results", []):
            k = (r.get("expectation"), json.dumps(r.get("column"), default=str))
            cur = by_name.setdefault(k, {**r, "unexpected_count": 0, "success": True})
            cur["unexpected_count"] += int(r.get("unexpected_count") or 0)
            cur["success"] = cur["success"] and bool(r.get("success"))
    return {
        "suite_name": parts[0].get("suite_name", "metapilot_jobs"),
        "success": all(p.get("success", True) for p in parts),
        "evaluated": sum(int(p.get("evaluated", 0)) for p in parts),
        "failed_rows": sum(int(p.get("failed_rows", 0)) for p in parts),
        "results": list(by_name.values()),
    }


def _store_capacity(con: duckdb.DuckDBPyConnection, cluster: str, rows: list[dict], valid_from: datetime | None) -> None:
    """Capacity that came with the file (an SWF header), dated from its first job unless it says."""
    if not rows or valid_from is None:
        return
    for r in rows:
        con.execute(
            "INSERT OR REPLACE INTO capacity (cluster, partition, valid_from, nodes, cores, gpus, mem_mib, source, note) VALUES (?,?,?,?,?,?,?,?,?)",
            [cluster, r.get("partition") or "*", r.get("valid_from") or valid_from, r.get("nodes"), r["cores"],
             r.get("gpus") or 0, r.get("mem_mib"), r.get("source", "swf-header"), r.get("note")],
        )


def infer_missing_capacity(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Give every cluster without capacity rows one inferred from its peak allocation; return warnings."""
    warnings = []
    clusters = [r[0] for r in con.execute(
        "SELECT DISTINCT cluster FROM jobs WHERE cluster NOT IN (SELECT cluster FROM capacity) ORDER BY 1").fetchall()]
    q = sql_text("ingest/infer_peak_capacity.sql")
    for c in clusters:
        nodes, cores, gpus, mem, valid_from = con.execute(q, [c]).fetchall()[0]
        if not cores or valid_from is None:
            continue
        con.execute(
            "INSERT OR REPLACE INTO capacity VALUES (?, '*', ?, ?, ?, ?, ?, 'inferred-peak', ?)",
            [c, valid_from, nodes, cores, gpus or 0, mem,
             "no cluster config or SWF header: capacity is the peak concurrent allocation seen in the logs"],
        )
        warnings.append(f"cluster {c}: capacity inferred from peak concurrent allocation ({cores} cores, {gpus or 0} GPUs); "
                        "give the real figures in warehouse/clusters.toml (metapilot capacity --config FILE)")
    return warnings


def ingest_file(con: duckdb.DuckDBPyConnection, path: Path, opts: IngestOptions, key: bytes) -> FileReport:
    """Load one file atomically. Returns its report; a failure leaves the warehouse as it was."""
    t0 = time.perf_counter()
    sha = sha256_file(path)
    size = path.stat().st_size
    rep = FileReport(path=str(path), sha256=sha, bytes=size, outcome="loaded")
    found = con.execute("SELECT outcome, cluster, format FROM ingest_files WHERE sha256 = ?", [sha]).fetchall()
    prior = found[0] if found else None
    if prior is not None and prior[0] == "loaded":
        rep.outcome, rep.cluster, rep.format = "skipped", prior[1], prior[2]
        rep.message = "already ingested (same SHA-256): nothing to do"
        return rep
    now = datetime.now(timezone.utc)
    cluster_default = opts.cluster or default_cluster_name(path)
    popts = ParseOptions(fmt=opts.fmt, cluster=cluster_default, timezone=opts.timezone,
                         delimiter=opts.delimiter, fields=opts.fields,
                         chunk_bytes=opts.chunk_bytes)
    tot = _Totals()
    name_cache: dict = {}
    prepared = (_prepare(res, raw, sha, now, key, opts, name_cache) for res, raw in iter_parse(path, popts))
    con.execute("SET preserve_insertion_order = false")  # lets DuckDB append in parallel
    stage_dir = tempfile.TemporaryDirectory(prefix="metapilot-stage-")
    stage = Path(stage_dir.name)
    con.execute("BEGIN TRANSACTION")
    try:
        for p in _read_ahead(prepared):
            _append(con, p, sha, str(path), now, tot, stage)
        if tot.key_hashes:
            con.execute("INSERT INTO jobs BY NAME SELECT * FROM read_parquet(?)", [str(stage / "part-*.parquet")])
        tot.format = tot.format or popts.detected
        if _needs_dedupe(con, sha, tot):
            for stmt in sql_statements("ingest/dedupe_jobs.sql"):
                con.execute(stmt, [sha])
            jobs_written, rows_loaded, clusters = con.execute(
                "SELECT count(*), count(DISTINCT source_line), list(DISTINCT cluster) FROM jobs WHERE source_file_id = ?",
                [sha]).fetchall()[0]
        else:
            jobs_written, rows_loaded, clusters = tot.rows_staged, tot.lines_with_rows, sorted(tot.clusters)
        rep.format, rep.lines_read, rep.lines_skipped = tot.format, tot.lines_read, tot.skipped
        rep.rows_quarantined, rep.jobs_written, rep.rows_loaded = tot.quarantined, jobs_written, rows_loaded
        lines_with_rows = tot.lines_read - tot.merged - tot.quarantined - tot.skipped
        rep.rows_merged = tot.merged + (lines_with_rows - rows_loaded)
        rep.cluster = ",".join(sorted(clusters or [])) or cluster_default
        if not rep.reconciles:
            raise IngestError(f"{path}: line counts do not reconcile ({rep.lines_read} read != {rep.rows_loaded} loaded + "
                              f"{rep.rows_merged} merged + {rep.rows_quarantined} quarantined + {rep.lines_skipped} skipped); "
                              "this is a MetaPilot bug: please report it with the file")
        for c in clusters or []:
            _store_capacity(con, c, tot.capacity, tot.first_submit)
        rep.validation = _merge_validation(tot.validation)
        rep.warnings = tot.warnings
        rep.seconds = time.perf_counter() - t0
        con.execute(
            "INSERT OR REPLACE INTO ingest_files VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [sha, str(path), size, rep.format, rep.cluster, rep.lines_read, rep.rows_loaded, rep.jobs_written,
             rep.rows_merged, rep.rows_quarantined, rep.lines_skipped, now, datetime.now(timezone.utc), "loaded",
             "; ".join(rep.warnings) or None],
        )
        v = rep.validation
        con.execute("INSERT INTO validation_runs VALUES (?,?,?,?,?,?,?,?)",
                    [str(uuid.uuid4()), sha, v["suite_name"], v["success"], v["evaluated"], v["failed_rows"],
                     json.dumps(v["results"], default=str), datetime.now(timezone.utc)])
        con.execute("COMMIT")
        con.execute("RESET preserve_insertion_order")
        stage_dir.cleanup()
    except BaseException as e:
        con.execute("ROLLBACK")
        con.execute("RESET preserve_insertion_order")
        stage_dir.cleanup()
        rep.outcome = "failed"
        rep.seconds = time.perf_counter() - t0
        rep.message = _explain(e, path, tot.last_line)
        con.execute(
            "INSERT OR REPLACE INTO ingest_files (sha256, path, bytes, format, cluster, started_at, finished_at, outcome, message) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            [sha, str(path), size, tot.format, cluster_default, now, datetime.now(timezone.utc), "failed", rep.message])
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
    return rep


def _explain(e: BaseException, path: Path, last_line: int) -> str:
    """The error a user sees: which file, where, why, and what to do."""
    where = f" after line {last_line}" if last_line else ""
    if isinstance(e, UnknownFormatError):
        return f"{path}: {e}"
    if isinstance(e, EOFError):
        return (f"{path}: the compressed file ends unexpectedly{where} (truncated download or copy?): "
                "nothing was loaded from it; copy the file again and re-run ingest")
    if isinstance(e, (OSError, IngestError)):
        return f"{path}: {e}{where}: nothing was loaded from this file; fix the cause and re-run ingest"
    return (f"{path}: {type(e).__name__}: {e}{where}: nothing was loaded from this file; "
            "re-run ingest after fixing the cause, or report it as a MetaPilot bug with the file")


def ingest_paths(con: duckdb.DuckDBPyConnection, paths: list[str], opts: IngestOptions, key: bytes) -> Iterator[FileReport]:
    """Ingest every file named by `paths`, one transaction each, yielding each report as it is done."""
    for f in expand_paths(paths):
        if not f.exists():
            yield FileReport(path=str(f), sha256="", bytes=0, outcome="failed",
                             message=f"{f}: no such file or directory: check the path or glob")
            continue
        yield ingest_file(con, f, opts, key)
