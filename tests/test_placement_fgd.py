"""FGD as the paper's simulator defines it (hkust-adsl/kubernetes-scheduler-simulator), on a tiny
cluster, against values worked out by hand from the Go definitions (issue 34)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from metapilot.models.placement import kernels as K
from metapilot.models.placement.engine import Replay, build_cluster, build_workload, tie_rank, typical_pods
from metapilot.models.placement.typical import target_pod_list


def _cluster(gpus: tuple = (2, 2), model: str = "T4") -> pl.DataFrame:
    return pl.DataFrame({"node": [f"n{i}" for i in range(len(gpus))], "cpu_milli": [64000] * len(gpus),
                         "memory_mib": [100000] * len(gpus), "gpus": list(gpus), "gpu_model": [model] * len(gpus)})


def _pods(rows: list[tuple]) -> pl.DataFrame:
    """rows: (cpu_milli, num_gpu, gpu_milli, gpu_spec)"""
    return pl.DataFrame(rows, orient="row", schema={
        "cpu_milli": pl.Int64, "num_gpu": pl.Int64, "gpu_milli": pl.Int64, "gpu_spec": pl.Utf8}).with_columns(
        pl.lit(10).alias("memory_mib"), pl.lit(0.0).alias("creation_s"), pl.lit(None, pl.Float64).alias("duration_s"))


# A: 4 CPUs + half a GPU (x5), B: 8 CPUs + a whole GPU (x3), C: 2 CPUs (x1), D: no CPU request (x1)
ROWS = [(4000, 1, 500, None)] * 5 + [(8000, 1, 1000, None)] * 3 + [(2000, 0, 0, None), (0, 0, 0, None)]


def test_typical_pods_are_get_typical_pods():
    w = build_workload(_pods(ROWS), build_cluster(_cluster()))
    # threshold 80: 8 of 10 pods wanted; A (5) then B (8) reach it; renormalised over the 8
    top = target_pod_list(w.cpu, w.gm, w.ng, w.spec, 80)
    assert top.select("cpu", "gm", "ng").rows() == [(4000, 500, 1), (8000, 1000, 1)]
    assert top["p"].to_list() == pytest.approx([5 / 8, 3 / 8])
    # threshold 95 (the paper's): 9.5 wanted; C and D tie on count, the larger CPU comes first
    # (sort.Reverse of TargetPodList.Less); D's CPU is the scheduler's non-zero request, 100 milli
    top = target_pod_list(w.cpu, w.gm, w.ng, w.spec)
    assert top.select("cpu", "gm", "ng").rows() == [(4000, 500, 1), (8000, 1000, 1), (2000, 0, 0), (100, 0, 0)]
    assert top["p"].to_list() == pytest.approx([0.5, 0.3, 0.1, 0.1])
    with pytest.raises(ValueError):
        target_pod_list(w.cpu, w.gm, w.ng, w.spec, 0)


def _frag(cpu_free: int, gfree: list[int], typ: tuple, model: int = 0, access: np.ndarray | None = None) -> float:
    g = np.array([gfree], np.int64)
    acc = np.ones((1, 1), np.bool_) if access is None else access
    return K.node_frag(0, np.array([cpu_free], np.int64), g, np.array([len(gfree)], np.int64),
                       np.array([model], np.int64), acc, *typ)


def test_fragment_measure_is_node_gpu_share_frag_amount_score():
    w = build_workload(_pods(ROWS), build_cluster(_cluster()))
    typ = typical_pods(w)  # A 0.5, B 0.3, C 0.1, D 0.1
    # 6 CPUs left, GPUs [300, 1000] left (1300 milli):
    #  C, D: CPU-only (XL): every idle milli-GPU, 0.2 x 1300 = 260
    #  A: GPU 1 fits and 6 >= 4 CPUs (Q3): the GPU with less than 500 left is a fragment, 0.5 x 300 = 150
    #  B: GPU 1 fits but 6 < 8 CPUs (Q4): all of it, 0.3 x 1300 = 390
    assert _frag(6000, [300, 1000], typ) == pytest.approx(800.0)
    # 10 CPUs, two free GPUs: only the CPU-only pods' share, 0.2 x 2000
    assert _frag(10000, [1000, 1000], typ) == pytest.approx(400.0)
    # no GPU left: no fragment
    assert _frag(10000, [0, 0], typ) == 0.0
    # [300, 500], 2 CPUs: A lacks CPU (Q4) 0.5 x 800, B lacks a GPU (Q2/Q1) 0.3 x 800, C/D 0.2 x 800
    assert _frag(2000, [300, 500], typ) == pytest.approx(800.0)
    # a typical pod whose GPU type the node does not have (NoAccess): all of it
    spec = build_workload(_pods([(1000, 1, 500, "V100")]), build_cluster(_cluster(model="V100")))
    assert _frag(64000, [300, 1000], typical_pods(spec), access=np.zeros((1, 1), np.bool_)) == pytest.approx(1300.0)
    assert _frag(64000, [300, 1000], typical_pods(spec)) == pytest.approx(300.0)


def test_fgd_score_and_its_ties():
    # n0: 6 CPUs and GPUs [300, 1000] left, n1 empty; an A pod (4 CPUs, 500 milli)
    c = build_cluster(_cluster())
    w = build_workload(_pods(ROWS), c)
    rp = Replay(c, w, "time", seed=0, typical=typical_pods(w))
    rp.cl[1][0] = 6000
    rp.cl[3][0] = [300, 1000]
    rp._init_sums()
    assert rp.st[0].tolist() == pytest.approx([800.0, 0.2 * 2000])
    score = [K._fgd_score(n, 0, rp.cl[1], rp.cl[3], rp.cl[4], rp.cl[5], rp.cl[6], *rp.typ, rp.st[0], w.cpu, w.ng, w.gm)
             for n in range(2)]
    # n0 after: 2 CPUs, [300, 500]: 800 (above), drop 0 -> int(sigmoid(0) x 100) = 50
    # n1 after: 60 CPUs, [500, 1000]: C/D 0.2 x 1500, A fits (Q3, nothing below 500), B fits (Q3,
    #   the 500 left is below 1000) 0.3 x 500: 450; drop 400 - 450 -> int(sigmoid(-0.05) x 100) = 48
    assert score == [50, int(100 / (1 + math.exp(0.05)))] == [50, 48]
    # equal scores go to the node of lowest tie rank (the simulator's selectHost: the smallest name,
    # after it prefixed every name with its index in a seeded permutation), the same on every run
    c = build_cluster(_cluster(gpus=(2, 2, 2)))
    w = build_workload(_pods([(4000, 1, 1000, None)]), c)
    for seed in range(5):
        for policy in ("fgd", "best-fit"):
            rp = Replay(c, w, "time", seed=seed)
            rp.run(policy)
            assert rp.st[3][0] == int(np.argmin(tie_rank(3, seed)))
    assert sorted(tie_rank(3, 7).tolist()) == [0, 1, 2] and tie_rank(40, 7).tolist() == tie_rank(40, 7).tolist()
    assert tie_rank(40, 7).tolist() != tie_rank(40, 8).tolist()


def test_cpu_only_pod_goes_to_the_lowest_rank_among_equal_fgd_scores():
    """FGD on a CPU-only pod (`calculateGpuShareFragExtendScore`, `nodeRes.Sub`): only the CPU moves.
    Typical pods A (4 CPUs + half a GPU) 0.5, B (8 CPUs + a GPU) 0.3, C and D (CPU-only) 0.2; a
    C pod (2 CPUs) arrives. n0 and n1: 64 CPUs, two free GPUs: after it 62 CPUs, every typical pod
    still fits, the fragment stays 0.2 x 2000 = 400: drop 0, score int(sigmoid(0) x 100) = 50.
    n2: 9 CPUs, two free GPUs (fragment 400); after it 7 CPUs: B lacks CPU (Q4), 0.3 x 2000 more:
    drop -600, score int(sigmoid(-0.6) x 100) = 35. The pod goes to the one of n0, n1 whose tie rank
    is lower, never to n2 even where n2 ranks first; first-fit takes n0 whatever the ranks."""
    c = build_cluster(_cluster(gpus=(2, 2, 2)))
    w = build_workload(_pods(ROWS), c)
    assert (w.cpu[8], w.ng[8]) == (2000, 0)
    for rank, want in (([0, 1, 2], 0), ([2, 1, 0], 1), ([1, 0, 2], 1), ([1, 2, 0], 0)):
        rp = Replay(c, w, "time", seed=0, typical=typical_pods(w))
        rp.cl[1][2] = 9000
        rp.cl[7][:] = rank
        rp._init_sums()
        assert rp.st[0].tolist() == pytest.approx([400.0, 400.0, 400.0])
        score = [K._fgd_score(n, 8, rp.cl[1], rp.cl[3], rp.cl[4], rp.cl[5], rp.cl[6], *rp.typ, rp.st[0], w.cpu, w.ng,
                              w.gm) for n in range(3)]
        assert score == [50, 50, int(100 / (1 + math.exp(0.6)))] == [50, 50, 35]
        args = (rp.cl[0], rp.cl[1], rp.cl[2], rp.cl[3], rp.cl[4], rp.cl[5], rp.cl[6], w.cpu, w.mem, w.ng, w.gm, w.spec,
                *rp.typ, rp.st[0], rp.st[8], rp.pods[8], rp.st[10], rp.st[11], rp.st[12], rp.cl[7])
        assert K.select_node(8, K.FGD, *args) == want
        assert K.select_node(8, K.FIRST_FIT, *args) == 0


def test_gpushare_list_is_made_from_the_default_list():
    """tests/data/openb/openb_pod_list_gpushare80.csv.gz is what bench/make_gpushare.py makes (seed 0)."""
    import gzip
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("make_gpushare", root / "bench" / "make_gpushare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pods = pl.read_csv(gzip.decompress(mod.DEFAULT.read_bytes()), infer_schema_length=0)
    pods = pods.with_columns(pl.col("num_gpu", "gpu_milli", "creation_time").cast(pl.Int64))
    made = mod.gpushare(pods, 0.8, 0).select(pods.columns).cast(pl.Utf8)
    kept = pl.read_csv(gzip.decompress((mod.DEFAULT.parent / "openb_pod_list_gpushare80.csv.gz").read_bytes()),
                       infer_schema_length=0)
    assert made.fill_null("").equals(kept.fill_null(""))
    gpu = made.filter(pl.col("num_gpu") != "0")
    share = gpu.filter((pl.col("num_gpu") == "1") & (pl.col("gpu_milli").cast(pl.Int64) < 1000))
    assert made.height == pods.height and share.height == round(0.8 * gpu.height)


def test_cpu250_list_is_made_from_the_default_list():
    """tests/data/openb/openb_pod_list_cpu250.csv.gz is what bench/make_cpuheavy.py makes (seed 0): the
    default list's GPU pods as they are, CPU-only pods drawn from its own to 25% of the pods."""
    import gzip
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("make_cpuheavy", root / "bench" / "make_cpuheavy.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(root / "bench"))
    pods = pl.read_csv(gzip.decompress(mod.DEFAULT.read_bytes()), infer_schema_length=0)
    pods = pods.with_columns(pl.col("num_gpu", "creation_time").cast(pl.Int64))
    made = mod.cpuheavy(pods, 0.25, 0).select(pods.columns).cast(pl.Utf8)
    kept = pl.read_csv(gzip.decompress((mod.DEFAULT.parent / "openb_pod_list_cpu250.csv.gz").read_bytes()),
                       infer_schema_length=0)
    assert made.fill_null("").equals(kept.fill_null(""))
    cpu = made.filter(pl.col("num_gpu") == "0")
    gpu = made.filter(pl.col("num_gpu") != "0")
    assert gpu.height == pods.filter(pl.col("num_gpu") > 0).height == 7064
    assert cpu.height == round(0.25 / 0.75 * gpu.height) == 2355
    with pytest.raises(ValueError):
        mod.cpuheavy(pods, 1.0, 0)
