"""LSF lsb.acct parser: Open XDMoD's LSF fixtures (expected JSON), aws-samples/hpc-cost-simulator's
real lsb.acct files with the values its tests assert (exp_jobs.csv), LSF 7.06 to 10.1 layouts,
the quirks of real files, malformed records, garbage."""

from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metapilot.transforms.canonical import ParseResult
from metapilot.transforms.lines import iter_line_chunks
from metapilot.transforms.lsf import identity_spans, parse_lsf_chunk
from parser_contract import check_contract, mutated_records, utc

DATA = Path(__file__).parent / "data" / "lsf"
XDMOD = DATA / "xdmod-unit"
HCS = DATA / "hpc-cost-simulator"


def frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line_no": list(range(1, len(lines) + 1)), "line": lines},
                        schema={"line_no": pl.Int64, "line": pl.Utf8})


def parse_lines(lines: list[str]) -> ParseResult:
    return parse_lsf_chunk(frame(lines), "c1")


def parse_file(path: Path, bad_lines: int = 0) -> ParseResult:
    chunks = list(iter_line_chunks(path))
    assert len(chunks) == 1 and chunks[0].bad.height == bad_lines
    return parse_lsf_chunk(chunks[0].lines, "c1")


def iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


def duration(text: str) -> int:
    """hpc-cost-simulator's timedelta text: [DD-]H:MM:SS."""
    days, _, hms = text.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def row(r: ParseResult, job_id: str) -> dict:
    rows = r.jobs.filter(pl.col("job_id") == job_id).to_dicts()
    assert len(rows) == 1, (job_id, rows)
    return rows[0]


# --- Open XDMoD (tests/artifacts/xdmod/unit/shredder/lsf) ---------------------------------------


def check_xdmod_record(got: dict, e: dict) -> None:
    """What XDMoD's Lsf.php maps: end = event_time, start, submit, cpus = num_processors, nodes =
    distinct execution hosts, node_list, exit_code = exit_status, array index = idx."""
    assert got["end_time"] == utc(e["event_time"])
    assert got["start_time"] == utc(e["start_time"]) and got["submit_time"] == utc(e["submit_time"])
    assert got["run_s"] == max(int(e["event_time"]) - int(e["start_time"]), 0)  # XDMoD's wall_time
    assert got["wait_s"] == max(int(e["start_time"]) - int(e["submit_time"]), 0)  # XDMoD's wait_time
    assert got["req_cpus"] == int(e["num_processors"])
    assert got["alloc_nodes"] == int(e["num_ex_hosts"]) and got["node_list"] == e["node_list"]
    assert got["exit_code"] == e["exit_status"] and got["partition"] == e["queue"]
    assert got["user_name"] == e["user_name"] and got["account_name"] == e["project_name"]
    assert got["job_id"] == (e["job_id"] if int(e["idx"]) == 0 else f"{e['job_id']}_{e['idx']}")
    assert got["job_name"] == (e["job_name"] or None)
    if "gpu_count" in e:
        assert got["req_gpus"] == e["gpu_count"]
    if "run_limit" in e:
        assert got["timelimit_s"] == (int(e["run_limit"]) if int(e["run_limit"]) > 0 else None)


def test_xdmod_accounting_logs():
    r = parse_file(XDMOD / "accounting-logs.log")
    check_contract(r)
    expected = json.loads((XDMOD / "accounting-logs.expected.json").read_text())
    # Both records are the same job (id, submit time): the later one replaces the earlier (merged).
    assert (r.jobs.height, r.merged) == (1, 1)
    check_xdmod_record(r.jobs.to_dicts()[0], expected[-1])
    assert r.jobs["timelimit_s"].to_list() == [43200]  # #BSUB -W 12:00 (a 9.11 record with 6-field host rusage)
    first = parse_lines([(XDMOD / "accounting-logs.log").read_text().splitlines()[0]]).jobs.to_dicts()[0]
    check_xdmod_record(first, expected[0])
    assert first["alloc_cpus"] == 128  # 8 hosts as 16*host


