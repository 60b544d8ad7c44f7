"""sacct text parser (transforms.sacct) against real samples and their expected results.

Fixtures: Open XDMoD's Slurm shredder unit tests (input -> expected JSON), the
hpc-cost-simulator's SlurmLogParser tests (sacct output -> exp_jobs.csv), tdhock/slurm exports
with headers, Open XDMoD's pozidriv reference log. Where we deliberately differ from a
fixture, the test says so and why.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metapilot.transforms.canonical import PARSED_SCHEMA, SLURM_STATES, ParseResult
from metapilot.transforms.lines import iter_line_chunks, read_head
from metapilot.transforms.sacct import (
    HPC_COST_SIM_FIELDS,
    XDMOD_FIELDS,
    SacctConfig,
    parse_sacct_chunk,
    sniff_sacct,
)

DATA = Path(__file__).resolve().parent / "data" / "slurm"
XDMOD = DATA / "xdmod-unit"
HPC = DATA / "hpc-cost-simulator"
TDHOCK = DATA / "tdhock"
POZIDRIV = DATA / "xdmod-reference" / "pozidriv.log.gz"


@dataclasses.dataclass
class Parsed:
    cfg: SacctConfig
    jobs: pl.DataFrame
    quarantine: pl.DataFrame
    lines_read: int
    merged: int
    skipped: int
    warnings: list[str]


def check(res: ParseResult) -> ParseResult:
    """Invariants of every parse: accounting, schema, keys present, states canonical."""
    assert res.reconciles(), (res.lines_read, res.lines_loaded, res.merged, res.quarantine.height, res.skipped)
    assert res.jobs.schema == pl.Schema(PARSED_SCHEMA)
    assert res.jobs.filter(pl.col("job_id").is_null() | pl.col("submit_time").is_null() | pl.col("cluster").is_null()).height == 0
    assert set(res.jobs["state"].drop_nulls().unique()) <= set(SLURM_STATES)
    assert res.quarantine["reason"].null_count() == 0
    assert res.quarantine["line_no"].n_unique() == res.quarantine.height
    return res


def parse_file(path: Path, chunk_bytes: int = 32 << 20, delimiter: str | None = None, fields: list[str] | None = None, **over) -> Parsed:
    """Sniff, then parse chunk by chunk as the loader does; every chunk must reconcile."""
    cfg = sniff_sacct(read_head(path), delimiter, fields)
    assert cfg is not None, path
    cfg = dataclasses.replace(cfg, **over)
    parts = []
    for chunk in iter_line_chunks(path, chunk_bytes):
        assert chunk.bad.height == 0
        parts.append(check(parse_sacct_chunk(chunk.lines, cfg)))
    return Parsed(
        cfg,
        pl.concat([p.jobs for p in parts]),
        pl.concat([p.quarantine for p in parts]),
        sum(p.lines_read for p in parts),
        sum(p.merged for p in parts),
        sum(p.skipped for p in parts),
        [w for p in parts for w in p.warnings],
    )


def parse_lines(lines: list[str], cfg: SacctConfig | None = None) -> ParseResult:
    chunk = pl.DataFrame({"line_no": list(range(1, len(lines) + 1)), "line": lines}, schema={"line_no": pl.Int64, "line": pl.Utf8})
    return check(parse_sacct_chunk(chunk, cfg or SacctConfig()))


def epoch(ts: datetime | None) -> int | None:
    return None if ts is None else int(ts.timestamp())


def xdmod_lines(name: str) -> list[str]:
    return (XDMOD / "input" / f"{name}.log").read_text(encoding="utf-8").splitlines()


def xdmod_expected(name: str):
    return json.loads((XDMOD / "output" / f"{name}.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Open XDMoD shredder fixtures


def test_xdmod_accounting_logs_agree_on_shared_fields():
    p = parse_file(XDMOD / "input" / "accounting-logs.log")
    assert p.cfg.layout == "xdmod" and p.quarantine.height == 0 and p.merged == 0
    rows = p.jobs.sort("source_line").to_dicts()
    expected = xdmod_expected("accounting-logs")
    assert len(rows) == len(expected) == 4
    for exp, row in zip(expected, rows):
        assert row["job_id"] == exp["job_id"]
        assert row["array_task_id"] is None and exp["job_array_index"] == -1
        # XDMoD replaces the cluster with its configured resource name; we keep sacct's Cluster.
        assert row["cluster"] == "ub-hpc" and exp["cluster_name"] == "testresource"
        assert row["partition"] == (exp["partition_name"] or None)
        assert (row["qos"], row["account_name"], row["group_name"], row["user_name"]) == (
            exp["qos_name"], exp["account_name"], exp["group_name"], exp["user_name"])
        assert epoch(row["submit_time"]) == exp["submit_time"]
        assert epoch(row["eligible_time"]) == exp["eligible_time"]
        assert epoch(row["start_time"]) == exp["start_time"]
        assert epoch(row["end_time"]) == exp["end_time"]
        assert row["run_s"] == exp["elapsed"]
        assert row["wait_s"] == exp["start_time"] - exp["submit_time"]
        assert row["exit_code"] == exp["exit_code"]
        assert row["state"] == exp["state"].split(" ")[0]
        assert row["alloc_nodes"] == int(exp["nnodes"]) and row["alloc_cpus"] == int(exp["ncpus"])
        assert row["req_cpus"] == int(exp["req_cpus"])
        assert row["timelimit_s"] == exp["timelimit"]
        assert row["node_list"] == exp["node_list"]
        assert row["job_name"] == exp["job_name"]
        assert (row["alloc_gpus"] or 0) == exp["ngpus"]
    # Memory: 3000Mc x 256 CPUs, 48000Mn x 3 nodes, 3000Mc x 48 (= ReqTRES mem=144000M), 0n unknown.
    assert [r["req_mem_mib"] for r in rows] == [768000, 144000, 144000, None]
    assert [r["alloc_mem_mib"] for r in rows] == [3000, 48000, 144000, None]
    assert rows[3]["alloc_gpus"] == 2 and rows[3]["eligible_time"] is None and rows[3]["timelimit_s"] is None


def test_xdmod_job_arrays_expand_like_xdmod():
    lines = xdmod_lines("accounting-logs-with-job-arrays")
    for line, want in zip(lines, xdmod_expected("accounting-logs-with-job-arrays")):
        res = parse_lines([line])
        assert res.jobs["array_task_id"].to_list() == want
        assert res.jobs["array_job_id"].unique().to_list() == ["4103947"]
        assert res.jobs["job_id"].to_list() == [f"4103947_{t}" for t in want]
        assert res.lines_loaded == 1 and res.jobs["source_line"].unique().to_list() == [1]
    # The whole file: task 1, 9, 10, ... appear on several lines with the same submit time; the
    # later line replaces the earlier one, and a line that lost every row counts as merged.
    whole = parse_lines(lines)
    assert whole.jobs["job_id"].n_unique() == whole.jobs.height == 17


def test_xdmod_gpu_gres_fixture_older_layout():
    """This fixture is Open XDMoD's older 26 fields (no QOS, ReqGRES before ReqTRES)."""
    lines = xdmod_lines("accounting-logs-with-gpu-gres")
    cfg = sniff_sacct(lines)
    assert cfg is not None and cfg.layout == "xdmod-reqgres"
    for line, want in zip(lines, xdmod_expected("accounting-logs-with-gpu-gres")):
        row = parse_lines([line], cfg).jobs.row(0, named=True)
        assert row["alloc_gpus"] == want
        assert (row["account_name"], row["user_name"], row["qos"]) == ("account", "user", None)
        assert row["submit_time"] == datetime(2020, 1, 1, tzinfo=timezone.utc)
        assert row["req_mem_mib"] == 256000  # 1000Mc x 256
    gres = parse_lines([lines[9]], cfg).jobs.row(0, named=True)  # ReqGRES gpu:V100:32
    assert gres["req_gpus"] == 32 and gres["gpu_type"] == "V100"


