"""The walk forward's decision rule (issue 48, `models.evaluation.choice`): keep unless the lead is
material and holds across the past's weeks, a tail test over many jobs with a margin, guards relative
to the current rule's tail, staying with the rule followed, fidelity before advice, the planner as it
says."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import metapilot.models.evaluation.choice as ch
import metapilot.models.evaluation.walk_forward as wf
import metapilot.models.simulator.rules as rules

WEEK = 7 * 86400.0
WEEKS = 12
SPAN = WEEKS * WEEK


def past(wait_per_week, bsld_per_week=None, n: int = 200, top: float | None = None, top_jobs: int = 0,
         fired: int | None = None, seed: int = 0) -> ch.Past:
    """A replay of a 12-week past: `n` jobs a week with the week's mean wait and bsld (a little noise);
    `top_jobs` jobs of the last weeks wait `top` instead."""
    rng = np.random.default_rng(seed)
    waits, bslds, submits = [], [], []
    for w in range(WEEKS):
        mw = wait_per_week[w] if np.ndim(wait_per_week) else wait_per_week
        mb = (bsld_per_week[w] if np.ndim(bsld_per_week) else bsld_per_week) if bsld_per_week is not None else 1 + mw / 600
        waits.append(rng.uniform(0.5, 1.5, n) * mw)
        bslds.append(np.maximum(1.0, rng.uniform(0.9, 1.1, n) * mb))
        submits.append(w * WEEK + np.sort(rng.uniform(0, WEEK - 1, n)))
    wait, bsld, submit = np.concatenate(waits), np.concatenate(bslds), np.concatenate(submits)
    if top_jobs:
        wait[-top_jobs:] = top
    frame = pl.DataFrame({"submit": submit, "wait": wait, "bsld": bsld, "run": np.full(wait.size, 3600.0)})
    return ch.Past.of(frame, SPAN, fired)


CURRENT = past(1000.0, 10.0, seed=1)


def test_a_material_lead_on_both_that_holds_every_week_switches():
    better = past(600.0, 6.0, fired=3, seed=2)
    c = ch.choose_guarded({("SJF+EASY", 10.0): better}, CURRENT, "FCFS+EASY")
    assert (c.rule, c.guard_h, c.fired) == ("SJF+EASY", 10.0, 3) and c.why.startswith("leads FCFS+EASY")


@pytest.mark.parametrize("wait,bsld", [(970.0, 6.0), (600.0, 9.7), (1000.0, 10.0)])
def test_a_lead_within_the_tolerance_on_either_objective_or_a_tie_keeps(wait, bsld):
    c = ch.choose_guarded({("SJF+EASY", 10.0): past(wait, bsld, seed=2)}, CURRENT, "FCFS+EASY")
    assert (c.rule, c.guard_h) == ("FCFS+EASY", None) and c.why.startswith("keep")


def test_a_lead_from_one_congested_week_is_noise_not_evidence():
    """Ahead by 30% over the past as a whole, but all of it in one week: the paired block bootstrap's
    interval crosses zero, so the lead does not hold across the past's weeks: keep."""
    w = np.full(WEEKS, 1000.0)
    cur = past(np.where(np.arange(WEEKS) == 5, 12_000.0, w), np.where(np.arange(WEEKS) == 5, 120.0, 10.0), seed=1)
    one_week = past(np.where(np.arange(WEEKS) == 5, 6_000.0, w * 1.01), np.where(np.arange(WEEKS) == 5, 60.0, 10.1),
                    seed=1)
    assert one_week.figures.bsld_mean < 0.8 * cur.figures.bsld_mean
    ok, words = ch.lead(one_week, cur)
    assert not ok and "bsld" in words
    assert ch.choose_guarded({("SAF+EASY", 10.0): one_week}, cur, "FCFS+EASY").rule == "FCFS+EASY"


def test_an_idle_past_keeps():
    idle = past(0.0, 1.0)
    assert ch.choose_guarded({("SJF+EASY", 1.0): past(0.0, 1.0, seed=3)}, idle, "FCFS+EASY").rule == "FCFS+EASY"


