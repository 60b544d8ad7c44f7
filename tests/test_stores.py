"""The warehouse stores that took over the SQL the upper layers ran inline: their lookups on a
small in-memory warehouse (the flows' tests exercise them end to end)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from metapilot.warehouse.capacity import capacity_listing, store_capacity_config, upsert_capacity
from metapilot.warehouse.db import connect_memory
from metapilot.warehouse.jobs_store import clusters_with_jobs, data_fingerprint, last_submit
from metapilot.warehouse.policy_store import policy_row, registered_sums

NOW = datetime(2024, 3, 6, tzinfo=timezone.utc)


def _job(con, cluster: str, job_id: str, partition: str, submit: str) -> None:
    con.execute(
        "INSERT INTO jobs (cluster, job_id, partition, source_format, source_file_id, submit_time, alloc_cpus, "
        "alloc_nodes, alloc_gpus, ingested_at) VALUES (?, ?, ?, 'test', 'f', ?::TIMESTAMPTZ, 1, 1, 0, ?)",
        [cluster, job_id, partition, submit, NOW])


@pytest.fixture()
def con():
    c = connect_memory()
    _job(c, "kth", "1", "batch", "2024-03-04 08:00:00+00")
    _job(c, "kth", "2", "debug", "2024-03-05 09:30:00+00")
    _job(c, "curie", "1", "batch", "2024-03-01 00:00:00+00")
    yield c
    c.close()


def test_jobs_lookups(con):
    assert clusters_with_jobs(con) == ["curie", "kth"]
    assert last_submit(con, "kth") == datetime(2024, 3, 5, 9, 30, tzinfo=timezone.utc)
    assert last_submit(con, "kth", "batch") == datetime(2024, 3, 4, 8, tzinfo=timezone.utc)
    assert last_submit(con, "kth", "nope") is None
    assert last_submit(con, "lumi") is None
    before = data_fingerprint(con, "kth")
    assert before.startswith("2@")
    _job(con, "kth", "3", "batch", "2024-03-05 10:00:00+00")
    assert data_fingerprint(con, "kth") != before
    assert data_fingerprint(con, "curie").startswith("1@")


def test_capacity_upsert_replaces_the_same_date_and_a_config_replaces_the_cluster(con):
    row = {"cluster": "kth", "partition": "*", "valid_from": NOW, "nodes": 10, "cores": 100, "gpus": 0,
           "mem_mib": None, "source": "swf-header", "note": None}
    upsert_capacity(con, row)
    upsert_capacity(con, {**row, "cores": 120})
    listing = capacity_listing(con)
    assert listing.height == 1 and listing["cores"][0] == 120
    store_capacity_config(con, [{**row, "partition": "batch", "cores": 64, "source": "config"}])
    listing = capacity_listing(con)
    assert listing.select("partition", "cores", "source").rows() == [("batch", 64, "config")]


def test_policy_lookups_say_what_is_registered(con):
    with pytest.raises(LookupError, match="no policy is registered yet"):
        policy_row(con, "p1")
    assert registered_sums(con, "p1") is None
    con.execute(
        "INSERT INTO policies (policy_id, cluster, partition, created_at, path, train_from, train_to, algorithm, "
        "n_steps, seed, n_train_tuples, dataset_sha256, sums_sha256, code_version) "
        "VALUES ('p1', 'kth', '*', ?, '/x', ?, ?, 'cql', 1, 0, 1, 'd', 'abc', 'v')", [NOW, NOW, NOW])
    assert policy_row(con, "p1")["path"] == "/x"
    assert registered_sums(con, "p1") == "abc"
    with pytest.raises(LookupError, match="known: p1"):
        policy_row(con, "p2")