def test_xdmod_non_ended_states_are_kept_without_invented_times():
    """XDMoD skips non-ended jobs; we keep them (SPEC §4: a newer record replaces them later)."""
    assert all("non-ended" in d for e in xdmod_expected("non-ended-job-state") for d in e["debug"][1:])
    res = parse_lines(xdmod_lines("non-ended-job-state"))
    running, pending = res.jobs.sort("source_line").to_dicts()
    assert running["state"] == "RUNNING" and running["start_time"] == datetime(2020, 6, 30, 19, 24, 8, tzinfo=timezone.utc)
    assert running["end_time"] is None  # sacct printed End = Start for a running job
    assert running["run_s"] == 22 * 3600 + 32 * 60 + 22  # Elapsed so far
    assert pending["state"] == "PENDING"
    assert pending["start_time"] is None and pending["end_time"] is None and pending["run_s"] is None and pending["wait_s"] is None
    assert pending["alloc_cpus"] is None and pending["req_cpus"] == 40 and pending["req_mem_mib"] == 120000


def test_xdmod_unknown_states_become_unknown_with_a_warning():
    """XDMoD warns and skips; we keep the job as UNKNOWN (its times are real) and warn."""
    assert all(e["warning"] for e in xdmod_expected("unknown-job-state"))
    res = parse_lines(xdmod_lines("unknown-job-state"))
    assert res.jobs["state"].to_list() == ["UNKNOWN", "UNKNOWN"]
    assert any("FOO" in w and "BAR" in w for w in res.warnings)


