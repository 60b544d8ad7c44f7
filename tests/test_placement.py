"""Node placement (SPEC §11): openb and Prometheus parsers, their ingest, the node-level replay."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from placement_fixtures import openb_warehouse
from metapilot.models.placement.engine import (
    Replay,
    build_cluster,
    build_workload,
    replay,
    typical_pods,
)
from metapilot.transforms.openb import (
    POD_HEADER,
    detect_openb,
    parse_node_list,
    parse_pod_list,
    placement_pods,
)
from metapilot.transforms.prometheus import (
    is_exposition,
    is_query_range_json,
    parse_exposition,
    parse_labels,
    parse_query_range,
)

DATA = Path(__file__).parent / "data"
E2E = DATA / "metrics" / "node_exporter-e2e-output.txt.gz"
NODES = DATA / "openb" / "openb_node_list_gpu_node.csv"
PODS = DATA / "openb" / "openb_pod_list_default.csv.gz"
SPEC_PODS = DATA / "openb" / "openb_pod_list_gpuspec33_head.csv"
T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def _lines(text: str) -> pl.DataFrame:
    rows = text.split("\n")
    if rows and rows[-1] == "":
        rows = rows[:-1]
    return pl.DataFrame({"line_no": list(range(1, len(rows) + 1)), "line": rows},
                        schema={"line_no": pl.Int64, "line": pl.Utf8})


# --- Prometheus ----------------------------------------------------------------------------------


def test_exposition_on_node_exporters_own_output():
    text = gzip.decompress(E2E.read_bytes()).decode()
    lines = _lines(text)
    assert is_exposition(text.split("\n")[:200])
    rows, q, skipped = parse_exposition(lines, "host-a", T0)
    samples = [ln for ln in text.split("\n") if ln.strip() and not ln.startswith("#")]
    assert q.height == 0
    assert rows.height == len(samples) == 3027
    assert skipped == lines.height - rows.height
    # a label value with blanks, parentheses and '@' (node_cpu_info), kept whole
    info = rows.filter(pl.col("metric") == "node_cpu_info").row(0, named=True)
    assert json.loads(info["labels"])["model_name"] == "Intel(R) Core(TM) i7-8650U CPU @ 1.90GHz"
    # exponent notation
    v = rows.filter(pl.col("metric") == "node_bcache_btree_read_average_duration_seconds")["value"][0]
    assert v == pytest.approx(1.305e-06)
    assert set(rows["node"].unique()) == {"host-a"} and set(rows["ts"].unique()) == {T0}


def test_exposition_edge_cases_and_bad_lines():
    text = ('# TYPE x gauge\n'
            'x{instance="n1:9100",path="a\\"b\\\\c\\nd"} NaN 1714521600000\n'
            'x{node="n2"} +Inf\n'
            'x -Inf\n'
            'x{a="1",} 3\n'
            'this is not a sample\n'
            'y{a="1"} twelve\n')
    rows, q, skipped = parse_exposition(_lines(text), "dflt", T0)
    assert rows.height == 4 and skipped == 1
    r = rows.row(0, named=True)
    assert r["node"] == "n1" and json.loads(r["labels"])["path"] == 'a"b\\c\nd'
    assert np.isnan(r["value"]) and r["ts"] == datetime(2024, 5, 1, tzinfo=timezone.utc)
    assert rows["node"].to_list() == ["n1", "dflt", "dflt", "dflt"]  # only `instance` names the node
    assert rows["value"][1] == float("inf") and rows["value"][2] == float("-inf")
    assert sorted(q["line_no"].to_list()) == [6, 7]
    assert "not a number" in q.filter(pl.col("line_no") == 7)["reason"][0]
    assert parse_labels('a="1" b="2"') is None  # missing comma


def test_query_range_json():
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "node_load1", "instance": "gpu-7:9100", "job": "node"},
         "values": [[1714521600, "0.5"], [1714521605, "0.75"], [1714521610, "oops"]]},
        {"metric": {"__name__": "node_memory_MemAvailable_bytes", "instance": "gpu-8:9100"},
         "values": [[1714521600.5, "123456"]]}]}}
    text = json.dumps(doc, indent=1)
    assert is_query_range_json(text.split("\n")[:50])
    rows, problems = parse_query_range(text, "dflt")
    assert rows.height == 3 and len(problems) == 1
    assert rows["node"].to_list() == ["gpu-7", "gpu-7", "gpu-8"]
    assert json.loads(rows["labels"][0]) == {"instance": "gpu-7:9100", "job": "node"}
    assert rows["ts"][1] == datetime(2024, 5, 1, 0, 0, 5, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="failed"):
        parse_query_range(json.dumps({"status": "error", "error": "bad query", "data": {}}), "d")
    with pytest.raises(ValueError, match="JSON"):
        parse_query_range("{not json", "d")


# --- openb ---------------------------------------------------------------------------------------


def test_openb_detect_and_node_list():
    text = NODES.read_text()
    assert detect_openb(text.split("\n")[:5]) == "openb-nodes"
    assert detect_openb(["name,cpu_milli,memory_mib,num_gpu,gpu_milli"]) == "openb-pods"
    assert detect_openb(["JobID|State"]) is None
    nodes, res = parse_node_list(_lines(text))
    assert nodes.height == 1213 and res.quarantine.height == 0
    assert res.lines_read == nodes.height + res.merged + res.quarantine.height + res.skipped
    assert int(nodes["gpus"].sum()) == 6212
    assert nodes.filter(pl.col("node") == "openb-node-0000").row(0, named=True)["gpu_model"] == "P100"


def test_openb_pod_list_keeps_fractional_gpus_and_quarantines_bad_lines():
    text = gzip.decompress(PODS.read_bytes()).decode()
    res, extras = parse_pod_list(_lines(text), POD_HEADER, "c")
    assert res.jobs.height == 8152 and res.quarantine.height == 0 and res.reconciles()
    j = res.jobs.join(extras, on="source_line")
    share = j.filter((pl.col("req_gpus") == 1) & (pl.col("gpu_milli") < 1000))
    assert share.height > 1000  # GPU-sharing pods keep their milli-GPU
    assert j.filter(pl.col("job_name") == "openb-pod-0001").row(0, named=True)["gpu_milli"] == 460
    assert set(j["state"].unique()) == {"RUNNING", "COMPLETED", "FAILED", "PENDING"}
    bad = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
           "p-1,1000,10,1,500,,LS,Running,-5,10,0\n"
           "p-2,1000,10,1,500,,LS,Running,50,10,50\n"
           "p-3,1000,10\n"
           "p-4,1000,10,2,500,,LS,Running,5,10,6\n"
           "p-5,1000,10,1,500,,LS,Pending,5,10,\n")
    res, extras = parse_pod_list(_lines(bad), POD_HEADER, "c")
    reasons = dict(zip(res.quarantine["line_no"].to_list(), res.quarantine["reason"].to_list()))
    assert reasons[2] == "negative time" and reasons[3] == "deletion_time before creation_time"
    assert "11 comma-separated" in reasons[4] and "num_gpu > 1" in reasons[5]
    assert res.jobs["job_id"].to_list() == ["5"] and res.jobs["start_time"][0] is None
    assert res.reconciles()


def test_ingest_node_list_pods_and_metrics(mem_con, site_key, tmp_path):
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    pods = tmp_path / "pods.csv"
    pods.write_text(SPEC_PODS.read_text() + "openb-pod-9999,1000,10,1,500,,LS,Running,-5,10,0\n")
    prom = tmp_path / "node-a.prom"
    prom.write_bytes(gzip.decompress(E2E.read_bytes()))
    reports = [ingest_file(mem_con, p, IngestOptions(cluster="ob"), site_key) for p in (NODES, pods, prom)]
    assert [r.format for r in reports] == ["openb-nodes", "openb-pods", "prom-text"]
    assert all(r.outcome == "loaded" and r.reconciles for r in reports), [r.message for r in reports]
    assert mem_con.execute("SELECT count(*), sum(gpus) FROM nodes WHERE cluster = 'ob'").fetchall()[0] == (1213, 6212)
    n_pods = len(SPEC_PODS.read_text().strip().split("\n")) - 1
    got = mem_con.execute("SELECT count(*), count(gpu_milli), count(gpu_type), min(source_format) FROM jobs").fetchall()[0]
    assert got == (n_pods, n_pods, n_pods, "openb")
    q = mem_con.execute("SELECT raw, reason FROM quarantine").fetchall()
    assert len(q) == 1 and q[0][1] == "negative time" and "openb-pod-9999" not in q[0][0]  # name hashed
    assert mem_con.execute("SELECT count(*) FROM node_metrics WHERE node = 'node-a'").fetchall()[0][0] == 3027
    again = ingest_file(mem_con, NODES, IngestOptions(cluster="ob"), site_key)
    assert again.outcome == "skipped"


# --- the replay ----------------------------------------------------------------------------------


def _cluster(gpus=(2, 2), cpu=64000, model="T4") -> pl.DataFrame:
    return pl.DataFrame({"node": [f"n{i}" for i in range(len(gpus))], "cpu_milli": [cpu] * len(gpus),
                         "memory_mib": [100000] * len(gpus), "gpus": list(gpus), "gpu_model": [model] * len(gpus)})


def _pods(rows: list[tuple]) -> pl.DataFrame:
    """rows: (cpu_milli, num_gpu, gpu_milli, gpu_spec, creation_s, duration_s)"""
    return pl.DataFrame(rows, orient="row", schema={
        "cpu_milli": pl.Int64, "num_gpu": pl.Int64, "gpu_milli": pl.Int64, "gpu_spec": pl.Utf8,
        "creation_s": pl.Float64, "duration_s": pl.Float64}).with_columns(pl.lit(10).alias("memory_mib"))


def test_time_replay_queue_wait_and_bad_pods():
    c = build_cluster(_cluster(gpus=(1,)))
    pods = _pods([(1000, 1, 1000, None, 0, 100),     # takes the only GPU until t=100
                  (1000, 1, 1000, None, 10, 50),     # waits 90 s, runs 100..150
                  (1000, 2, 1000, None, 20, 5),      # two GPUs: fits no node, counted, never crashes
                  (1000, 1, 500, "A100", 30, 5),     # a model no node has
                  (1000, 1, 500, None, 40, 10)])     # waits until 150 (the GPU is whole-taken until then)
    w = build_workload(pods, c)
    for policy in ("random", "first-fit", "best-fit", "least-loaded", "fgd"):
        r = replay(c, w, policy, "time", seed=1)
        assert (r["pods"], r["placed"], r["failed"], r["unfit"], r["unknown_gpu_model"]) == (5, 3, 2, 2, 1), policy
        assert r["mean_wait_s"] == pytest.approx((0 + 90 + 110) / 3), policy
        assert r["idle_share"] == 0.0  # the only GPU is busy whenever a pod waits


def test_best_fit_packs_shares_and_fgd_avoids_fragmenting():
    # two nodes of two GPUs; two half-GPU pods and a whole-GPU pod
    c = build_cluster(_cluster(gpus=(2, 2)))
    pods = _pods([(1000, 1, 500, None, 0, -1), (1000, 1, 500, None, 1, -1), (1000, 1, 1000, None, 2, -1)])
    w = build_workload(pods, c)
    for policy in ("best-fit", "fgd"):
        rp = Replay(c, w, "time", seed=3)
        rp.run(policy)
        gfree = rp.cl[3]
        # 0.5 + 0.5 share one GPU, the whole-GPU pod gets a free one: nothing is left fragmented
        assert sorted(gfree[:, :2].ravel().tolist()) == [0, 0, 1000, 1000], policy
    # FGD by the paper's measure: with mostly whole-GPU pods in the target workload, a second half-GPU
    # pod goes next to the first (the half GPU left over is a fragment to whole-GPU pods)
    pods = _pods([(1000, 1, 500, None, 0, -1), (1000, 1, 500, None, 1, -1)] + [(1000, 1, 1000, None, 9, -1)] * 8)
    w = build_workload(pods, c)
    rp = Replay(c, w, "time", seed=0)
    rp.step()  # first pod: any node
    rp.place(int(np.flatnonzero(rp.mask)[0]))
    p = rp.step()
    typ = typical_pods(w)
    from metapilot.models.placement import kernels as K

    scores = [K._fgd_score(n, p, rp.cl[1], rp.cl[3], rp.cl[4], rp.cl[5], rp.cl[6], *typ, rp.st[0], w.cpu, w.ng, w.gm)
              for n in range(2)]
    assert scores == [int(100 / (1 + np.exp(-0.4))), int(100 / (1 + np.exp(0.4)))]  # 0.8 x 500 milli


def test_inflate_reproduces_the_fgd_papers_allocation_on_one_seed():
    """The paper's headline (mean of 10 seeds: Random 86.3%, BestFit 92.9%, FGD 95.2% at 100% arrived);
    one seed here, with the seed-to-seed spread as tolerance (docs/benchmarks.md has the 10-seed means)."""
    nodes, _ = parse_node_list(_lines(NODES.read_text()))
    res, extras = parse_pod_list(_lines(gzip.decompress(PODS.read_bytes()).decode()), POD_HEADER, "c")
    pods = placement_pods(res.jobs, extras)
    c = build_cluster(nodes)
    w = build_workload(pods, c)
    typ = typical_pods(w)
    got = {p: replay(c, w, p, "inflate", seed=42, typical=typ) for p in ("random", "best-fit", "fgd")}
    assert got["random"]["gpu_alloc_share"] == pytest.approx(0.863, abs=0.015)
    assert got["best-fit"]["gpu_alloc_share"] == pytest.approx(0.929, abs=0.015)
    assert got["fgd"]["gpu_alloc_share"] == pytest.approx(0.952, abs=0.015)
    curve = got["fgd"]["curve"]
    assert len(curve) == 131 and curve[50] == pytest.approx(0.50, abs=0.01)  # everything fits at 50%
    again = replay(c, w, "fgd", "inflate", seed=42, typical=typ)
    assert again["gpu_alloc_share"] == got["fgd"]["gpu_alloc_share"]  # deterministic from its seed


def test_place_replay_cli_json(tmp_path, site_key, monkeypatch):
    from metapilot.warehouse.db import connect
    from typer.testing import CliRunner

    from metapilot.cli.app import app

    db = openb_warehouse(tmp_path, SPEC_PODS, every=1)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["place", "replay", "--cluster", "ob", "--policy", "best-fit", "--mode", "time",
                                 "--json", str(out), "--db", str(db)])
    assert r.exit_code == 0, r.output
    got = json.loads(out.read_text())
    for key in ("policy", "pods", "placed", "failed", "mean_wait_s", "gpu_alloc_share", "frag_gpu_share",
                "imbalance", "hot_node_share", "idle_share"):
        assert key in got
    assert got["policy"] == "best-fit" and got["pods"] == got["placed"] + got["failed"]
    con = connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM placement_runs WHERE cluster = 'ob'").fetchall()[0][0] == 1
    finally:
        con.close()
    r = CliRunner().invoke(app, ["place", "replay", "--cluster", "nope", "--db", str(db)])
    assert r.exit_code != 0 and "no node list" in r.output
