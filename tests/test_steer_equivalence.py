"""The same order in replay and live (issue 50): snapshots of engine replays of the bundled KTH-SP2
log at random epoch boundaries, rendered as the `squeue --json` and `sinfo --json` answers Slurm 22.05
would give, read back by `steer`'s own parser, and ranked by `steer`'s own code under the same
decision; the ranking must be the engine's queue order, job for job, for a fixed rule, a rule with
the walk forward's tail guard, and the lookahead planner (whose pick from the live answers must be
the pick it makes inside the replay, with the same costs), and the learned controller (whose lookahead features and queue figures read live are the
ones it reads in the replay; the arrivals and memory it also reads come from what Slurm shows, which
holds no job that ended before the last minutes: they are not compared)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from evidence_fixtures import kth_warehouse
from metapilot.models.controller.objectives import Menu
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig
from metapilot.models.evaluation.walk_forward import WAIT_MAX, RuleDecider
from metapilot.models.simulator.rules import RULES, rule_setting
from metapilot.models.simulator import Capacity
from metapilot.models.simulator.epoch_replay import EpochReplay
from metapilot.models.simulator.objectives import CATALOGUE
from metapilot.models.simulator.policies import scores_at
from metapilot.models.steering.decision import SteerDecision
from metapilot.models.steering.live_state import live_view
from metapilot.models.steering.rank import desired_factors, targets
from metapilot.models.steering.squeue import parse_sinfo, parse_squeue
from metapilot.transforms.workload import Workload, normalise

T0 = datetime(1996, 11, 4, tzinfo=timezone.utc)
T1 = datetime(1996, 12, 2, tzinfo=timezone.utc)
CORES = 64  # KTH-SP2 has 100: fewer make queues long enough to order (jobs wider are left out)
META = {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"version": {"major": 22, "minor": 5, "micro": 8},
                                                         "release": "22.05.8"}}


@pytest.fixture(scope="module")
def kth() -> Workload:
    """Four weeks of the bundled log, in Slurm's units: whole seconds, time limits in whole minutes."""
    from metapilot.warehouse.sim_store import load_window

    con = kth_warehouse()
    try:
        w = normalise(load_window(con, "KTH-SP2", T0, T1), T0)
    finally:
        con.close()
    req = np.ceil(w.req_time / 60.0) * 60.0
    return Workload.from_arrays(submit=np.floor(w.submit), run=np.minimum(np.ceil(w.run), req), req_time=req,
                                cores=w.cores, window_start=T0)


def replay_to(wl: Workload, rule: str, hours: int) -> tuple[EpochReplay, np.ndarray]:
    rp = EpochReplay(wl, Capacity.single(CORES), epoch_s=3600, settings=[rule_setting(rule)])
    rp.reset()
    for _ in range(hours):
        rp.advance(0)
    return rp, rp.aggregates()


