"""`metapilot sql`: read-only queries against a warehouse file, as a table, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone

import pytest
from metapilot.warehouse.db import connect
from typer.testing import CliRunner

from metapilot.cli import app

UTC = timezone.utc


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """A warehouse file with three jobs of one cluster over two days and a capacity row."""
    path = tmp_path_factory.mktemp("wh") / "metapilot.duckdb"
    con = connect(path)
    now = datetime.now(UTC)
    jobs = [
        ("1", "2024-03-04 08:00:00", "2024-03-04 09:00:00", "2024-03-04 11:00:00", 4),
        ("2", "2024-03-04 22:00:00", "2024-03-04 23:00:00", "2024-03-05 01:00:00", 8),
        ("3", "2024-03-05 10:00:00", None, None, 2),
    ]
    for job_id, submit, start, end, cpus in jobs:
        con.execute(
            "INSERT INTO jobs (cluster, job_id, partition, source_format, source_file_id, submit_time, start_time, "
            "end_time, alloc_cpus, alloc_nodes, alloc_gpus, ingested_at) VALUES ('kth', ?, 'batch', 'test', 'f', "
            "?::TIMESTAMPTZ, ?::TIMESTAMPTZ, ?::TIMESTAMPTZ, ?, 1, 0, ?)",
            [job_id, submit + "+00", start and start + "+00", end and end + "+00", cpus, now])
    con.execute("INSERT INTO capacity VALUES ('kth', '*', '2024-01-01 00:00:00+00', 10, 100, 0, NULL, 'config', NULL)")
    con.close()
    return path


def run(*args: str):
    return CliRunner().invoke(app, ["sql", *args])


def test_csv_output(warehouse):
    r = run("SELECT period_label, jobs_submitted, jobs_started, jobs_ended, cpu_hours FROM mart_daily_cluster "
            "ORDER BY period_start", "--db", str(warehouse), "--format", "csv")
    assert r.exit_code == 0, r.output
    got = list(csv.DictReader(io.StringIO(r.stdout)))
    assert got == [
        {"period_label": "2024-03-04", "jobs_submitted": "2", "jobs_started": "2", "jobs_ended": "1", "cpu_hours": "16.0"},
        {"period_label": "2024-03-05", "jobs_submitted": "1", "jobs_started": "0", "jobs_ended": "1", "cpu_hours": "8.0"},
    ]


def test_json_output(warehouse):
    r = run("SELECT period_label, utilisation_cpu, wait_mean_s FROM mart_weekly WHERE cluster = 'kth'",
            "--db", str(warehouse), "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [{"period_label": "2024-W10", "utilisation_cpu": 24.0 / (100 * 168),
                                     "wait_mean_s": 3600.0}]


def test_table_output(warehouse):
    r = run("SELECT job_id, alloc_cpus FROM jobs ORDER BY job_id", "--db", str(warehouse))
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "job_id" in out and "alloc_cpus" in out
    for job_id in ("1", "2", "3"):
        assert job_id in out


def test_table_output_respects_limit(warehouse):
    r = run("SELECT job_id FROM jobs ORDER BY job_id", "--db", str(warehouse), "--limit", "1")
    assert r.exit_code == 0, r.output
    assert "2 more rows" in r.stdout


def test_db_from_environment(warehouse, monkeypatch):
    monkeypatch.setenv("METAPILOT_DB", str(warehouse))
    r = run("SELECT count(*) AS n FROM jobs", "--format", "csv")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["n", "3"]


@pytest.mark.parametrize("statement", [
    "DELETE FROM jobs",
    "INSERT INTO capacity VALUES ('kth', 'x', '2024-01-01 00:00:00+00', 1, 1, 0, NULL, 'config', NULL)",
    "DROP VIEW mart_daily",
    "CREATE TABLE t AS SELECT 1",
])
def test_write_statements_are_refused(warehouse, statement):
    r = run(statement, "--db", str(warehouse))
    assert r.exit_code == 2
    assert "read-only" in r.stderr
    assert "only queries are allowed" in r.stderr
    # and nothing changed
    again = run("SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM capacity) AS cap, "
                "(SELECT count(*) FROM mart_daily) AS days", "--db", str(warehouse), "--format", "csv")
    assert again.stdout.splitlines() == ["jobs,cap,days", "3,1,2"]


def test_missing_warehouse_is_a_clear_error(tmp_path):
    r = run("SELECT 1", "--db", str(tmp_path / "nothing.duckdb"))
    assert r.exit_code == 2
    assert "no warehouse at" in r.stderr and "metapilot ingest" in r.stderr
    assert not (tmp_path / "nothing.duckdb").exists()


def test_bad_sql_is_an_error_not_a_traceback(warehouse):
    r = run("SELECT no_such_column FROM jobs", "--db", str(warehouse))
    assert r.exit_code == 2
    assert r.stderr.startswith("error:")
    assert r.exception is None or isinstance(r.exception, SystemExit)