def test_one_long_wait_does_not_decide_the_tail_many_do():
    """The tail is the mean of the k largest waits (k = sqrt of the jobs): one job waiting 30 h more
    neither excludes a setting nor does it hide that a few dozen jobs do."""
    one = past(600.0, 6.0, top=30 * 3600.0, top_jobs=1, seed=2)
    many = past(600.0, 6.0, top=30 * 3600.0, top_jobs=60, seed=2)
    assert ch.tail_holds(one, CURRENT) and not ch.tail_holds(many, CURRENT)
    c = ch.choose_guarded({("SJF+EASY", 10.0): many}, CURRENT, "FCFS+EASY")
    assert c.rule == "FCFS+EASY" and "tail" in c.why
    assert ch.tail_k(2400) == 49 and ch.tail_k(4) == 4 and ch.tail_k(50) == ch.TAIL_MIN_JOBS


def test_the_guard_is_relative_to_the_current_rules_recent_tail():
    """A guard can fire at any load: its thresholds scale with the current rule's tail (never below
    the slack of an hour)."""
    assert ch.guard_thresholds_h(10 * 3600.0) == (10.0, 20.0, 40.0)
    assert ch.guard_thresholds_h(600.0) == (1.0,)  # a nearly idle cluster: the hour's slack
    long = 20 * WEEK
    frame = pl.DataFrame({"submit": [0.0, long - 1000.0], "wait": [99_000.0, 7_200.0]})
    assert ch.recent_tail(frame, long) == 7_200.0  # recent, not the single longest wait of the whole past


def test_the_loosest_guard_unless_a_tighter_one_leads_it():
    loose, tight = past(600.0, 6.0, fired=0, seed=2), past(590.0, 5.9, fired=9, seed=2)
    c = ch.choose_guarded({("SJF+EASY", 40.0): loose, ("SJF+EASY", 10.0): tight}, CURRENT, "FCFS+EASY")
    assert c.guard_h == 40.0 and c.fired == 0  # the tighter one's edge is no material lead
    much = past(300.0, 3.0, fired=9, seed=2)
    c = ch.choose_guarded({("SJF+EASY", 40.0): loose, ("SJF+EASY", 10.0): much}, CURRENT, "FCFS+EASY")
    assert c.guard_h == 10.0 and "tighter guard leads" in c.why


def test_a_guard_that_never_fired_is_reported_as_such():
    d = rules.Decision("SJF+EASY", 40.0, guard_fired=0)
    assert "never fired" in d.describe()
    assert "never fired" not in rules.Decision("SJF+EASY", 40.0, guard_fired=5).describe()


def test_staying_with_the_rule_followed_unless_another_leads_it():
    sjf, saf = past(600.0, 6.0, seed=2), past(580.0, 5.8, seed=3)
    cands = {("SJF+EASY", 10.0): sjf, ("SAF+EASY", 10.0): saf}
    proposed = ch.choose_guarded(cands, CURRENT, "FCFS+EASY")
    assert proposed.rule == "SAF+EASY"
    stay = ch.stay_with("SJF+EASY", proposed, cands, CURRENT, "FCFS+EASY")
    assert stay.rule == "SJF+EASY" and stay.why.startswith("stays with SJF+EASY")
    cands[("SAF+EASY", 10.0)] = past(300.0, 3.0, seed=3)
    moved = ch.stay_with("SJF+EASY", ch.choose_guarded(cands, CURRENT, "FCFS+EASY"), cands, CURRENT, "FCFS+EASY")
    assert moved.rule == "SAF+EASY" and "leads SJF+EASY" in moved.why


