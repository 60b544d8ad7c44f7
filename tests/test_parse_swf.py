"""SWF parser: real Parallel Workloads Archive traces, header capacity, edge cases, garbage."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metapilot.transforms.canonical import PARSED_SCHEMA, SLURM_STATES, ParseResult
from metapilot.transforms.lines import iter_line_chunks, read_head
from metapilot.transforms.swf import (
    parse_swf_chunk,
    parse_swf_header,
    swf_count_warning,
)

DATA = Path(__file__).parent / "data" / "swf"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "swf"

KTH_HEADER = """; Version: 2.2
; Computer: IBM SP2
; Installation: Swedish Royal Institute of Technology (KTH)
; Acknowledge: Lars Malinowsky
; MaxJobs: 28490
; MaxRecords: 28476
; UnixStartTime: 843480031
; TimeZoneString: Europe/Stockholm
; MaxNodes: 100
; MaxProcs: 100
; Note: uses the EASY scheduler
;
; Note: THIS IS A CLEANED VERSION OF THE LOG!
;       The filter used to produce it was
;         job<=14 (14 jobs removed)
;""".split("\n")


def frame(lines: list[str], first: int = 1) -> pl.DataFrame:
    return pl.DataFrame(
        {"line_no": list(range(first, first + len(lines))), "line": lines},
        schema={"line_no": pl.Int64, "line": pl.Utf8},
    )


def parse_lines(lines: list[str], header_lines: list[str] | None = None, first: int = 1) -> ParseResult:
    header = parse_swf_header(header_lines if header_lines is not None else lines)
    return parse_swf_chunk(frame(lines, first), header, "c1")


def parse_file(path: Path, chunk_bytes: int | None = None) -> tuple[list[ParseResult], pl.DataFrame]:
    header = parse_swf_header(read_head(path))
    kwargs = {"chunk_bytes": chunk_bytes} if chunk_bytes else {}
    results = [parse_swf_chunk(c.lines, header, "c1") for c in iter_line_chunks(path, **kwargs)]
    return results, pl.concat([r.jobs for r in results])


def check_contract(r: ParseResult) -> None:
    """What every parse must satisfy: schema, accounting, states, no sentinels."""
    assert dict(r.jobs.schema) == PARSED_SCHEMA
    assert r.reconciles(), (r.lines_read, r.lines_loaded, r.merged, r.quarantine.height, r.skipped)
    assert set(r.jobs["state"].drop_nulls().to_list()) <= set(SLURM_STATES)
    assert r.jobs["submit_time"].null_count() == 0
    for col in ("wait_s", "run_s", "alloc_cpus", "req_cpus", "timelimit_s"):
        assert (r.jobs[col].drop_nulls() >= 0).all(), col


TRACES = [
    # file, jobs, MaxProcs -> cores, MaxNodes, count warning expected
    ("KTH-SP2-1996-2.1-cln.swf.gz", 28_476, 100, 100, False),
    ("HPC2N-subset-3170jobs.swf", 3_170, 240, 240, True),
    ("NASA-iPSC-1993-3.1-cln.swf.gz", 18_239, 128, 128, True),
    ("lublin_256.synthetic-model.swf.gz", 10_000, 256, 256, False),
]


@pytest.mark.parametrize("name,jobs,cores,nodes,count_warns", TRACES)
def test_real_traces_exact_counts_and_capacity(name, jobs, cores, nodes, count_warns):
    results, all_jobs = parse_file(DATA / name)
    for r in results:
        check_contract(r)
    assert all_jobs.height == jobs
    assert all_jobs["job_id"].n_unique() == jobs
    assert sum(r.quarantine.height for r in results) == 0
    assert (all_jobs["source_format"] == "swf").all()
    cap = [c for r in results for c in r.capacity]
    assert len(cap) == 1
    assert (cap[0]["partition"], cap[0]["cores"], cap[0]["nodes"], cap[0]["gpus"], cap[0]["source"]) == ("*", cores, nodes, 0, "swf-header")
    header = parse_swf_header(read_head(DATA / name))
    assert (swf_count_warning(header, all_jobs.height) is not None) == count_warns


def test_cea_curie_large_trace_when_present():
    """312,826 jobs while the header claims 773,138: parsed exactly, disagreement reported."""
    path = SHARED / "CEA-Curie-2011-2.1-cln.swf.gz"
    if not path.exists():
        pytest.skip("CEA-Curie trace lives in ../shared/data only")
    results, jobs = parse_file(path)
    for r in results:
        check_contract(r)
    assert jobs.height == 312_826
    assert results[0].capacity[0]["cores"] == 93_312 and results[0].capacity[0]["nodes"] == 5_544
    header = parse_swf_header(read_head(path))
    assert header.partitions["3"] == "batch" and header.time_zone_string == "Europe/Paris"
    warning = swf_count_warning(header, jobs.height)
    assert warning and "773,138" in warning and "312,826" in warning


def test_kth_first_job_mapping():
    results, jobs = parse_file(DATA / "KTH-SP2-1996-2.1-cln.swf.gz")
    row = jobs.row(0, named=True)
    # "15 599850 192180 3477 4 -1 -1 4 53940 -1 1 12 12 -1 -1 -1 -1 -1"
    submit = datetime.fromtimestamp(843480031 + 599850, tz=timezone.utc)
    assert row["job_id"] == "15" and row["cluster"] == "c1"
    assert row["submit_time"] == submit
    assert (row["start_time"] - row["submit_time"]).total_seconds() == 192180
    assert (row["end_time"] - row["start_time"]).total_seconds() == 3477
    assert (row["wait_s"], row["run_s"], row["alloc_cpus"], row["req_cpus"], row["timelimit_s"]) == (192180, 3477, 4, 4, 53940)
    assert (row["state"], row["user_name"], row["group_name"], row["partition"], row["qos"]) == ("COMPLETED", "12", "12", None, None)
    assert row["req_mem_mib"] is None and row["alloc_mem_mib"] is None
    assert row["source_line"] == 25  # after a 24-line header
    assert set(jobs["state"].unique()) == {"COMPLETED", "FAILED"}


def test_nasa_unknown_wait_and_status():
    """NASA-iPSC has no waits (-1) and no status: start/end stay null, state UNKNOWN."""
    _, jobs = parse_file(DATA / "NASA-iPSC-1993-3.1-cln.swf.gz")
    assert jobs["start_time"].null_count() == jobs.height
    assert jobs["end_time"].null_count() == jobs.height
    assert jobs["run_s"].null_count() == 0
    assert set(jobs["state"].unique()) == {"UNKNOWN"}
    assert set(jobs["qos"].unique()) <= {"0", "1", None}


def test_hpc2n_trailing_blank_line_skipped():
    results, jobs = parse_file(DATA / "HPC2N-subset-3170jobs.swf")
    r = results[0]
    assert r.skipped == r.lines_read - 3_170  # header lines + the blank last line
    assert jobs["job_id"].to_list()[-1] == "7183"
    assert jobs["partition"].drop_nulls().unique().to_list() == ["1"]


def test_lublin_no_unix_start_time_warns_and_uses_epoch():
    results, jobs = parse_file(DATA / "lublin_256.synthetic-model.swf.gz")
    assert any("UnixStartTime" in w for w in results[0].warnings)
    assert jobs["submit_time"].min() == datetime.fromtimestamp(5094, tz=timezone.utc)
    cap = results[0].capacity[0]
    assert cap["cores"] == 256 and "MaxProcs missing" in cap["note"]


def test_multi_chunk_reading_matches_single_chunk():
    """Small chunks: same jobs, capacity once (from the chunk holding line 1), all reconcile."""
    results, jobs = parse_file(DATA / "KTH-SP2-1996-2.1-cln.swf.gz", chunk_bytes=64 * 1024)
    assert len(results) > 5
    for r in results:
        check_contract(r)
    assert jobs.height == 28_476 and jobs["job_id"].n_unique() == 28_476
    assert sum(len(r.capacity) for r in results) == 1
    assert sum(r.lines_read for r in results) == 28_500


def test_header_parsing_notes_queues_partitions():
    h = parse_swf_header(KTH_HEADER + [
        "; Queue:  1 [fque:1] ",
        "; Partition:  2 ALL     ",
        "; Note: Curie is composed of 3 types of nodes",
        ";\tsee: http://example.org",
        "1 0 1 1 1 -1 -1 1 1 -1 1 1 1 -1 -1 -1 -1 -1",
    ])
    assert (h.unix_start_time, h.max_procs, h.max_nodes, h.max_jobs, h.max_records) == (843480031, 100, 100, 28490, 28476)
    assert h.time_zone_string == "Europe/Stockholm" and h.acknowledge == "Lars Malinowsky"
    assert h.notes[1] == "THIS IS A CLEANED VERSION OF THE LOG! The filter used to produce it was job<=14 (14 jobs removed)"
    assert h.notes[2].endswith("see: http://example.org")
    assert h.queues == {"1": "[fque:1]"} and h.partitions == {"2": "ALL"}


def test_header_missing_everything_is_tolerated():
    h = parse_swf_header([])
    assert h.unix_start_time is None and h.max_procs is None
    r = parse_lines(["1 0 5 10 2 -1 -1 2 60 -1 1 3 4 -1 1 2 -1 -1"], header_lines=[])
    check_contract(r)
    assert r.capacity == []
    assert any("MaxProcs" in w for w in r.warnings) and any("UnixStartTime" in w for w in r.warnings)


def test_line_forms_crlf_tabs_extended_blank_short_garbage():
    lines = [
        "; UnixStartTime: 1000",
        "; MaxProcs: 8",
        "1 0 5 10 2 -1 -1 2 60 -1 1 3 4 -1 1 2 -1 -1\r",
        "2\t10\t-1\t-1\t4\t-1\t-1\t4\t60\t-1\t5\t3\t4\t-1\t1\t-1\t-1\t-1",
        "  3   20  0  7  1 -1 -1 1 60 -1 0 3 4 -1 1 2 -1 -1 99 extra tokens",
        "",
        "   ",
        "4 30 0 7 1 -1 -1",
        "5 40 zero 7 1 -1 -1 1 60 -1 0 3 4 -1 1 2 -1 -1",
        "6 -1 0 7 1 -1 -1 1 60 -1 0 3 4 -1 1 2 -1 -1",
        "-1 50 0 7 1 -1 -1 1 60 -1 0 3 4 -1 1 2 -1 -1",
        "8 60 0 7 1 -1 -1 1 60 -1 0 3 4 -1 1 2 -1 1e400",
    ]
    r = parse_lines(lines)
    check_contract(r)
    assert r.jobs["job_id"].to_list() == ["1", "2", "3"]
    assert r.skipped == 4
    q = dict(zip(r.quarantine["line_no"].to_list(), r.quarantine["reason"].to_list()))
    assert set(q) == {8, 9, 10, 11, 12}
    assert "7 fields" in q[8] and "field 3 (wait)" in q[9] and "submit" in q[10] and "job number" in q[11]
    assert "field 18" in q[12]
    j1, j2, j3 = r.jobs.iter_rows(named=True)
    assert j1["submit_time"] == datetime.fromtimestamp(1000, tz=timezone.utc)
    assert j1["start_time"] == datetime.fromtimestamp(1005, tz=timezone.utc)
    assert j1["end_time"] == datetime.fromtimestamp(1015, tz=timezone.utc)
    assert (j1["partition"], j1["qos"], j1["state"]) == ("2", "1", "COMPLETED")
    assert (j2["state"], j2["start_time"], j2["run_s"], j2["partition"]) == ("CANCELLED", None, None, None)
    assert (j3["state"], j3["wait_s"], j3["run_s"]) == ("FAILED", 0, 7)


def test_memory_totals_in_mib():
    # used 1024 KB/proc x 4 alloc procs = 4 MiB; requested 2048 KB/proc x 8 req procs = 16 MiB
    r = parse_lines(["1 0 0 10 4 -1 1024 8 60 2048 1 3 4 -1 1 2 -1 -1",
                     "2 0 0 10 4 -1 1024 -1 60 2048 1 3 4 -1 1 2 -1 -1"])
    assert r.jobs["alloc_mem_mib"].to_list() == [4, 4]
    assert r.jobs["req_mem_mib"].to_list() == [16, 8]  # unknown req procs: allocated stand in


@pytest.mark.parametrize("status,state", [(1, "COMPLETED"), (0, "FAILED"), (5, "CANCELLED"), (-1, "UNKNOWN"),
                                          (2, "PREEMPTED"), (3, "COMPLETED"), (4, "FAILED"), (7, "UNKNOWN")])
def test_status_mapping(status, state):
    r = parse_lines([f"1 0 0 10 4 -1 -1 4 60 -1 {status} 3 4 -1 1 2 -1 -1"])
    assert r.jobs["state"].to_list() == [state]


def test_partial_executions_fold_into_one_row():
    lines = [
        "7 0 0 100 4 -1 -1 4 600 -1 1 3 4 -1 1 2 -1 -1",  # summary line
        "7 0 0 40 4 -1 -1 4 600 -1 2 3 4 -1 1 2 -1 -1",
        "7 0 60 60 4 -1 -1 4 600 -1 3 3 4 -1 1 2 -1 -1",
        "8 0 0 40 4 -1 -1 4 600 -1 2 3 4 -1 1 2 -1 -1",  # partial only: last part kept
        "8 0 60 60 4 -1 -1 4 600 -1 4 3 4 -1 1 2 -1 -1",
    ]
    r = parse_lines(lines)
    check_contract(r)
    assert r.jobs.select("job_id", "source_line", "state").rows() == [("7", 1, "COMPLETED"), ("8", 5, "FAILED")]
    assert r.merged == 3 and any("share a job number" in w for w in r.warnings)


def test_header_disagreements_warn():
    header = ["; UnixStartTime: 0", "; MaxProcs: 8", "; MaxJobs: 2", "; MaxRecords: 2"]
    lines = header + ["1 0 0 10 16 -1 -1 16 60 -1 1 3 4 -1 1 2 -1 -1", "5 0 0 10 2 -1 -1 2 60 -1 1 3 4 -1 1 2 -1 -1"]
    r = parse_lines(lines)
    assert any("MaxProcs 8" in w and "largest 16" in w for w in r.warnings)
    assert any("beyond the header's MaxJobs 2" in w for w in r.warnings)
    h = parse_swf_header(header)
    assert swf_count_warning(h, 2) is None and "holds 3 jobs" in swf_count_warning(h, 3)


def test_capacity_only_with_the_chunk_holding_line_one():
    head = ["; MaxProcs: 8"]
    r = parse_lines(["1 0 0 10 2 -1 -1 2 60 -1 1 3 4 -1 1 2 -1 -1"], header_lines=head, first=100)
    assert r.capacity == [] and r.jobs.height == 1


def test_empty_chunk():
    r = parse_swf_chunk(frame([]), parse_swf_header([]), "c1")
    check_contract(r)
    assert r.jobs.height == 0 and r.lines_read == 0


KTH_LINE = "   15   599850 192180   3477    4     -1    -1    4  53940    -1  1  12  12  -1 -1 -1 -1 -1"
TOKEN = st.one_of(
    st.integers(-5, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["-1", "", ";", "x", "1e999", "0.5", "--1", "NaN", "\u00a0", "1_000"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=120), max_size=30))
def test_garbage_text_never_raises_and_reconciles(lines):
    lines = [ln.replace("\n", " ") for ln in lines]
    r = parse_lines(lines)
    check_contract(r)
    assert r.lines_read == len(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(TOKEN, min_size=0, max_size=22).map(" ".join), max_size=20))
def test_numeric_garbage_never_raises_and_reconciles(lines):
    r = parse_lines(KTH_HEADER + lines)
    check_contract(r)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(KTH_LINE)), st.integers(1, 5))
def test_truncated_lines_reconcile(cut, copies):
    r = parse_lines(KTH_HEADER + [KTH_LINE[:cut]] * copies + [KTH_LINE])
    check_contract(r)
    assert r.jobs.height == 1 or r.jobs["job_id"].n_unique() == r.jobs.height
