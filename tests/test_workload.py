"""Normalisation of canonical job rows into a replay workload (SPEC §6)."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from metapilot.transforms.workload import Workload, normalise

DATA = Path(__file__).resolve().parent / "data"
REFERENCE = DATA / "reference"
KTH_NORMALISED = REFERENCE / "KTH-SP2.normalised.swf.gz"
SHARED_SWF = Path(__file__).resolve().parents[2] / "shared" / "data" / "swf"

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def read_swf_frame(path: Path) -> tuple[pl.DataFrame, datetime]:
    """A tiny SWF reader (independent of transforms.swf): canonical-like rows and the trace start.

    Fields used: 1 job, 2 submit, 3 wait, 4 run, 5 allocated procs, 8 requested procs,
    9 requested time; -1 is unknown."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows, start = [], 0
    with opener(path, "rt") as fh:
        for line in fh:
            if line.startswith(";"):
                if "UnixStartTime" in line:
                    start = int(line.split(":", 1)[1])
                continue
            fields = line.split()
            if len(fields) >= 18:
                rows.append([int(float(x)) for x in fields[:9]])
    a = np.array(rows, dtype=np.int64)
    known = lambda col: pl.Series(np.where(a[:, col] >= 0, a[:, col], 0)).cast(pl.Int64)  # noqa: E731
    to_ts = lambda s: (s * 1_000_000).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    df = pl.DataFrame({
        "job_id": a[:, 0].astype(str),
        "submit_time": to_ts(pl.Series(a[:, 1] + start)),
        "start_time": to_ts(pl.Series(a[:, 1] + np.maximum(a[:, 2], 0) + start)),
        "run_s": known(3), "timelimit_s": known(8), "req_cpus": known(7), "alloc_cpus": known(4),
    })
    unknown = {"start_time": 2, "run_s": 3, "timelimit_s": 8, "req_cpus": 7, "alloc_cpus": 4}
    df = df.with_columns(
        pl.when(pl.Series(a[:, col]) < 0).then(None).otherwise(pl.col(name)).alias(name)
        for name, col in unknown.items()
    )
    return df, datetime.fromtimestamp(start, UTC)


def rows(*jobs: dict) -> pl.DataFrame:
    """Canonical-like rows; times given in seconds after T0."""
    base = {"job_id": None, "submit": 0, "start": 0, "run_s": 10, "timelimit_s": 20, "req_cpus": 1,
            "alloc_cpus": None, "req_gpus": None, "alloc_gpus": None, "req_mem_mib": None,
            "alloc_mem_mib": None, "partition": None}
    recs = [{**base, **j} for j in jobs]
    ts = lambda k: [None if r[k] is None else T0 + timedelta(seconds=r[k]) for r in recs]  # noqa: E731
    data = {k: [r[k] for r in recs] for k in base if k not in ("submit", "start")}
    df = pl.DataFrame(data, schema={
        "job_id": pl.Utf8, "run_s": pl.Int64, "timelimit_s": pl.Int64, "req_cpus": pl.Int64,
        "alloc_cpus": pl.Int64, "req_gpus": pl.Int64, "alloc_gpus": pl.Int64, "req_mem_mib": pl.Int64,
        "alloc_mem_mib": pl.Int64, "partition": pl.Utf8,
    })
    return df.with_columns(
        pl.Series("submit_time", ts("submit"), dtype=pl.Datetime("us", "UTC")),
        pl.Series("start_time", ts("start"), dtype=pl.Datetime("us", "UTC")),
    )


def test_left_out_clamped_and_filled_are_counted() -> None:
    df = rows(
        {"job_id": "1"},                                           # replayed as is
        {"job_id": "2", "start": None, "run_s": None},             # never ran
        {"job_id": "3", "start": None, "run_s": 0},                # never ran (cancelled in queue)
        {"job_id": "4", "run_s": 0},                               # ran 0 s
        {"job_id": "5", "req_cpus": None, "alloc_cpus": None},     # no size
        {"job_id": "6", "req_cpus": 0, "alloc_cpus": 0},           # size 0
        {"job_id": "7", "run_s": 50, "timelimit_s": 20},           # clamped to 20
        {"job_id": "8", "run_s": 30, "timelimit_s": None},         # estimate filled: 30
        {"job_id": "9", "start": None, "run_s": 5},                # start unknown but it ran: kept
    )
    w = normalise(df)
    rep = w.report
    assert (rep.jobs_in, rep.replayed) == (9, 4)
    assert (rep.never_ran, rep.zero_run, rep.no_size) == (2, 1, 2)
    assert rep.left_out == 5 and rep.replayed + rep.left_out == rep.jobs_in
    assert (rep.clamped, rep.estimates_filled) == (1, 1)
    by_id = dict(zip(w.job_ids, range(len(w)), strict=True))
    assert (w.run[by_id["7"]], w.req_time[by_id["7"]], w.clamped[by_id["7"]]) == (20, 20, True)
    assert (w.run[by_id["8"]], w.req_time[by_id["8"]], w.estimate_filled[by_id["8"]]) == (30, 30, True)
    assert not w.estimate_filled[by_id["1"]] and not w.clamped[by_id["1"]]


