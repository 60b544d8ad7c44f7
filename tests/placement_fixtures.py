"""Shared by the placement tests: an openb warehouse on disk (every 30th node, a pod list)."""

from __future__ import annotations

from pathlib import Path

OPENB = Path(__file__).parent / "data" / "openb"
NODES = OPENB / "openb_node_list_gpu_node.csv"
SPEC_PODS = OPENB / "openb_pod_list_gpuspec33_head.csv"


def openb_warehouse(tmp_path: Path, pods: Path = SPEC_PODS, every: int = 30, cluster: str = "ob") -> Path:
    """A warehouse file holding every `every`-th node of the openb node list and a pod list."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    lines = NODES.read_text().splitlines()
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("\n".join([lines[0]] + lines[1::every]) + "\n")
    db = tmp_path / "w.duckdb"
    con = connect(db)
    try:
        for p in (nodes, pods):
            rep = ingest_file(con, p, IngestOptions(cluster=cluster), bytes(range(32)))
            assert rep.outcome == "loaded", rep.message
    finally:
        con.close()
    return db