def test_xdmod_utf8_job_name():
    res = parse_lines(xdmod_lines("utf8-multibyte-chars"))
    assert res.jobs["job_name"].to_list() == [e["job_name"] for e in xdmod_expected("utf8-multibyte-chars")]


def test_pozidriv_reference_log():
    if not POZIDRIV.exists():
        pytest.skip("pozidriv reference log not bundled")
    whole = parse_file(POZIDRIV)
    assert whole.lines_read == whole.jobs.height == 11704 and whole.quarantine.height == 0
    j = whole.jobs
    assert set(j["state"].unique()) == {"CANCELLED", "COMPLETED", "FAILED", "PREEMPTED", "TIMEOUT"}
    assert j["cluster"].unique().to_list() == ["pozidriv"]
    # 2147486648Mn-style artefacts (> 1 PiB) are unknown, not absurd numbers.
    assert j["req_mem_mib"].max() <= 1024**3
    none_assigned = j.filter(pl.col("node_list").is_null())
    assert none_assigned.height > 0 and none_assigned["start_time"].null_count() == none_assigned.height
    assert none_assigned["run_s"].null_count() == none_assigned.height
    ran = j.filter(pl.col("start_time").is_not_null())
    assert (ran["wait_s"] >= 0).all() and ran["run_s"].null_count() == 0
    # Chunking changes nothing.
    small = parse_file(POZIDRIV, chunk_bytes=200_000)
    assert small.jobs.sort("source_line").equals(j.sort("source_line"))


# ---------------------------------------------------------------------------------------------
# hpc-cost-simulator fixtures

# (jobs only we have, jobs only they have), with the reason.
HPC_DEVIATIONS: dict[str, tuple[set[str], set[str]]] = {
    # 39: cancelled with Start=None; they fail on it, we keep a job that never ran.
    # 2346371: only its .extern step is in the file; steps fold into a job line, so no row.
    "issues/17": ({"39"}, {"2346371"}),
    # 67108866: ReqMem `100Mcd`: they drop the job, we keep it with req_mem_mib unknown (warning).
    # 67108868: a bad MaxDiskRead on its .batch step: steps are not read, the job stands.
    # 67108872: its .batch step is truncated: that line is quarantined, the job stands.
    "issues/20": ({"67108866", "67108868", "67108872"}, set()),
    "issues/gl-20": ({"67108866", "67108868", "67108872"}, set()),
    # A PENDING job (Start/End Unknown): they fail on it, SPEC §4 counts it as submitted.
    "issues/5": ({"31259618"}, set()),
    # Cancelled before start (Start=None), then a second record with state INVALID: we keep one
    # job (the record with a state Slurm defines wins), never ran, end = cancel time.
    "issues/61": ({"141"}, set()),
    # Only an .interactive step: no job line, no row.
    "issues/63": (set(), {"2346371"}),
}