def render(rp: EpochReplay) -> tuple[str, str]:
    """What squeue --json and sinfo --json answer at the replay's clock (job id = job index + 1)."""
    e, base = rp.engine, T0.timestamp()
    j = e.jobs
    recs = []
    for state, idx in (("RUNNING", e.running()), ("PENDING", e.queued())):
        for i in idx:
            submit = int(base + j.submit[i])
            rec = {"job_id": int(i) + 1, "array_job_id": 0, "array_task_id": None, "array_task_string": "",
                   "partition": "batch", "job_state": state, "state_reason": "None" if state == "RUNNING" else "Priority",
                   "priority": 1, "submit_time": submit, "eligible_time": submit,
                   "start_time": int(base + e.start[i]) if state == "RUNNING" else 0,
                   "time_limit": int(j.req[i] // 60), "cpus": int(j.need[i, 0]), "node_count": 1, "qos": "normal",
                   "resv_name": "", "dependency": "", "user_name": "u"}
            recs.append(rec)
    used = int(j.need[e.running(), 0].sum())
    nodes = [{"name": "kth", "state": "mixed", "cpus": CORES, "alloc_cpus": used, "real_memory": 1, "alloc_memory": 0,
              "partitions": ["batch"]}]
    return (json.dumps({"meta": META, "errors": [], "jobs": recs}),
            json.dumps({"meta": META, "errors": [], "nodes": nodes}))


def engine_order(rp: EpochReplay, policy: int) -> list[str]:
    """The engine's queue order under a rule (queues.priority: score, then job index), as job ids."""
    e = rp.engine
    q = e.queued()
    sc = scores_at(policy, e.jobs.submit[q], e.jobs.req[q], e.jobs.need[q, 0], e.now)
    return [str(int(i) + 1) for i in q[np.lexsort((q, sc))]]


def steer_order(squeue: str, objective: str, now: float) -> list[str]:
    _, jobs = parse_squeue(squeue)
    d = desired_factors(targets(jobs), objective, now, 10, {}, origin_s=T0.timestamp())
    return d.sort("rank")["target"].to_list()


SNAPSHOT = settings(max_examples=int(__import__("os").environ.get("EQUIVALENCE_EXAMPLES", "12")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SNAPSHOT
@given(rule=st.sampled_from(RULES), hours=st.integers(24, 26 * 24),
       guard=st.sampled_from([None, 2.0, 12.0, 48.0]))
def test_a_rule_and_its_guard_rank_live_as_the_engine_orders_its_queue(kth, rule, hours, guard):
    rp, agg = replay_to(kth, "FCFS+EASY", hours)
    assume(len(rp.engine.queued()) >= 2)  # an order to compare
    squeue, _ = render(rp)
    now = T0.timestamp() + rp.engine.now
    decider = RuleDecider(rule, guard)
    policy = decider.setting(rp, agg)[0]
    live = SteerDecision("fixed", rule, rule=rule, guard_h=guard)
    objective = live.objective(float(agg[WAIT_MAX]))
    assert CATALOGUE[objective].setting[0] == policy  # the guard fires live exactly when it fires in the replay
    assert steer_order(squeue, objective, now) == engine_order(rp, policy)


@SNAPSHOT
@given(hours=st.integers(24, 26 * 24), horizon=st.sampled_from([6.0, 12.0]), guard=st.sampled_from([None, 24.0]))
def test_the_planner_picks_live_what_it_picks_in_the_replay_and_steer_ranks_by_it(kth, hours, horizon, guard):
    rp, agg = replay_to(kth, "SJF+EASY", hours)
    assume(len(rp.engine.queued()) >= 2)
    squeue, sinfo = render(rp)
    now = T0.timestamp() + rp.engine.now
    cfg = PlannerConfig(horizon_h=horizon, lam=0.0, guard_h=guard)
    menu = Menu()
    inside = LookaheadPlanner(menu, cfg, 3600)
    pick = inside.plan(rp.engine, agg, menu.settings)
    _, jobs = parse_squeue(squeue)
    nodes = parse_sinfo(sinfo)
    v = live_view(jobs, nodes, now, origin_s=T0.timestamp())
    live = LookaheadPlanner(menu, cfg, 3600)
    assert live.plan(v.engine, v.aggregates, menu.settings) == pick
    np.testing.assert_allclose(live.costs, inside.costs, rtol=1e-9, atol=1e-6)
    decision = SteerDecision("planner", "planner", planner={"horizon_h": horizon, "lam": 0.0, "guard_h": guard},
                             origin_s=T0.timestamp())
    objective = decision.planner_objective(jobs, nodes, now, float(agg[WAIT_MAX]))
    assert objective == menu.names[pick]
    assert steer_order(squeue, objective, now) == engine_order(rp, CATALOGUE[objective].setting[0])


QUEUE_FIGURES = ("used_cpu", "cap_cpu", "queue_len", "queued_cpu", "wait_mean_s", "wait_max_s", "long_tail_share",
                 "req_mean_s")


@SNAPSHOT
@given(hours=st.integers(24, 26 * 24), horizon=st.sampled_from([2.0, 6.0]))
def test_a_controller_reads_live_the_lookahead_and_queue_it_reads_in_the_replay(kth, hours, horizon):
    from metapilot.models.controller.lookahead import LookaheadProbe
    from metapilot.models.simulator.epoch_replay import A
    from metapilot.models.steering.live_state import live_aggregates, live_state
    from metapilot.transforms.state import StateConfig, lookahead_features

    rp, agg = replay_to(kth, "SJF+EASY", hours)
    assume(len(rp.engine.queued()) >= 2)
    squeue, sinfo = render(rp)
    now = T0.timestamp() + rp.engine.now
    cfg = StateConfig(lookahead_h=horizon)
    probe = LookaheadProbe(cfg)
    inside = lookahead_features(probe.costs(rp.engine, agg, probe.menu.settings), cfg.epoch_s)[0]
    _, jobs = parse_squeue(squeue)
    nodes = parse_sinfo(sinfo)
    live = live_state(jobs, nodes, now, cfg, origin_s=T0.timestamp())[0]
    np.testing.assert_allclose(live[-len(inside):], inside, rtol=1e-6, atol=1e-6)
    seen = live_aggregates(jobs, nodes, now, cfg)
    assert {k: seen[k] for k in QUEUE_FIGURES} == pytest.approx({k: float(agg[A[k]]) for k in QUEUE_FIGURES})
