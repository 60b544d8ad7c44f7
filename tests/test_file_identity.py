"""A file whose lines name no cluster (SWF, openb node and pod lists) is known by its content and
the cluster it was loaded for (issue 33): the real openb node list loads for a second cluster, the
skip row names the earlier load's cluster, and no message sends the user back to the command just run."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from conftest import DATA, SHARED_DATA

REPO = Path(__file__).resolve().parents[1]
SHARED_NODES = SHARED_DATA / "gpu" / "alibaba-2023" / "cluster-trace-gpu-v2023_csv_openb_node_list_gpu_node.csv"
NODES = SHARED_NODES if SHARED_NODES.exists() else DATA / "openb" / "openb_node_list_gpu_node.csv"  # the same file
PODS_A = DATA / "openb" / "openb_pod_list_gpuspec33_head.csv"


def metapilot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "METAPILOT_DEBUG")}
    return subprocess.run([sys.executable, "-m", "metapilot.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def pods_b(tmp_path: Path) -> Path:
    """A second real pod list: the head of openb's default pod list."""
    with gzip.open(DATA / "openb" / "openb_pod_list_default.csv.gz", "rt") as f:
        head = [next(f) for _ in range(300)]
    out = tmp_path / "pods_default_head.csv"
    out.write_text("".join(head))
    return out


def test_one_node_list_serves_two_clusters(tmp_path):
    db = str(tmp_path / "w.duckdb")
    first = metapilot("ingest", str(NODES), str(PODS_A), "--cluster", "a", "--db", db, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    second = metapilot("ingest", str(NODES), str(pods_b(tmp_path)), "--cluster", "b", "--db", db, cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    con = duckdb.connect(db, read_only=True)
    try:
        loads = con.execute("SELECT cluster, outcome FROM ingest_files WHERE format = 'openb-nodes' ORDER BY cluster").fetchall()
        nodes = dict(con.execute("SELECT cluster, count(*) FROM nodes GROUP BY cluster").fetchall())
        pods = dict(con.execute("SELECT cluster, count(*) FROM jobs GROUP BY cluster").fetchall())
    finally:
        con.close()
    assert loads == [("a", "loaded"), ("b", "loaded")]
    assert nodes == {"a": 1213, "b": 1213}
    assert set(pods) == {"a", "b"} and pods["b"] > 0
    replay = metapilot("place", "replay", "--cluster", "b", "--policy", "first-fit", "--db", db, cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "no node list" not in replay.stdout + replay.stderr

    again = metapilot("ingest", str(NODES), "--cluster", "b", "--db", db, cwd=tmp_path)  # a true repeat
    assert again.returncode == 0, again.stdout + again.stderr
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    con = connect(db)
    try:
        rep = ingest_file(con, NODES, IngestOptions(cluster="a"), (tmp_path / "secret.key").read_bytes())
        n_loads = con.execute("SELECT count(*) FROM ingest_files WHERE format = 'openb-nodes'").fetchall()[0][0]
    finally:
        con.close()
    assert rep.outcome == "skipped" and rep.cluster == "a" and "for cluster a" in rep.message
    assert n_loads == 2


def test_swf_log_loads_for_a_second_cluster_and_the_skip_names_the_earlier_one(mem_con, site_key):
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    swf = DATA / "kth_sp2_days22-25.swf"
    a = ingest_file(mem_con, swf, IngestOptions(cluster="sp2"), site_key)
    b = ingest_file(mem_con, swf, IngestOptions(cluster="sp2-whatif"), site_key)
    assert (a.outcome, b.outcome) == ("loaded", "loaded")
    assert b.jobs_written == a.jobs_written > 0
    counts = dict(mem_con.execute("SELECT cluster, count(*) FROM jobs GROUP BY cluster").fetchall())
    assert counts == {"sp2": a.jobs_written, "sp2-whatif": a.jobs_written}
    again = ingest_file(mem_con, swf, IngestOptions(cluster="sp2-whatif"), site_key)
    assert again.outcome == "skipped" and again.cluster == "sp2-whatif"
    assert dict(mem_con.execute("SELECT cluster, count(*) FROM jobs GROUP BY cluster").fetchall()) == counts


def test_a_log_that_names_its_cluster_is_known_by_its_content(mem_con, site_key):
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    log = REPO / "samples" / "logs" / "slurm" / "sacct_1.json"
    first = ingest_file(mem_con, log, IngestOptions(), site_key)
    assert first.outcome == "loaded"
    again = ingest_file(mem_con, log, IngestOptions(), site_key)
    assert again.outcome == "skipped" and again.cluster == first.cluster
    assert f"into cluster {first.cluster}" in again.message


def test_an_older_warehouse_keyed_by_hash_alone_is_migrated(tmp_path, site_key):
    """A warehouse made before issue 33 (ingest_files keyed by sha256): its rows are kept, its
    quarantine and data-check runs get their load's cluster, and the file loads for another cluster."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    from metapilot.ground.files import sha256_file

    swf = DATA / "kth_sp2_days22-25.swf"
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE ingest_files (sha256 VARCHAR PRIMARY KEY, path VARCHAR NOT NULL, bytes BIGINT NOT NULL, "
                "format VARCHAR, cluster VARCHAR, lines_read BIGINT, rows_loaded BIGINT, jobs_written BIGINT, "
                "rows_merged BIGINT, rows_quarantined BIGINT, lines_skipped BIGINT, started_at TIMESTAMPTZ NOT NULL, "
                "finished_at TIMESTAMPTZ, outcome VARCHAR NOT NULL, message VARCHAR)")
    con.execute("INSERT INTO ingest_files (sha256, path, bytes, format, cluster, started_at, outcome) "
                "VALUES (?, ?, 1, 'swf', 'sp2', now(), 'loaded')", [sha256_file(swf), str(swf)])
    con.close()
    con = connect(db)  # migrates
    try:
        key = [c[0] for c in con.execute("SELECT constraint_column_names FROM duckdb_constraints() "
                                         "WHERE table_name = 'ingest_files' AND constraint_type = 'PRIMARY KEY'").fetchall()]
        assert list(key[0]) == ["sha256", "cluster"]
        assert ingest_file(con, swf, IngestOptions(cluster="sp2"), site_key).outcome == "skipped"
        assert ingest_file(con, swf, IngestOptions(cluster="other"), site_key).outcome == "loaded"
    finally:
        con.close()


def test_a_node_list_with_no_usable_line_is_not_answered_with_the_ingest_just_run(tmp_path):
    db = str(tmp_path / "w.duckdb")
    header = NODES.read_text().splitlines()[0]
    bad = tmp_path / "nodes_bad.csv"
    bad.write_text(header + "\nnode-1,lots,of,nothing,V100\nnode-2,,,,\n")
    ran = metapilot("ingest", str(bad), str(PODS_A), "--cluster", "c", "--db", db, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    replay = metapilot("place", "replay", "--cluster", "c", "--db", db, cwd=tmp_path)
    out = replay.stdout + replay.stderr
    assert replay.returncode == 2, out
    assert "none of its 3 lines is a usable node" in " ".join(out.split()), out
    assert "metapilot ingest NODES.csv PODS.csv --cluster c" not in out
