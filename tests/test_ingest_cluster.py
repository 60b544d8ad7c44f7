"""An explicit --cluster is never silently ignored (issue 54, item 5): a log that names its own
cluster (sacct's Cluster field, sacct JSON's "cluster") and a --cluster that differs are refused,
naming both, and nothing is loaded; the same name loads; formats that carry no cluster column
(PBS, SGE, LSF, SWF) are loaded under the name given."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from cli_helpers import POZIDRIV, cli, query

DATA = Path(__file__).resolve().parent / "data"
SACCT_JSON = DATA / "slurm" / "sacct-json" / "sacct_1"
KTH_DAYS = DATA / "kth_sp2_days22-25.swf"
UNNAMED = {"pbs": DATA / "pbs" / "accounting-logs.log",
           "sge": DATA / "sge" / "apel" / "sge-test-parse-line.accounting",
           "lsf": DATA / "lsf" / "xdmod-unit" / "truncated-record.log",
           "swf": KTH_DAYS}


@pytest.fixture
def sacct_log(tmp_path) -> Path:
    """The first lines of the real Open XDMoD pozidriv log, whose Cluster field is `pozidriv`."""
    with gzip.open(POZIDRIV, "rt") as f:
        lines = [next(f) for _ in range(40)]
    path = tmp_path / "pozidriv.log"
    path.write_text("".join(lines))
    return path


def _jobs(db: Path) -> list[tuple]:
    return query(db, "SELECT cluster, count(*) FROM jobs GROUP BY cluster ORDER BY cluster") if db.exists() else []


@pytest.mark.parametrize("log, named", [("sacct", "pozidriv"), ("sacct-json", "cedar")])
def test_a_different_cluster_is_refused_naming_both(log, named, sacct_log, tmp_path):
    path = sacct_log if log == "sacct" else SACCT_JSON
    db = tmp_path / "w.duckdb"
    r = cli("ingest", path, "--cluster", "poz2", "--db", db)
    assert r.exit_code != 0, r.output
    text = " ".join(r.output.split())
    assert named in text and "poz2" in text and "drop --cluster" in text, text
    assert _jobs(db) == []


@pytest.mark.parametrize("log, named", [("sacct", "pozidriv"), ("sacct-json", "cedar")])
def test_the_same_cluster_or_none_loads_under_the_logs_name(log, named, sacct_log, tmp_path):
    path = sacct_log if log == "sacct" else SACCT_JSON
    r = cli("ingest", path, "--cluster", named, "--db", tmp_path / "a.duckdb")
    assert r.exit_code == 0, r.output
    assert [c for c, _ in _jobs(tmp_path / "a.duckdb")] == [named]
    r = cli("ingest", path, "--db", tmp_path / "b.duckdb")
    assert r.exit_code == 0, r.output
    assert [c for c, _ in _jobs(tmp_path / "b.duckdb")] == [named]


@pytest.mark.parametrize("fmt", sorted(UNNAMED))
def test_a_log_without_a_cluster_column_takes_the_given_name(fmt, tmp_path):
    db = tmp_path / "w.duckdb"
    r = cli("ingest", UNNAMED[fmt], "--format", fmt, "--cluster", "poz2", "--db", db)
    assert r.exit_code == 0, r.output
    assert [c for c, _ in _jobs(db)] == ["poz2"]