HPC_DIRS = ("array", "multi-node", "issues/5", "issues/17", "issues/20", "issues/59", "issues/61", "issues/63", "issues/gl-20")
HPC_CASES = [
    ("sacct-output.txt", "exp_jobs.csv"), ("sacct-output-v1.txt", "exp_jobs-v1.csv"), ("sacct-output-v2.txt", "exp_jobs-v2.csv"),
] + [(f"{d}/sacct-output.txt", f"{d}/exp_jobs.csv") for d in HPC_DIRS]


def hms(text: str) -> int:
    h, m, s = text.split(":")
    return int(h) * 3600 + int(m) * 60 + int(float(s))


@pytest.mark.parametrize("src,exp", HPC_CASES, ids=[c[0] for c in HPC_CASES])
def test_hpc_cost_simulator_expected_jobs(src, exp):
    p = parse_file(HPC / src)
    assert p.cfg.layout == "hpc-cost-sim"
    expected = pl.read_csv(HPC / exp, infer_schema=False)
    ours_only, theirs_only = HPC_DEVIATIONS.get(src.rsplit("/", 1)[0], (set(), set()))
    ours, theirs = set(p.jobs["job_id"]), set(expected["job_id"])
    assert ours - theirs == ours_only and theirs - ours == theirs_only
    assert p.jobs.height == len(ours)  # one row per job

    ts = lambda c: pl.col(c).str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S").dt.replace_time_zone("UTC")  # noqa: E731
    both = expected.join(p.jobs, on="job_id", suffix="_ours")
    for row in both.with_columns(ts("submit_time"), ts("start_time"), ts("finish_time"), ts("eligible_time")).to_dicts():
        never_ran = row["start_time_ours"] is None
        assert row["submit_time"] == row["submit_time_ours"]
        assert row["eligible_time"] == row["eligible_time_ours"]
        assert row["finish_time"] == row["end_time"]
        if never_ran:
            # Cancelled while pending or failed before launch (AllocNodes 0, Elapsed 0): they take
            # the printed Start (= End) and one host; we record no start, no run, no allocation.
            assert row["state"] in ("CANCELLED", "FAILED") and row["start_time"] == row["finish_time"] and hms(row["run_time"]) == 0
            assert row["run_s"] is None and row["alloc_nodes"] is None
            assert int(row["num_cores"]) == row["req_cpus"]
        else:
            assert row["start_time"] == row["start_time_ours"]
            assert hms(row["run_time"]) == row["run_s"]
            assert int(row["num_cores"]) == row["alloc_cpus"]
            assert int(row["num_hosts"]) == row["alloc_nodes"]
        if row["max_mem_gb"]:
            gb = float(row["max_mem_gb"])
            # `0n` (the whole node) is unknown to us, 0.0 to them.
            assert row["req_mem_mib"] == (round(gb * 1024) if gb > 0 else None)


def test_hpc_cost_simulator_quarantine_reasons_and_warnings():
    p = parse_file(HPC / "issues" / "20" / "sacct-output.txt")
    q = p.quarantine.sort("line_no").to_dicts()
    assert [r["reason"] for r in q] == ["expected 25 to 26 fields, found 24"] * 2
    assert all("67108870" in r["raw"] or "67108872.batch" in r["raw"] for r in q)
    assert any("ReqMem" in w for w in p.warnings)
    # Comments and blank lines are skipped; steps merged (the truncated job's step included).
    assert p.skipped == 21 and p.merged == 9


def test_hpc_cost_simulator_mixed_partition_column():
    """The v2 file mixes lines with and without the trailing Partition column."""
    p = parse_file(HPC / "sacct-output-v2.txt")
    assert p.quarantine.height == 0
    assert p.jobs.filter(pl.col("partition") == "partition1").height > 0 and p.jobs["partition"].null_count() > 0
    j = parse_file(HPC / "issues" / "59" / "sacct-output.txt").jobs.row(0, named=True)
    assert (j["state"], j["partition"], j["run_s"], j["req_mem_mib"]) == ("NODE_FAIL", "us-east-1a_all", 1232, 14947)


