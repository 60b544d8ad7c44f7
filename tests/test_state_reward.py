"""State vector, reward and as-run aggregates (SPEC §7), checked against hand computations."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

import numpy as np
import polars as pl
import pytest
from controller_fixtures import CLUSTER, load_warehouse, read_swf
from hypothesis import given, settings
from hypothesis import strategies as st
from metapilot.transforms.asrun_state import capacity_at, to_epoch_s
from metapilot.transforms.reward import (
    ControllerRewardConfig,
    reward_from_aggregates,
    utilisation,
)
from metapilot.transforms.state import (
    AGGREGATES,
    FEATURE_NAMES,
    FEATURES,
    N_FEATURES,
    StateConfig,
    local_seconds,
    state_from_aggregates,
)
from metapilot.warehouse.asrun_queries import aggregates_at, asrun_aggregates

from metapilot.ground.paths import SQL_DIR

T0 = to_epoch_s("2024-01-01T00:00:00")  # a Monday, 00:00 UTC


def _agg(**over) -> dict:
    base = dict(epoch_start=T0, used_cpu=50, used_gpu=0, used_mem=0, cap_cpu=100, cap_gpu=0, cap_mem=0,
                queue_len=9, queued_cpu=100, queued_gpu=0, queued_mem=0, wait_mean_s=999, wait_max_s=99_999,
                long_tail_share=0.25, req_mean_s=3599, arrivals=99)
    return base | over


# --- the feature list is the table's columns --------------------------------------------------------


def test_features_match_mdp_table_columns():
    ddl = (SQL_DIR / "ddl" / "010_mdp.sql").read_text()
    s_cols = re.findall(r"^\s+s_(\w+)\s+FLOAT", ddl, re.M)
    ns_cols = re.findall(r"^\s+ns_(\w+)\s+FLOAT", ddl, re.M)
    assert tuple(s_cols) == FEATURE_NAMES == tuple(ns_cols)
    assert len(FEATURES) == N_FEATURES == 16
    assert all(f.normalisation and f.meaning for f in FEATURES)


# --- state_from_aggregates ------------------------------------------------------------------------


def test_state_by_hand():
    s = state_from_aggregates(**_agg())
    assert s.shape == (1, N_FEATURES) and s.dtype == np.float32
    v = dict(zip(FEATURE_NAMES, s[0].astype(float)))
    assert v["used_cpu"] == pytest.approx(0.5)
    assert v["used_gpu"] == 0 and v["used_mem"] == 0 and v["queued_gpu"] == 0 and v["queued_mem"] == 0
    assert v["queue_len"] == pytest.approx(1 / 3)  # log10(1 + 9) / 3
    assert v["queued_cpu"] == pytest.approx(math.log(2.0), rel=1e-6)  # ln(1 + 100/100)
    assert v["wait_mean"] == pytest.approx(3 / 6)  # log10(1 + 999) / 6
    assert v["wait_max"] == pytest.approx(5 / 6, rel=1e-6)
    assert v["long_tail_share"] == pytest.approx(0.25)
    assert v["req_mean"] == pytest.approx(math.log10(3600) / 6, rel=1e-6)
    assert v["arrivals"] == pytest.approx(2 / 3)
    # Monday 00:00 UTC: hour angle 0, day 0
    assert (v["hour_sin"], v["hour_cos"], v["dow_sin"], v["dow_cos"]) == pytest.approx((0, 1, 0, 1), abs=1e-7)


def test_state_time_features_and_timezone():
    t = to_epoch_s("1996-10-17T12:00:00")  # a Thursday
    s = state_from_aggregates(**_agg(epoch_start=t))[0]
    hs, hc, ds, dc = s[12:16]
    assert (hs, hc) == pytest.approx((0.0, -1.0), abs=1e-6)  # 12:00
    assert (ds, dc) == pytest.approx((math.sin(2 * math.pi * 3 / 7), math.cos(2 * math.pi * 3 / 7)), abs=1e-6)
    # Stockholm in October 1996 is on summer time (UTC+2): 14:00 local
    st_local = state_from_aggregates(**_agg(epoch_start=t), config=StateConfig(timezone="Europe/Stockholm"))[0]
    ang = 2 * math.pi * 14 / 24
    assert st_local[12:14] == pytest.approx((math.sin(ang), math.cos(ang)), abs=1e-6)
    assert local_seconds(np.array([t]), "+02:00")[0] == t + 7200
    assert local_seconds(np.array([t]), "Europe/Stockholm")[0] == t + 7200


def test_state_scalars_equal_array_rows_and_empty_queue():
    rows = [_agg(epoch_start=T0 + 3600 * i, used_cpu=10 * i, queue_len=i) for i in range(4)]
    arrays = {k: np.array([r[k] for r in rows]) for k in AGGREGATES}
    batch = state_from_aggregates(**arrays)
    for i, r in enumerate(rows):  # the env calls it one epoch at a time, with scalars
        np.testing.assert_array_equal(batch[i], state_from_aggregates(**r)[0])
    # queue_len 0: queue features are 0 whatever was passed
    idx = [FEATURE_NAMES.index(n) for n in ("queue_len", "queued_cpu", "wait_mean", "wait_max", "long_tail_share", "req_mean")]
    assert np.all(batch[0, idx] == 0)
    assert batch[0, FEATURE_NAMES.index("arrivals")] > 0


@settings(max_examples=60, deadline=None)
@given(
    used=st.floats(0, 1e6), cap=st.floats(0, 1e5), q=st.integers(0, 100_000), w=st.floats(0, 1e9),
    share=st.floats(0, 1), arr=st.integers(0, 1_000_000), t=st.integers(0, 4_000_000_000),
)
def test_state_is_finite_and_bounded(used, cap, q, w, share, arr, t):
    s = state_from_aggregates(**_agg(epoch_start=t, used_cpu=used, cap_cpu=cap, used_mem=used, cap_mem=cap,
                                     queue_len=q, queued_cpu=used, wait_mean_s=w, wait_max_s=w, long_tail_share=share,
                                     req_mean_s=w, arrivals=arr))
    assert np.all(np.isfinite(s))
    assert s.min() >= -1.0 and s.max() <= 4.0  # ratios clipped at 4, logs of <= 1e9 s stay < 1.6


# --- reward ------------------------------------------------------------------------------------------


PAPER = ControllerRewardConfig(kind="paper")


def test_aligned_reward_by_hand():
    """-(A + lam * G) / (scale_jobs * epoch_s), + mu * utilisation only when the epoch opens with a backlog."""
    rc = ControllerRewardConfig(lam=10.0, mu=2.0, scale_jobs=5.0)
    r = reward_from_aggregates(
        queue_len_end=np.array([0, 3, 3, 0]), wait_mean_end_s=np.zeros(4), u_cpu=np.array([0.5, 0.5, 0.5, 0.9]),
        u_gpu=np.array([0.2, 0.2, 0.2, 0.2]), u_mem=np.zeros(4), cap_gpu=np.array([0, 0, 4, 0]), cap_mem=np.zeros(4),
        queue_len_start=np.array([0, 2, 2, 1]), wait_record_s=np.array([0, 100, 100, 500]),
        wait_max_end_s=np.array([0, 400, 50, 300]), wait_accrued_s=np.array([0, 7200, 7200, 1800]),
        epoch_s=3600, config=rc)
    expected = [
        0.0,  # an empty epoch costs nothing: no constant
        -(7200 + 10 * 300) / (5 * 3600) + 2 * 0.5,  # the largest wait passed the record by 300 s; CPU only
        -(7200 + 10 * 0) / (5 * 3600) + 2 * (0.5 + 0.2),  # below the record: G = 0; GPU partition
        -1800 / (5 * 3600) + 2 * 0.9,
    ]
    np.testing.assert_allclose(r, expected)
    with pytest.raises(ValueError):
        ControllerRewardConfig(kind="nope")


def test_reward_by_hand():
    r = reward_from_aggregates(
        queue_len_end=np.array([0, 5, 5, 5, 5]),
        wait_mean_end_s=np.array([1e6, 2000, 2000, 20_000, 20_000]),
        u_cpu=np.array([0.1, 0.7, 0.7, 0.5, 0.5]),
        u_gpu=np.array([0.9, 0.9, 0.9, 0.8, 0.8]),
        u_mem=np.array([0.3, 0.3, 0.3, 0.4, 0.4]),
        cap_gpu=np.array([0, 0, 0, 8, 8]),
        cap_mem=np.array([0, 0, 1000, 1000, 0]),
        config=PAPER,
    )
    expected = [
        4.0,  # empty queue
        -2000 / 1e3 + 0.7,  # CPU partition, memory unknown: no u_gpu, no u_mem
        -2000 / 1e3 + 0.7 + 0.3,  # CPU partition with memory
        -20_000 / 1e4 + 0.5 + 0.8 + 0.4,  # GPU partition: alpha 1e4, u_gpu counts
        -20_000 / 1e4 + 0.5 + 0.8,
    ]
    np.testing.assert_allclose(r, expected)


def test_reward_config_overrides():
    kw = dict(queue_len_end=3, wait_mean_end_s=5000, u_cpu=0.5, u_gpu=0.5, u_mem=0.5, cap_gpu=4, cap_mem=100)
    paper = lambda **k: ControllerRewardConfig(kind="paper", **k)  # noqa: E731
    assert reward_from_aggregates(**kw, config=paper(alpha=100))[0] == pytest.approx(-50 + 1.5)
    assert reward_from_aggregates(**kw, config=paper(use_gpu=False, use_mem=False))[0] == pytest.approx(-0.5 + 0.5)
    assert reward_from_aggregates(**(kw | {"queue_len_end": 0}), config=paper(empty_queue_reward=1.0))[0] == 1.0
    assert utilisation(np.array([1800.0]), np.array([1.0]), 3600)[0] == 0.5
    assert utilisation(np.array([5.0]), np.array([0.0]), 3600)[0] == 0.0


# --- as-run aggregates ------------------------------------------------------------------------------


def _hand_jobs() -> pl.DataFrame:
    ts = lambda s: None if s is None else datetime.fromtimestamp(T0 + s, tz=timezone.utc)
    rows = [  # job, submit, start, end, cores (alloc, req), mem, timelimit
        ("A", -1800, -600, 5400, 4, 4, 100, 7200),
        ("B", -100, 1800, 9000, 6, 6, 200, 7200),
        ("C", 600, None, None, None, 2, 0, 1000),  # pending until the end of the log
        ("D", 3000, None, 3500, None, 1, 0, 600),  # cancelled while pending
        ("E", 5500, 5500, 5600, 4, 3, 0, 200),  # size = max(alloc 4, req 3)
        ("X", 0, 0, 100, 50, 50, 0, 100),  # another partition
    ]
    return pl.DataFrame({
        "cluster": "hand", "job_id": [r[0] for r in rows], "partition": ["p"] * 5 + ["other"],
        "submit_time": [ts(r[1]) for r in rows], "start_time": [ts(r[2]) for r in rows],
        "end_time": [ts(r[3]) for r in rows],
        "run_s": [None if r[2] is None else r[3] - r[2] for r in rows],
        "timelimit_s": [r[7] for r in rows],
        "alloc_cpus": [r[4] for r in rows], "req_cpus": [r[5] for r in rows],
        "alloc_gpus": [None] * 6, "req_gpus": [None] * 6,
        "alloc_mem_mib": [r[6] for r in rows], "req_mem_mib": [None] * 6,
    }, schema_overrides={"submit_time": pl.Datetime("us", "UTC"), "start_time": pl.Datetime("us", "UTC"),
                         "end_time": pl.Datetime("us", "UTC")})


HAND_CAP = pl.DataFrame({"partition": ["p"], "valid_from_s": [0], "cores": [10], "gpus": [0], "mem_mib": [1000]})


@pytest.mark.parametrize("path", ["frame", "warehouse"])
def test_asrun_aggregates_by_hand(path, mem_con):
    jobs = _hand_jobs()
    cfg = StateConfig(epoch_s=3600, long_tail_s=5000)
    if path == "frame":
        agg = asrun_aggregates(jobs, "hand", T0, T0 + 3 * 3600, partition="p", config=cfg, capacity=HAND_CAP)
    else:
        full = jobs.with_columns(pl.lit("test").alias("source_format"), pl.lit("x").alias("source_file_id"),
                                 pl.lit(datetime(2024, 1, 1, tzinfo=timezone.utc)).alias("ingested_at"))
        mem_con.register("_j", full.to_arrow())
        mem_con.execute("INSERT INTO jobs BY NAME SELECT * FROM _j")
        mem_con.execute("INSERT INTO capacity (cluster, partition, valid_from, cores, gpus, mem_mib, source) VALUES "
                        "('hand', 'p', TIMESTAMPTZ '2020-01-01 00:00:00+00', 10, 0, 1000, 'config')")
        agg = asrun_aggregates(mem_con, "hand", T0, T0 + 3 * 3600, partition="p", config=cfg)
    assert agg["epoch_start"].to_list() == [T0, T0 + 3600, T0 + 7200, T0 + 10800]
    got = {c: agg[c].to_list() for c in agg.columns}
    assert got["used_cpu"] == [4, 10, 6, 0]
    assert got["used_mem"] == [100, 300, 200, 0]
    assert got["queue_len"] == [1, 1, 1, 1]  # B; then C (D left the queue at 3500, before the boundary)
    assert got["queued_cpu"] == [6, 2, 2, 2]
    assert got["wait_mean_s"] == [100, 3000, 6600, 10200]
    assert got["wait_max_s"] == [100, 3000, 6600, 10200]
    assert got["long_tail_share"] == [0, 0, 1, 1]
    assert got["req_mean_s"] == [7200, 1000, 1000, 1000]
    assert got["arrivals"] == [2, 2, 1, 0]  # A, B | C, D | E | -
    np.testing.assert_allclose(got["u_cpu"], [(4 * 3600 + 6 * 1800) / 36000, (4 * 1800 + 6 * 3600 + 4 * 100) / 36000,
                                              6 * 1800 / 36000, 0])
    np.testing.assert_allclose(got["u_mem"], [(100 * 3600 + 200 * 1800) / 3.6e6, (100 * 1800 + 200 * 3600) / 3.6e6,
                                              200 * 1800 / 3.6e6, 0])
    assert got["cap_cpu"] == [10] * 4 and got["cap_mem"] == [1000] * 4


@pytest.mark.parametrize("path", ["frame", "warehouse"])
def test_asrun_a_job_that_ran_at_an_unknown_time_is_never_queued(path, mem_con):
    """SWF wait -1 (NASA-iPSC, Lublin): the job ran, but the log does not say when. Counted as
    pending forever, such jobs filled the as-run queue for the rest of the log (states, inferred
    actions and the lookahead's views, which grew with them); they are submitted and nothing else."""
    cfg = StateConfig(epoch_s=3600, long_tail_s=5000)
    unknown = pl.DataFrame({"cluster": ["hand"], "job_id": ["F"], "partition": ["p"],
                            "submit_time": [datetime.fromtimestamp(T0 + 4000, tz=timezone.utc)], "start_time": [None],
                            "end_time": [None], "run_s": [500], "timelimit_s": [600], "alloc_cpus": [None],
                            "req_cpus": [3], "alloc_gpus": [None], "req_gpus": [None], "alloc_mem_mib": [None],
                            "req_mem_mib": [None]})
    jobs = pl.concat([_hand_jobs(), unknown], how="diagonal_relaxed")

    def aggregates(frame: pl.DataFrame, cluster: str) -> pl.DataFrame:
        if path == "frame":
            return asrun_aggregates(frame.with_columns(pl.lit(cluster).alias("cluster")), cluster, T0, T0 + 3 * 3600,
                                    partition="p", config=cfg, capacity=HAND_CAP)
        full = frame.with_columns(pl.lit(cluster).alias("cluster"), pl.lit("test").alias("source_format"),
                                  pl.lit("x").alias("source_file_id"),
                                  pl.lit(datetime(2024, 1, 1, tzinfo=timezone.utc)).alias("ingested_at"))
        mem_con.register("_j", full.to_arrow())
        mem_con.execute("INSERT INTO jobs BY NAME SELECT * FROM _j")
        mem_con.unregister("_j")
        mem_con.execute("INSERT INTO capacity (cluster, partition, valid_from, cores, gpus, mem_mib, source) VALUES "
                        f"('{cluster}', 'p', TIMESTAMPTZ '2020-01-01 00:00:00+00', 10, 0, 1000, 'config')")
        return asrun_aggregates(mem_con, cluster, T0, T0 + 3 * 3600, partition="p", config=cfg)

    with_f, without = aggregates(jobs, "hand-f"), aggregates(_hand_jobs(), "hand")
    for c in without.columns:
        if c != "arrivals":
            assert with_f[c].to_list() == without[c].to_list(), c
    assert with_f["arrivals"].to_list() == [2, 2, 2, 0]  # F, submitted at 4000 s, is an arrival of the epoch before 7200 s


def test_capacity_dated_entries_and_partitions():
    cap = pl.DataFrame({"partition": ["a", "a", "b"], "valid_from_s": [0, 1000, 0], "cores": [10, 20, 5],
                        "gpus": [0, 0, 4], "mem_mib": [None, None, 64]})
    c = capacity_at(cap, np.array([500, 1000, 5000]))
    assert c["cap_cpu"].tolist() == [15, 25, 25] and c["cap_gpu"].tolist() == [4, 4, 4] and c["cap_mem"].tolist() == [64] * 3
    assert capacity_at(cap, np.array([1500]), "a")["cap_cpu"].tolist() == [20]
    with pytest.raises(ValueError, match="no capacity"):
        capacity_at(cap.head(0), np.array([0]))


def test_kth_aggregates_reconcile_with_brute_force(mem_con):
    """SQL range joins vs a direct per-boundary computation over the same real jobs."""
    jobs = load_warehouse(mem_con)
    agg = asrun_aggregates(mem_con, CLUSTER, "1996-10-15T12:00:00", "1996-10-18T12:00:00")
    sub = jobs["submit_time"].dt.epoch("s").to_numpy()
    start = jobs["start_time"].dt.epoch("s").to_numpy()
    end = jobs["end_time"].dt.epoch("s").to_numpy()
    cores = np.maximum(jobs["alloc_cpus"].to_numpy(), jobs["req_cpus"].to_numpy())
    req = jobs["timelimit_s"].to_numpy()
    for row in agg.iter_rows(named=True):
        t = row["epoch_start"]
        run = (start <= t) & (t < end)
        q = (sub <= t) & (t < start)
        assert row["used_cpu"] == cores[run].sum()
        assert row["queue_len"] == q.sum()
        assert row["queued_cpu"] == cores[q].sum()
        if q.any():
            assert row["wait_mean_s"] == pytest.approx((t - sub[q]).mean())
            assert row["wait_max_s"] == (t - sub[q]).max()
            assert row["req_mean_s"] == pytest.approx(req[q].mean())
        assert row["arrivals"] == ((sub >= t - 3600) & (sub < t)).sum()
        overlap = np.clip(np.minimum(end, t + 3600) - np.maximum(start, t), 0, None)
        assert row["u_cpu"] == pytest.approx((cores * overlap).sum() / (100 * 3600))
    assert agg["queue_len"].max() > 10  # a real backlog, not an idle toy


def test_aggregates_at_single_instant(mem_con):
    load_warehouse(mem_con)
    t = to_epoch_s("1996-10-17T12:00:00")
    one = aggregates_at(mem_con, CLUSTER, np.array([t]))
    many = asrun_aggregates(mem_con, CLUSTER, "1996-10-17T10:00:00", "1996-10-17T14:00:00")
    assert one.height == 1
    assert one.row(0) == many.filter(pl.col("epoch_start") == t).row(0)


def test_jobs_frame_and_warehouse_give_the_same_aggregates(mem_con):
    jobs = load_warehouse(mem_con)
    a = asrun_aggregates(mem_con, CLUSTER, "1996-10-16T00:00:00", "1996-10-17T00:00:00")
    cap = pl.DataFrame({"partition": ["*"], "valid_from_s": [0], "cores": [100], "gpus": [0], "mem_mib": [None]})
    b = asrun_aggregates(jobs, CLUSTER, "1996-10-16T00:00:00", "1996-10-17T00:00:00", capacity=cap)
    assert a.equals(b)
    assert read_swf().height == jobs.height