def test_xdmod_gpu_and_truncated_records():
    r = parse_file(XDMOD / "gpu-accounting-logs.log")
    check_contract(r)
    expected = json.loads((XDMOD / "gpu-accounting-logs.expected.json").read_text())
    assert (r.jobs.height, r.merged) == (2, 1)
    for label, e in expected.items():
        if "synthetic" not in label:
            check_xdmod_record(row(r, e["job_id"]), e)
    # the third record (GPUs per host) is the same job as the second, so it replaces it
    check_xdmod_record(row(r, "83630"), expected["LSF 10.1 GPUs per host (synthetic)"])
    t = parse_file(XDMOD / "truncated-record.log")
    check_contract(t)
    check_xdmod_record(t.jobs.to_dicts()[0], json.loads((XDMOD / "truncated-record.expected.json").read_text())[0])
    assert t.jobs["timelimit_s"].to_list() == [None]  # the record ends before runLimit


def test_xdmod_utf8_multibyte_command():
    line = (XDMOD / "utf8-multibyte-chars.log").read_text(encoding="utf-8").rstrip("\n")
    r = parse_lines([line])
    check_contract(r)
    assert r.jobs.height == 1 and r.jobs["job_id"].to_list() == ["404717"]
    commands = [line[a:b] for a, b, kind in identity_spans(line) if kind == "command"]
    assert commands == [json.loads((XDMOD / "utf8-multibyte-chars.expected.json").read_text())[0]["command"]]


# --- aws-samples/hpc-cost-simulator: real files and the job values its tests assert ----------


def exp_jobs(path: Path) -> dict[str, dict]:
    with open(path, newline="") as f:
        return {r["job_id"]: r for r in csv.DictReader(f)}


def check_exp_job(got: dict, e: dict) -> None:
    assert got["submit_time"] == iso(e["submit_time"])
    assert got["start_time"] == iso(e["start_time"])
    assert got["end_time"] == iso(e["finish_time"])
    assert got["run_s"] == duration(e["run_time"]) and got["wait_s"] == duration(e["wait_time"])
    assert got["alloc_cpus"] == int(e["num_cores"])  # maxNumProcessors there; the slots the job held here
    assert got["exit_code"] == e["exit_status"]
    assert got["partition"] == e["queue"] and got["account_name"] == e["project"]


def test_hpc_cost_simulator_issue_9_records():
    r = parse_file(HCS / "issues-9" / "lsb.acct.hostFactor-not-a-float")
    check_contract(r)
    expected = exp_jobs(HCS / "issues-gl-9" / "exp_jobs.csv")
    assert sorted(r.jobs["job_id"].to_list()) == sorted(expected)
    assert (r.skipped, r.quarantine.height) == (7, 0)  # blank lines between records
    for job, e in expected.items():
        check_exp_job(row(r, job), e)
    assert row(r, "521375")["state"] == "CANCELLED"  # EXIT, TERM_ADMIN (15): killed by an administrator
    assert row(r, "521375")["timelimit_s"] == 2419200  # runLimit (after a 5-pair submitEXT)
    assert row(r, "982457")["req_cpus"] == 2 and row(r, "982457")["alloc_cpus"] == 3  # bsub -n 2,3


def test_hpc_cost_simulator_issue_31_start_from_run_time():
    r = parse_file(HCS / "issues-31" / "lsb.acct.issue-31")
    check_contract(r)
    expected = exp_jobs(HCS / "issues-31" / "exp_jobs.csv")
    check_exp_job(row(r, "203"), expected["203"])  # startTime 0, runTime 9: start = end - runTime


def test_hpc_cost_simulator_missing_num_ex_hosts():
    r = parse_file(HCS / "numExHosts" / "lsb.acct")
    check_contract(r)
    assert (r.jobs.height, r.merged, r.skipped, r.quarantine.height) == (2, 1, 5, 0)
    # test_files/LSFLogParser/exp_jobs.csv: 387,2,...,2022-02-14T08:16:51,2022-02-14T08:16:52,2022-02-14T08:17:08,
    # ...,0:00:01,0:00:16,0,...
    check_exp_job(row(r, "387"), {"submit_time": "2022-02-14T08:16:51", "start_time": "2022-02-14T08:16:52",
                                  "finish_time": "2022-02-14T08:17:08", "run_time": "0:00:16", "wait_time": "0:00:01",
                                  "num_cores": "2", "exit_status": "0", "queue": "sender", "project": "default"})
    assert row(r, "387")["node_list"] == "ip-10-30-66-253.eu-west-1.compute.internal"
    check_exp_job(row(r, "521375"), {**exp_jobs(HCS / "issues-gl-9" / "exp_jobs.csv")["521375"], "project": "r56"})


