"""The batch validation step: the repo's GX suite decides which parsed rows are quarantined.

Real rows are transcribed by hand from Open XDMoD's unit fixtures
(../shared/data/slurm/xdmod-unit: input/accounting-logs.log, input/non-ended-job-state.log and
the expected parse in output/accounting-logs.json; LGPL-3, see LICENSE-xdmod-LGPL3 there).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metapilot.transforms.canonical import (
    PARSED_SCHEMA,
    SLURM_STATES,
    conform,
    empty_jobs,
)
from metapilot.transforms.data_checks import (
    SUITE_PATH,
    SuiteError,
    DataCheckOutcome,
    load_suite,
    check_jobs,
)

SUITE = json.loads(SUITE_PATH.read_text())
ROW_LEVEL = [e for e in SUITE["expectations"] if not e["type"].startswith("expect_table_")]
COUNT_COLUMNS = ["wait_s", "run_s", "timelimit_s", "req_cpus", "req_nodes", "req_mem_mib", "req_gpus",
                 "alloc_cpus", "alloc_nodes", "alloc_mem_mib", "alloc_gpus"]


def ts(epoch: int | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=timezone.utc)


def iso(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc)


def real_rows() -> pl.DataFrame:
    """Canonical rows for xdmod-unit jobs, plus an array task and a het component."""
    rows = [
        # accounting-logs.log line 1: TIMEOUT, 32 nodes x 8 cpus, 3000Mc
        dict(job_id="4103947", source_line=1, user_name="unknown", account_name="anon", group_name="anon",
             partition="general-compute", qos="qos", state="TIMEOUT", exit_code="1:0",
             submit_time=ts(1435327020), eligible_time=ts(1435327020), start_time=ts(1435460150),
             end_time=ts(1435719350), wait_s=1435460150 - 1435327020, run_s=259200, timelimit_s=259200,
             req_cpus=256, req_nodes=32, req_mem_mib=3000 * 256, req_gpus=0, alloc_cpus=256, alloc_nodes=32,
             alloc_mem_mib=3000 * 256, alloc_gpus=0, job_name="1AbC-2-3"),
        # line 2: "CANCELLED by 102216" maps to CANCELLED
        dict(job_id="4107166", source_line=2, user_name="hanx", account_name="dspumpkins", state="CANCELLED",
             exit_code="0:0", submit_time=ts(1435348285), eligible_time=ts(1435348286),
             start_time=ts(1435504489), end_time=ts(1435756673), wait_s=1435504489 - 1435348285, run_s=252184,
             timelimit_s=259200, req_cpus=36, req_nodes=3, req_mem_mib=48000 * 3, alloc_cpus=36, alloc_nodes=3),
        # line 3
        dict(job_id="4107219", source_line=3, user_name="anonuser", state="COMPLETED", exit_code="0:0",
             submit_time=ts(1435350142), eligible_time=ts(1435350142), start_time=ts(1435665844),
             end_time=ts(1435716293), wait_s=1435665844 - 1435350142, run_s=50449, timelimit_s=51600,
             req_cpus=48, req_nodes=4, req_mem_mib=3000 * 48, alloc_cpus=48, alloc_nodes=4),
        # line 4: zero-length GPU job, eligible Unknown, no time limit, everything 0
        dict(job_id="5692623", source_line=4, user_name="xms", state="COMPLETED", exit_code="0:0",
             submit_time=ts(1470031268), eligible_time=None, start_time=ts(1470035049), end_time=ts(1470035049),
             wait_s=1470035049 - 1470031268, run_s=0, timelimit_s=None, req_cpus=0, req_nodes=0, req_mem_mib=0,
             req_gpus=2, alloc_gpus=2, node_list="cpn-k16-35-01,cpn-k16-37-01"),
        # non-ended-job-state.log line 1: RUNNING
        dict(job_id="3451067", cluster="phillips", source_line=1, state="RUNNING", exit_code="0:0",
             submit_time=iso("2020-06-24T15:06:34"), eligible_time=iso("2020-06-24T15:06:34"),
             start_time=iso("2020-06-30T19:24:08"), end_time=None, timelimit_s=259200, req_cpus=12, req_nodes=1,
             req_mem_mib=48000),
        # line 2: PENDING, never started (start null), end Unknown-ish = submit in XDMoD's output
        dict(job_id="3483276", cluster="phillips", source_line=2, state="PENDING", exit_code="0:0",
             submit_time=iso("2020-07-01T15:28:17"), eligible_time=iso("2020-07-01T15:28:17"), start_time=None,
             end_time=iso("2020-07-01T15:28:17"), timelimit_s=259200, req_cpus=40, req_nodes=1, req_mem_mib=120000),
        # an array task and a het component (ids as SPEC §4 writes them)
        dict(job_id="123_4", array_job_id="123", array_task_id=4, source_line=5, state="COMPLETED",
             submit_time=iso("2024-01-01T00:00:00"), start_time=iso("2024-01-01T00:00:00"),
             end_time=iso("2024-01-01T01:00:00"), wait_s=0, run_s=3600, req_cpus=1, alloc_cpus=1),
        dict(job_id="124+1", het_job_id="124", het_offset=1, source_line=6, state="FAILED", exit_code="1:0",
             submit_time=iso("2024-01-01T00:00:00"), start_time=iso("2024-01-01T00:05:00"),
             end_time=iso("2024-01-01T00:06:00"), wait_s=300, run_s=60, req_gpus=1, alloc_gpus=1, gpu_type="a100"),
    ]
    for r in rows:
        r.setdefault("cluster", "ub-hpc")
        r.setdefault("source_format", "sacct")
    return conform(pl.DataFrame(rows, schema_overrides={k: v for k, v in PARSED_SCHEMA.items()}, infer_schema_length=None))


def label(e: dict) -> str:
    kw = e["kwargs"]
    cols = kw.get("column") or f"{kw['column_A']}, {kw['column_B']}"
    return f"{e['type']}({cols})"


def break_row(df: pl.DataFrame, e: dict, i: int) -> pl.DataFrame:
    """Make row `i` violate expectation `e` (and, as far as possible, nothing else)."""
    t, kw = e["type"], e["kwargs"]
    row = pl.int_range(pl.len()) == i
    if t == "expect_column_values_to_not_be_null":
        c = kw["column"]
        return df.with_columns(pl.when(row).then(None).otherwise(pl.col(c)).alias(c))
    if t == "expect_column_values_to_be_in_set":
        c = kw["column"]
        return df.with_columns(pl.when(row).then(pl.lit("BOGUS")).otherwise(pl.col(c)).alias(c))
    if t == "expect_column_values_to_be_between":
        c = kw["column"]
        return df.with_columns(pl.when(row).then(pl.lit(kw["min_value"] - 1)).otherwise(pl.col(c)).cast(pl.Int64).alias(c))
    if t == "expect_column_values_to_match_regex":
        c = kw["column"]
        return df.with_columns(pl.when(row).then(pl.lit("12 34")).otherwise(pl.col(c)).alias(c))
    if t == "expect_column_pair_values_a_to_be_greater_than_b":
        a, b = kw["column_A"], kw["column_B"]
        # A one hour before B; for end < start also pull end before submit is not implied
        return df.with_columns(pl.when(row).then(pl.col(b) - timedelta(hours=1)).otherwise(pl.col(a)).alias(a))
    raise AssertionError(f"no test mutation for {t}: add one so the new expectation is exercised")


def same_outcome(a: DataCheckOutcome, b: DataCheckOutcome) -> None:
    assert a.good.equals(b.good)
    assert a.failed.equals(b.failed)
    strip = lambda s: {k: v for k, v in s.items() if k not in ("mode", "gx_rows")}  # noqa: E731
    assert strip(a.summary) == strip(b.summary)


# ----------------------------------------------------------------------------- the suite


def test_suite_is_a_gx_suite_in_step_with_the_canonical_record():
    from metapilot.transforms.parsers import SOURCE_FORMATS

    suite = load_suite()  # imports GX quietly first
    import great_expectations as gx

    assert isinstance(suite, gx.ExpectationSuite)
    assert suite.name == "metapilot_jobs"
    assert len(suite.expectations) == len(SUITE["expectations"])
    by = {(e["type"], e["kwargs"].get("column")): e["kwargs"] for e in SUITE["expectations"]}
    assert by[("expect_column_values_to_be_in_set", "state")]["value_set"] == list(SLURM_STATES)
    assert set(by[("expect_column_values_to_be_in_set", "source_format")]["value_set"]) == set(SOURCE_FORMATS)
    assert by[("expect_table_columns_to_match_ordered_list", None)]["column_list"] == list(PARSED_SCHEMA)
    for key in ("cluster", "job_id", "submit_time"):
        assert ("expect_column_values_to_not_be_null", key) in by
    for c in COUNT_COLUMNS:
        assert by[("expect_column_values_to_be_between", c)]["min_value"] == 0
    pairs = {(e["kwargs"]["column_A"], e["kwargs"]["column_B"]) for e in SUITE["expectations"]
             if e["type"] == "expect_column_pair_values_a_to_be_greater_than_b"}
    assert {("start_time", "submit_time"), ("end_time", "start_time")} <= pairs


def test_a_suite_gx_rejects_is_an_error(tmp_path: Path):
    p = tmp_path / "s.json"
    for exp in ({"type": "expect_column_values_to_be_between", "kwargs": {"colum": "x", "min_value": 0}},
                {"type": "expect_column_values_to_be_sane", "kwargs": {"column": "x"}}):
        p.write_text(json.dumps(dict(SUITE, expectations=SUITE["expectations"] + [exp])))
        with pytest.raises(SuiteError, match="GX rejects|accepted"):
            load_suite(p)
        with pytest.raises(SuiteError):
            check_jobs(real_rows(), suite_path=p)


# ----------------------------------------------------------------------------- behaviour


@pytest.mark.parametrize("mode", ["fast", "full"])
def test_real_rows_pass_untouched(mode: str):
    df = real_rows()
    out = check_jobs(df, mode=mode)
    assert out.good.equals(df)
    assert out.failed.height == 0 and out.failed.schema == pl.Schema({"source_line": pl.Int64, "reason": pl.Utf8})
    s = out.summary
    assert s["suite_name"] == "metapilot_jobs" and s["success"] is True
    assert s["evaluated"] == df.height and s["failed_rows"] == 0
    assert len(s["results"]) == len(SUITE["expectations"])
    assert all(r["success"] and r["unexpected_count"] in (0, None) for r in s["results"])
    json.dumps(s)  # goes to data_check_runs.results_json as is


@pytest.mark.parametrize("exp", ROW_LEVEL, ids=label)
def test_each_expectation_quarantines_its_bad_row(exp: dict):
    df = real_rows()
    i = 2
    bad = break_row(df, exp, i)
    out = check_jobs(bad)
    assert out.failed.height == 1, out.failed
    assert f"failed expectation {label(exp)}" in out.failed["reason"][0]
    assert out.failed["source_line"][0] == bad["source_line"][i]
    assert out.good.equals(bad.filter(pl.int_range(pl.len()) != i))
    s = out.summary
    assert s["success"] is False and s["failed_rows"] == 1 and s["evaluated"] == df.height
    mine = [r for r in s["results"] if r["expectation"] == exp["type"] and f"{r['expectation']}({r['column']})" == label(exp)]
    assert mine and mine[0]["success"] is False and mine[0]["unexpected_count"] == 1


def test_a_row_failing_several_expectations_names_them_all():
    df = real_rows().with_columns(
        pl.when(pl.col("job_id") == "4107219").then(-5).otherwise(pl.col("wait_s")).alias("wait_s"),
        pl.when(pl.col("job_id") == "4107219").then(pl.lit("DONE")).otherwise(pl.col("state")).alias("state"),
    )
    out = check_jobs(df)
    assert out.failed.to_dicts() == [{
        "source_line": 3,
        "reason": "failed expectation expect_column_values_to_be_in_set(state); "
                  "failed expectation expect_column_values_to_be_between(wait_s)",
    }]
    assert out.summary["failed_rows"] == 1
    assert sum(r["unexpected_count"] or 0 for r in out.summary["results"]) == 2


def test_unknown_values_are_null_and_not_judged():
    """Never-started jobs (null start/run) and unknown state pass; only keys must be present."""
    df = real_rows().with_columns(*(pl.lit(None, dtype=PARSED_SCHEMA[c]).alias(c) for c in
                                    ["state", "start_time", "end_time", "run_s", "wait_s", "timelimit_s",
                                     "req_cpus", "alloc_cpus", "eligible_time"]))
    out = check_jobs(df)
    assert out.failed.height == 0 and out.summary["success"] is True


def test_wrong_columns_fail_the_batch_but_quarantine_no_row():
    df = real_rows().with_columns(pl.lit(1).alias("extra"))
    out = check_jobs(df)
    assert out.good.equals(df) and out.failed.height == 0
    assert out.summary["success"] is False
    table = [r for r in out.summary["results"] if r["expectation"] == "expect_table_columns_to_match_ordered_list"]
    assert table == [{"expectation": "expect_table_columns_to_match_ordered_list", "column": None,
                      "success": False, "unexpected_count": None}]


def test_missing_column_is_an_error_not_a_pass():
    with pytest.raises(SuiteError, match="GX could not evaluate"):
        check_jobs(real_rows().drop("req_gpus"))


def test_empty_batch():
    out = check_jobs(empty_jobs())
    assert out.good.height == 0 and out.failed.height == 0
    assert out.summary["success"] is True and out.summary["evaluated"] == 0


def test_expectations_the_precheck_does_not_know_run_through_gx_on_every_row(tmp_path: Path):
    """A suite edited by an operator with types (and `mostly`) the fast path does not compile."""
    extra = [
        {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "job_id", "max_value": 6}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "req_cpus", "max_value": 100, "mostly": 0.5}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "job_id"}},
    ]
    p = tmp_path / "suite.json"
    p.write_text(json.dumps(dict(SUITE, expectations=SUITE["expectations"] + extra)))
    df = real_rows()
    out = check_jobs(df, suite_path=p)
    # the six 7-character xdmod ids fail the length check
    assert sorted(out.failed["source_line"].to_list()) == [1, 1, 2, 2, 3, 4]
    assert all("expect_column_value_lengths_to_be_between(job_id)" in r for r in out.failed["reason"])
    # 256 > 100 on one row of seven: within mostly=0.5, so the expectation succeeds, yet the row
    # is quarantined like any row GX lists as unexpected
    assert "expect_column_values_to_be_between(req_cpus)" in out.failed.filter(
        pl.col("reason").str.contains("req_cpus"))["reason"][0]
    res = out.summary["results"][len(SUITE["expectations"]):]
    assert [(r["success"], r["unexpected_count"]) for r in res] == [(False, 6), (True, 1), (True, 0)]
    assert out.summary["success"] is False
    assert out.summary["gx_rows"] >= df.height
    same_outcome(out, check_jobs(df, mode="full", suite_path=p))


# ----------------------------------------------------------------------------- fast == full

_STATES = list(SLURM_STATES) + ["BOGUS", None]


@st.composite
def frames(draw) -> pl.DataFrame:
    """Canonical rows with random nulls, negative counts, odd ids/states and inverted times."""
    n = draw(st.integers(1, 15))
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    rows = []
    for i in range(n):
        sub = base + timedelta(seconds=draw(st.integers(0, 10**6)))
        start = draw(st.one_of(st.none(), st.integers(-100, 5000).map(lambda s: sub + timedelta(seconds=s))))
        end = draw(st.one_of(st.none(), st.integers(-100, 5000).map(lambda s: (start or sub) + timedelta(seconds=s))))
        small = st.one_of(st.none(), st.integers(-3, 1000))
        rows.append(dict(
            cluster=draw(st.sampled_from(["c1", "c1", None])),
            job_id=draw(st.sampled_from(["1", "123_4", "9+1", "77.pbs01", "5[3]", "x1", "1 2", "", "é1", "1\n", None])),
            source_format=draw(st.sampled_from(["sacct", "pbs", "swf", "lsf", None])),
            source_line=draw(st.sampled_from([i + 1, i + 1, 0, None])),
            state=draw(st.sampled_from(_STATES)),
            submit_time=draw(st.sampled_from([sub, sub, None])), start_time=start, end_time=end,
            **{c: draw(small) for c in COUNT_COLUMNS + ["array_task_id", "het_offset"]},
        ))
    return conform(pl.DataFrame(rows, schema_overrides=PARSED_SCHEMA, infer_schema_length=None))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_fast_path_agrees_with_gx_on_every_row(df: pl.DataFrame):
    same_outcome(check_jobs(df, mode="fast"), check_jobs(df, mode="full"))


# ----------------------------------------------------------------------------- speed


def synthetic(n: int, bad_every: int = 1000) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    sub = np.datetime64("2024-01-01", "us") + rng.integers(0, 365 * 86400, n) * np.timedelta64(1, "s")
    wait, run = rng.integers(0, 7200, n), rng.integers(0, 86400, n)
    start = sub + wait * np.timedelta64(1, "s")
    df = pl.DataFrame({
        "cluster": ["c1"] * n, "job_id": np.arange(1000, 1000 + n).astype(str), "source_format": ["sacct"] * n,
        "source_line": np.arange(1, n + 1), "state": rng.choice(["COMPLETED", "FAILED", "TIMEOUT"], n),
        "submit_time": sub, "start_time": start, "end_time": start + run * np.timedelta64(1, "s"),
        "wait_s": wait, "run_s": run, "req_cpus": rng.integers(1, 64, n), "alloc_cpus": rng.integers(1, 64, n),
    }).with_columns(pl.col("submit_time", "start_time", "end_time").dt.replace_time_zone("UTC"))
    df = conform(df)
    if bad_every:
        df = df.with_columns(pl.when(pl.col("source_line") % bad_every == 0).then(-1).otherwise(pl.col("wait_s")).alias("wait_s"))
    return df


def test_100k_rows_validate_quickly():
    df = synthetic(100_000)
    check_jobs(df.head(100))  # GX import and context setup are once per process
    t = time.perf_counter()
    out = check_jobs(df)
    dt = time.perf_counter() - t
    print(f"check_jobs: 100k rows in {dt:.3f} s = {dt / 1e5 * 1e6:.2f} us/row")
    assert out.summary["failed_rows"] == 100 and out.good.height == 99_900
    assert dt < 10


def test_every_row_failing_is_reported_row_by_row():
    """GX's COMPLETE result lists every unexpected row (no partial cap), in row order."""
    df = synthetic(20_000, bad_every=1)
    out = check_jobs(df)
    assert out.good.height == 0 and out.failed.height == 20_000
    assert out.failed["source_line"].to_list() == df["source_line"].to_list()
    assert out.failed["reason"].unique().to_list() == ["failed expectation expect_column_values_to_be_between(wait_s)"]
