"""Steering's pure parts: squeue JSON -> frame (22.05 and 23.02 shapes), which jobs may be touched,
ranking within Slurm's groups, site factors, changes and batches."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest
from steer_standin import job

from metapilot.models.steering.rank import (
    GAP_STEPS,
    MIDDLE,
    SITE_FACTOR_MAX,
    band_for,
    batches,
    changes,
    desired_factors,
    kendall_tau,
    place,
    targets,
)
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
        job(23, limit_min=5, reason="None"),  # being evaluated by a scheduling pass: still steerable
        job(30, limit_min=5, array_job_id=30, array_task_string="2-4"),  # array 30: a pending task split off
        job(31, limit_min=5, array_job_id=30, array_task_id=1),  # a split pending task: its own id
        job(40, limit_min=5, partition="debug,high"),  # two partitions
    ]))
    t = dict(zip(f["job_id"], f["target"]))
    assert t == {"1": "1", "2": "2", "3": None, "4": None, "5": None, "6": None, "7": None, "8": "8", "20": "9",
                 "21": None, "23": "23", "30": None, "31": "30_1", "40": "40"}
    place = dict(zip(f["job_id"], f["place"]))
    # issue 49 (12): what cannot be ranked (an array with a task running: through its id it would touch the
    # running task too; a job in two partitions) is set to the band's middle, not left under every raised job
    assert place["20"] == place["40"] == MIDDLE and place["1"] == place["31"] == "rank" and place["3"] is None


def test_rank_within_partition_tier_centred_in_the_same_band_for_every_group():
    f = targets(_frame([job(1, limit_min=9), job(2, limit_min=3), job(3, limit_min=7), job(4, limit_min=5),
                        job(5, limit_min=1, partition="high")]))
    d = desired_factors(f, "SJF", NOW, 100, {"debug": 1, "high": 2})
    got = {r["target"]: (r["group_key"], r["rank"], r["site_factor"]) for r in d.iter_rows(named=True)}
    b, gap = band_for(100), GAP_STEPS * 100
    assert got == {"2": ("debug|tier 1", 0, b.mid + 3 * gap // 2), "4": ("debug|tier 1", 1, b.mid + gap // 2),
                   "3": ("debug|tier 1", 2, b.mid - gap // 2), "1": ("debug|tier 1", 3, b.mid - 3 * gap // 2),
                   "5": ("high|tier 2", 0, b.mid)}
    assert band_for(100) == band_for(100) and b.low >= 100 and b.high <= SITE_FACTOR_MAX
    assert band_for(10**9).high <= SITE_FACTOR_MAX  # a huge step: the band stays within scontrol's bound


def test_jobs_that_cannot_be_ranked_sit_at_the_band_middle_among_the_ranked():
    f = targets(_frame([job(i, limit_min=i) for i in range(1, 8)]
                       + [job(40, limit_min=4, partition="debug,high"),
                          job(20, limit_min=5, array_job_id=9, array_task_string="3-4"),
                          job(21, limit_min=5, array_job_id=9, array_task_id=1, state="RUNNING", reason="None")]))
    d = desired_factors(f, "SJF", NOW, 10, {"debug": 1, "high": 2})
    by = dict(zip(d["target"], d["site_factor"]))
    ranked = sorted(by[str(i)] for i in range(1, 8))
    assert by["40"] == by["9"] == band_for(10).mid == ranked[3]  # as many ranked jobs above as below
    assert d.filter(pl.col("target").is_in(["40", "9"]))["rank"].null_count() == 2


def _current(d: pl.DataFrame) -> pl.DataFrame:
    return d.select(pl.col("target").alias("job_id"), "site_factor", "group_key")


def test_changes_only_where_the_factor_moves_and_an_arrival_sets_only_itself():
    jobs = [job(i, limit_min=i) for i in range(1, 6)]
    d1 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1})
    todo, forget = changes(d1, pl.DataFrame(schema={"job_id": pl.Utf8, "site_factor": pl.Int64}), {"1", "2", "3", "4", "5"}, 100)
    assert sorted(todo["target"].to_list()) == ["1", "2", "3", "4", "5"]
    current = _current(d1)
    jobs[0]["job_state"], jobs[0]["state_reason"] = "RUNNING", "None"  # the first started
    d2 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1}, current)
    todo, forget = changes(d2, current, {"2", "3", "4", "5"}, 100)
    assert todo.is_empty() and forget == ["1"]
    jobs.append(job(9, limit_min=2))  # a new job ranked first: only itself is set
    jobs.append(job(10, limit_min=4))  # one ranked between two others: only itself, in the gap
    jobs.append(job(11, limit_min=60))  # one ranked last (FCFS: every arrival): only itself
    left = current.filter(pl.col("job_id") != "1")
    d3 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1}, left)
    todo, _ = changes(d3, left, {"2", "3", "4", "5", "9", "10", "11"}, 100)
    assert sorted(todo["target"].to_list()) == ["10", "11", "9"]
    order = d3.sort("rank")["site_factor"].to_list()
    assert all(a - b >= 10 for a, b in zip(order, order[1:]))  # the rule's order, a step apart at least
    capped, _ = changes(d3, left, {"2", "3", "4", "5", "9", "10", "11"}, 1)
    assert capped["target"].to_list() == ["9"]  # the front first


def test_a_steered_job_held_since_goes_back_to_zero():
    jobs = [job(1, limit_min=1), job(2, limit_min=2, reason="JobHeldUser")]
    d = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, {"debug": 1})
    todo, forget = changes(d, pl.DataFrame({"job_id": ["2"], "site_factor": [10]}), {"1", "2"}, 10)
    assert todo.filter(pl.col("target") == "2")["site_factor"].to_list() == [0] and forget == []


def test_place_keeps_what_is_in_order_and_fills_gaps():
    b = band_for(10)
    first = place([None] * 5, b)
    assert first == sorted(first, reverse=True) and first[2] == b.mid and first[0] - first[1] == GAP_STEPS * 10
    assert place(first[:2] + [None] + first[2:], b)[:2] + place(first[:2] + [None] + first[2:], b)[3:] == first
    out = place([first[3], first[0], None], b)  # two out of order: one kept, the other placed again
    assert out == sorted(out, reverse=True) and len(set(out)) == 3
    assert place([b.high + 5, None], b)[0] <= b.high  # a factor outside the band (an older layout) is not kept


def test_place_random_arrivals_and_starts_change_about_one_job_each():
    """Issue 49 (3): 10,000 pending, a start and an arrival anywhere per cycle: about one factor each,
    never out of order, within the band; a group drifting to the band's edge is laid out again rarely:
    a group whose every arrival ranks last drifts GAP_STEPS steps an arrival, so the band's lower half
    (BAND_SLOTS steps) holds about 16,000 arrivals before the group is laid out again, whatever its size
    (a group of 200 here, so that 17,000 arrivals take seconds, not minutes)."""
    rng = random.Random(7)
    b = band_for(10_001)
    cur = place([None] * 10_000, b)
    total, worst = 0, 0
    for _ in range(400):
        pos = rng.randrange(len(cur))
        new = cur[1:pos] + [None] + cur[pos:]
        got = place(new, b)
        assert all(x > y for x, y in zip(got, got[1:])) and b.low <= got[-1] and got[0] <= b.high
        n = sum(1 for x, y in zip(new, got) if x != y)
        total, worst, cur = total + n, max(worst, n), got
    assert total <= 440 and worst <= 50, (total, worst)
    b = band_for(201)
    fcfs = place([None] * 200, b)
    changed = []
    for _ in range(17_000):  # every arrival ranks last: the group drifts down and is laid out again once
        new = fcfs[1:] + [None]
        fcfs = place(new, b)
        changed.append(sum(1 for x, y in zip(new, fcfs) if x != y))
    assert sum(1 for c in changed if c > 1) == 1 and sum(changed) <= 17_000 + 2 * 200


def test_a_job_moved_to_another_partition_is_placed_afresh_and_named():
    jobs = [job(i, limit_min=i) for i in range(1, 11)] + [job(i, limit_min=i, partition="high") for i in (17, 18)]
    tiers = {"debug": 1, "high": 1}
    d1 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, tiers)
    jobs[0]["partition"] = "high"  # the user moves the debug group's first job to high, keeping its factor
    d2 = desired_factors(targets(_frame(jobs)), "SJF", NOW, 10, tiers, _current(d1))
    moved = d2.filter(pl.col("moved_from").is_not_null())
    assert moved["target"].to_list() == ["1"] and moved["moved_from"][0] == "debug|tier 1"
    assert moved["group_key"][0] == "high|tier 1"
    todo, _ = changes(d2, _current(d1).select("job_id", "site_factor"), {str(j["job_id"]) for j in jobs}, 1)
    assert todo["target"].to_list() == ["1"]  # set first, before any cap
    high = d2.filter(pl.col("group_key") == "high|tier 1").sort("rank")["site_factor"].to_list()
    assert high == sorted(high, reverse=True) and max(high) <= max(d1["site_factor"])


def test_batches_share_a_line_per_value():
    todo = pl.DataFrame({"target": ["1", "2", "3"], "site_factor": [0, 0, 5], "rank": [None, None, 0],
                         "group_key": [None, None, "g"]})
    assert batches(todo) == [(0, ["1", "2"]), (5, ["3"])]


def test_text_parsers_and_tau():
    assert parse_partitions("PartitionName=a Nodes=x PriorityTier=3\nPartitionName=b Nodes=x") == {"a": 3, "b": 1}
    assert parse_sdiag_rpcs("\tREQUEST_UPDATE_JOB                      ( 3001) count:12     ave_time:3")["REQUEST_UPDATE_JOB"] == 12
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0 and kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