def test_lsf_7_records_and_an_undecodable_line():
    r = parse_file(HCS / "issues-gl-26" / "lsb.acct.issue-gl-26", bad_lines=1)
    check_contract(r)
    assert r.jobs.height == 5 and r.quarantine.height == 0  # "7.06": ends after submitEXT's count
    got = row(r, "447116")
    assert (got["submit_time"], got["start_time"], got["end_time"]) == (utc(1357860027), utc(1357860032), utc(1357860114))
    assert got["timelimit_s"] is None and got["state"] == "COMPLETED"
    latin = list(iter_line_chunks(HCS / "issues-gl-26" / "lsb.acct.issue-gl-26", encoding="latin-1"))[0]
    r = parse_lsf_chunk(latin.lines, "c1")
    check_contract(r)
    assert r.quarantine.height == 1 and "event time is not an epoch" in r.quarantine["reason"][0]


# --- forms ------------------------------------------------------------------------------------

BASE = (XDMOD / "truncated-record.log").read_text().rstrip("\n")  # a 10.1 JOB_FINISH ending at jobDescription


def test_other_records_are_skipped_and_malformed_quarantined():
    lines = [
        "#1234567",
        '"JOB_RESIZE" "10.1" 1644826628 387 0 1644826612 1501 "simuser" 0 0 0 0 0 0 0',
        '"EVENT_ADRSV_FINISH" "10.1" 1644826628 ""',
        BASE.replace('"anonuser"', '"anon user'),  # unbalanced quotes
        "JOB_FINISH 10.1 1727454753",  # no quotes: not a record
        BASE.replace("1727454753 11493", "1727454753 x11493"),
        BASE.replace("1727454675 0 0 1727454676", "0 0 0 1727454676"),
        BASE.replace('"1727454675.11493" 0 1 "host2001" 64', '"1727454675.11493" 0 3 "host2001" 64'),
        BASE,
    ]
    r = parse_lines(lines)
    check_contract(r)
    reasons = dict(zip(r.quarantine["line_no"].to_list(), r.quarantine["reason"].to_list()))
    assert (r.skipped, r.jobs.height) == (3, 1)
    assert "unbalanced double quotes" in reasons[4]
    assert "not an lsb.acct record" in reasons[5]
    assert "jobId is not a positive integer" in reasons[6]
    assert "no submit time" in reasons[7]
    assert "host lists do not line up" in reasons[8]


@pytest.mark.parametrize("jstatus,exit_info,state", [
    (64, 0, "COMPLETED"), (32, 0, "FAILED"), (32, 5, "TIMEOUT"), (32, 12, "TIMEOUT"), (32, 6, "DEADLINE"),
    (32, 1, "PREEMPTED"), (32, 16, "OUT_OF_MEMORY"), (32, 14, "CANCELLED"), (32, 9, "CANCELLED"), (32, 10, "REQUEUED"),
    (192, 0, "COMPLETED"), (1, 0, "UNKNOWN"),
])
def test_states(jstatus, exit_info, state):
    line = BASE.replace('"host2001" 64 12.5', f'"host2001" {jstatus} 12.5')
    toks = line.split(" ")
    # exitInfo is e + 38: the 15th field from the end of this record (it ends at jobDescription, e + 52)
    toks[-15] = str(exit_info)
    assert parse_lines([" ".join(toks)]).jobs["state"].to_list() == [state]


