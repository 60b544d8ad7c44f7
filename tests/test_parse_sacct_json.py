"""`sacct --json` parser (transforms.sacct_json) on Slurm 21.08 samples and broken documents."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from metapilot.transforms.canonical import PARSED_SCHEMA, ParseResult
from metapilot.transforms.sacct_json import parse_sacct_json

JSON_DIR = Path(__file__).resolve().parent / "data" / "slurm" / "sacct-json"


def utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


def check(res: ParseResult) -> ParseResult:
    assert res.reconciles()
    assert res.jobs.schema == pl.Schema(PARSED_SCHEMA)
    assert res.quarantine["reason"].null_count() == 0
    return res


def sample(name: str) -> dict:
    return json.loads((JSON_DIR / name).read_text())


def test_sacct_1():
    res = check(parse_sacct_json((JSON_DIR / "sacct_1").read_text(), "dflt", "UTC"))
    assert (res.lines_read, res.merged, res.quarantine.height) == (2, 0, 0)
    a, b = res.jobs.sort("source_line").to_dicts()
    # Array task 7 of array job 1 (raw job id 10), as sacct's text JobID would print it.
    assert (a["job_id"], a["array_job_id"], a["array_task_id"], a["source_format"]) == ("1_7", "1", 7, "sacct-json")
    assert (a["cluster"], a["partition"], a["qos"], a["user_name"], a["account_name"], a["group_name"], a["job_name"]) == (
        "cedar", "partition1", "normal", "nobody", "def-cerise-rrg", "nobody", "test-job-1")
    assert a["state"] == "NODE_FAIL" and a["exit_code"] == "0:0"
    assert a["submit_time"] == utc(1680193479) and a["eligible_time"] == utc(1680193504) and a["start_time"] == utc(1680193504)
    # end = 0 in the dump: not known; the run time falls back on elapsed.
    assert a["end_time"] is None and a["run_s"] == 20615 and a["wait_s"] == 25
    assert a["timelimit_s"] == 1440 * 60
    assert (a["req_cpus"], a["req_nodes"], a["req_mem_mib"], a["req_gpus"]) == (4, 1, 40960, 1)
    assert (a["alloc_cpus"], a["alloc_nodes"], a["alloc_mem_mib"], a["alloc_gpus"], a["node_list"]) == (4, 1, 40960, 1, "cdr1")
    assert (b["job_id"], b["state"], b["end_time"], b["run_s"]) == ("2_0", "REQUEUED", utc(1680215981), 1680215981 - 1680127992)


def test_sacct_2_is_a_later_snapshot():
    res = check(parse_sacct_json((JSON_DIR / "sacct_2").read_text(), "dflt", "UTC"))
    rows = {r["job_id"]: r for r in res.jobs.to_dicts()}
    assert set(rows) == {"1_7", "3_0"}
    assert rows["1_7"]["end_time"] == utc(1680244103) and rows["1_7"]["run_s"] == 1680244103 - 1680193504
    assert rows["1_7"]["job_name"] == "new_name" and rows["3_0"]["job_name"] == "submitit"


def test_not_json_is_one_quarantine_row():
    for text in ["", "{not json", "\x00\x01", '{"jobs": [}']:
        res = check(parse_sacct_json(text, "c", "UTC"))
        assert res.lines_read == 1 and res.jobs.height == 0
        assert res.quarantine.to_dicts()[0]["line_no"] == 1
        assert res.quarantine["reason"][0].startswith("not valid JSON")


def test_json_without_jobs_list():
    for doc in ["[]", '{"meta": {}}', '{"jobs": 3}', "42"]:
        res = check(parse_sacct_json(doc, "c", "UTC"))
        assert (res.lines_read, res.quarantine.height) == (1, 1) and "'jobs'" in res.quarantine["reason"][0]


def test_bad_job_objects_are_quarantined_by_position():
    doc = sample("sacct_1")
    good = doc["jobs"][1]
    no_submit = copy.deepcopy(good)
    del no_submit["time"]["submission"]
    bad_id = copy.deepcopy(good)
    bad_id["job_id"] = "x"
    doc["jobs"] = [good, "not an object", no_submit, bad_id]
    res = check(parse_sacct_json(json.dumps(doc), "c", "UTC"))
    assert res.lines_read == 4 and res.jobs["source_line"].to_list() == [1]
    assert res.quarantine.select("line_no", "reason").rows() == [
        (2, "job entry is not an object"), (3, "no submit time"), (4, "bad job id 'x'"),
    ]


def test_newer_dump_forms_pending_array_het_and_duplicates():
    """v0.0.39+ wraps numbers in {set, infinite, number} and makes state a list of flags."""
    n = lambda v: {"set": True, "infinite": False, "number": v}  # noqa: E731
    pending = {
        "job_id": 50, "cluster": "", "name": "arr", "nodes": "None assigned",
        "array": {"job_id": 50, "task_id": n(4294967294), "task": "1-3,7%2"},
        "state": {"current": ["PENDING"], "reason": "Priority"},
        "time": {
            "submission": n(1700000000), "start": n(0), "end": n(0), "elapsed": 0,
            "limit": {"set": False, "infinite": True, "number": 0},
        },
        "tres": {
            "requested": [{"type": "cpu", "count": 2}, {"type": "mem", "count": 2048}, {"type": "gres", "name": "gpu:a100", "count": 1}],
            "allocated": [],
        },
    }
    het = {
        "job_id": 61, "het": {"job_id": 60, "job_offset": n(1)}, "state": {"current": ["COMPLETED"]}, "nodes": "n1",
        "time": {"submission": 1700000000, "start": 1700000010, "end": 1700000110, "limit": n(10)},
        "exit_code": {"status": ["EXITED"], "return_code": n(3), "signal": {"id": n(0), "name": ""}},
    }
    twice = copy.deepcopy(het)
    twice["state"] = {"current": ["FAILED"]}
    doc = {"jobs": [pending, het, twice]}
    res = check(parse_sacct_json(json.dumps(doc), "dflt", "UTC"))
    assert res.lines_read == 3 and res.merged == 1  # the later record of 60+1 replaces the earlier
    rows = {r["job_id"]: r for r in res.jobs.to_dicts()}
    assert sorted(rows) == ["50_1", "50_2", "50_3", "50_7", "60+1"]
    p = rows["50_7"]
    assert (p["cluster"], p["state"], p["array_task_id"], p["start_time"], p["end_time"], p["run_s"], p["timelimit_s"]) == (
        "dflt", "PENDING", 7, None, None, None, None)
    assert (p["req_cpus"], p["req_mem_mib"], p["req_gpus"], p["gpu_type"]) == (2, 2048, 1, "a100")
    assert (p["alloc_gpus"], p["node_list"]) == (None, None)
    h = rows["60+1"]
    assert (h["het_job_id"], h["het_offset"], h["state"], h["run_s"], h["wait_s"], h["timelimit_s"], h["exit_code"]) == (
        "60", 1, "FAILED", 100, 10, 600, "3:0")


@settings(max_examples=80, deadline=None)
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace"))))
def test_garbage_text_never_raises(text):
    check(parse_sacct_json(text, "c", "UTC"))


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 2**33), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(
        ["job_id", "time", "submission", "start", "end", "array", "task_id", "task", "het", "job_offset", "state",
         "current", "tres", "allocated", "requested", "type", "name", "count", "nodes", "number", "set", "limit"]), inner, max_size=6)),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(jobs=st.lists(_json_values, max_size=6))
def test_garbage_job_objects_never_raise(jobs):
    res = check(parse_sacct_json(json.dumps({"jobs": jobs}), "c", "UTC"))
    assert res.lines_read == len(jobs)
