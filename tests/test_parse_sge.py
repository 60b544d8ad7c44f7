"""SGE/UGE accounting parser: Open XDMoD's SGE and UGE fixtures, APEL's parser tests (real lines
from four grid sites), a real Son of Grid Engine 8.1.9 file, record forms, garbage."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metapilot.transforms.canonical import ParseResult
from metapilot.transforms.lines import iter_line_chunks
from metapilot.transforms.sge import IDENTITY_FIELDS, identity_spans, parse_sge_chunk
from parser_contract import check_contract, mutated_records, utc

DATA = Path(__file__).parent / "data" / "sge"


def frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line_no": list(range(1, len(lines) + 1)), "line": lines},
                        schema={"line_no": pl.Int64, "line": pl.Utf8})


def parse_lines(lines: list[str]) -> ParseResult:
    return parse_sge_chunk(frame(lines), "c1")


def parse_file(path: Path) -> ParseResult:
    chunks = list(iter_line_chunks(path))
    assert len(chunks) == 1 and chunks[0].bad.height == 0
    return parse_sge_chunk(chunks[0].lines, "c1")


def row(r: ParseResult, job_id: str) -> dict:
    rows = r.jobs.filter(pl.col("job_id") == job_id).to_dicts()
    assert len(rows) == 1, (job_id, rows)
    return rows[0]


# --- Open XDMoD's fixtures (tests/artifacts/xdmod/unit/shredder/{sge,uge}) ----------------------


@pytest.mark.parametrize("name", ["sge", "uge"])
def test_xdmod_fixture(name):
    r = parse_file(DATA / "xdmod-unit" / f"{name}-accounting-logs.log")
    check_contract(r)
    expected = json.loads((DATA / "xdmod-unit" / f"{name}-accounting-logs.expected.json").read_text())
    # XDMoD's ingestor groups records by (job_number, task_number): one job per distinct pair.
    keys = {(e["job_number"], e["task_number"]) for e in expected}
    assert r.jobs.height == len(keys) and r.merged == len(expected) - len(keys)
    for e in expected:
        got = row(r, e["job_number"])
        assert got["submit_time"] == utc(e["submission_time"])
        assert got["start_time"] == utc(e["start_time"])
        assert got["end_time"] == utc(e["end_time"])
        assert got["wait_s"] == max(int(e["start_time"]) - int(e["submission_time"]), 0)  # XDMoD's wait_time
        assert got["run_s"] == max(int(e["end_time"]) - int(e["start_time"]), 0)  # XDMoD's wall_time
        assert (got["user_name"], got["group_name"], got["job_name"], got["partition"]) == (
            e["owner"], e["groupname"], e["job_name"], e["qname"])
        assert got["exit_code"] == e["exit_status"] and got["state"] == "COMPLETED"
        assert got["account_name"] == (e["project"] if e["project"] != "NONE" else e["account"])
        slots = max(int(e["slots"]), int(e.get("resource_list_num_proc") or 1))  # XDMoD's cpu_count
        assert got["req_cpus"] == got["alloc_cpus"] == slots
        assert got["array_task_id"] is None and int(e["task_number"]) == 0
        assert got["alloc_nodes"] == 1 and got["node_list"] == e["hostname"]
        if "resource_list_h_rt" in e:
            assert got["timelimit_s"] == int(e["resource_list_h_rt"])
        assert got["req_gpus"] == int(e.get("resource_list_gpu") or 0)
    last = expected[-1]
    got = row(r, last["job_number"])
    if "resource_list_mem_free" in last:  # XDMoD stores KiB; per slot
        assert got["req_mem_mib"] == last["resource_list_mem_free"] // 1024 * int(last["slots"])
    assert r.jobs["source_format"].to_list() == [name] * r.jobs.height


def test_uge_milliseconds_are_floored_as_xdmod_does():
    r = parse_file(DATA / "xdmod-unit" / "uge-accounting-logs.log")
    got = row(r, "4437956")
    assert got["start_time"] == utc(1652111622)  # 1652111622875 ms: floored, not rounded
    assert got["req_mem_mib"] == 16 * 1024 and got["req_gpus"] == got["alloc_gpus"] == 1  # m_mem_free=1.000G x 16
    assert got["alloc_mem_mib"] == max(16 * 1024, math.ceil(9323855872 / 2**20))


# --- APEL's SGE parser tests (apel/apel test/test_sge.py): real lines from grid sites ------------

APEL = {  # job -> the values APEL's test asserts: StartTime, StopTime, Processors, MemoryVirtual, user, group
    "43": (1200093294, 1200093295, 1, 30171136, "dteam041", "dteam"),
    "6972834": (1318560254, 1318740255, 9, 821923840, "csfiylfl", "csic"),
    "1630912": (1358190002, 1358210574, 1, 1546682368, "pilatl10", "pilatl"),
    "3294013": (1404169049, 1404169408, 1, 5944487936, "prdatl26", "prdatl"),
}


def test_apel_lines():
    r = parse_file(DATA / "apel" / "sge-test-parse-line.accounting")
    check_contract(r)
    assert r.jobs.height == 4 and r.quarantine.height == 0
    for job, (start, stop, procs, vmem, user, group) in APEL.items():
        got = row(r, job)
        assert (got["start_time"], got["end_time"]) == (utc(start), utc(stop))
        assert got["req_cpus"] == got["alloc_cpus"] == procs
        assert (got["user_name"], got["group_name"]) == (user, group)
        assert got["alloc_mem_mib"] >= math.ceil(vmem / 2**20)
    long_job = row(r, "6972834")  # -pe mpi 9, h_vmem=1124M per slot, h_rt=180300, s_rt=180000
    assert long_job["timelimit_s"] == 180300 and long_job["req_mem_mib"] == 9 * 1124
    assert long_job["run_s"] == 180001 and long_job["exit_code"] == "138"
    assert long_job["state"] == "TIMEOUT"  # ran past s_rt and got SIGUSR1 (exit 128 + 10), failed 100
    assert row(r, "43")["alloc_mem_mib"] == math.ceil(30171136 / 2**20)  # no request: the peak maxvmem
    assert row(r, "6972834")["account_name"] == "por_defecto"  # the project, not the default account "sge"


def test_apel_univa_line():
    r = parse_file(DATA / "apel" / "uge-test-univa-timestamps.accounting")
    got = row(r, "3872561")
    assert got["start_time"] == utc(1412932865)  # as APEL asserts
    # APEL rounds 1412933085629 ms to 1412933086; we floor, as Open XDMoD's Uge.php does.
    assert got["end_time"] == utc(1412933085) and abs(1412933086 - 1412933085) == 1
    assert got["source_format"] == "uge" and got["req_cpus"] == 1


# --- a real Son of Grid Engine 8.1.9 file (ucsf-wynton/wyntonquery inst/exdata/accounting) ------


def test_wynton_accounting_head():
    r = parse_file(DATA / "wyntonquery" / "accounting.head")
    check_contract(r)
    # wyntonquery's test: one job (task) per record; the `# Version: 8.1.9` header is skipped.
    assert (r.lines_read, r.skipped, r.jobs.height, r.merged, r.quarantine.height) == (72, 4, 68, 0, 0)
    assert set(r.jobs["array_job_id"].to_list()) == {"1", "2"}
    t = row(r, "2_75")
    assert (t["submit_time"], t["start_time"], t["end_time"]) == (utc(1502823623), utc(1502823636), utc(1502823936))
    assert (t["partition"], t["node_list"], t["account_name"], t["state"]) == ("long.q", "cc-id2", "project4", "COMPLETED")
    first = row(r, "1_100")  # failed 100, exit 137: killed (qdel), no limit given
    assert first["state"] == "CANCELLED" and first["run_s"] == 38


# --- forms ------------------------------------------------------------------------------------

# fields 0-38 of a record; `{cat}` is the category, then iow, pe_taskid, maxvmem, arid, ar_submission_time
HEAD = ("all.q:{host}:grp:usr:job:{job}:sge:0:{sub}:{start}:{end}:{failed}:{exit}:60:1.0:0.5:1000:0:0:0:0:10:0:0:0:0:"
        "0:0:0:10:5:NONE:defaultdepartment:{pe}:{slots}:{task}:1.5:0.1:0.0")


def record(job=7, host="n1", sub=1600000000, start=1600000010, end=1600000070, failed=0, exit=0, pe="NONE",
           slots=1, task=0, cat="-q all.q", peid="NONE", vmem="1048576.000000") -> str:
    return HEAD.format(host=host, job=job, sub=sub, start=start, end=end, failed=failed, exit=exit, pe=pe,
                       slots=slots, task=task) + f":{cat}:0.000000:{peid}:{vmem}:0:0"


def test_category_with_colons():
    r = parse_lines([record(cat="-l cpu=24:00:00,h_rt=1:00:00,h_vmem=2G -pe smp 4", slots=4, pe="smp")])
    check_contract(r)
    got = r.jobs.to_dicts()[0]
    assert got["timelimit_s"] == 3600 and got["req_cpus"] == 4 and got["req_mem_mib"] == 4 * 2048


def test_parallel_task_records_are_merged_and_add_their_hosts():
    lines = [record(host="n1", pe="mpi", slots=8, cat="-pe mpi 8"),
             record(host="n2", pe="mpi", slots=8, cat="-pe mpi 8", peid="1.n2", sub=1600000010),
             record(host="n3", pe="mpi", slots=8, cat="-pe mpi 8", peid="2.n3", sub=0)]
    r = parse_lines(lines)
    check_contract(r)
    assert (r.jobs.height, r.merged) == (1, 2)
    got = r.jobs.to_dicts()[0]
    assert got["node_list"] == "n1,n2,n3" and got["alloc_nodes"] == 3 and got["alloc_cpus"] == 8


def test_rescheduled_job_keeps_first_start_last_end_and_last_outcome():
    lines = [record(start=1600000010, end=1600000100, failed=25, exit=0),
             record(start=1600000200, end=1600000300, failed=0, exit=0)]
    r = parse_lines(lines)
    check_contract(r)
    got = r.jobs.to_dicts()[0]
    assert (r.jobs.height, r.merged, got["source_line"]) == (1, 1, 2)
    assert got["start_time"] == utc(1600000010) and got["end_time"] == utc(1600000300) and got["state"] == "COMPLETED"


@pytest.mark.parametrize("failed,exit_status,cat,state", [
    (0, 0, "-q q", "COMPLETED"), (0, 1, "-q q", "FAILED"), (0, 137, "-l h_rt=30", "TIMEOUT"),
    (100, 137, "-l h_rt=3600", "CANCELLED"), (100, 137, "-l h_rt=60", "TIMEOUT"), (37, 137, "-l h_rt=60", "TIMEOUT"),
    (37, 0, "-l h_vmem=1G", "FAILED"), (25, 0, "-q q", "REQUEUED"), (19, 0, "-q q", "FAILED"),
])
def test_states(failed, exit_status, cat, state):
    assert parse_lines([record(failed=failed, exit=exit_status, cat=cat)]).jobs["state"].to_list() == [state]


def test_never_started_and_arrays():
    r = parse_lines([record(job=9, start=0, end=0, failed=1, task=3), record(job=9, task=4)])
    check_contract(r)
    a, b = r.jobs.sort("job_id").to_dicts()
    assert (a["job_id"], a["array_job_id"], a["array_task_id"]) == ("9_3", "9", 3)
    assert a["start_time"] is None and a["run_s"] is None and a["alloc_cpus"] is None and a["state"] == "FAILED"
    assert b["job_id"] == "9_4" and b["state"] == "COMPLETED"


def test_malformed_lines_are_quarantined_with_reasons():
    lines = ["# Version: 8.1.9", "", "x", "too:few:fields", record(job="abc"), record(sub="soon"),
             record(sub=0), record().replace(":0.000000:NONE:", ":x:y:"), record()]
    r = parse_lines(lines)
    check_contract(r)
    reasons = dict(zip(r.quarantine["line_no"].to_list(), r.quarantine["reason"].to_list()))
    assert (r.skipped, r.jobs.height) == (3, 1)
    assert "3 colon-separated fields, at least 43" in reasons[4]
    assert "job_number is not a positive integer: abc" in reasons[5]
    assert "submission_time is not an epoch" in reasons[6]
    assert "no submission time" in reasons[7]
    assert "no iow:pe_taskid:maxvmem" in reasons[8]


def test_identity_spans():
    line = (DATA / "apel" / "sge-test-parse-line.accounting").read_text().splitlines()[1]
    spans = {line[a:b]: kind for a, b, kind in identity_spans(line)}
    assert spans == {"csic": "group", "csfiylfl": "user", "s001.sh": "job_name", "sge": "account",
                     "por_defecto": "account"}
    assert set(IDENTITY_FIELDS.values()) == {"group", "user", "job_name", "account"}
    assert identity_spans("a:b") == [] and identity_spans("") == []


# --- garbage ----------------------------------------------------------------------------------

REAL = [ln for ln in (DATA / "apel" / "sge-test-parse-line.accounting").read_text().splitlines()] + \
       (DATA / "xdmod-unit" / "uge-accounting-logs.log").read_text().splitlines()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=200).map(lambda s: s.replace("\n", " ")), max_size=20))
def test_random_text_never_raises_and_reconciles(lines):
    r = parse_lines(lines)
    check_contract(r)
    assert r.lines_read == len(lines)
    for ln in lines:
        identity_spans(ln)


FIELD = st.one_of(st.integers(-5, 2 * 10**12).map(str), st.sampled_from(["NONE", "", "x", "1.n2", "0.000000", "-l h_rt=1:0",
                                                                         "-pe mpi 4", "INFINITY", "1e99"]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(REAL) - 1), st.lists(st.tuples(st.integers(0, 60), FIELD), max_size=4),
                          st.integers(0, 3000)), min_size=1, max_size=10))
def test_mutated_real_records_never_raise_and_reconcile(edits):
    check_contract(parse_lines(mutated_records(REAL, edits, ":")))