def test_size_is_the_larger_of_allocated_and_requested() -> None:
    df = rows(
        {"job_id": "1", "req_cpus": 4, "alloc_cpus": 8, "req_gpus": 2, "alloc_gpus": 1,
         "req_mem_mib": 1000, "alloc_mem_mib": None},
        {"job_id": "2", "req_cpus": None, "alloc_cpus": 3},
        {"job_id": "3", "req_cpus": 0, "alloc_cpus": 0, "req_gpus": 1},  # GPU-only job still has a size
    )
    w = normalise(df)
    assert w.cores.tolist() == [8, 3, 0]
    assert w.gpus.tolist() == [2, 0, 1]
    assert w.mem.tolist() == [1000, 0, 0]


def test_order_is_submit_then_numeric_job_id() -> None:
    df = rows({"job_id": "10", "submit": 5}, {"job_id": "9", "submit": 5}, {"job_id": "100", "submit": 1})
    assert normalise(df).job_ids.tolist() == ["100", "9", "10"]
    # Not all integers: plain string order within a submit time.
    df = rows({"job_id": "10_1", "submit": 5}, {"job_id": "9", "submit": 5})
    assert normalise(df).job_ids.tolist() == ["10_1", "9"]


def test_times_are_seconds_since_the_window_start() -> None:
    df = rows({"job_id": "1", "submit": 100}, {"job_id": "2", "submit": 160})
    w = normalise(df)
    assert w.window_start == T0 + timedelta(seconds=100)
    assert w.submit.tolist() == [0.0, 60.0]
    w = normalise(df, window_start=T0)
    assert w.window_start == T0 and w.submit.tolist() == [100.0, 160.0]


def test_partitions_are_indexed() -> None:
    df = rows({"job_id": "1", "partition": "gpu"}, {"job_id": "2", "partition": "cpu"}, {"job_id": "3"})
    w = normalise(df)
    assert w.partitions == ("cpu", "gpu", None)
    assert w.partition_names() == ["gpu", "cpu", None]


def test_select_and_from_arrays() -> None:
    w = Workload.from_arrays(submit=[5, 0, 3], run=[1, 2, 3], req_time=[2, 2, 3], cores=[1, 2, 3])
    assert w.submit.tolist() == [0, 3, 5] and w.cores.tolist() == [2, 3, 1]
    assert len(w.head(2)) == 2 and w.head(2).submit.tolist() == [0, 3]
    with pytest.raises(ValueError):
        Workload.from_arrays(submit=[0], run=[5], req_time=[2])


def test_reference_trace_normalises_to_itself() -> None:
    """The reference file is already normalised: nothing left out, clamped or filled, and the
    arrays equal the reference schedules' columns."""
    df, start = read_swf_frame(KTH_NORMALISED)
    w = normalise(df, window_start=start)
    assert len(w) == 28_467 and w.report.left_out == 0
    assert (w.report.clamped, w.report.estimates_filled) == (0, 0)
    ref = pl.read_csv(REFERENCE / "KTH-SP2.fcfs-easy.starts.csv.gz")
    assert w.job_ids.tolist() == ref["job_id"].cast(pl.Utf8).to_list()
    assert np.array_equal(w.submit, ref["submit"].to_numpy())
    assert np.array_equal(w.run, ref["run"].to_numpy())
    assert np.array_equal(w.req_time, ref["req"].to_numpy())
    assert np.array_equal(w.cores, ref["procs"].to_numpy())


@pytest.mark.skipif(not (SHARED_SWF / "KTH-SP2-1996-2.1-cln.swf.gz").exists(), reason="shared data not present")
def test_raw_kth_normalises_like_the_reference() -> None:
    """SPEC §6 normalisation of the raw KTH-SP2 trace gives the reference input (28,467 jobs)."""
    raw, start = read_swf_frame(SHARED_SWF / "KTH-SP2-1996-2.1-cln.swf.gz")
    w = normalise(raw, window_start=start)
    ref, _ = read_swf_frame(KTH_NORMALISED)
    r = normalise(ref, window_start=start)
    assert w.report.jobs_in == 28_476 and len(w) == 28_467
    assert w.report.left_out == 9
    for name in ("submit", "run", "req_time", "cores"):
        assert np.array_equal(getattr(w, name), getattr(r, name)), name
    assert w.job_ids.tolist() == r.job_ids.tolist()
