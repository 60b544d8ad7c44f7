"""A warehouse written before the held-out replay and the data checks had names of their own opens with
its rows under the new names."""

from __future__ import annotations

import duckdb

from metapilot.warehouse.db import connect


def test_an_older_warehouse_gets_the_held_out_names_with_its_rows(tmp_path):
    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))
    old.execute("CREATE TABLE validations (validation_id VARCHAR NOT NULL, contender VARCHAR NOT NULL, "
                "wait_mean_s DOUBLE, PRIMARY KEY (validation_id, contender))")
    old.execute("INSERT INTO validations VALUES ('val-1', 'MetaPilot', 12.5)")
    old.execute("CREATE TABLE validation_weeks (validation_id VARCHAR NOT NULL, contender VARCHAR NOT NULL, "
                "week VARCHAR NOT NULL, PRIMARY KEY (validation_id, contender, week))")
    old.execute("INSERT INTO validation_weeks VALUES ('val-1', 'MetaPilot', '1996-W44')")
    old.execute("CREATE TABLE validation_runs (run_id VARCHAR PRIMARY KEY, file_sha256 VARCHAR NOT NULL, "
                "suite_name VARCHAR NOT NULL, success BOOLEAN NOT NULL, evaluated BIGINT NOT NULL, "
                "failed_rows BIGINT NOT NULL, results_json VARCHAR, validated_at TIMESTAMPTZ NOT NULL)")
    old.execute("INSERT INTO validation_runs VALUES ('run-1', 'abc', 'metapilot_jobs', true, 10, 0, '[]', "
                "TIMESTAMPTZ '2024-01-01 00:00:00+00')")
    old.close()

    con = connect(path)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert {"heldout_replays", "heldout_weeks", "heldout_diffs"} <= tables
        assert not tables & {"validations", "validation_weeks", "validation_diffs", "validation_runs"}
        assert con.execute("SELECT run_id, evaluated, checked_at IS NOT NULL FROM data_check_runs").fetchall() == [
            ("run-1", 10, True)]
        assert con.execute("SELECT heldout_id, contender, wait_mean_s FROM heldout_replays").fetchall() == [
            ("val-1", "MetaPilot", 12.5)]
        assert con.execute("SELECT heldout_id, week FROM heldout_weeks").fetchall() == [("val-1", "1996-W44")]
    finally:
        con.close()
    connect(path).close()  # a second open changes nothing
