"""Shared by the controller tests: a few hundred real KTH-SP2 jobs in an in-memory warehouse.

tests/data/kth_sp2_days22-25.swf is a slice of the Parallel Workloads Archive trace (see
tests/data/PROVENANCE.md). SWF fields used: 1 job, 2 submit, 3 wait, 4 run, 5 allocated procs,
8 requested procs, 9 requested time; submit is seconds since UnixStartTime 843480031.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

SWF = Path(__file__).parent / "data" / "kth_sp2_days22-25.swf"
UNIX_START = 843480031
CLUSTER = "kth-sp2"


def read_swf(path: Path = SWF) -> pl.DataFrame:
    """The canonical job rows of a small SWF file (tiny reader: 18 whitespace fields, ';' comments)."""
    rows = [ln.split() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith(";")]
    f = {i: [int(r[i]) for r in rows] for i in (0, 1, 2, 3, 4, 7, 8)}
    submit = [UNIX_START + s for s in f[1]]
    start = [s + w for s, w in zip(submit, f[2])]
    end = [s + r for s, r in zip(start, f[3])]
    ts = lambda xs: (pl.Series(xs, dtype=pl.Int64) * 1_000_000).cast(pl.Datetime("us", "UTC"))
    return pl.DataFrame({
        "cluster": CLUSTER,
        "job_id": [str(j) for j in f[0]],
        "source_format": "swf",
        "source_file_id": "test",
        "partition": "batch",
        "state": "COMPLETED",
        "submit_time": ts(submit),
        "start_time": ts(start),
        "end_time": ts(end),
        "wait_s": f[2],
        "run_s": f[3],
        "timelimit_s": f[8],
        "req_cpus": f[7],
        "alloc_cpus": f[4],
        "ingested_at": datetime(2024, 1, 1, tzinfo=timezone.utc),
    })


def load_warehouse(con, jobs: pl.DataFrame | None = None, cores: int = 100) -> pl.DataFrame:
    """Insert the jobs and a capacity row (`cores` processors, from the SWF header) into `con`."""
    jobs = read_swf() if jobs is None else jobs
    con.register("_jobs_in", jobs.to_arrow())
    con.execute("INSERT INTO jobs BY NAME SELECT * FROM _jobs_in")
    con.unregister("_jobs_in")
    con.execute(
        "INSERT INTO capacity (cluster, partition, valid_from, nodes, cores, gpus, mem_mib, source) "
        "VALUES ($c, '*', TIMESTAMPTZ '1996-01-01 00:00:00+00', $n, $n, 0, NULL, 'swf-header')",
        {"c": CLUSTER, "n": cores},
    )
    return jobs


@pytest.fixture(scope="module")
def warehouse():
    """An in-memory warehouse holding the KTH-SP2 slice and its capacity, one per test module."""
    from metapilot.warehouse.db import connect_memory

    con = connect_memory()
    load_warehouse(con)
    yield con
    con.close()