def test_the_record_prefers_the_planner_only_on_a_material_lead_with_its_tail_in_the_margin():
    def fig(bsld: float, mean: float, p99: float, mx: float) -> wf.Figures:
        return wf.Figures(100, mean, p99 / 2, p99, mx, bsld, bsld)

    gl, cur = fig(10.0, 1_000.0, 5_000.0, 9_000.0), fig(20.0, 2_000.0, 6_000.0, 10_000.0)
    assert ch.record_prefers(fig(9.0, 900.0, 5_000.0, 14_000.0), gl, cur)
    assert not ch.record_prefers(fig(9.8, 900.0, 5_000.0, 9_000.0), gl, cur)  # 2% on bsld: no material lead
    assert not ch.record_prefers(fig(9.0, 900.0, 5_000.0, 20_000.0), gl, cur)  # tail past the margin
    assert not ch.record_prefers(wf.Figures.of(pl.DataFrame({"wait": [], "bsld": [], "run": []})), gl, cur)


def frames(replay_waits: np.ndarray, asrun_waits: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    n = replay_waits.size
    ids = [str(i) for i in range(n)]
    sub = np.arange(n, dtype=float) * 600.0

    def f(w: np.ndarray) -> pl.DataFrame:
        return pl.DataFrame({"job_id": ids, "wait": w, "bsld": 1 + w / 3600, "start": sub + w})

    return f(replay_waits), f(asrun_waits)


def test_fidelity_says_when_the_replay_does_not_reproduce_the_cluster():
    rng = np.random.default_rng(0)
    busy = rng.exponential(1_400.0, 2_000)
    idle = np.where(rng.uniform(size=2_000) < 0.03, rng.exponential(300.0, 2_000), 0.0)
    far = ch.fidelity(*frames(idle, busy))
    assert far.far and "as run" in far.words() and far.to_dict()["far"]
    close = ch.fidelity(*frames(busy * 0.5, busy))  # half the waiting (KTH-SP2's replay is about that): close enough
    assert not close.far and close.kendall_tau > 0.9
    both_idle = ch.fidelity(*frames(idle * 0.01, idle * 0.001))
    assert not both_idle.far  # two idle pictures agree, whatever their ratio
    # the same mean wait, but the short jobs wait in the replay and not as run: bounded slowdown apart
    f = ch.Fidelity(1000, 23_000.0, 31_600.0, 369.0, 35.0, 0.62, 0.43, 0.98)
    assert f.far and not ch.Fidelity(1000, 23_000.0, 31_600.0, 120.0, 35.0, 0.62, 0.43, 0.98).far


def test_a_replay_far_from_the_as_run_history_keeps_with_its_reason():
    """past_choice on a workload whose logged waits are far longer than any replay's: keep, say why."""
    from metapilot.models.evaluation.backtest import past_choice
    from metapilot.models.simulator import Capacity
    from metapilot.transforms.workload import Workload

    rng = np.random.default_rng(3)
    run = rng.choice([60.0, 600.0, 3600.0], 400)
    wl = Workload.from_arrays(submit=np.sort(rng.uniform(0, 40 * 86400, 400)), run=run, req_time=run * 2,
                              cores=rng.choice([1.0, 2.0, 4.0], 400))
    cap = Capacity.single(64)
    asrun = pl.DataFrame({"job_id": wl.job_ids.astype(str), "wait": np.full(len(wl), 50_000.0),
                          "bsld": np.full(len(wl), 20.0), "start": wl.submit + 50_000.0})
    c = past_choice(wl, cap, "FCFS+EASY", float(wl.submit.max()) + 1.0, asrun)
    assert c.guarded == "FCFS+EASY" and c.guard_h is None and not c.faithful
    assert "does not reproduce this cluster" in c.why and c.fidelity["far"]


def test_the_planner_starts_on_its_base_objective():
    from metapilot.models.controller.objectives import Menu
    from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig

    menu = Menu()
    p = LookaheadPlanner(menu, PlannerConfig(horizon_h=6.0, base=None))
    p.reset()
    assert p.last == p.base == 0  # the menu's first, not FCFS by default
    anchored = LookaheadPlanner(menu, PlannerConfig(horizon_h=6.0, base="SAF"))
    anchored.reset()
    assert anchored.last == menu.index("SAF")


def test_the_weekly_report_shows_how_far_the_replay_was_from_the_cluster():
    from metapilot.models.reporting.backtest import period_lines

    period = {"period_from": "2010-06-01T00:00:00", "period_to": "2010-06-29T00:00:00", "decision": "FCFS+EASY",
              "why": "keep: the replay does not reproduce this cluster", "fidelity_wait_mean_replay_s": 8.6,
              "fidelity_wait_mean_asrun_s": 1375.0, "fidelity_waited_replay": 0.01, "fidelity_waited_asrun": 0.2,
              "fidelity_kendall_tau": 0.97, "fidelity_far": True}
    line = period_lines({"periods": [period]})[0]
    assert "9 s against 1,375 s as run" in line and "1% against 20%" in line and "keeps the current rule" in line
    no_starts = {**period, "fidelity_wait_mean_replay_s": None}
    assert "as run" not in period_lines({"periods": [no_starts]})[0]


# --- the recheck: the promise held as the period unfolds --------------------------------------------


def _busy(n: int = 600, seed: int = 5):
    from metapilot.transforms.workload import Workload

    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, 40 * 86400, n))
    run = rng.choice([60.0, 600.0, 3600.0, 6 * 3600.0, 30 * 3600.0], n)
    cores = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0], n)
    return Workload.from_arrays(submit=submit, run=run, req_time=run * 2, cores=cores)