# ---------------------------------------------------------------------------------------------
# tdhock/slurm exports (headers; many without Submit/Start/End)

TDHOCK_FILES = sorted(p for p in TDHOCK.rglob("*") if p.is_file())


@pytest.mark.parametrize("path", TDHOCK_FILES, ids=lambda p: p.name)
def test_tdhock_every_file_parses_or_is_quarantined(path):
    p = parse_file(path)
    assert p.cfg.header
    assert p.lines_read == p.jobs["source_line"].n_unique() + p.merged + p.quarantine.height + p.skipped
    header = [f.lower() for f in p.cfg.fields]
    if "submit" not in header:
        # Cannot place jobs in time: every data line is quarantined with that reason, nothing invented.
        assert p.jobs.height == 0 and p.skipped == 1
        assert p.quarantine.height == p.lines_read - 1
        assert p.quarantine["reason"].str.starts_with("no Submit column").all()
    else:
        assert p.jobs.height > 0


def test_tdhock_all_columns_export():
    p = parse_file(TDHOCK / "extdata" / "sacct-all-cols.txt")
    assert p.cfg.delimiter == "\t" and not p.cfg.trailing_delimiter and len(p.cfg.fields) == 108
    assert (p.jobs.height, p.merged, p.skipped) == (1, 2, 1)
    j = p.jobs.row(0, named=True)
    assert j["job_id"] == "32650736" and j["cluster"] == "cedar" and j["state"] == "TIMEOUT"
    assert (j["partition"], j["user_name"], j["account_name"], j["group_name"]) == (
        "cpubase_bycore_b1", "icecube10", "rpp-kenclark_cpu", "icecube")
    assert (epoch(j["submit_time"]), j["wait_s"], j["run_s"], j["timelimit_s"]) == (1576096517, 61, 3606, 3600)
    assert (j["req_cpus"], j["req_mem_mib"], j["alloc_mem_mib"], j["alloc_gpus"], j["node_list"]) == (1, 7996, 7996, 0, "cdr735")


# ---------------------------------------------------------------------------------------------
# Edge cases on real lines

LINE = xdmod_lines("accounting-logs")[2]  # 4107219, COMPLETED, 4 nodes, 48 CPUs, 3000Mc
FIELDS = LINE.split("|")


def line_with(**changes: str) -> str:
    cells = list(FIELDS)
    for name, value in changes.items():
        cells[XDMOD_FIELDS.index(name)] = value
    return "|".join(cells)


def test_delimiter_inside_job_name_survives():
    res = parse_lines([line_with(jobname="a|b||c")])
    assert res.jobs["job_name"].to_list() == ["a|b||c"]


@pytest.mark.parametrize("delim", ["‖", "::", "\t", ";", "|#|"])
def test_other_delimiters_multi_byte_included(delim):
    lines = [line_with(jobname=f"x{delim}y").replace("|", delim, len(FIELDS) - 1), line_with(jobid="99").replace("|", delim)]
    cfg = sniff_sacct(lines, delim)
    assert cfg is not None and cfg.layout == "xdmod" and cfg.delimiter == delim
    res = parse_lines(lines, cfg)
    assert res.jobs["job_id"].to_list() == ["4107219", "99"] and res.jobs["job_name"].to_list() == [f"x{delim}y", "anonjobname"]
    assert res.jobs["alloc_cpus"].to_list() == [48, 48]


def test_parsable_p_trailing_delimiter():
    lines = [line_with(jobname="n|m") + "|", line_with(jobid="4107219.batch", jobname="batch") + "|"]
    cfg = sniff_sacct(lines)
    assert cfg is not None and cfg.trailing_delimiter
    res = parse_lines(lines, cfg)
    assert res.jobs["job_name"].to_list() == ["n|m"] and res.merged == 1


