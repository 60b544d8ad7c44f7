"""Lookups on the `jobs` table that several layers share: which clusters have jobs, where a
cluster's history ends, which weeks it has jobs in, and a fingerprint that changes with its jobs
(sql/jobs/)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import duckdb
from metapilot.transforms.windows import week_start

from metapilot.ground.paths import sql_text


def clusters_with_jobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the clusters that have jobs, sorted: what an error about an unknown cluster lists."""
    return [r[0] for r in con.execute(sql_text("jobs/clusters.sql")).fetchall()]


def require_jobs(con: duckdb.DuckDBPyConnection, cluster: str) -> None:
    """Raise a LookupError that lists the clusters there are when `cluster` has no jobs."""
    known = clusters_with_jobs(con)
    if cluster not in known:
        raise LookupError(f"no jobs for cluster {cluster!r} (clusters: {', '.join(known) or 'none'})")


def last_submit(con: duckdb.DuckDBPyConnection, cluster: str, partition: str | None = None) -> datetime | None:
    """The cluster's (or partition's) last submit time; None when it has no jobs."""
    return con.execute(sql_text("jobs/last_submit.sql"), {"cluster": cluster, "partition": partition}).fetchall()[0][0]


def busy_weeks(con: duckdb.DuckDBPyConnection, cluster: str) -> list[datetime]:
    """The Monday (00:00 UTC) of every week in which the cluster has a submitted job, in order."""
    rows = con.execute(sql_text("jobs/busy_weeks.sql"), {"cluster": cluster}).fetchall()
    return [week_start(w) for (w,) in rows]


def data_fingerprint(con: duckdb.DuckDBPyConnection, cluster: str) -> str:
    """Changes whenever the cluster's jobs change: part of every cache key over a window."""
    jobs, last = con.execute(sql_text("jobs/fingerprint.sql"), {"cluster": cluster}).fetchall()[0]
    return f"{jobs}@{last}"


def partitions(con: duckdb.DuckDBPyConnection, cluster: str) -> list[str | None]:
    """The partitions a cluster's jobs ran in: what an error about an unknown --partition lists."""
    return [r[0] for r in con.execute(sql_text("jobs/partitions.sql"), [cluster]).fetchall()]


def holds_hashed_names(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse's jobs carry keyed hashes for names (the default, SPEC §8)."""
    return bool(con.execute(sql_text("jobs/hashed_names.sql")).fetchall()[0][0])


def stored_name(con: duckdb.DuckDBPyConnection, cluster: str, names: list[str],
                key: bytes | None) -> tuple[Callable[[str], str], int]:
    """How the cluster's jobs name the accounts and users `names` (as `sshare` or `sacctmgr` print them):
    by their keyed hash (SPEC §8, the default) or as they are (`--keep-names`), whichever more of the
    cluster's jobs carry (hashed when neither is found and there is a key), and how many jobs that is."""
    from metapilot.transforms.privacy import keyed_hash

    hashes = [keyed_hash(x, key) for x in names] if key is not None else []
    given, hashed = con.execute(sql_text("jobs/names_known.sql"), [cluster, names, hashes]).fetchall()[0]
    if key is None or given > hashed:
        return str, given
    return (lambda x: keyed_hash(x, key)), hashed
