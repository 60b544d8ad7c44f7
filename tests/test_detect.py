"""Format detection from content: every real sample we hold, look-alikes that must not match, garbage."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metapilot.transforms.detect import detect_format
from metapilot.transforms.lines import read_head

TESTS = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

# Copies in tests/data, so these run on a fresh clone.
LOCAL = {
    "swf/KTH-SP2-1996-2.1-cln.swf.gz": "swf",
    "swf/HPC2N-subset-3170jobs.swf": "swf",
    "swf/NASA-iPSC-1993-3.1-cln.swf.gz": "swf",
    "swf/lublin_256.synthetic-model.swf.gz": "swf",
    "pbs/accounting-logs.log": "pbs",
    "pbs/accounting-logs.expected.json": None,  # Open XDMoD's parse result, not a log
    "detect/sge-accounting.log": "sge",  # SGE: colon-separated
    "detect/uge-accounting.log": "sge",  # UGE: the same, epochs in milliseconds
    "detect/lsf-lsb.acct.log": "lsf",  # LSF lsb.acct: quoted, space-separated
    "sge/wyntonquery/accounting.head": "sge",  # `# Version: 8.1.9` header, then records
    "sge/apel/sge-test-parse-line.accounting": "sge",
    "sge/xdmod-unit/sge-accounting-logs.expected.json": None,  # Open XDMoD's parse result, not a log
    "lsf/hpc-cost-simulator/issues-gl-26/lsb.acct.issue-gl-26": "lsf",  # comments, LSF 7.06, a non-UTF-8 byte
    "lsf/hpc-cost-simulator/numExHosts/lsb.acct": "lsf",
    "lsf/hpc-cost-simulator/issues-gl-9/exp_jobs.csv": None,  # that tool's expected output, not a log
    "detect/xdmod-slurm-accounting-logs.log": "sacct",
    "detect/hpc-cost-simulator-issue20-sacct-output.txt": "sacct",
    "detect/hpc-cost-simulator-issue20-exp_jobs.csv": None,  # another tool's expected output
    "detect/sacct-2019-11-21.csv.gz": "sacct",  # real --parsable2 export; no times, the parser refuses it
    "detect/sacct_tasks_input_multi_state.csv": None,  # R-derived CSV, sacct columns plus R's
    "detect/sacct-json-sacct_1.json": "sacct-json",
    "detect/LICENSE-clockwork": None,
    "detect/LICENSE-xdmod-LGPL3": None,
}


def expected_for_shared(rel: str) -> str | None:
    """What each file under ../shared/data is, by what we know of its content (SOURCES.tsv)."""
    name = rel.rsplit("/", 1)[-1]
    if rel.endswith(".swf") or rel.endswith(".swf.gz"):
        return "swf"
    if rel.startswith("pbs/") and "/input/" in rel:
        return "pbs"
    if rel.startswith("sge/") and "/input/" in rel:
        return "sge"
    if rel.startswith("lsf/") and "/input/" in rel:
        return "lsf"
    if rel.startswith("slurm/sacct-json/sacct_"):
        return "sacct-json"
    if rel.startswith("slurm/") and ("/input/" in rel or name.startswith("sacct-") or name.startswith("slurm-dcast")
                                     or name == "pozidriv.log.gz"):
        # sacct-*.csv.gz / sacct-*.txt: real sacct exports, some without times (the sacct parser
        # refuses those), but sacct is what they are. sacct_tasks_input_multi_state.csv is not.
        return "sacct"
    # Open XDMoD's expected JSON, exp_jobs.csv, the GPU pod traces,
    # schedule CSVs, READMEs, licences and SOURCES.tsv: none of our formats.
    return None


@pytest.mark.parametrize("rel,expected", sorted(LOCAL.items()))
def test_local_samples(rel, expected):
    assert detect_format(read_head(TESTS / rel)) == expected


def shared_files() -> list[str]:
    if not SHARED.exists():
        return []
    return sorted(str(p.relative_to(SHARED)) for p in SHARED.rglob("*") if p.is_file())


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data not present")
@pytest.mark.parametrize("rel", shared_files())
def test_every_shared_sample(rel):
    assert detect_format(read_head(SHARED / rel)) == expected_for_shared(rel)


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data not present")
def test_shared_samples_cover_all_formats_and_lookalikes():
    seen = {expected_for_shared(rel) for rel in shared_files()}
    assert seen == {"sacct", "sacct-json", "pbs", "swf", "sge", "lsf", None}
    assert any(rel.startswith(("sge/", "lsf/")) for rel in shared_files())


@pytest.mark.parametrize("lines,expected", [
    ([], None),
    (["", "   "], None),
    (["hello world", "this is prose"], None),
    # SWF without any header, and with CRLF
    (["1 0 5 10 2 -1 -1 2 60 -1 1 3 4 -1 1 2 -1 -1\r", "2 3 5 10 2 -1 -1 2 60 -1 1 3 4 -1 1 2 -1 -1\r"], "swf"),
    # SWF header only (the head of a file whose data starts later)
    (["; Version: 2.2", "; MaxJobs: 10", "; UnixStartTime: 0"], "swf"),
    # 17 numbers is not SWF
    (["1 0 5 10 2 -1 -1 2 60 -1 1 3 4 -1 1 2 -1"], None),
    (["\ufeff03/01/2021 10:00:00;Q;100.srv;queue=batch", "03/01/2021 10:00:05;S;100.srv;user=u"], "pbs"),
    (["JobID|JobName|Partition|State|Submit|Start|End", "1|a|p|COMPLETED|2020-01-01T00:00:00|x|y"], "sacct"),
    (["JobID\tState\tSubmit", "1\tCOMPLETED\t2020-01-01T00:00:00"], "sacct"),
    (["JobID,State,Submit", "1,COMPLETED,2020-01-01T00:00:00"], "sacct"),
    (["job_id,num_cores,submit_time", "1,2,2020-01-01T00:00:00"], None),
    (["12|abc|COMPLETED|2020-01-01T00:00:00", "13.batch|abc|COMPLETED|2020-01-01T00:00:00"], "sacct"),
    (["a|b|c", "d|e|f"], None),  # pipes alone do not make sacct
    (['{', '  "meta": {},', '  "jobs": ['], "sacct-json"),  # truncated head of sacct --json
    (['{"jobs": []}'], "sacct-json"),
    (['{"foo": 1}'], None),
    (["[1, 2]"], None),
    (["myqueue:testhost:jdoe:jdoe:mpi-mem-test:22947:sge:0:1310761621:1311095354:1311095414:0:0:60"], None),
    (['"JOB_FINISH" "9.11" 1389683139 404717 22025 33882739 128 1389642318 0 0 1389642771 "u"'], "lsf"),
    (["# Version: 2011.11p1", "#", "# DO NOT MODIFY THIS FILE MANUALLY!", "#"], None),  # header only: nothing to tell
    (['"JOB_FINISH" 9.11 1389683139'], None),  # the version is quoted in lsb.acct
    (["a:b:c:d:e:x:g:h:1:2:3:0:0" + ":0" * 40], None),  # 53 fields, job number not a number
])
def test_synthetic_heads(lines, expected):
    assert detect_format(lines) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=30))
def test_garbage_never_raises(lines):
    assert detect_format(lines) in {None, "sacct", "sacct-json", "pbs", "swf"}