def test_header_columns_by_name_any_order_and_repeated_header():
    lines = [
        "state|JOBID|submit|Start|End|NCPUS|NNodes|ReqMem|Timelimit|NodeList|JobName|Cluster|ReqTRES|AllocTRES",
        "CANCELLED by 5|123_[1-5%2]|2020-01-01T00:00:00|Unknown|2020-01-01T01:00:00|4|1|4Gn|UNLIMITED|None assigned|arr|c1|cpu=4,mem=4G,node=1|",
        "COMPLETED|124|2020-01-01T00:00:00|2020-01-01T00:10:00|2020-01-01T00:20:00|8|2|2000Mc|1-00:00:00|n[1-2]|j|c1|"
        "cpu=8,mem=16000M,node=2,gres/gpu:a100=4|cpu=8,mem=16000M,node=2,gres/gpu=4,gres/gpu:a100=4",
        "COMPLETED|124.batch|2020-01-01T00:10:00|2020-01-01T00:10:00|2020-01-01T00:20:00|8|1||||batch|c1||",
        "State|JobID|Submit|Start|End|NCPUS|NNodes|ReqMem|Timelimit|NodeList|JobName|Cluster|ReqTRES|AllocTRES",
        "PENDING|125|2020-01-02T00:00:00|Unknown|Unknown|1|1|1G|00:30:00|None assigned|p|c1|cpu=1,mem=1G,node=1|",
    ]
    cfg = sniff_sacct(lines)
    assert cfg is not None and cfg.header and cfg.fields[1] == "JOBID"
    res = parse_lines(lines, dataclasses.replace(cfg, cluster="ignored"))
    assert (res.skipped, res.merged, res.lines_loaded) == (2, 1, 3)
    j = {r["job_id"]: r for r in res.jobs.to_dicts()}
    assert sorted(j) == ["123_1", "123_2", "123_3", "123_4", "123_5", "124", "125"]
    a = j["123_3"]
    assert (a["array_job_id"], a["array_task_id"], a["state"], a["cluster"]) == ("123", 3, "CANCELLED", "c1")
    assert a["start_time"] is None and a["run_s"] is None and a["end_time"] == datetime(2020, 1, 1, 1, tzinfo=timezone.utc)
    assert a["req_mem_mib"] == 4096 and a["timelimit_s"] is None and a["alloc_cpus"] is None
    b = j["124"]
    assert (b["wait_s"], b["run_s"], b["timelimit_s"], b["req_mem_mib"], b["alloc_mem_mib"]) == (600, 600, 86400, 16000, 16000)
    assert (b["req_gpus"], b["alloc_gpus"], b["gpu_type"], b["alloc_nodes"], b["node_list"]) == (4, 4, "a100", 2, "n[1-2]")
    assert j["125"]["end_time"] is None and j["125"]["state"] == "PENDING"


def test_het_jobs_and_steps():
    lines = [
        line_with(jobid="200+0", jobidraw="200"),
        line_with(jobid="200+1", jobidraw="201"),
        line_with(jobid="200+1.0", jobidraw="201.0"),
        line_with(jobid="200+0.extern", jobidraw="200.extern"),
        line_with(jobid="300_7", jobidraw="301"),
        line_with(jobid="300_7.batch", jobidraw="301.batch"),
        line_with(jobid="301.interactive"),
    ]
    res = parse_lines(lines)
    assert res.jobs.select("job_id", "het_job_id", "het_offset", "array_job_id", "array_task_id").rows() == [
        ("200+0", "200", 0, None, None), ("200+1", "200", 1, None, None), ("300_7", None, None, "300", 7),
    ]
    assert res.merged == 4  # steps fold into their job, even one whose job line is elsewhere


def test_quarantine_reasons_are_precise():
    lines = [
        "|".join(FIELDS[:12]),
        line_with(submit="xyz"),
        line_with(submit="Unknown"),
        line_with(jobid="abc"),
        line_with(jobid="5_[9-3]"),
        line_with(jobid="5_[1-99999999]"),
        "",
        "   ",
        "# a comment",
        LINE,
    ]
    res = parse_lines(lines)
    assert res.quarantine.sort("line_no").select("line_no", "reason").rows() == [
        (1, "expected 26 fields, found 12"),
        (2, "bad submit time 'xyz'"),
        (3, "bad submit time 'Unknown'"),
        (4, "bad job id 'abc'"),
        (5, "bad array index range '[9-3]'"),
        (6, "bad array index range '[1-99999999]'"),
    ]
    assert res.quarantine.filter(pl.col("line_no") == 2)["raw"].to_list() == [lines[1]]
    assert (res.skipped, res.lines_loaded) == (3, 1)


