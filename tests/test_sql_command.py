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


# --- the sandbox (SPEC §8): no files, no other databases, no extensions, no settings --------------


@pytest.fixture
def keyed(warehouse):
    """The site key beside the warehouse, as a real site has it."""
    key = warehouse.parent / "secret.key"
    key.write_text("ab" * 32 + "\n")
    yield key
    key.unlink()


@pytest.mark.parametrize("template", [
    "COPY (SELECT 'x') TO '{key}' (HEADER false)",
    "SELECT * FROM read_text('{key}')",
    "SELECT * FROM read_csv('{key}')",
    "SELECT * FROM read_blob('{key}')",
    "SELECT * FROM glob('{dir}/*')",
    "SELECT 1; COPY (SELECT * FROM jobs) TO '{dir}/leak.csv'",
    "EXPORT DATABASE '{dir}/dump'",
    "ATTACH '{dir}/other.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET threads = 1",
    "PRAGMA enable_profiling",
])
def test_files_databases_extensions_and_settings_are_out_of_reach(warehouse, keyed, template):
    before = keyed.read_text()
    r = run(template.format(key=keyed, dir=warehouse.parent), "--db", str(warehouse))
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert "refused" in r.stderr and "--out" in r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert keyed.read_text() == before
    assert not (warehouse.parent / "leak.csv").exists() and not (warehouse.parent / "dump").exists()
    assert not (warehouse.parent / "other.duckdb").exists()


def test_tables_and_marts_stay_queryable_in_the_sandbox(warehouse):
    r = run("SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM mart_weekly_cluster) AS weeks, "
            "current_setting('TimeZone') AS tz", "--db", str(warehouse), "--format", "csv")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["jobs,weeks,tz", "3,1,UTC"]


@pytest.mark.parametrize("name", ["out.csv", "out.parquet"])
def test_out_writes_the_whole_result_to_a_file(warehouse, tmp_path, name):
    import polars as pl

    target = tmp_path / "results" / name
    r = run("SELECT job_id, alloc_cpus FROM jobs ORDER BY job_id", "--db", str(warehouse), "--out", str(target),
            "--limit", "1")
    assert r.exit_code == 0, r.output
    df = pl.read_csv(target) if name.endswith(".csv") else pl.read_parquet(target)
    assert df["job_id"].cast(pl.Utf8).to_list() == ["1", "2", "3"] and df["alloc_cpus"].to_list() == [4, 8, 2]
    assert "3 rows written to" in r.stderr and r.stdout == ""


def test_out_needs_a_csv_or_parquet_name(warehouse, tmp_path):
    r = run("SELECT 1", "--db", str(warehouse), "--out", str(tmp_path / "out.xlsx"))
    assert r.exit_code == 2 and ".csv or .parquet" in r.stderr
    assert not (tmp_path / "out.xlsx").exists()


# --- a query DuckDB cannot bind or parse is not a permission problem (issue 33) -----------------


def test_a_missing_column_shows_duckdbs_message_and_the_nearest_names(warehouse):
    r = run("select cores from jobs", "--db", str(warehouse))
    assert r.exit_code == 2
    assert "read-only" not in r.stderr and "only queries are allowed" not in r.stderr
    assert r.stderr.startswith('error: Binder Error: Referenced column "cores" not found')
    nearest = next(ln for ln in r.stderr.splitlines() if ln.startswith("nearest names: "))
    assert "req_cpus" in nearest or "alloc_cpus" in nearest
    assert 'metapilot sql "describe jobs"' in r.stderr


def test_a_missing_table_shows_the_nearest_table_and_how_to_list_columns(warehouse):
    r = run("select * from job", "--db", str(warehouse))
    assert r.exit_code == 2
    assert "read-only" not in r.stderr
    assert "Table with name job does not exist" in r.stderr
    assert "nearest names: jobs" in r.stderr and 'metapilot sql "describe jobs"' in r.stderr


def test_a_syntax_error_shows_duckdbs_message_only(warehouse):
    r = run("selec 1", "--db", str(warehouse))
    assert r.exit_code == 2
    assert r.stderr.startswith("error: Parser Error: syntax error at or near")
    assert "read-only" not in r.stderr
