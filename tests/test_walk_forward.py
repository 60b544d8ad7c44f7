"""The walk forward (issue 38): origins, one continuous replay that follows each period's decision,
the choices made from the past, regret with its block bootstrap, fairness, and the bar."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import metapilot.models.evaluation.walk_forward as wf
import metapilot.models.simulator.rules as rules
from metapilot.models.simulator import Capacity, simulate
from metapilot.transforms.windows import walk_forward_origins, week_start
from metapilot.transforms.workload import Workload

UTC = timezone.utc


def busy(n: int, first: int = 1400) -> list[datetime]:
    return [week_start(first + i) for i in range(n)]


def test_origins_default_warmup_and_every():
    weeks = busy(48)
    origins = walk_forward_origins(weeks, weeks[-1] + timedelta(days=6))
    assert origins[0] == weeks[24] and all(b - a == timedelta(weeks=4) for a, b in zip(origins, origins[1:]))
    assert origins[-1] < weeks[-1] + timedelta(days=6)
    # 26 weeks or half the weeks with jobs, whichever is less (seven at least)
    short = busy(17)
    assert walk_forward_origins(short, short[-1] + timedelta(days=6))[0] == short[8]


def test_origins_count_weeks_with_jobs_across_a_gap():
    weeks = busy(10) + busy(30, first=1500)  # a gap of 90 weeks
    origins = walk_forward_origins(weeks, weeks[-1] + timedelta(days=6), warmup_weeks=20)
    assert origins[0] == weeks[20]


@pytest.mark.parametrize("n", [0, 5, 7])
def test_too_short_a_history_says_how_much_is_needed(n):
    weeks = busy(n)
    with pytest.raises(ValueError, match="at least 7 weeks with jobs .*ingest a longer history$"):
        walk_forward_origins(weeks, (weeks[-1] if weeks else week_start(1400)) + timedelta(days=6))


@pytest.mark.parametrize("n", [8, 10, 11])
def test_a_short_log_still_gets_an_origin_by_default(n):
    """HPC2N's 8-week subset (10 weeks with jobs): half its weeks would be 5, too few to learn from,
    so the default warmup rises to seven rather than refusing a log that can be walked forward."""
    weeks = busy(n)
    origins = walk_forward_origins(weeks, weeks[-1] + timedelta(days=6))
    assert origins[0] == weeks[7]


def test_a_warmup_given_too_short_or_too_long_says_what_to_pass():
    weeks = busy(10)
    with pytest.raises(ValueError, match="--warmup 3 is too short"):
        walk_forward_origins(weeks, weeks[-1] + timedelta(days=6), warmup_weeks=3)
    with pytest.raises(ValueError, match=r"\(--warmup 10\).*lower --warmup \(7 to 9\)"):
        walk_forward_origins(weeks, weeks[-1] + timedelta(days=6), warmup_weeks=10)


def workload(n: int = 400, seed: int = 3) -> Workload:
    """A busy synthetic queue on 16 cores: waits long enough for a guard to matter."""
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, 40 * 86400, n))
    run = rng.choice([60.0, 600.0, 3600.0, 6 * 3600.0, 30 * 3600.0], n)
    cores = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0], n)
    return Workload.from_arrays(submit=submit, run=run, req_time=run * 2, cores=cores)


CAP = Capacity.single(16)


def test_one_rule_followed_throughout_is_the_simulator_start_for_start():
    wl = workload()
    for rule in ("SAF+EASY", "F1+CONSERVATIVE", "WFP3+NONE"):
        pol, bf = rules.parse_rule(rule)
        assert np.array_equal(wf.follow(wl, CAP, [(0.0, wf.RuleDecider(rule))]).start,
                              simulate(wl, CAP, pol, bf).start)


def test_the_queue_and_running_jobs_carry_across_a_boundary():
    """Two periods of the same rule are the same replay as one: nothing restarts at the boundary."""
    wl = workload()
    one = wf.follow(wl, CAP, [(0.0, wf.RuleDecider("SJF+EASY"))])
    two = wf.follow(wl, CAP, [(0.0, wf.RuleDecider("SJF+EASY")), (10 * 86400.0, wf.RuleDecider("SJF+EASY"))])
    assert np.array_equal(one.start, two.start)
    switched = wf.follow(wl, CAP, [(0.0, wf.RuleDecider("SJF+EASY")), (10 * 86400.0, wf.RuleDecider("FCFS+EASY"))])
    before = wl.submit < 5 * 86400.0
    started_before = one.start < 10 * 86400.0
    assert np.array_equal(switched.start[started_before], one.start[started_before])  # the past is kept
    assert not np.array_equal(switched.start, one.start)


def test_holding_a_guarded_rule_is_the_same_schedule_as_deciding_every_epoch(monkeypatch):
    wl = workload(600, seed=5)
    spec = [(0.0, wf.RuleDecider("SAF+EASY", 24.0)), (15 * 86400.0, wf.RuleDecider("LAF+CONSERVATIVE", 12.0)),
            (30 * 86400.0, wf.RuleDecider("SJF+NONE"))]
    fast = wf.follow(wl, CAP, spec)
    monkeypatch.setattr(wf.RuleDecider, "steady_s", lambda self, agg: 0.0)
    slow = wf.follow(wl, CAP, spec)
    assert np.array_equal(fast.start, slow.start)


def test_the_guard_caps_the_longest_wait():
    wl = workload(600, seed=5)
    plain = wf.Figures.of(wf.jobs_between(wf.follow(wl, CAP, [(0.0, wf.RuleDecider("LAF+EASY"))]), 0, 1e12))
    guarded = wf.Figures.of(wf.jobs_between(wf.follow(wl, CAP, [(0.0, wf.RuleDecider("LAF+EASY", 12.0))]), 0, 1e12))
    assert guarded.wait_max_s < plain.wait_max_s


def test_the_bar_says_when_there_was_nothing_to_beat():
    def row(name: str, kind: str, wait: float, bsld: float) -> dict:
        return {"name": name, "kind": kind, "wait_mean_s": wait, "wait_max_s": wait, "bsld_mean": bsld,
                "reference": "FCFS+EASY", "regret_bsld": 0.0, "regret_wait_mean": 0.0, "admissible": True}

    idle = pl.DataFrame([row("MetaPilot", "metapilot", 0.0, 1.0), row("FCFS+EASY", "fixed", 0.0, 1.0),
                         row("SJF+EASY", "fixed", 20.0, 1.01)])
    v = wf.bar_verdict(idle, "FCFS+EASY")
    assert not v["met"] and not v["beats_current"] and "nothing to beat" in v["why"]
    busy = pl.DataFrame([row("MetaPilot", "metapilot", 0.0, 1.0), row("FCFS+EASY", "fixed", 0.0, 1.0),
                         row("SJF+EASY", "fixed", 200.0, 1.01)])
    assert "why" not in wf.bar_verdict(busy, "FCFS+EASY")


def test_parse_rule_names_the_21():
    assert rules.parse_rule("saf+easy") == ("SAF", "easy") and len(rules.RULES) == 21
    with pytest.raises(ValueError, match="unknown rule"):
        rules.parse_rule("SRPT+EASY")


def test_regret_and_its_block_bootstrap():
    rng = np.random.default_rng(0)
    ref = np.column_stack([np.full(12, 100.0), rng.uniform(900, 1100, 12) * 100, rng.uniform(9, 11, 12) * 100,
                           np.full(12, 80.0), np.full(12, 800.0)])
    same = wf.regret(ref, ref, 2)
    assert same == (0.0, 0.0, 0.0)
    better = ref.copy()
    better[:, 2] *= 0.8
    point, lo, hi = wf.regret(better, ref, 2)
    assert point == pytest.approx(-0.2) and lo < point < hi < 0  # a win: the whole interval below zero
    one = wf.regret(better[:1], ref[:1], 2)
    assert one[1] is None  # one period: no interval


def test_fairness_figures():
    frame = pl.DataFrame({"job_id": ["1", "2", "3", "4"], "wait": [10.0, 10.0, 30.0, 50.0]})
    owners = pl.DataFrame({"job_id": ["1", "2", "3", "4"], "user": ["a", "a", "b", "b"], "account": ["x", "x", "x", "y"]})
    f = wf.fairness(frame, owners)
    assert f["worst_user_wait_s"] == 40.0 and f["worst_account_wait_s"] == 50.0
    assert f["jain_users"] == pytest.approx((10 + 40) ** 2 / (2 * (10 ** 2 + 40 ** 2)))


def test_compare_and_the_bar_on_a_synthetic_span():
    wl = workload(600, seed=5)
    bounds = [0.0, 10 * 86400.0, 20 * 86400.0, 30 * 86400.0, 50 * 86400.0]
    contenders = [wf.Contender("MetaPilot", "metapilot", wf.follow(wl, CAP, [(b, wf.RuleDecider("SJF+EASY", 24.0))
                                                                           for b in bounds[:-1]]))]
    for r in rules.RULES:
        pol, bf = rules.parse_rule(r)
        contenders.append(wf.Contender(r, "fixed", simulate(wl, CAP, pol, bf)))
    span, per = wf.compare(contenders, bounds, "FCFS+EASY", n_boot=200)
    assert set(span["name"]) >= {"MetaPilot", "FCFS+EASY"} and per.height == len(contenders) * 4
    row = span.filter(pl.col("name") == "FCFS+EASY").row(0, named=True)
    assert row["admissible"] and row["gain_wait_mean"] == 0.0
    ref = span["reference"][0]
    assert span.filter(pl.col("name") == ref)["regret_bsld"][0] == 0.0
    verdict = wf.bar_verdict(span, "FCFS+EASY")
    assert set(verdict) >= {"met", "beats_current", "not_dominated", "regret_within_5pct", "starves_no_one_more"}


def test_the_record_at_an_origin_reads_nothing_after_it():
    """A job still queued at t counts the wait it had had by t; a job that had not ended has no
    bounded slowdown yet; a job submitted after t is not there."""
    frame = pl.DataFrame({"submit": [0.0, 100.0, 200.0, 900.0], "wait": [10.0, 5_000.0, 50.0, 0.0],
                          "run": [100.0, 100.0, 2_000.0, 10.0], "end": [110.0, 5_200.0, 2_250.0, 910.0],
                          "bsld": [1.1, 51.0, 1.025, 1.0]})
    f = wf.observed_by(frame, 500.0)
    assert f.jobs == 3 and f.wait_max_s == 400.0  # the second job: queued at 500 s, 400 s so far
    assert f.bsld_mean == pytest.approx(1.1)  # only the first job had ended
    assert f.wait_mean_s == pytest.approx((10 + 400 + 50) / 3)


def test_a_fold_whose_learning_fails_is_a_verdict_not_the_end(monkeypatch, tmp_path, prefect_harness):
    """The fold is recorded as failed with its reason (and then followed by the guarded leader);
    the walk forward goes on. Its private warehouse holds only the past of its origin."""
    from prefect import flow

    import metapilot.flows.backtest as bt
    from metapilot.warehouse.db import connect

    db = str(tmp_path / "w.duckdb")
    con = connect(db)
    con.execute("INSERT INTO capacity (cluster, partition, cores, gpus, mem_mib, valid_from, source) VALUES "
                "('c', '*', 16, 0, NULL, TIMESTAMPTZ '2000-01-01 00:00:00+00', 'config')")
    con.close()
    seen = {}

    def boom(cluster, windows, db, **kw):
        seen["db"] = db
        raise RuntimeError("the GPU caught fire")

    monkeypatch.setattr(bt, "learn_flow", boom)
    weeks = busy(12)

    @flow
    def one() -> object:
        return bt.learn_fold(db, "c", weeks[0], weeks, weeks[8], 10)

    fold = one()
    assert fold.gate == "failed" and "RuntimeError: the GPU caught fire" in fold.note and fold.policy_id is None
    assert seen["db"] == fold.db and fold.db.startswith(str(tmp_path / "backtests" / "folds" / "c"))
    assert not (Path(fold.db).parent / "fold.json").exists()  # a failed fold is learned again next time


def test_the_json_of_a_contender_never_holds_nan():
    """Lublin-256 logs no start times: its as-run figures were NaN, and `--json` wrote `NaN`, which is not JSON."""
    import json

    from metapilot.models.evaluation.walk_forward_result import ContenderFigures

    row = ContenderFigures.of({"name": "as-run", "kind": "as-run", "wait_mean_s": float("nan"),
                               "regret_bsld_ci": [float("nan"), 0.1]}).to_json()
    assert row["wait_mean_s"] is None and row["regret_bsld_ci"] == [None, 0.1]
    json.dumps(row, allow_nan=False)
