"""PBS/Torque/PBS Pro parser: agreement with Open XDMoD's fixture, record lifecycle, forms, garbage."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metapilot.transforms.canonical import PARSED_SCHEMA, SLURM_STATES, ParseResult
from metapilot.transforms.lines import iter_line_chunks
from metapilot.transforms.pbs import parse_pbs_chunk

DATA = Path(__file__).parent / "data" / "pbs"
TZ = "America/New_York"


def frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line_no": list(range(1, len(lines) + 1)), "line": lines},
                        schema={"line_no": pl.Int64, "line": pl.Utf8})


def parse_lines(lines: list[str], tz: str = TZ) -> ParseResult:
    return parse_pbs_chunk(frame(lines), "c1", tz)


def check_contract(r: ParseResult) -> None:
    assert dict(r.jobs.schema) == PARSED_SCHEMA
    assert r.reconciles(), (r.lines_read, r.lines_loaded, r.merged, r.quarantine.height, r.skipped)
    assert set(r.jobs["state"].to_list()) <= set(SLURM_STATES)
    assert r.jobs["submit_time"].null_count() == 0
    assert r.jobs.select("job_id").is_unique().all()
    for col in ("wait_s", "run_s", "alloc_cpus", "req_cpus", "req_mem_mib", "req_gpus", "timelimit_s"):
        assert (r.jobs[col].drop_nulls() >= 0).all(), col


def epoch(value: str | int | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(int(value), tz=timezone.utc)


def ended(job: str, attrs: str, stamp: str = "03/01/2021 10:30:00") -> str:
    base = "user=u group=g queue=q ctime=1614610800 start=1614610805 end=1614612600 Exit_status=0"
    return f"{stamp};E;{job}.srv;{base} {attrs}"


# --- Open XDMoD fixture -----------------------------------------------------------------------

# Where we deliberately differ from Open XDMoD's shredder (see transforms/pbs.py):
# - 3073070: exec_host `[hostname_2]/0*0` has a zero count; XDMoD's PHP `range(1, 0)` counts 2 CPUs,
#   we fall back to resources_used.ncpus=48 (also Resource_List.ncpus and exec_vnode's 24+24).
# - 6464684: XDMoD's cpu_req is Resource_List.ncpus=1; our req_cpus also weighs nodes=1:ppn=4 -> 4.
ALLOC_CPUS_DIFFER = {"3073070": (2, 48)}
REQ_CPUS_DIFFER = {"6464684": ("1", 4)}


@pytest.fixture(scope="module")
def fixture_result() -> ParseResult:
    chunks = list(iter_line_chunks(DATA / "accounting-logs.log"))
    assert len(chunks) == 1
    return parse_pbs_chunk(chunks[0].lines, "c1", TZ)


def test_fixture_accounting(fixture_result):
    r = fixture_result
    check_contract(r)
    assert r.lines_read == 9 and r.quarantine.height == 0
    # lines 1 and 2 are the same job 6 (with and without the server in the id): one row, one merged
    assert r.jobs.height == 8 and r.merged == 1
    assert r.jobs.filter(pl.col("job_id") == "6")["source_line"].to_list() == [2]


def test_fixture_agrees_with_open_xdmod(fixture_result):
    expected = json.loads((DATA / "accounting-logs.expected.json").read_text())
    rows = {row["job_id"]: row for row in fixture_result.jobs.iter_rows(named=True)}
    assert set(rows) == {e["job_id"] for e in expected.values()}
    checked = 0
    for case, e in expected.items():
        got = rows[e["job_id"]]
        pairs = {
            "queue": ("partition", e.get("queue")),
            "user": ("user_name", e.get("user")),
            "groupname": ("group_name", e.get("groupname")),
            "jobname": ("job_name", e.get("jobname")),
            "account": ("account_name", e.get("account")),
            "ctime": ("submit_time", epoch(e.get("ctime"))),
            "etime": ("eligible_time", epoch(e.get("etime"))),
            "start": ("start_time", epoch(e.get("start"))),
            "end": ("end_time", epoch(e.get("end"))),
            "exit_status": ("exit_code", e.get("exit_status")),
            "resources_used_walltime": ("run_s", e.get("resources_used_walltime")),
            "resources_used_nodes": ("alloc_nodes", e.get("resources_used_nodes")),
            "resources_used_cpus": ("alloc_cpus", e.get("resources_used_cpus")),
            "resources_used_gpus": ("req_gpus", e.get("resources_used_gpus")),
            "resource_list_walltime": ("timelimit_s", e.get("resource_list_walltime")),
            "node_list": ("node_list", e.get("node_list")),
            "resource_list_ncpus": ("req_cpus", e.get("resource_list_ncpus")),
            "resource_list_mem": ("req_mem_mib", e.get("resource_list_mem")),
        }
        for key, (ours, want) in pairs.items():
            if key not in e:
                continue
            if key == "resources_used_cpus" and e["job_id"] in ALLOC_CPUS_DIFFER:
                assert (want, got[ours]) == ALLOC_CPUS_DIFFER[e["job_id"]]
                continue
            if key == "resource_list_ncpus" and e["job_id"] in REQ_CPUS_DIFFER:
                assert (want, got[ours]) == REQ_CPUS_DIFFER[e["job_id"]]
                continue
            if key == "resource_list_mem":
                want = round(want / 2**20)
            if key in ("resource_list_ncpus", "resources_used_gpus") and want is not None:
                want = int(want)
            assert got[ours] == want, (case, key, got[ours], want)
            checked += 1
        assert got["alloc_gpus"] == got["req_gpus"]  # started jobs hold what they asked for
    assert checked > 100


def test_fixture_states(fixture_result):
    states = dict(zip(fixture_result.jobs["job_id"], fixture_result.jobs["state"]))
    assert states == {
        "6": "COMPLETED", "6464684": "FAILED", "2994": "COMPLETED", "2995": "COMPLETED",
        "7904": "FAILED", "10711": "COMPLETED", "10712": "COMPLETED",
        "3073070": "TIMEOUT",  # Exit_status 271 (SIGTERM) after 10:01:06 of a 10:00:00 limit
    }


# --- record lifecycle ---------------------------------------------------------------------------

LIFECYCLE = """03/01/2021 10:00:00;Q;100.srv;queue=batch
03/01/2021 10:00:05;S;100.srv;user=u group=g jobname=j queue=batch ctime=1614610800 qtime=1614610800 etime=1614610800 start=1614610805 exec_host=n1/0-3+n2/0-3 Resource_List.nodes=2:ppn=4 Resource_List.walltime=01:00:00 Resource_List.mem=8gb
03/01/2021 10:30:00;E;100.srv;user=u group=g jobname=j queue=batch ctime=1614610800 qtime=1614610800 etime=1614610800 start=1614610805 end=1614612600 exec_host=n1/0-3+n2/0-3 Resource_List.nodes=2:ppn=4 Resource_List.walltime=01:00:00 Exit_status=0 resources_used.walltime=00:29:55
03/01/2021 11:00:00;Q;101.srv;queue=batch
03/01/2021 11:00:00;Q;102.srv;queue=batch
03/01/2021 11:05:00;S;102.srv;user=u queue=batch ctime=1614614400 start=1614614700 exec_host=n3/0*8 Resource_List.select=2:ncpus=4:ngpus=1:mem=2gb
03/01/2021 11:10:00;Q;103.srv;queue=batch
03/01/2021 11:20:00;D;103.srv;requestor=u@host
03/01/2021 11:10:00;D;104.srv;requestor=u@host
03/01/2021 11:10:00;Q;200[].srv;queue=batch array_indices_submitted=1-3
03/01/2021 11:10:00;Q;201[].srv;queue=batch
03/01/2021 11:11:00;S;201[1].srv;user=u queue=batch ctime=1614615000 start=1614615060 exec_host=n4/0
03/01/2021 11:12:00;E;201[1].srv;user=u queue=batch ctime=1614615000 start=1614615060 end=1614615120 exec_host=n4/0 Exit_status=0
03/01/2021 11:13:00;R;105.srv;
03/01/2021 11:13:00;L;license;floating license hour:0 day:0
03/01/2021 11:13:00;Y;R5.srv;requestor=x

