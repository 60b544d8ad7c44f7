"""A log whose jobs cannot fit the capacity (issue 54, item 6), on a small SWF log with no header
whose memory fields hold bytes, as Alea's extended SWF does (node lists and queue names after field
18): memory capacity is inferred from what the jobs hold (used or requested), so every job that ran
fits; jobs larger than the cluster are reported when they arrive, with what to do (a capacity
config, --mem-unit); `simulate` and `backtest` refuse a window with no job that can run in one
sentence and exit 2, instead of an empty result and exit 0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli_helpers import cli, query

GIB = 1024**3
CONFIG = """[clusters.alea]
partitions = [{ name = "*", nodes = 4, cores_per_node = 16, mem_per_node_mib = 65536, valid_from = "1970-01-01" }]
"""


def _alea_like(path: Path, jobs: int = 90) -> Path:
    """SWF lines with no header, 18 fields plus a node list and a queue name; memory per processor
    in bytes (used 0.5 GiB, requested 2 GiB): read as KB, a job asks for terabytes."""
    lines = []
    for i in range(jobs):
        procs = 2 + (i % 4) * 2
        submit = i * 80_000  # a job a day over 12 weeks: a walk forward's warm-up and periods
        fields = [i + 1, submit, 60, 3_600, procs, -1, GIB // 2, procs, 7_200, 2 * GIB, 1, 1 + i % 5, 1, -1, 1, 1, -1, -1]
        lines.append(" ".join(str(f) for f in fields) + f" node{i % 4}:{procs} q_normal")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def log(tmp_path) -> Path:
    return _alea_like(tmp_path / "alea-2009.swf")


def _ok(r) -> str:
    assert r.exit_code == 0, r.output
    return " ".join(r.output.split())


def test_memory_capacity_is_inferred_from_what_jobs_hold_so_they_replay(log, tmp_path):
    db = tmp_path / "w.duckdb"
    said = _ok(cli("ingest", log, "--db", db))
    assert "per core), is more than any cluster has" in said and "--mem-unit b" in said, said  # bytes read as KB
    (cores, mem, source), = query(db, "SELECT cores, mem_mib, source FROM capacity WHERE cluster = 'alea'")
    asked = query(db, "SELECT max(greatest(alloc_mem_mib, req_mem_mib)) FROM jobs")[0][0]
    assert source == "inferred-peak" and mem >= asked, (mem, asked)
    out = _ok(cli("simulate", "--cluster", "alea", "--db", db))
    assert "cannot fit 0" in out and "replayed 90" in out, out


def test_jobs_larger_than_the_cluster_are_reported_and_replays_refused(log, tmp_path):
    db, config = tmp_path / "w.duckdb", tmp_path / "clusters.toml"
    config.write_text(CONFIG)
    _ok(cli("capacity", "--config", config, "--db", db))  # the real figures first: 256 GiB in all
    out = _ok(cli("ingest", log, "--db", db))
    assert "all 90 of its jobs ask for more than the cluster has" in out and "--mem-unit b" in out, out
    assert "capacity --config" in out
    r = cli("simulate", "--cluster", "alea", "--db", db)
    said = " ".join(r.output.split())
    assert r.exit_code == 2, said
    assert "none of the 90 jobs of alea" in said and "TiB" in said and "256.0 GiB" in said, said
    assert not re.search(r"\.\s+[A-Z]", said) and "Traceback" not in said  # one sentence
    assert query(db, "SELECT count(*) FROM sim_runs")[0][0] == 0
    r = cli("backtest", "--cluster", "alea", "--warmup", "7", "--no-planner", "--db", db)
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "none of the" in said and "can run on the cluster's capacity" in said, said


def test_loading_a_config_the_jobs_exceed_says_so(log, tmp_path):
    db, config = tmp_path / "w.duckdb", tmp_path / "clusters.toml"
    _ok(cli("ingest", log, "--db", db))
    config.write_text(CONFIG)
    r = cli("capacity", "--config", config, "--db", db)
    assert r.exit_code == 0
    assert "all 90 of its jobs ask for more than the cluster has" in " ".join(r.output.split())


def test_mem_unit_bytes_reads_the_log_as_meant(log, tmp_path):
    db, config = tmp_path / "w.duckdb", tmp_path / "clusters.toml"
    config.write_text(CONFIG)
    _ok(cli("capacity", "--config", config, "--db", db))
    out = _ok(cli("ingest", log, "--mem-unit", "b", "--db", db))
    assert "ask for more" not in out and "more than any cluster has" not in out, out
    assert query(db, "SELECT max(req_mem_mib), max(alloc_mem_mib) FROM jobs")[0] == (8 * 2048, 8 * 512)
    out = _ok(cli("simulate", "--cluster", "alea", "--db", db))
    assert "cannot fit 0" in out, out
    r = cli("ingest", log, "--mem-unit", "gb", "--db", db)
    assert r.exit_code == 2 and "--mem-unit" in r.output


def test_a_replay_that_finished_nothing_is_named_not_a_type_error():
    from metapilot.models.controller.gate import Outcome

    with pytest.raises(ValueError, match="finished no job"):
        Outcome.of("FCFS+easy", {"mean_wait": None, "max_wait": None, "mean_bsld": None})
