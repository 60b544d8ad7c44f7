"""Load placement inputs (SPEC §11) that are not job logs alone: openb node lists into `nodes`,
openb pod lists into `jobs` (with their milli-CPU and milli-GPU amounts), and Prometheus node
metrics (text exposition, query_range JSON) into `node_metrics`.

`warehouse.ingest` hands a file here when its content is one of these (`placement_format`); the
file is then loaded in one transaction with the same guarantees as a job log: site key checked,
every line loaded, merged, quarantined (with the reason, names hashed) or skipped, the counts
reconciled and recorded in `ingest_files`, nothing written when anything fails.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl
from metapilot.transforms.canonical import ParseResult
from metapilot.transforms.lines import iter_line_chunks, open_binary, read_head
from metapilot.transforms.openb import TRACE_EPOCH, detect_openb, parse_node_list, parse_pod_list
from metapilot.transforms.privacy import keyed_hash, pseudonymise
from metapilot.transforms.prometheus import (
    is_exposition,
    is_query_range_json,
    parse_exposition,
    parse_query_range,
    span_warning,
)
from metapilot.transforms.data_checks import check_jobs

from metapilot.ground.files import shown_path
from metapilot.ground.paths import sql_text
from metapilot.warehouse.capacity import upsert_capacity
from metapilot.warehouse.db import insert_frame
from metapilot.warehouse.ingest_log import dedupe_file, file_rows, record_failed, record_loaded, record_data_check
from metapilot.warehouse.secret import SiteKeyError, check_and_record_key

PLACEMENT_FORMATS = ("openb-nodes", "openb-pods", "prom-text", "prom-range")


def placement_format(path: Path, fmt: str = "auto") -> str | None:
    """The placement format of a file from its content, or None for anything else (a job log);
    `--format` naming one of them forces it (its lines are then loaded or quarantined one by one)."""
    if fmt in PLACEMENT_FORMATS:
        return fmt
    if fmt != "auto":
        return None
    try:
        head = read_head(path, max_lines=50)
    except (OSError, EOFError, ValueError):  # unreadable, truncated gzip, undecodable: not a placement file
        return None
    found = detect_openb(head)
    if found is None and is_query_range_json(head):
        found = "prom-range"
    if found is None and is_exposition(head):
        found = "prom-text"
    return found


def _quarantine(con, q: pl.DataFrame, sha: str, path: Path, cluster: str, now: datetime) -> None:
    if q.height:
        insert_frame(con, "quarantine", q.select(pl.lit(sha).alias("file_sha256"), pl.lit(shown_path(path)).alias("path"), "line_no",
                                            "raw", "reason", pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("quarantined_at"),
                                            pl.lit(cluster).alias("cluster")))


def _hide_pod_names(q: pl.DataFrame, key: bytes, keep_names: bool) -> pl.DataFrame:
    """A quarantined pod line keeps its numbers; its first field (the pod name) is hashed (SPEC §8)."""
    if keep_names or not q.height:
        return q
    def redact(raw: str | None) -> str | None:
        if raw is None or "," not in raw:
            return None if raw is None else keyed_hash(raw, key)
        name, rest = raw.split(",", 1)
        return keyed_hash(name, key) + "," + rest
    return q.with_columns(pl.col("raw").map_elements(redact, return_dtype=pl.Utf8))


def _lines(path: Path) -> pl.DataFrame:
    chunks = [c for c in iter_line_chunks(path)]
    frames = [c.lines for c in chunks]
    bad = [c.bad for c in chunks if c.bad.height]
    lines = pl.concat(frames) if frames else pl.DataFrame(schema={"line_no": pl.Int64, "line": pl.Utf8})
    if bad:  # undecodable lines: kept as lossy text, the parsers quarantine what does not parse
        lines = pl.concat([lines, pl.concat(bad).rename({"raw": "line"})]).sort("line_no")
    return lines


def _load_nodes(con, path: Path, cluster: str, sha: str, now: datetime) -> tuple[ParseResult, int, int, list[str]]:
    nodes, res = parse_node_list(_lines(path))
    rows = nodes.with_columns(pl.lit(cluster).alias("cluster"), pl.lit(sha).alias("source_file_id"),
                              pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("ingested_at"))
    if not rows.height:  # nothing usable: the cluster keeps the node list it had, and the user is told
        what = (f"all {res.quarantine.height} node lines were quarantined" if res.quarantine.height
                else "it holds no node line (only its header)")
        return res, 0, 0, [f"no node loaded: {what}; cluster {cluster}'s node list is unchanged"]
    con.execute(sql_text("placement/forget_nodes.sql"), {"cluster": cluster})
    insert_frame(con, "nodes", rows)
    tot = rows.select(pl.len(), pl.col("cpu_milli").sum(), pl.col("gpus").sum(), pl.col("memory_mib").sum()).row(0)
    upsert_capacity(con, {"cluster": cluster, "partition": "*", "valid_from": TRACE_EPOCH, "nodes": tot[0],
                          "cores": tot[1] // 1000, "gpus": tot[2], "mem_mib": tot[3], "source": "node-list",
                          "note": f"from the node list {path.name}: {tot[0]} nodes"})
    return res, rows.height, rows.height, []


def _load_pods(con, path: Path, cluster: str, sha: str, now: datetime, key: bytes, keep_names: bool) -> tuple[ParseResult, int, int, list[str]]:
    lines = _lines(path)
    header = tuple(f.strip().lower() for f in (read_head(path, max_lines=1)[0].lstrip("\ufeff").strip().split(",")))
    res, extras = parse_pod_list(lines, header, cluster)
    outcome = check_jobs(res.jobs)
    jobs, q = res.jobs, res.quarantine
    if outcome.failed.height:
        bad = outcome.failed.group_by("source_line", maintain_order=True).agg(pl.col("reason").unique().str.join("; "))
        jobs = jobs.join(bad.select("source_line"), on="source_line", how="anti")
        bad = bad.join(lines.rename({"line_no": "source_line", "line": "raw"}), on="source_line", how="left")
        q = pl.concat([q, bad.select(pl.col("source_line").alias("line_no"), "raw", "reason")], how="vertical_relaxed")
    res.quarantine = _hide_pod_names(q, key, keep_names)
    res.jobs = jobs
    written = 0
    if jobs.height:
        rows = pseudonymise(jobs, key, keep_names).with_columns(
            pl.lit(sha).alias("source_file_id"), pl.lit(now, dtype=pl.Datetime("us", "UTC")).alias("ingested_at"),
        ).join(extras, on="source_line", how="left")
        insert_frame(con, "jobs", rows)
        dedupe_file(con, sha, cluster)  # a pod list names no cluster: this load's rows only
        written = file_rows(con, sha, cluster)[0]
    return res, written, written, []  # a row that lost to an earlier ended record counts as merged


def _load_metrics(con, path: Path, fmt: str, cluster: str, sha: str, now: datetime) -> tuple[ParseResult, int, int, list[str]]:
    from metapilot.transforms.canonical import conform, empty_quarantine, quarantine_rows

    node = path.name.split(".")[0]
    warnings: list[str] = []
    if fmt == "prom-text":
        mtime = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
        lines = _lines(path)
        rows, q, skipped = parse_exposition(lines, node, mtime)
        res = ParseResult(conform(pl.DataFrame()), q, lines.height, skipped=skipped)
        if rows["ts"].n_unique() and rows.height and rows["ts"].max() == mtime:
            warnings.append(f"samples without timestamps are dated with the file's modification time ({mtime.isoformat()})")
        if (spread := span_warning(rows)) is not None:
            warnings.append(spread)
        n_lines = rows["source_line"].n_unique()
    else:
        with open_binary(path) as f:
            text = f.read().decode("utf-8", errors="replace")
        lines = text.split("\n")
        n_read = len(lines) - (1 if text.endswith("\n") else 0)
        try:
            rows, problems = parse_query_range(text, node)
            warnings += problems[:10]
            res = ParseResult(conform(pl.DataFrame()), empty_quarantine(), n_read)
            n_lines = n_read if rows.height else 0
            res.skipped = n_read - n_lines
        except ValueError as e:  # the whole document is unusable: every line quarantined, with why
            rows = pl.DataFrame()
            res = ParseResult(conform(pl.DataFrame()), quarantine_rows(list(range(1, n_read + 1)), lines[:n_read], str(e)), n_read)
            n_lines = 0
    if rows.height:
        insert_frame(con, "node_metrics", rows.with_columns(pl.lit(cluster).alias("cluster"), pl.lit(sha).alias("source_file_id")))
    return res, n_lines, rows.height, warnings


def load_placement_file(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, opts, key: bytes, rep,
                        cluster: str, t0: float | None = None):
    """Load one placement file in one transaction, filling in `rep` (the ingest's FileReport for
    the file: path, sha256, bytes) and returning it."""
    t0 = time.perf_counter() if t0 is None else t0
    now = datetime.now(timezone.utc)
    sha = rep.sha256
    rep.outcome, rep.format, rep.cluster = "loaded", fmt, cluster
    con.execute("BEGIN TRANSACTION")
    try:
        check_and_record_key(con, key, opts.new_key, opts.key_file)
        if fmt == "openb-nodes":
            res, loaded_lines, written, warnings = _load_nodes(con, path, cluster, sha, now)
        elif fmt == "openb-pods":
            res, loaded_lines, written, warnings = _load_pods(con, path, cluster, sha, now, key, opts.keep_names)
        else:
            res, loaded_lines, written, warnings = _load_metrics(con, path, fmt, cluster, sha, now)
        _quarantine(con, res.quarantine, sha, path, cluster, now)
        rep.lines_read, rep.rows_loaded, rep.jobs_written = res.lines_read, loaded_lines, written
        rep.rows_merged = res.lines_read - loaded_lines - res.quarantine.height - res.skipped
        rep.rows_quarantined, rep.lines_skipped = res.quarantine.height, res.skipped
        rep.warnings = list(res.warnings) + warnings
        if rep.rows_merged < 0 or not rep.reconciles:
            raise RuntimeError(f"line counts do not reconcile ({rep.lines_read} read, {rep.rows_loaded} loaded, "
                               f"{rep.rows_quarantined} quarantined, {rep.lines_skipped} skipped): a MetaPilot bug")
        rep.seconds = time.perf_counter() - t0
        record_loaded(con, rep, now)
        record_data_check(con, sha, cluster, f"metapilot_{fmt}", rep.rows_quarantined == 0, rep.lines_read, rep.rows_quarantined, [])
        con.execute("COMMIT")
    except SiteKeyError:
        con.execute("ROLLBACK")
        raise
    except BaseException as e:
        con.execute("ROLLBACK")
        rep.outcome, rep.seconds = "failed", time.perf_counter() - t0
        rep.message = f"{path}: {type(e).__name__}: {e}: nothing was loaded from this file"
        record_failed(con, rep, fmt, cluster, now)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
    return rep


__all__ = ["placement_format", "load_placement_file", "PLACEMENT_FORMATS"]
