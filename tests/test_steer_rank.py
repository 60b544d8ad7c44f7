"""Steering's pure parts: squeue JSON -> frame (22.05 and 23.02 shapes), which jobs may be touched,
ranking within Slurm's groups, site factors, changes and batches."""

from __future__ import annotations

import json

import polars as pl
import pytest
from steer_standin import job

from metapilot.models.steering.rank import batches, changes, desired_factors, kendall_tau, targets
from metapilot.models.steering.squeue import (
    SlurmParseError,
    parse_partitions,
    parse_sdiag_rpcs,
    parse_squeue,
)

META_22 = {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}
NOW = 1_800_000_600


def _frame(jobs: list[dict]) -> pl.DataFrame:
    return parse_squeue(json.dumps({"meta": META_22, "errors": [], "jobs": jobs}))[1]


def test_parse_both_json_shapes():
    v, f = parse_squeue(json.dumps({"meta": META_22, "errors": [], "jobs": [job(7, limit_min=5, cpus=4)]}))
    assert str(v) == "22.05.8" and f["job_id"].to_list() == ["7"] and f["time_limit_s"].to_list() == [300]
    new = {"job_id": 8, "job_state": ["PENDING"], "state_reason": "Resources", "partition": "debug",
           "time_limit": {"set": True, "infinite": False, "number": 10}, "cpus": {"set": True, "number": 2},
           "priority": {"set": True, "number": 5}, "submit_time": {"set": True, "number": 100},
           "array_job_id": {"set": True, "number": 0}, "array_task_id": {"set": False, "number": 0}}
    v, f = parse_squeue(json.dumps({"meta": {"slurm": {"version": {"major": 23, "minor": 2, "micro": 4}}}, "jobs": [new]}))
    assert str(v) == "23.02.4" and f.row(0, named=True)["state"] == "PENDING" and f["time_limit_s"][0] == 600
    with pytest.raises(SlurmParseError, match="did not answer JSON"):
        parse_squeue("squeue: error: garbage")
    with pytest.raises(SlurmParseError, match="reported an error"):
        parse_squeue(json.dumps({"meta": META_22, "errors": [{"error": "Unable to contact slurm controller"}], "jobs": []}))


def test_only_jobs_pending_for_priority_or_resources_are_touched():
    f = targets(_frame([
        job(1, limit_min=5), job(2, limit_min=5, reason="Resources"), job(3, limit_min=5, reason="JobHeldUser"),
        job(4, limit_min=5, state="RUNNING", reason="None"), job(5, limit_min=5, reason="Dependency"),
        job(6, limit_min=5, reason="QOSMaxJobsPerUserLimit"), job(7, limit_min=5, resv_name="maint"),
        job(8, limit_min=5, array_job_id=8, array_task_string="1-4"),  # unsplit array: as a whole
        job(20, limit_min=5, array_job_id=9, array_task_string="3-4"),  # array 9: one task running
        job(21, limit_min=5, array_job_id=9, array_task_id=1, state="RUNNING", reason="None"),
        job(22, limit_min=5, array_job_id=9, array_task_id=2),  # a split pending task: its own id
        job(23, limit_min=5, reason="None"),  # being evaluated by a scheduling pass: still steerable
    ]))
    t = dict(zip(f["job_id"], f["target"]))
    assert t == {"1": "1", "2": "2", "3": None, "4": None, "5": None, "6": None, "7": None, "8": "8", "20": None,
                 "21": None, "22": "9_2", "23": "23"}


def test_rank_within_partition_tier_and_factors_from_the_bottom():
    f = targets(_frame([job(1, limit_min=9), job(2, limit_min=3), job(3, limit_min=7), job(4, limit_min=5),
                        job(5, limit_min=1, partition="high")]))
    d = desired_factors(f, "SJF", NOW, 100, {"debug": 1, "high": 2})
    got = {r["target"]: (r["group_key"], r["rank"], r["site_factor"]) for r in d.iter_rows(named=True)}
    assert got == {"2": ("debug|tier 1", 0, 300), "4": ("debug|tier 1", 1, 200), "3": ("debug|tier 1", 2, 100),
                   "1": ("debug|tier 1", 3, 0), "5": ("high|tier 2", 0, 0)}


def test_changes_only_where_the_factor_moves_and_the_start_of_the_first_changes_nothing():
    jobs = [job(i, limit_min=i) for i in range(1, 6)]
    d1 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1})
    todo, forget = changes(d1, pl.DataFrame(schema={"job_id": pl.Utf8, "site_factor": pl.Int64}), {"1", "2", "3", "4", "5"}, 100)
    assert sorted(todo["target"].to_list()) == ["1", "2", "3", "4"]  # job 5 stays at 0
    current = d1.select(pl.col("target").alias("job_id"), "site_factor")
    jobs[0]["job_state"], jobs[0]["state_reason"] = "RUNNING", "None"  # the first started
    d2 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1})
    todo, forget = changes(d2, current, {"2", "3", "4", "5"}, 100)
    assert todo.is_empty() and forget == ["1"]
    jobs.append(job(9, limit_min=2))  # a new job ranked second: only the one above it moves
    d3 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1})
    todo, _ = changes(d3, current.filter(pl.col("job_id") != "1"), {"2", "3", "4", "5", "9"}, 100)
    assert sorted(todo["target"].to_list()) == ["2", "9"]
    capped, _ = changes(d3, current.filter(pl.col("job_id") != "1"), {"2", "3", "4", "5", "9"}, 1)
    assert capped["target"].to_list() == ["2"]  # the front first


def test_a_steered_job_held_since_goes_back_to_zero():
    jobs = [job(1, limit_min=1), job(2, limit_min=2, reason="JobHeldUser")]
    d = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1})
    todo, forget = changes(d, pl.DataFrame({"job_id": ["2"], "site_factor": [10]}), {"1", "2"}, 10)
    assert todo.filter(pl.col("target") == "2")["site_factor"].to_list() == [0] and forget == []


def test_batches_share_a_line_per_value():
    todo = pl.DataFrame({"target": ["1", "2", "3"], "site_factor": [0, 0, 5], "rank": [None, None, 0],
                         "group_key": [None, None, "g"]})
    assert batches(todo) == [(0, ["1", "2"]), (5, ["3"])]


def test_text_parsers_and_tau():
    assert parse_partitions("PartitionName=a Nodes=x PriorityTier=3\nPartitionName=b Nodes=x") == {"a": 3, "b": 1}
    assert parse_sdiag_rpcs("\tREQUEST_UPDATE_JOB                      ( 3001) count:12     ave_time:3")["REQUEST_UPDATE_JOB"] == 12
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0 and kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