def test_a_line_with_more_fields_than_named_is_quarantined_when_the_last_is_not_the_job_name():
    # The job name, last in XDMoD's fields, may hold the delimiter; any other last field may not.
    fields = [*XDMOD_FIELDS[:-2], XDMOD_FIELDS[-1], XDMOD_FIELDS[-2]]  # the job name second to last
    cells = dict(zip(XDMOD_FIELDS, FIELDS, strict=True))
    line = "|".join(cells[f] for f in fields)
    res = parse_lines([line, line + "|extra"], SacctConfig(fields=fields))
    assert res.quarantine.select("line_no", "reason").rows() == [(2, "expected 26 fields, found 27")]
    assert res.lines_loaded == 1


def test_same_key_newer_record_replaces_older_and_requeue_is_a_new_row():
    lines = [
        line_with(state="RUNNING", end="Unknown"),
        line_with(state="COMPLETED"),
        line_with(submit="2015-06-27T00:00:00", state="FAILED"),  # requeued: new submit time
    ]
    res = parse_lines(lines)
    assert res.jobs.select("source_line", "state").rows() == [(2, "COMPLETED"), (3, "FAILED")]
    assert res.merged == 1


def test_never_ran_rules():
    lines = [
        line_with(nodelist="None assigned", state="CANCELLED by 1"),
        line_with(nodelist="None assigned", state="PENDING", start="Unknown", end="Unknown"),
        line_with(start="None", state="CANCELLED"),
        line_with(start="Unknown", state="FAILED", end="Unknown"),
    ]
    rows = parse_lines([ln.replace("4107219", str(i)) for i, ln in enumerate(lines)]).jobs.sort("source_line").to_dicts()
    assert all(r["start_time"] is None and r["run_s"] is None and r["wait_s"] is None and r["alloc_cpus"] is None for r in rows)
    end = datetime(2015, 7, 1, 2, 4, 53, tzinfo=timezone.utc)
    assert [r["end_time"] for r in rows] == [end, None, end, None]
    assert rows[0]["node_list"] is None and rows[0]["req_cpus"] == 48


def test_cluster_timezone_and_default_cluster():
    cfg = SacctConfig(cluster="dflt", timezone="America/New_York")
    row = parse_lines([line_with(cluster="")], cfg).jobs.row(0, named=True)
    assert row["cluster"] == "dflt"
    assert row["submit_time"] == datetime(2015, 6, 27, 0, 22, 22, tzinfo=timezone.utc)  # 20:22:22 EDT
    assert row["run_s"] == 50449 and row["wait_s"] == 315702


def test_user_given_fields_and_header_detection():
    fields = ["JobID", "Submit", "Start", "End", "State", "AllocCPUS", "ElapsedRaw", "TimelimitRaw"]
    body = ["7|2021-03-01T10:00:00|2021-03-01T10:00:05|2021-03-01T11:00:05|COMPLETED|16|3600|120"]
    cfg = sniff_sacct(body, None, fields)
    assert cfg is not None and not cfg.header
    row = parse_lines(body, cfg).jobs.row(0, named=True)
    assert (row["alloc_cpus"], row["run_s"], row["timelimit_s"], row["wait_s"]) == (16, 3600, 7200, 5)
    # Without Start/End columns, times are unknown (not "never ran"): the run time is Elapsed.
    res = parse_lines(["7|2021-03-01T10:00:00|COMPLETED|3600"], SacctConfig(fields=["JobID", "Submit", "State", "ElapsedRaw"]))
    row = res.jobs.row(0, named=True)
    assert (row["start_time"], row["end_time"], row["wait_s"], row["run_s"]) == (None, None, None, 3600)
    assert any("no Start/End column" in w for w in res.warnings)
    cfg2 = sniff_sacct(["|".join(fields).lower()] + body, "|", fields)
    assert cfg2 is not None and cfg2.header
    assert parse_lines(["|".join(fields).lower()] + body, cfg2).skipped == 1


