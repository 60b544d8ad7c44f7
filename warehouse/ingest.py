"""Load log files into the warehouse, one atomic transaction per file, every line accounted for.

For each file: hash it (a file already loaded, for the same cluster when its lines name none, is
skipped: `warehouse.ingest_log.earlier_load`), stage it (`warehouse.ingest_stage`:
parsed, validated and pseudonymised into Parquet parts without touching the warehouse), then, in
one short transaction, check the site key, append, merge duplicate keys, check that the line
counts reconcile, record the file in `ingest_files` and commit. Any error rolls the file back and
is reported with the line it happened at and what to do. `ingest_file_to` holds the database only
for that commit (under the writer lock), so queries keep answering while a long file is parsed.
"""

from __future__ import annotations

import glob
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb
from metapilot.transforms.parsers import UnknownFormatError

from metapilot.ground.files import shown_path
from metapilot.ground.paths import db_path, sql_text
from metapilot.warehouse.capacity import upsert_capacity
from metapilot.warehouse.db import connect, has_column, writer_lock, writer_wait_s
from metapilot.warehouse.ingest_log import (
    PriorLoad,
    dedupe_file,
    earlier_load,
    forget_file,
    forget_load,
    load_scope,
    refused_loads,
    seen_at,
    top_reasons,
    record_failed,
    record_loaded,
    record_data_check,
    undecodable_lines,
)
from metapilot.warehouse.ingest_stage import (
    ClusterMismatchError,
    IngestOptions,
    StageAhead,
    StagedFile,
    StageTotals,
    default_cluster_name,
    identify_file,
    stage_file,
)
from metapilot.warehouse.oversize import oversize_warnings
from metapilot.warehouse.placement_ingest import load_placement_file, placement_format
from metapilot.warehouse.secret import SiteKeyError, check_and_record_key

__all__ = ["FileReport", "IngestError", "IngestOptions", "NothingToIngestError", "commit_staged", "default_cluster_name",
           "describe", "expand_paths", "forget_loads", "expand_paths_checked", "infer_missing_capacity", "ingest_batch", "ingest_file",
           "ingest_file_to", "ingest_paths", "stage_file"]


class IngestError(Exception):
    """A file could not be loaded; the warehouse is unchanged. The message says where and what to do."""


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
    data_checks: dict | None = None

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


class NothingToIngestError(ValueError):
    """No path named on the command line gives a file to load."""


def expand_paths_checked(paths: list[str]) -> tuple[list[Path], list[FileReport]]:
    """`expand_paths`, saying which arguments give no file: (files, a failed report per such
    argument). Raises NothingToIngestError when no argument gives any file."""
    files: list[Path] = []
    empty: list[FileReport] = []
    for p in paths:
        found = [f for f in expand_paths([p]) if f.exists()]
        if found:
            files.extend(found)
            continue
        if Path(p).is_dir():
            why = f"{shown_path(p)}: the directory holds no log files (hidden files are ignored)"
        elif glob.has_magic(p):
            why = f"{shown_path(p)}: the pattern matches no files: check it (quote it so the shell leaves it to MetaPilot)"
        else:
            why = f"{shown_path(p)}: no such file or directory: check the path"
        empty.append(FileReport(path=shown_path(p), sha256="", bytes=0, outcome="failed", message=why))
    if not files:
        raise NothingToIngestError("nothing to ingest: " + "; ".join(r.message or r.path for r in empty))
    seen: set[Path] = set()
    unique = [f for f in files if not (f.resolve() in seen or seen.add(f.resolve()))]
    return unique, empty


def _needs_dedupe(con: duckdb.DuckDBPyConnection, sha: str, tot: StageTotals) -> bool:
    """Whether any key may repeat: within the file (equal key hashes, `StageTotals.close`) or
    against rows already in the warehouse for the same clusters and submit range. Skipping the
    merge when nothing can repeat keeps a first load of millions of rows in bounded memory."""
    if not tot.rows_staged:
        return False
    if tot.keys_repeat:
        return True
    n = con.execute(sql_text("ingest/stored_rows_in_range.sql"),
                    [sha, sorted(tot.clusters), tot.first_submit, tot.last_submit]).fetchall()[0][0]
    return n > 0


