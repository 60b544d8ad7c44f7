"""What ingest records about each file, whatever its kind (job logs, node and pod lists, metrics):
`ingest_files` (loaded or failed, with the line counts) and `data_check_runs` (its data checks).

A file is known by its content (SHA-256) and, when its lines name no cluster (SWF, PBS, SGE, LSF,
openb node and pod lists, node metrics), by the cluster it was loaded for as well: one node list
can describe two clusters (a what-if copy, two partitions of one inventory), so loading it for a
second cluster loads it (issue 33). A log whose lines name their clusters (sacct, `sacct --json`)
is known by its content alone: its rows say where they belong."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any, NamedTuple

import duckdb

from metapilot.ground.paths import sql_statements, sql_text

# Formats whose lines carry their cluster's name (the `Cluster` field, the JSON's `cluster`).
NAMING_FORMATS = frozenset({"sacct", "sacct-json"})


class PriorLoad(NamedTuple):
    outcome: str  # loaded | quarantined (every line refused) | failed
    cluster: str  # the cluster(s) that load went to
    format: str | None


def load_scope(fmt: str | None, cluster: str) -> str | None:
    """The cluster that is part of a load's identity: `cluster` for a format whose lines name no
    cluster, None (the content alone) for one whose lines do."""
    return None if fmt in NAMING_FORMATS else cluster


def earlier_load(con: duckdb.DuckDBPyConnection, sha: str, cluster: str) -> PriorLoad | None:
    """The earlier load that makes loading this content for `cluster` (--cluster, else the name
    from the file's name) a repeat: one of a log whose lines name their clusters, or one for the
    same cluster. None when there is none (a first load, a load for another cluster, a failure)."""
    rows = [PriorLoad(*r) for r in con.execute(sql_text("ingest/prior_load.sql"), {"sha256": sha}).fetchall()]
    for r in rows:
        if r.outcome == "loaded" and (r.format in NAMING_FORMATS or r.cluster == cluster):
            return r
    return None


def seen_at(con: duckdb.DuckDBPyConnection, path: str, size: int) -> bool:
    """Whether a file of `size` bytes was loaded from `path` before (probably the same content)."""
    return bool(con.execute(sql_text("ingest/seen_path.sql"), [path, size]).fetchall()[0][0])


def refused_loads(con: duckdb.DuckDBPyConnection, sha: str, cluster: str) -> list[PriorLoad]:
    """Earlier loads of this content for `cluster` (or of a log naming its clusters) that loaded
    nothing, every line quarantined (a wrong --format, say): they block no reload, and the reload
    replaces their quarantine rows."""
    rows = [PriorLoad(*r) for r in con.execute(sql_text("ingest/prior_load.sql"), {"sha256": sha}).fetchall()]
    return [r for r in rows if r.outcome == "quarantined" and (r.format in NAMING_FORMATS or r.cluster == cluster)]


def top_reasons(con: duckdb.DuckDBPyConnection, sha: str, cluster: str) -> list[tuple[str, int]]:
    """The most frequent quarantine reasons of one load: what a refused file's message quotes."""
    return [(r, int(n)) for r, n in con.execute(sql_text("ingest/top_reasons.sql"), [sha, cluster]).fetchall()]


def _forget_record(con: duckdb.DuckDBPyConnection, sha: str, scope: str | None) -> None:
    con.execute(sql_text("ingest/forget_record.sql"), {"sha256": sha, "scope": scope})


def record_loaded(con: duckdb.DuckDBPyConnection, rep: Any, started_at: datetime, outcome: str = "loaded") -> None:
    """A loaded file, from its report (`warehouse.ingest.FileReport`), replacing earlier records
    of the same load (a failure, a load replaced with --encoding). `outcome` 'quarantined': no
    line loaded (its quarantine rows are kept, and it blocks no reload)."""
    _forget_record(con, rep.sha256, load_scope(rep.format, rep.cluster))
    con.execute(sql_text("ingest/record_loaded.sql"), {
        "sha256": rep.sha256, "path": rep.path, "bytes": rep.bytes, "format": rep.format, "cluster": rep.cluster,
        "lines_read": rep.lines_read, "rows_loaded": rep.rows_loaded, "jobs_written": rep.jobs_written,
        "rows_merged": rep.rows_merged, "rows_quarantined": rep.rows_quarantined, "lines_skipped": rep.lines_skipped,
        "started_at": started_at, "finished_at": datetime.now(timezone.utc), "message": "; ".join(rep.warnings) or None,
        "outcome": outcome,
    })


def record_failed(con: duckdb.DuckDBPyConnection, rep: Any, fmt: str | None, cluster: str,
                  started_at: datetime) -> None:
    """A file that failed, after its transaction was rolled back: `rep.message` says why."""
    con.execute(sql_text("ingest/record_failed.sql"), {
        "sha256": rep.sha256, "path": rep.path, "bytes": rep.bytes, "format": fmt, "cluster": cluster,
        "started_at": started_at, "finished_at": datetime.now(timezone.utc), "message": rep.message,
    })


def record_data_check(con: duckdb.DuckDBPyConnection, sha: str, cluster: str, suite: str, success: bool,
                      evaluated: int, failed_rows: int, results: list) -> None:
    """One load's data checks (`cluster`: the load's, as in `ingest_files`)."""
    con.execute(sql_text("ingest/record_data_check.sql"), {
        "run_id": str(uuid.uuid4()), "file_sha256": sha, "cluster": cluster, "suite_name": suite,
        "success": bool(success), "evaluated": int(evaluated), "failed_rows": int(failed_rows),
        "results_json": json.dumps(results, default=str), "checked_at": datetime.now(timezone.utc),
    })


def undecodable_lines(con: duckdb.DuckDBPyConnection, sha: str, prefix: str, scope: str | None) -> int:
    """How many of a load's quarantined lines were not valid text (their reason starts with `prefix`)."""
    return int(con.execute(sql_text("ingest/undecodable_lines.sql"),
                           {"sha256": sha, "prefix": prefix, "scope": scope}).fetchall()[0][0])


def forget_file(con: duckdb.DuckDBPyConnection, sha: str, scope: str | None) -> None:
    """Remove what an earlier load of a file wrote (inside the new load's transaction); `scope`
    as `load_scope` gives it: that load's cluster, or None for every load of the content."""
    for stmt in sql_statements("ingest/forget_file.sql"):
        con.execute(stmt, [sha, scope])


def dedupe_file(con: duckdb.DuckDBPyConnection, sha: str, scope: str | None) -> tuple[int, int, list[str]]:
    """Keep one row per job key after a load's rows were appended (sql/ingest/dedupe_jobs.sql);
    return `file_rows`, with a line whose row replaced another file's row of the same job counted
    as merged rather than loaded (so that the loaded rows of all files add up to the jobs)."""
    con.execute(sql_text("ingest/replaced_keys.sql"), [sha, scope])
    try:
        for stmt in sql_statements("ingest/dedupe_jobs.sql"):
            con.execute(stmt, [sha, scope])
        return con.execute(sql_text("ingest/file_rows_merged.sql"), [sha, scope]).fetchall()[0]
    finally:
        con.execute("DROP TABLE IF EXISTS _replaced_keys")


def file_rows(con: duckdb.DuckDBPyConnection, sha: str, scope: str | None) -> tuple[int, int, list[str]]:
    """(job rows, lines they came from, clusters) that a file's load left in `jobs`."""
    return con.execute(sql_text("ingest/file_rows.sql"), [sha, scope]).fetchall()[0]


class LostFile(NamedTuple):
    path: str
    outcome: str  # failed | quarantined (no line loaded)
    message: str | None
    cluster: str
    sha256: str
    finished_at: datetime


def lost_files(con: duckdb.DuckDBPyConnection, cluster: str | None = None) -> list[LostFile]:
    """Files a load could not use and that nothing has replaced since (sql/ingest/lost_files.sql):
    an operator must act on them, so `serve --list` and the weekly report name them."""
    return [LostFile(*r) for r in con.execute(sql_text("ingest/lost_files.sql"), {"cluster": cluster}).fetchall()]


class ForgottenLoad(NamedTuple):
    sha256: str
    cluster: str
    format: str | None
    outcome: str
    path: str
    jobs: int  # job rows removed
    quarantined: int  # quarantined lines removed
    data_checks: int  # data-check runs removed
    node_rows: int  # node-list and node-metric rows removed
    clusters: list[str]  # clusters its jobs were in


def loads_of_file(con: duckdb.DuckDBPyConnection, sha: str, cluster: str | None = None) -> list[tuple]:
    """(sha256, cluster, format, outcome, path) of every recorded load of a file (`sha`: its
    SHA-256 or the start of it), or only its load for `cluster`."""
    return con.execute(sql_text("ingest/loads_of_file.sql"), [sha, cluster]).fetchall()


def forget_load(con: duckdb.DuckDBPyConnection, sha: str, cluster: str, fmt: str | None, outcome: str,
                path: str) -> ForgottenLoad:
    """Remove one recorded load of a file: its jobs, quarantined lines, data-check runs and its
    `ingest_files` row (the caller holds the transaction and recomputes derived capacity)."""
    scope = load_scope(fmt, cluster)
    jobs, quarantined, checks, nodes, clusters = con.execute(sql_text("ingest/load_counts.sql"), [sha, scope]).fetchall()[0]
    forget_file(con, sha, scope)
    _forget_record(con, sha, scope)
    return ForgottenLoad(sha, cluster, fmt, outcome, path, int(jobs), int(quarantined), int(checks),
                         int(nodes), list(clusters or []) or [cluster])