def test_array_element_and_never_started_job():
    toks = BASE.split(" ")
    toks[-24] = "7"  # idx: e + 29, the record ending at jobDescription (e + 52)
    arr = parse_lines([" ".join(toks)]).jobs.to_dicts()[0]
    assert (arr["job_id"], arr["array_job_id"], arr["array_task_id"]) == ("11493_7", "11493", 7)
    pending = BASE.replace("1727454675 0 0 1727454676", "1727454675 0 0 0").replace('"host2001" 64', '"host2001" 32')
    got = parse_lines([pending]).jobs.to_dicts()[0]
    assert got["start_time"] is None and got["run_s"] is None and got["alloc_cpus"] is None
    assert got["state"] == "CANCELLED"


def test_identity_spans():
    line = (HCS / "issues-9" / "lsb.acct.hostFactor-not-a-float").read_text().splitlines()[0]
    spans = [(line[a:b], kind) for a, b, kind in identity_spans(line)]
    assert ("user1", "user") in spans and ("24253", "user_id") in spans and ("string9", "job_name") in spans
    assert ("default", "account") in spans and ("/projects/string7/user1", "path") in spans
    assert any(kind == "command" and "string10.sh" in v for v, kind in spans)
    assert ("queue1", "user") not in spans and not any(v == "string8" for v, _ in spans)  # hosts are not identities
    odd = '"WHATEVER" "1" 2 "someone" "x y"'
    assert [odd[a:b] for a, b, _ in identity_spans(odd)] == ["someone", "x y"]  # unknown layout: every string


# --- garbage ----------------------------------------------------------------------------------

REAL = [ln for p in (HCS / "issues-9" / "lsb.acct.hostFactor-not-a-float", XDMOD / "gpu-accounting-logs.log",
                     XDMOD / "accounting-logs.log")
        for ln in p.read_text().splitlines() if ln]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=200).map(lambda s: s.replace("\n", " ")), max_size=20))
def test_random_text_never_raises_and_reconciles(lines):
    r = parse_lines(lines)
    check_contract(r)
    assert r.lines_read == len(lines)
    for ln in lines:
        identity_spans(ln)


TOKEN = st.one_of(st.integers(-5, 10**12).map(str), st.sampled_from(['""', '"x"', '"a""b"', "02", "-1", "1.5", '"', "x"]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(REAL) - 1), st.lists(st.tuples(st.integers(0, 200), TOKEN), max_size=4),
                          st.integers(0, 5000)), min_size=1, max_size=8))
def test_mutated_real_records_never_raise_and_reconcile(edits):
    lines = mutated_records(REAL, edits, " ")
    r = parse_lines(lines)
    check_contract(r)
    for ln in lines:
        identity_spans(ln)


@pytest.mark.parametrize("entry", ['"host2001" 102400 0 10 1', '"host2001" 102400 0 10 1 0'])
def test_host_rusage_entries_of_five_or_six_fields(entry):
    """10.x documents 5 fields per host rusage entry; the 9.11 record above has 6: both line up."""
    line = (XDMOD / "gpu-accounting-logs.log").read_text().splitlines()[1]
    old = '"num=2:mode=shared:mps=no:j_exclusive=yes:gvendor=nvidia" 0 28800 0 100352 "select'
    assert line.count(old) == 1
    two = line.replace(old, old.replace('" 0 28800', f'" 2 {entry} {entry} 28800'))
    got = parse_lines([two]).jobs.to_dicts()[0]
    assert got["timelimit_s"] == 28800 and got["req_gpus"] == 2 and got["run_s"] == 785


def test_eligible_time_as_hpc_cost_simulator_computes_it():
    """eligible_time = submit + ineligiblePendTime (its exp_jobs.csv: eligible_time)."""
    r = parse_file(HCS / "issues-9" / "lsb.acct.hostFactor-not-a-float")
    for job, e in exp_jobs(HCS / "issues-gl-9" / "exp_jobs.csv").items():
        assert row(r, job)["eligible_time"] == iso(e["eligible_time"])
    line = (HCS / "numExHosts" / "lsb.acct").read_text().splitlines()[1]
    pend = line.replace(' -1 0 0 0 0 1 "schedulingOverhead"', ' 300 0 0 0 0 1 "schedulingOverhead"')
    assert pend.count(" 300 0 0 0 0 1 ") == 1
    assert parse_lines([pend]).jobs["eligible_time"].to_list() == [iso("2022-02-14T08:21:51")]