def _merge_data_checks(parts: list[dict]) -> dict:
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
        "gx_rows": sum(int(p.get("gx_rows", 0)) for p in parts),  # rows GX itself looked at (0: GX never ran)
        "results": list(by_name.values()),
    }


def _store_capacity(con: duckdb.DuckDBPyConnection, cluster: str, rows: list[dict], valid_from: datetime | None) -> None:
    """Capacity that came with the file (an SWF header), dated from its first job unless it says."""
    if not rows or valid_from is None:
        return
    for r in rows:
        upsert_capacity(con, {"cluster": cluster, "partition": r.get("partition") or "*",
                              "valid_from": r.get("valid_from") or valid_from, "nodes": r.get("nodes"), "cores": r["cores"],
                              "gpus": r.get("gpus") or 0, "mem_mib": r.get("mem_mib"),
                              "source": r.get("source", "swf-header"), "note": r.get("note")})


def infer_missing_capacity(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Give every cluster without a configured or SWF-header capacity one inferred from its peak
    allocation, computed again over all its jobs each time (a log ingested in parts, hourly
    `collect`: the first part's peak must not freeze it); return a warning per capacity written."""
    from metapilot.warehouse.capacity import forget_inferred

    warnings = []
    clusters = [r[0] for r in con.execute(sql_text("ingest/clusters_to_infer.sql")).fetchall()]
    q = sql_text("ingest/infer_peak_capacity.sql")
    for c in clusters:
        nodes, cores, gpus, mem, valid_from = con.execute(q, [c]).fetchall()[0]
        if not cores or valid_from is None:
            continue
        before = con.execute(sql_text("ingest/inferred_capacity.sql"), [c]).fetchall()
        if before == [(nodes, cores, gpus or 0, mem, valid_from)]:
            continue  # unchanged: nothing to write or say
        forget_inferred(con, c)
        upsert_capacity(con, {"cluster": c, "partition": "*", "valid_from": valid_from, "nodes": nodes, "cores": cores,
                              "gpus": gpus or 0, "mem_mib": mem, "source": "inferred-peak",
                              "note": "no cluster config or SWF header: capacity is the peak concurrent allocation seen in the logs"})
        was = f" (was {before[-1][1]} cores)" if before else ""
        warnings.append(f"cluster {c}: capacity inferred from peak concurrent allocation ({cores} cores, {gpus or 0} GPUs){was}; "
                        "give the real figures in warehouse/clusters.toml (metapilot capacity --config FILE)"
                        + _memory_unit_hint(mem, cores))
    return warnings


MIB_PER_CORE_PLAUSIBLE = 256 * 1024  # no cluster has more memory per core: beyond it, a unit is wrong


def _memory_unit_hint(mem_mib: float | None, cores: int) -> str:
    """What to say when the memory inferred per core is more than any machine has (issue 54: an
    SWF log whose memory fields hold bytes, read as KB, asks 1,024 times too much)."""
    if not mem_mib or not cores or mem_mib / cores <= MIB_PER_CORE_PLAUSIBLE:
        return ""
    from metapilot.ground.units import fmt_mib

    return (f"; its memory, {fmt_mib(mem_mib)} ({fmt_mib(mem_mib / cores)} per core), is more than any cluster has: "
            "if the log's memory is in bytes (SWF's unit is KB), `metapilot forget` it and ingest it again with "
            "--mem-unit b")


def _skipped(rep: FileReport, prior: PriorLoad) -> FileReport:
    """The report of a file loaded before: it names the cluster that load went to, and how to load
    it again with other options (--format, --fields, --timezone, ... are not part of its identity)."""
    rep.outcome, rep.cluster, rep.format = "skipped", prior.cluster, prior.format
    again = (f"to load it again with other options (--format, --fields, --timezone, ...), first "
             f"`metapilot forget {rep.path}` (or --file-id {rep.sha256[:12]}), then ingest it")
    if load_scope(prior.format, prior.cluster) is None:
        rep.message = (f"already ingested (same SHA-256) as {prior.format} into cluster {prior.cluster}, whose name "
                       f"the log gives (--cluster does not rename it): nothing to do; {again}")
    else:
        rep.message = (f"already ingested as {prior.format} for cluster {prior.cluster} (same SHA-256): nothing to do; "
                       f"--cluster NAME loads it for another cluster; {again}")
    return rep


def _reload_of(con: duckdb.DuckDBPyConnection, sha: str, opts: IngestOptions, prior: PriorLoad | None,
               exact: bool = True) -> bool:
    """Whether the earlier load `prior` is to be replaced (`reload_allowed`). `exact=False` (a
    look through a read-only connection at an older warehouse, whose quarantine has no cluster yet)
    counts any load of the content; the commit then decides exactly."""
    if prior is None:
        return False
    scope = load_scope(prior.format, prior.cluster) if exact else None
    return reload_allowed(con, sha, opts, scope)


# DuckDB's memory while it loads a staged file (issue 14: peak RSS < 1 GiB; issue 53: 256 MiB, as fast
# as 512 for the load, which streams, and the command's peak RSS stays under 1 GiB at 20M lines)
COMMIT_MEMORY_BYTES = 256 * 1024**2
_UNITS = {"bytes": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
          "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}


def _cap_memory(con: duckdb.DuckDBPyConnection, limit: int = COMMIT_MEMORY_BYTES) -> str | None:
    """Lower DuckDB's memory limit to `limit` for a load (it spills, or writes row groups out,
    instead of growing to its default of 80% of RAM); returns the setting to restore, or None when
    the limit in force is already lower (a user's)."""
    current = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    m = re.match(r"^\s*([\d.]+)\s*([A-Za-z]+)\s*$", str(current))
    if m and m.group(2).lower() in _UNITS and float(m.group(1)) * _UNITS[m.group(2).lower()] <= limit:
        return None
    con.execute(f"SET memory_limit = '{limit // 1024**2}MiB'")
    return str(current)


def commit_staged(con: duckdb.DuckDBPyConnection, st: StagedFile) -> FileReport:
    """Load a staged file in one transaction: skipped if another run loaded it meanwhile; refused
    (SiteKeyError) if the key is not the warehouse's; a failure rolls back and is recorded."""
    path, sha, size, now, tot = st.path, st.sha, st.size, st.now, st.tot
    rep = FileReport(path=shown_path(path), sha256=sha, bytes=size, outcome="loaded")
    con.execute("SET preserve_insertion_order = false")  # lets DuckDB append in parallel
    memory_before = _cap_memory(con)
    con.execute("BEGIN TRANSACTION")
    try:
        prior = earlier_load(con, sha, st.cluster_default)
        reload = _reload_of(con, sha, st.opts, prior)
        if prior is not None and not reload:
            con.execute("ROLLBACK")
            return _skipped(rep, prior)
        check_and_record_key(con, st.key, st.opts.new_key, st.opts.key_file)
        if reload:
            forget_file(con, sha, load_scope(prior.format, prior.cluster))
        for refused in refused_loads(con, sha, st.cluster_default):  # an earlier try that loaded nothing
            forget_load(con, sha, refused.cluster, refused.format, refused.outcome, shown_path(path))
        if st.error is not None:
            raise st.error
        if tot.rows_staged:
            con.execute(sql_text("ingest/append_staged_jobs.sql"), [sha, now, str(st.stage / "part-*.parquet")])
        scope = load_scope(tot.format, st.cluster_default)
        if _needs_dedupe(con, sha, tot):
            jobs_written, rows_loaded, clusters = dedupe_file(con, sha, scope)
        else:
            jobs_written, rows_loaded, clusters = tot.rows_staged, tot.lines_with_rows, sorted(tot.clusters)
        rep.format, rep.lines_read, rep.lines_skipped = tot.format, tot.lines_read, tot.skipped
        rep.rows_quarantined, rep.jobs_written, rep.rows_loaded = tot.quarantined, jobs_written, rows_loaded
        lines_with_rows = tot.lines_read - tot.merged - tot.quarantined - tot.skipped
        rep.rows_merged = tot.merged + (lines_with_rows - rows_loaded)
        rep.cluster = ",".join(sorted(clusters or [])) or st.cluster_default
        if tot.quarantine_parts:
            con.execute(sql_text("ingest/append_staged_quarantine.sql"),
                        [str(st.stage / "quarantine-*.parquet"), rep.cluster, sha])
        if not rep.reconciles:
            raise IngestError(f"{path}: line counts do not reconcile ({rep.lines_read} read != {rep.rows_loaded} loaded + "
                              f"{rep.rows_merged} merged + {rep.rows_quarantined} quarantined + {rep.lines_skipped} skipped); "
                              "this is a MetaPilot bug: please report it with the file")
        for c in clusters or []:
            _store_capacity(con, c, tot.capacity, tot.first_submit)
        rep.data_checks = _merge_data_checks(tot.data_checks)
        rep.warnings = tot.warnings + quarantine_warnings(con, rep, st.opts)
        rep.seconds = time.perf_counter() - st.t0
        if rep.rows_loaded == 0 and rep.rows_merged == 0 and rep.rows_quarantined > 0:
            rep.outcome = "quarantined"  # nothing loaded: kept in quarantine, and no block on a reload
            rep.message = _nothing_loaded(con, rep)
        record_loaded(con, rep, now, outcome=rep.outcome)
        v = rep.data_checks
        record_data_check(con, sha, rep.cluster, v["suite_name"], v["success"], v["evaluated"], v["failed_rows"], v["results"])
        con.execute("COMMIT")
    except SiteKeyError:
        con.execute("ROLLBACK")
        raise
    except BaseException as e:
        con.execute("ROLLBACK")
        if _interrupted(e):  # Ctrl-C: rolled back, nothing recorded (the next run loads the file), the command stops
            raise KeyboardInterrupt(f"{rep.path}: interrupted during its load; nothing of it was kept") from None
        rep.outcome = "failed"
        rep.seconds = time.perf_counter() - st.t0
        rep.message = _explain(e, path, tot.last_line)
        record_failed(con, rep, tot.format, st.cluster_default, now)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
    finally:
        con.execute("RESET preserve_insertion_order")
        if memory_before is not None:
            con.execute(f"SET memory_limit = '{memory_before}'")
        st.cleanup()
    return rep


def _interrupted(e: BaseException) -> bool:
    """Whether an error is Ctrl-C: Python's, or DuckDB's "query interrupted" when SIGINT lands
    inside a statement."""
    if isinstance(e, KeyboardInterrupt) or isinstance(e, getattr(duckdb, "InterruptException", ())):
        return True
    return isinstance(e, RuntimeError) and "interrupted" in str(e).lower()


def _nothing_loaded(con: duckdb.DuckDBPyConnection, rep: FileReport) -> str:
    """Why a file of which every line was quarantined loaded nothing, and what to do."""
    reasons = "; ".join(f"{n:,} x {r}" for r, n in top_reasons(con, rep.sha256, rep.cluster or ""))
    return (f"{rep.path}: nothing loaded: all {rep.rows_quarantined:,} lines with data were quarantined as {rep.format} "
            f"({reasons}); check --format, --fields, --delimiter or --timezone and ingest it again "
            "(this attempt blocks no reload, and its quarantined lines are replaced then)")


def forget_loads(db: str | Path | None, file_ids: list[str], cluster: str | None = None,
                 log: Callable[[str], None] | None = None) -> list:
    """Undo loads (`metapilot forget`): for each file id (SHA-256, or a unique start of one), its
    jobs, quarantined lines, data checks, node rows and `ingest_files` record, in one transaction;
    then the capacity its clusters derived from logs is computed again (dropped for a cluster left
    with no jobs; a configured capacity stays). `cluster`: only the load for that cluster. Returns
    the `ForgottenLoad`s; LookupError names an id that matches no load, or several files."""
    from metapilot.warehouse.capacity import forget_derived
    from metapilot.warehouse.ingest_log import loads_of_file

    if not db_path(db).exists():
        raise FileNotFoundError(f"no warehouse at {db_path(db)}: nothing to forget (check --db)")
    with writer_lock(db, log=log):
        con = connect(db, log=log)
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                done = []
                for fid in file_ids:
                    loads = loads_of_file(con, fid, cluster)
                    if len({r[0] for r in loads}) > 1:
                        raise LookupError(f"file id {fid} matches {len({r[0] for r in loads})} files: give more of its SHA-256")
                    if not loads:
                        where = f" for cluster {cluster}" if cluster else ""
                        raise LookupError(f"no load of file {fid}{where} in the warehouse: `metapilot sql \"SELECT sha256, "
                                          "cluster, path, outcome FROM ingest_files\"` lists them")
                    done.extend(forget_load(con, sha, c, fmt, outcome, path) for sha, c, fmt, outcome, path in loads)
                for c in sorted({c for f in done for c in f.clusters}):
                    forget_derived(con, c)
                infer_missing_capacity(con)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        finally:
            con.close()
    return done


def _unreadable(path: Path, e: OSError) -> FileReport:
    return FileReport(path=shown_path(path), sha256="", bytes=0, outcome="failed",
                      message=f"{shown_path(path)}: cannot read it ({e.strerror or e}): check the path and its permissions")


def ingest_file(con: duckdb.DuckDBPyConnection, path: Path, opts: IngestOptions, key: bytes) -> FileReport:
    """Load one file atomically over an open connection. Returns its report; a failure leaves
    the warehouse as it was; a key that is not the warehouse's raises SiteKeyError."""
    t0 = time.perf_counter()
    try:
        sha, size = identify_file(path)
    except OSError as e:
        return _unreadable(path, e)
    prior = earlier_load(con, sha, opts.cluster or default_cluster_name(path))
    if prior is not None and not _reload_of(con, sha, opts, prior):
        return _skipped(FileReport(path=shown_path(path), sha256=sha, bytes=size, outcome="loaded"), prior)
    if (pfmt := placement_format(path, opts.fmt)) is not None:  # node lists, pod lists, node metrics (SPEC §11)
        return load_placement_file(con, path, pfmt, opts, key, FileReport(path=shown_path(path), sha256=sha, bytes=size, outcome="loaded"),
                                   opts.cluster or default_cluster_name(path), t0)
    return commit_staged(con, stage_file(path, opts, key, sha, size, t0))


def ingest_file_to(db: str | Path | None, path: Path, opts: IngestOptions, key: bytes, log=None) -> FileReport:
    """Load one file into the warehouse file `db`, holding the database only for the commit.

    A short read-only look first (already loaded? the right key?), then parsing and staging with
    no connection open (queries and other ingests go on), then the commit under the writer lock:
    a second writer waits for it, saying so through `log`. A job log is staged while it is
    hashed (`_stage_ahead`); what was staged is thrown away when the look says skip or refuse."""
    t0 = time.perf_counter()
    ahead = _stage_ahead(db, path, opts, key, t0, log)
    try:
        try:
            sha, size = identify_file(path)
        except OSError as e:
            return _unreadable(path, e)
        if (skipped := _look_before(db, path, sha, size, opts, key, log)) is not None:
            return skipped
        st = ahead.take(sha) if ahead is not None else None
    finally:
        if ahead is not None and not ahead.taken:
            ahead.drop()
    if st is None and (pfmt := placement_format(path, opts.fmt)) is not None:  # node lists, pod lists, node metrics (SPEC §11)
        with writer_lock(db, log=log):
            con = connect(db, log=log)
            try:
                return load_placement_file(con, path, pfmt, opts, key, FileReport(path=shown_path(path), sha256=sha, bytes=size,
                                           outcome="loaded"), opts.cluster or default_cluster_name(path), t0)
            finally:
                con.close()
    if st is None:
        st = stage_file(path, opts, key, sha, size, t0)
    try:
        with writer_lock(db, log=log):
            con = connect(db, log=log)
            try:
                return commit_staged(con, st)
            finally:
                con.close()
    finally:
        st.cleanup()


def _look_before(db: str | Path | None, path: Path, sha: str, size: int, opts: IngestOptions, key: bytes,
                 log=None) -> FileReport | None:
    """The short read-only look before a load: the report of a file loaded before (to skip), or
    None; SiteKeyError when the key is not the warehouse's."""
    if not db_path(db).exists():
        return None
    from metapilot.warehouse.secret import key_fingerprint, recorded_fingerprint

    con = connect(db, read_only=True, wait_s=writer_wait_s(), log=log)
    try:
        prior = earlier_load(con, sha, opts.cluster or default_cluster_name(path))
        recorded = recorded_fingerprint(con)
        reload = _reload_of(con, sha, opts, prior, exact=has_column(con, "quarantine", "cluster"))
    finally:
        con.close()
    if prior is not None and not reload:
        return _skipped(FileReport(path=shown_path(path), sha256=sha, bytes=size, outcome="loaded"), prior)
    if recorded and recorded != key_fingerprint(key) and not opts.new_key:
        from metapilot.warehouse.secret import different_key_message, secret_path

        raise SiteKeyError(different_key_message(Path(opts.key_file or secret_path(db)), key_fingerprint(key), recorded))
    return None


def _stage_ahead(db: str | Path | None, path: Path, opts: IngestOptions, key: bytes, t0: float,
                 log=None) -> StageAhead | None:
    """Start staging a job log while it is hashed (issue 53: the hash of a 5M-line file is 1.7 s
    of one core), unless the hash is likely to say "loaded before" (a file of the same size was
    loaded from the same path: a skip then costs only the hash) or the file is a placement file
    (loaded whole under the writer lock). None: hash first."""
    try:
        size = path.stat().st_size
    except OSError:
        return None  # the hash says why
    if placement_format(path, opts.fmt) is not None:
        return None
    if db_path(db).exists():
        con = connect(db, read_only=True, wait_s=writer_wait_s(), log=log)
        try:
            if seen_at(con, shown_path(path), size):
                return None
        finally:
            con.close()
    return StageAhead(path, opts, key, size, t0)


QUARANTINE_WARN_SHARE = 0.01  # warn when more than 1% of a file's lines are quarantined
UNDECODABLE_PREFIX = "line is not valid "  # transforms.parsers.undecodable_reason


def reload_allowed(con: duckdb.DuckDBPyConnection, sha: str, opts: IngestOptions, scope: str | None) -> bool:
    """A file already loaded is loaded again (replacing its earlier load) only when --encoding is
    given and the earlier load quarantined lines it could not decode: the fix for a log that was
    read as UTF-8 but is Latin-1. `scope`: that load's cluster (`load_scope`)."""
    if not opts.encoding:
        return False
    return undecodable_lines(con, sha, UNDECODABLE_PREFIX, scope) > 0


def quarantine_warnings(con: duckdb.DuckDBPyConnection, rep: FileReport, opts: IngestOptions) -> list[str]:
    """A warning when more than 1% of the file's lines went to quarantine (SPEC §4: the file is
    still loaded), saying how many were undecodable and what to do."""
    if not rep.lines_read or rep.rows_quarantined <= QUARANTINE_WARN_SHARE * rep.lines_read:
        return []
    share = rep.rows_quarantined / rep.lines_read
    text = (f"{rep.rows_quarantined:,} of {rep.lines_read:,} lines ({share:.1%}) were quarantined "
            f"(more than {QUARANTINE_WARN_SHARE:.0%}): see the quarantine table for the reasons")
    bad = undecodable_lines(con, rep.sha256, UNDECODABLE_PREFIX, load_scope(rep.format, rep.cluster or ""))
    if bad:
        enc = opts.encoding or "utf-8"
        fix = ("re-run ingest on it with --encoding latin-1 (or the log's own encoding; the earlier load is "
               "replaced)" if not opts.encoding else "check --encoding")
        text += f"; {bad:,} of them are not valid {enc} text: {fix}"
    return [text]


def _explain(e: BaseException, path: Path, last_line: int) -> str:
    """The error a user sees: which file, where, why, and what to do."""
    path = shown_path(path)
    where = f" after line {last_line}" if last_line else ""
    if isinstance(e, (UnknownFormatError, ClusterMismatchError)):
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
            yield FileReport(path=shown_path(f), sha256="", bytes=0, outcome="failed",
                             message=f"{shown_path(f)}: no such file or directory: check the path or glob")
            continue
        yield ingest_file(con, f, opts, key)


def describe(rep: FileReport) -> str:
    """One line for a file's report in a log."""
    if rep.outcome == "failed":
        return rep.message or f"{rep.path}: failed"
    return (f"{rep.path}: {rep.outcome} ({rep.format}, {rep.lines_read} lines: {rep.rows_loaded} loaded, "
            f"{rep.rows_merged} merged, {rep.rows_quarantined} quarantined, {rep.lines_skipped} skipped)")


def ingest_batch(paths: list[str], db: str | Path | None = None, opts: IngestOptions | None = None,
                 log: Callable[[str], None] | None = None, warn: Callable[[str], None] | None = None,
                 per_file: Callable[[str, str | Path | None, IngestOptions, bytes], FileReport] | None = None) -> list[dict]:
    """Ingest files, globs and directories into the warehouse `db`, each file in its own
    transaction (`ingest_file_to`); files already loaded (same SHA-256, and the same cluster when
    their lines name none) are skipped. Then give
    clusters without capacity an inferred one, and render the GX data docs when GX ran. Returns the
    reports as dicts (plus a `capacity` record when capacity was inferred).

    `per_file(path, db, opts, key)` loads one file: `flows.ingest.ingest_flow` passes its Prefect
    task; by default the file is loaded here. `log` gets progress and waits, `warn` the inferred
    capacities (they are in the returned records too). Raises NothingToIngestError when the paths give no
    file, SiteKeyError when the site key is missing or not the warehouse's (`warehouse.secret`)."""
    from dataclasses import asdict, replace

    from metapilot.warehouse.data_docs import render_after_ingest
    from metapilot.warehouse.secret import load_site_key, secret_path

    opts = opts or IngestOptions()
    files, empty = expand_paths_checked(list(paths))
    key = load_site_key(db, new_key=opts.new_key, log=log)
    if opts.key_file is None:
        opts = replace(opts, key_file=str(secret_path(db)))
    if per_file is None:
        def per_file(p: str, d, o: IngestOptions, k: bytes) -> FileReport:
            rep = ingest_file_to(d, Path(p), o, k, log=log)
            if log:
                log(describe(rep))
            return rep
    reports: list[FileReport] = list(empty)
    for f in files:
        reports.append(per_file(str(f), db, opts, key))
    warnings: list[str] = []
    if any(r.outcome == "loaded" for r in reports):
        with writer_lock(db, log=log):
            con = connect(db, log=log)
            try:
                _cap_memory(con)  # a new connection each time: nothing to restore
                warnings = infer_missing_capacity(con)
                loaded = {c for r in reports if r.outcome == "loaded" for c in (r.cluster or "").split(",") if c}
                warnings += oversize_warnings(con, sorted(loaded))
            finally:
                con.close()
    for w in warnings:
        if warn:
            warn(w)
    out = [asdict(r) for r in reports]
    render_after_ingest(db, out, log=warn or log)  # GX data docs, when GX ran (else on demand / weekly report)
    if warnings:
        out.append({"path": "(all clusters)", "sha256": "", "bytes": 0, "outcome": "capacity", "format": None,
                    "cluster": None, "lines_read": 0, "rows_loaded": 0, "jobs_written": 0, "rows_merged": 0,
                    "rows_quarantined": 0, "lines_skipped": 0, "seconds": 0.0, "message": None,
                    "warnings": warnings, "data_checks": None})
    return out