garbage
13/45/2021 11:13:00;E;1.srv;x=y
03/01/2021 11:30:00;S;300.srv;user=u queue=batch ctime=1614615000 start=1614616000 exec_host=n5/0
03/01/2021 11:40:00;D;300.srv;requestor=u@host
03/01/2021 11:41:00;E;300.srv;user=u queue=batch ctime=1614615000 start=1614616000 end=1614616860 exec_host=n5/0 Exit_status=271
03/01/2021 11:50:00;A;301.srv;ctime=1614615000""".split("\n")


def test_lifecycle_rows_states_and_buckets():
    r = parse_lines(LIFECYCLE)
    check_contract(r)
    got = {row["job_id"]: row for row in r.jobs.iter_rows(named=True)}
    assert {k: v["state"] for k, v in got.items()} == {
        "100": "COMPLETED", "101": "PENDING", "102": "RUNNING", "103": "CANCELLED",
        "200_[1-3]": "PENDING", "201_1": "COMPLETED", "300": "CANCELLED", "301": "FAILED",
    }
    # Q/S of 100, Q of 102, Q of 103, array summary 201[], S of 201[1], R of 105, S and D of 300
    assert r.merged == 9
    assert r.skipped == 3  # L and Y records, blank line
    q = dict(zip(r.quarantine["line_no"], r.quarantine["reason"]))
    assert set(q) == {9, 18, 19}
    assert "no submit time" in q[9] and "not a PBS accounting record" in q[18] and "not a valid date" in q[19]

    j100 = got["100"]
    assert j100["source_line"] == 3 and j100["run_s"] == 1795 and j100["wait_s"] == 5
    assert (j100["req_cpus"], j100["req_nodes"], j100["alloc_cpus"], j100["alloc_nodes"]) == (8, 2, 8, 2)
    assert j100["req_mem_mib"] == 8192 and j100["node_list"] == "n1,n2" and j100["timelimit_s"] == 3600
    # Q-only: submit is the Q stamp, local New York time (EST, UTC-5) to UTC
    assert got["101"]["submit_time"] == datetime(2021, 3, 1, 16, 0, tzinfo=timezone.utc)
    assert got["101"]["start_time"] is None and got["101"]["partition"] == "batch"
    j102 = got["102"]
    assert (j102["end_time"], j102["run_s"], j102["wait_s"]) == (None, None, 300)
    assert (j102["req_cpus"], j102["req_gpus"], j102["req_mem_mib"], j102["alloc_cpus"]) == (8, 2, 4096, 8)
    j103 = got["103"]  # deleted while queued: end = D stamp, never started
    assert j103["end_time"] == datetime(2021, 3, 1, 16, 20, tzinfo=timezone.utc)
    assert j103["start_time"] is None and j103["run_s"] is None and j103["alloc_cpus"] is None
    assert (got["200_[1-3]"]["array_job_id"], got["200_[1-3]"]["array_task_id"]) == ("200", None)
    assert (got["201_1"]["array_job_id"], got["201_1"]["array_task_id"]) == ("201", 1)
    assert got["300"]["exit_code"] == "271" and got["300"]["run_s"] == 860


def test_deleted_running_job_takes_start_from_its_s_record():
    r = parse_lines([
        "03/01/2021 11:30:00;S;400.srv;user=u queue=b ctime=1614615000 start=1614616000 exec_host=n5/0+n5/1",
        "03/01/2021 11:40:00;D;400.srv;requestor=u@host",
    ])
    check_contract(r)
    row = r.jobs.row(0, named=True)
    assert row["state"] == "CANCELLED" and row["source_line"] == 2 and r.merged == 1
    assert row["start_time"] == epoch(1614616000) and row["alloc_cpus"] == 2
    assert row["run_s"] == int((datetime(2021, 3, 1, 16, 40, tzinfo=timezone.utc) - epoch(1614616000)).total_seconds())


def test_array_summary_without_tasks():
    r = parse_lines([
        "03/01/2021 11:10:00;Q;200[].srv;queue=batch array_indices_submitted=1-3",
        "03/01/2021 11:20:00;D;200[].srv;requestor=u@host",
        "03/01/2021 11:10:00;Q;300[].srv;queue=batch",
        "03/01/2021 11:30:00;E;300[].srv;queue=batch ctime=1614615000 Exit_status=0",
    ])
    check_contract(r)
    assert r.jobs.select("job_id", "array_job_id", "array_task_id", "state").rows() == [
        ("200_[1-3]", "200", None, "CANCELLED"), ("300_[]", "300", None, "PENDING"),
    ]
    assert r.merged == 2  # the Q of 200[] (folded into its D), the E summary of 300[]


def test_timezone_of_stamps():
    summer = parse_lines(["07/01/2021 12:00:00;Q;1.srv;queue=q"]).jobs["submit_time"][0]
    assert summer == datetime(2021, 7, 1, 16, 0, tzinfo=timezone.utc)  # EDT, UTC-4
    utc = parse_lines(["07/01/2021 12:00:00;Q;1.srv;queue=q"], tz="UTC").jobs["submit_time"][0]
    assert utc == datetime(2021, 7, 1, 12, 0, tzinfo=timezone.utc)
    # a stamp in the spring-forward gap does not exist: no submit time, quarantined, not invented
    gap = parse_lines(["03/14/2021 02:30:00;Q;1.srv;queue=q"])
    assert gap.jobs.height == 0 and gap.quarantine.height == 1 and gap.reconciles()
    with pytest.raises(ValueError):
        parse_lines(["07/01/2021 12:00:00;Q;1.srv;queue=q"], tz="Mars/Olympus")


def test_end_stamp_used_when_end_attribute_missing():
    r = parse_lines(["03/01/2021 10:30:00;E;5.srv;user=u ctime=1614610800 start=1614610805 Exit_status=0"])
    assert r.jobs["end_time"][0] == datetime(2021, 3, 1, 15, 30, tzinfo=timezone.utc)
    assert r.jobs["run_s"][0] == 1795


# --- attribute forms ----------------------------------------------------------------------------

@pytest.mark.parametrize("mem,mib", [
    ("1gb", 1024), ("1GB", 1024), ("1048576kb", 1024), ("2tb", 2 * 1024 * 1024), ("1073741824", 1024),
    ("1073741824b", 1024), ("134217728w", 1024), ("1mw", 8), ("512mb", 512), ("1.5gb", 1536), ("bogus", None),
])
def test_memory_units(mem, mib):
    r = parse_lines([ended("1", f"Resource_List.mem={mem}")])
    assert r.jobs["req_mem_mib"][0] == mib


def test_pmem_times_cpus_when_no_total():
    r = parse_lines([ended("1", "Resource_List.nodes=2:ppn=4 Resource_List.pmem=1gb")])
    assert r.jobs["req_mem_mib"][0] == 8192


@pytest.mark.parametrize("walltime,secs", [("3600", 3600), ("01:00:00", 3600), ("60:00", 3600),
                                           ("144:00:00", 518400), ("00:00:30.5", 30), ("1:2:3:4", None)])
def test_walltime_forms(walltime, secs):
    r = parse_lines([ended("1", f"Resource_List.walltime={walltime}")])
    assert r.jobs["timelimit_s"][0] == secs


@pytest.mark.parametrize("exec_host,nodes,cpus,node_list", [
    ("i02n33/7+i02n33/6+i02n32/0", 2, 3, "i02n33,i02n32"),
    ("node/0-3", 1, 4, "node"),
    ("node/0*8", 1, 8, "node"),
    ("a/0*13+b/0*13", 2, 26, "a,b"),
    ("c1/0-3+c2/0-7", 2, 12, "c1,c2"),
    ("n1/0,2,4-5", 1, 4, "n1"),
    ("n1+n2", 2, 2, "n1,n2"),
])
def test_exec_host_forms(exec_host, nodes, cpus, node_list):
    row = parse_lines([ended("1", f"exec_host={exec_host}")]).jobs.row(0, named=True)
    assert (row["alloc_nodes"], row["alloc_cpus"], row["node_list"]) == (nodes, cpus, node_list)


@pytest.mark.parametrize("attrs,cpus,nodes,gpus", [
    ("Resource_List.select=2:ncpus=8:ngpus=1+1:ncpus=4", 20, None, 2),
    ("Resource_List.select=2:ncpus=8:ngpus=1+1:ncpus=4 Resource_List.nodect=3", 20, 3, 2),
    ("Resource_List.nodes=4:ppn=8", 32, 4, 0),
    ("Resource_List.nodes=node01:ppn=4+node02:ppn=4", 8, 2, 0),
    ("Resource_List.nodes=2:ppn=8:gpus=2", 16, 2, 4),
    ("Resource_List.nodes=1:ppn=28:gpus=1:default", 28, 1, 1),
    ("Resource_List.ncpus=16", 16, None, 0),
    ("Resource_List.ncpus=1 Resource_List.nodes=1:ppn=4", 4, 1, 0),
    ("Resource_List.procs=12", 12, None, 0),
    ("Resource_List.ngpus=3", None, None, 3),
    ("Resource_List.gpus=2", None, None, 2),
    ("Resource_List.nodect=2:ppn=24:gpu=4", None, 2, 8),
])
def test_request_forms(attrs, cpus, nodes, gpus):
    row = parse_lines([ended("1", attrs)]).jobs.row(0, named=True)
    assert (row["req_cpus"], row["req_nodes"], row["req_gpus"]) == (cpus, nodes, gpus)


def test_select_memory_total():
    row = parse_lines([ended("1", "Resource_List.select=2:ncpus=4:mem=2gb+1:ncpus=1:mem=512mb")]).jobs.row(0, named=True)
    assert row["req_mem_mib"] == 2 * 2048 + 512


@pytest.mark.parametrize("job,job_id,array_id,task", [
    ("123[4].srv", "123_4", "123", 4), ("123-4.srv", "123_4", "123", 4), ("123", "123", None, None),
    ("3073070.[hostname_1]", "3073070", None, None),
])
def test_job_id_forms(job, job_id, array_id, task):
    line = f"03/01/2021 10:30:00;E;{job};user=u ctime=1614610800 start=1614610805 end=1614612600 Exit_status=0"
    row = parse_lines([line]).jobs.row(0, named=True)
    assert (row["job_id"], row["array_job_id"], row["array_task_id"]) == (job_id, array_id, task)


@pytest.mark.parametrize("attrs,state", [
    ("Exit_status=0", "COMPLETED"), ("Exit_status=1", "FAILED"), ("Exit_status=-4", "FAILED"),
    ("Exit_status=265 resources_used.walltime=01:00:00 Resource_List.walltime=01:00:00", "TIMEOUT"),
    ("Exit_status=265 resources_used.walltime=00:10:00 Resource_List.walltime=01:00:00", "FAILED"),
])
def test_end_states(attrs, state):
    line = f"03/01/2021 10:30:00;E;1.srv;ctime=1614610800 start=1614610805 end=1614612600 {attrs}"
    assert parse_lines([line]).jobs["state"][0] == state


def test_ended_without_start_or_exit_is_cancelled():
    r = parse_lines(["03/01/2021 10:30:00;E;1.srv;ctime=1614610800 queue=q"])
    assert r.jobs.select("state", "start_time", "alloc_cpus", "alloc_gpus").row(0) == ("CANCELLED", None, None, None)


def test_project_default_is_not_an_account():
    r = parse_lines([ended("1", "project=_pbs_project_default"), ended("2", "project=astro"),
                     ended("3", "account=acct project=astro")])
    assert r.jobs["account_name"].to_list() == [None, "astro", "acct"]


# --- garbage ------------------------------------------------------------------------------------

FIXTURE_LINES = (DATA / "accounting-logs.log").read_text().splitlines()
PBS_VALUE = st.one_of(
    st.text(alphabet=st.sampled_from(list("0123456789:+/-*=.,[]abkmgtwKMGTxyz ")), max_size=30),
    st.lists(st.sampled_from(["2", ":", "ncpus=", "ngpus=", "mem=", "ppn=", "gpus=", "gpu=", "+", "8", "0",
                              "99999999999999999999", "gb", "w", "/", "-", "*", ",", "node", "."]), max_size=14).map("".join),
)
PBS_KEY = st.sampled_from([
    "ctime", "start", "end", "Exit_status", "exec_host", "Resource_List.select", "Resource_List.nodes",
    "Resource_List.nodect", "Resource_List.mem", "Resource_List.walltime", "resources_used.walltime",
    "Resource_List.ncpus", "Resource_List.pmem", "queue", "user", "Resource_List.ngpus",
])
PBS_RECORD = st.builds(
    lambda t, job, kv: f"03/01/2021 10:00:00;{t};{job};" + " ".join(f"{k}={v}" for k, v in kv),
    st.sampled_from(list("QSEDARTLYa")),
    st.sampled_from(["1.srv", "2", "3[1].s", "3[].s", "4-2", ".srv", "x", "5[.s"]),
    st.lists(st.tuples(PBS_KEY, PBS_VALUE), max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=150).map(lambda s: s.replace("\n", " ")), max_size=25))
def test_random_text_never_raises_and_reconciles(lines):
    r = parse_lines(lines)
    check_contract(r)
    assert r.lines_read == len(lines)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PBS_RECORD, max_size=15))
def test_random_records_never_raise_and_reconcile(lines):
    check_contract(parse_lines(lines))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(FIXTURE_LINES) - 1), st.integers(0, 2000)), min_size=1, max_size=12))
def test_truncated_fixture_lines_reconcile(cuts):
    lines = [FIXTURE_LINES[i][:cut] for i, cut in cuts]
    check_contract(parse_lines(lines))