def test_the_recheck_tightens_a_rule_that_starves_more_than_the_current_one_and_keeps_the_promise():
    """LAF starves the narrow jobs: followed unguarded for 40 days, its tail passes the current rule's
    margin within the first weeks; the weekly recheck adds a guard at the current rule's longest wait
    so far, reading nothing after the check, and the longest wait comes down."""
    from metapilot.models.simulator import Capacity, simulate
    from metapilot.models.simulator.metrics import job_frame

    wl, cap = _busy(), Capacity.single(16)
    current = job_frame(simulate(wl, cap, "FCFS", "easy"))
    plain = wf.follow(wl, cap, [(0.0, wf.RuleDecider("LAF+EASY"))])
    recheck = ch.Recheck(current)
    held = wf.follow(wl, cap, [(0.0, wf.RuleDecider("LAF+EASY"))], recheck=recheck)
    assert recheck.tightened, "LAF's tail should pass the margin"
    period, when, guard_s = recheck.tightened[0]
    assert period == 0.0 and when >= ch.RECHECK_S and guard_s >= ch.TAIL_SLACK_S
    seen = current.filter(pl.col("submit") < when)
    assert guard_s == pytest.approx(max(float(np.minimum(seen["wait"], when - seen["submit"]).max()), ch.TAIL_SLACK_S))
    later = wl.submit >= when + 2 * 86400.0
    assert np.nanmax(held.wait[later]) < np.nanmax(plain.wait[later])
    assert np.array_equal(held.start[plain.start < when], plain.start[plain.start < when])  # nothing before changes


def test_the_recheck_leaves_alone_a_decision_within_its_margin_and_a_keep_it_cannot_advise():
    from metapilot.models.simulator import Capacity, simulate
    from metapilot.models.simulator.metrics import job_frame

    wl, cap = _busy(), Capacity.single(16)
    current = job_frame(simulate(wl, cap, "FCFS", "easy"))
    same = ch.Recheck(current)
    res = wf.follow(wl, cap, [(0.0, wf.RuleDecider("FCFS+EASY"))], recheck=same)
    assert same.tightened == [] and np.array_equal(res.start, simulate(wl, cap, "FCFS", "easy").start)
    kept = wf.RuleDecider("LAF+EASY")
    kept.rechecked = False  # fidelity before advice: the replays say nothing here
    untouched = ch.Recheck(current)
    wf.follow(wl, cap, [(0.0, kept)], recheck=untouched)
    assert untouched.tightened == [] and kept.guard_s is None
