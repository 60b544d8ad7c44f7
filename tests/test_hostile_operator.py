"""Issue 41 (3-9): a hostile operator's pass over placement data, Prometheus files, `sql --out`,
reports and `serve`, through the CLI as an operator runs it. What is refused is quarantined or
reported with its reason, never dropped silently."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from metapilot.cli import app

REPO = Path(__file__).resolve().parents[1]
POZIDRIV = REPO / "tests" / "data" / "slurm" / "xdmod-reference" / "pozidriv.log.gz"


def cli(*args, **kw):
    return CliRunner().invoke(app, [str(a) for a in args], **kw)


def query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def pozidriv_lines(n: int, start: int = 0) -> list[str]:
    with gzip.open(POZIDRIV, "rt") as f:
        return f.read().splitlines()[start:start + n]


# 3. a file loaded half-written, then whole: the rows it replaces are merged, not loaded again


def test_a_file_loaded_again_whole_counts_the_replaced_rows_as_merged(tmp_path):
    db, log = tmp_path / "w.duckdb", tmp_path / "site.log"
    log.write_text("\n".join(pozidriv_lines(50)) + "\n")
    assert cli("ingest", log, "--db", db).exit_code == 0
    log.write_text("\n".join(pozidriv_lines(100)) + "\n")
    r = cli("ingest", log, "--db", db)
    assert r.exit_code == 0, r.output
    rows = query(db, "SELECT lines_read, rows_loaded, rows_merged, rows_quarantined, lines_skipped FROM ingest_files "
                     "ORDER BY finished_at")
    assert rows == [(50, 50, 0, 0, 0), (100, 50, 50, 0, 0)], rows
    assert sum(r[1] for r in rows) == query(db, "SELECT count(*) FROM jobs")[0][0] == 100


# 4, 7, 9: placement inputs: a CPU-only node list, duplicate node names, a header-only node list

OPENB = REPO / "tests" / "data" / "openb"
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"


def cpu_only_lists(tmp_path: Path, n_nodes: int = 40, n_pods: int = 60) -> tuple[Path, Path]:
    """Real openb nodes and pods with their GPUs taken away: a CPU-only cluster."""
    rows = (OPENB / "openb_node_list_gpu_node.csv").read_text().splitlines()[1:n_nodes + 1]
    nodes = tmp_path / "cpu_nodes.csv"
    nodes.write_text(NODE_HEADER + "\n" + "".join(",".join(r.split(",")[:3]) + ",0,\n" for r in rows))
    lines = (OPENB / "openb_pod_list_gpuspec33_head.csv").read_text().splitlines()
    pods = tmp_path / "cpu_pods.csv"
    body = []
    for ln in lines[1:n_pods + 1]:
        f = ln.split(",")
        f[3], f[4], f[5] = "0", "0", ""
        body.append(",".join(f))
    pods.write_text(lines[0] + "\n" + "\n".join(body) + "\n")
    return nodes, pods


def test_a_cpu_only_cluster_is_placed_on_cpu_and_memory_and_inflation_is_refused_in_a_sentence(tmp_path):
    db = tmp_path / "w.duckdb"
    nodes, pods = cpu_only_lists(tmp_path)
    assert cli("ingest", nodes, pods, "--cluster", "cpu", "--db", db).exit_code == 0
    r = cli("place", "replay", "--cluster", "cpu", "--mode", "time", "--db", db, "--json", tmp_path / "t.json")
    assert r.exit_code == 0, r.output
    import json

    out = json.loads((tmp_path / "t.json").read_text())
    assert out["placed"] == out["pods"] > 50 and out["gpus"] == 0 and out["imbalance"] > 0
    for args in (["place", "replay", "--mode", "inflate"], ["place", "train", "--steps", "10"]):
        r = cli(*args, "--cluster", "cpu", "--db", db)
        assert r.exit_code == 2, r.output
        assert "cpu's 40 nodes have no GPUs" in r.output and "--mode time" in r.output, r.output
        assert "concatenate" not in r.output and "Traceback" not in r.output


def test_a_node_named_twice_is_quarantined_with_a_warning_and_counted_once(tmp_path):
    db = tmp_path / "w.duckdb"
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(f"{NODE_HEADER}\nsn,64000,262144,2,P100\nsm,32000,131072,1,T4\nsn,96000,393216,8,V100M32\n")
    r = cli("ingest", nodes, "--cluster", "c", "--db", db)
    assert r.exit_code == 0, r.output
    assert "node listed before (sn)" in " ".join(r.output.split())
    assert query(db, "SELECT line_no, reason FROM quarantine") == [
        (4, "node name listed again (first at line 2): each node is listed once; the first listing is kept")]
    assert query(db, "SELECT lines_read, rows_loaded, rows_merged, rows_quarantined, lines_skipped FROM ingest_files") == [
        (4, 2, 0, 1, 1)]
    assert query(db, "SELECT nodes, cores, gpus FROM capacity WHERE cluster = 'c'") == [(2, 96, 3)]


def test_a_header_only_node_list_says_so_and_keeps_the_nodes_loaded_before(tmp_path):
    db = tmp_path / "w.duckdb"
    nodes, _ = cpu_only_lists(tmp_path)
    assert cli("ingest", nodes, "--cluster", "c", "--db", db).exit_code == 0
    empty = tmp_path / "nodes_2.csv"
    empty.write_text(NODE_HEADER + "\n")
    r = cli("ingest", empty, "--cluster", "c", "--db", db)
    assert "no node loaded: it holds no node line (only its header); cluster c's node list is unchanged" in " ".join(r.output.split())
    assert query(db, "SELECT count(*) FROM nodes WHERE cluster = 'c'")[0][0] == 40
    r = cli("ingest", empty, "--cluster", "d", "--db", db)
    r = cli("place", "replay", "--cluster", "d", "--db", db)
    assert r.exit_code == 2 and "holds no node line (only its header)" in " ".join(r.output.split()), r.output