def test_sniff_rejects_what_is_not_sacct():
    assert sniff_sacct([]) is None
    assert sniff_sacct(["hello world", "no delimiters here"]) is None
    assert sniff_sacct([LINE.replace("|", ",")], "|") is None
    assert sniff_sacct(["; SWF header", "1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1"]) is None


def test_wrong_delimiter_lines_are_quarantined():
    res = parse_lines([LINE.replace("|", ",")])
    assert res.quarantine["reason"].to_list() == ["expected 26 fields, found 1"]


def test_steps_whose_job_is_in_the_previous_chunk(tmp_path):
    text = "\n".join([LINE, line_with(jobid="4107219.batch"), line_with(jobid="4107219.extern")] * 20) + "\n"
    f = tmp_path / "s.log"
    f.write_text(text)
    p = parse_file(f, chunk_bytes=len(LINE) + 10)  # about one line per chunk
    assert p.jobs.height == 20 and p.merged == 40


# ---------------------------------------------------------------------------------------------
# Garbage never raises and always reconciles

CONFIGS = [
    SacctConfig(),
    SacctConfig(fields=["JobID", "ExitCode", "State", "MaxRSS", "Elapsed"], header=True),
    SacctConfig(fields=list(HPC_COST_SIM_FIELDS) + ["partition"], min_fields=len(HPC_COST_SIM_FIELDS), layout="hpc-cost-sim"),
    SacctConfig(
        delimiter="‖", fields=["JobID", "Submit", "Start", "End", "State", "ReqMem", "NCPUS", "AllocTRES", "JobName"], trailing_delimiter=True
    ),
    SacctConfig(delimiter="\t", fields=["State", "JobID", "Submit", "Timelimit", "NodeList"], timezone="Europe/Berlin"),
]
REAL = xdmod_lines("accounting-logs") + xdmod_lines("accounting-logs-with-job-arrays")[:3] + [line_with(jobid="9.batch")]
_tokens = st.sampled_from(
    list("|‖\t,;:_-+.[]%0123456789 TUNknowe#\\\"'aàb\r")
    + ["Unknown", "None", "2020-01-01T00:00:00", "4103947", "_[1-3]", "Mc", "gres/gpu="]
)


def junk(max_tokens: int) -> st.SearchStrategy[str]:
    """Text made of sacct-ish tokens: delimiters, digits, ids, times, units."""
    return st.lists(_tokens, max_size=max_tokens).map("".join)


@st.composite
def mangled_real_line(draw) -> str:
    """A real line cut, with a field dropped, duplicated or replaced by junk."""
    line = draw(st.sampled_from(REAL))
    cells = line.split("|")
    op = draw(st.sampled_from(["cut", "drop", "dup", "junk", "delim"]))
    i = draw(st.integers(0, len(cells) - 1))
    if op == "cut":
        return line[: draw(st.integers(0, len(line)))]
    if op == "drop":
        del cells[i]
    elif op == "dup":
        cells.insert(i, cells[i])
    elif op == "junk":
        cells[i] = draw(junk(10))
    else:
        return line.replace("|", draw(st.sampled_from([",", "\t", "||", "‖"])))
    return "|".join(cells)


line_strategy = st.one_of(
    st.text(max_size=120),
    junk(60),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", errors="replace")),
    mangled_real_line(),
    st.sampled_from(REAL),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(line_strategy, max_size=25), cfg=st.sampled_from(CONFIGS))
def test_garbage_never_raises_and_always_reconciles(lines, cfg):
    res = parse_lines(lines, cfg)
    assert res.lines_read == len(lines)


@settings(max_examples=60, deadline=None)
@given(blob=st.binary(max_size=4000))
def test_random_bytes_through_sniff_and_parse(blob):
    lines = blob.decode("utf-8", errors="replace").split("\n")
    cfg = sniff_sacct(lines) or SacctConfig()
    parse_lines(lines, cfg)


def test_gzip_sample_with_header_reads_like_plain(tmp_path):
    src = TDHOCK / "extdata" / "sacct-all-cols.txt"
    gz = tmp_path / "x.txt.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert parse_file(gz).jobs.equals(parse_file(src).jobs)
