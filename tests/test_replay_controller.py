"""The controller replay (models/controller/replay.py), the checkpoint evaluator
(models/evaluation/checkpoint.py) and `metapilot train --sources as-run,replay`."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from controller_fixtures import CLUSTER, load_warehouse, read_swf, warehouse  # noqa: F401  (module-scoped fixture)
from metapilot.models.controller.dataset import TupleRequest
from metapilot.models.controller.replay import (
    ObjectiveReplayResult,
    batch_policy,
    replay_objectives,
)
from metapilot.models.simulator import Capacity, simulate
from metapilot.models.controller.env import ObjectiveSwitchingEnv
from metapilot.transforms.state import N_FEATURES, StateConfig
from metapilot.transforms.workload import Workload, normalise

REPO = Path(__file__).resolve().parents[1]
KTH = REPO / "samples" / "logs" / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"
CAP = Capacity.single(100)
UW = StateConfig(menu=("U", "W"))  # the seed's two objectives: U = SJF+EASY, W = FCFS+EASY
U, W = 0, 1
OBJECTIVES = UW.menu
START = datetime(1996, 10, 15, tzinfo=timezone.utc)
TRAIN = ("1996-10-15T00:00:00", "1996-10-18T00:00:00")
METRIC_COLS = ["jobs", "mean_wait", "median_wait", "p95_wait", "p99_wait", "max_wait", "mean_bsld", "util_cores",
               "makespan", "first_submit", "last_end", "cannot_fit", "left_out", "clamped", "estimates_filled"]


def read_kth(path: Path = KTH) -> pl.DataFrame:
    """The whole KTH-SP2 sample as canonical rows, through MetaPilot's SWF parser."""
    from metapilot.transforms.parsers import ParseOptions, parse_jobs

    return parse_jobs(path, ParseOptions(fmt="swf"))


@pytest.fixture(scope="module")
def kth() -> Workload:
    """The whole KTH-SP2 year (28,467 jobs replayed), time zero at the first submission."""
    return normalise(read_kth())


@pytest.fixture(scope="module")
def small() -> Workload:
    return normalise(read_swf(), START)


def test_fixed_w_is_fcfs_easy_on_the_whole_year(kth):
    ref = simulate(kth, CAP, "FCFS", "easy")
    res = replay_objectives(kth, CAP, W, state_config=UW)
    assert isinstance(res, ObjectiveReplayResult)
    np.testing.assert_array_equal(res.start, ref.start)
    np.testing.assert_array_equal(res.end, ref.end)
    assert res.metrics().select(METRIC_COLS).equals(ref.metrics().select(METRIC_COLS))
    assert res.weekly().equals(ref.weekly())
    assert res.metrics()["mean_wait"][0] == pytest.approx(6892.86, abs=0.01)  # SPEC §6 reference (pyss)
    assert res.policy == "fixed-W" and res.backfill == "easy"
    assert res.counters["epochs_W"] == res.counters["epochs"] == len(res.objectives) and res.counters["switches"] == 0
    assert res.objective_schedule() == [{"from_epoch": 0, "epochs": len(res.objectives), "objective": "W"}]


def test_fixed_u_is_sjf_easy_on_the_whole_year(kth):
    ref = simulate(kth, CAP, "SJF", "easy")
    res = replay_objectives(kth, CAP, U, epoch_s=1800, state_config=UW)
    np.testing.assert_array_equal(res.start, ref.start)
    np.testing.assert_array_equal(res.end, ref.end)
    assert res.counters["epochs_U"] == res.counters["epochs"]
    # the replay ends at the first boundary after the last job
    last = np.nanmax(res.end)
    assert (res.counters["epochs"] - 1) * 1800 < last <= res.counters["epochs"] * 1800


def test_a_controller_sees_the_env_states_and_its_choices_are_recorded(small):
    seen: list[np.ndarray] = []

    def controller(state: np.ndarray) -> int:
        assert state.dtype == np.float32 and state.shape == (N_FEATURES,)
        seen.append(state.copy())
        return U if state[3] > 0.3 else W  # U when more than ~7 jobs queue

    res = replay_objectives(small, CAP, controller, state_config=UW)
    n = len(res.objectives)
    assert len(seen) == n and res.counters["epochs"] == n
    assert res.counters["epochs_U"] > 0 and res.counters["epochs_W"] > 0 and res.counters["switches"] >= 2
    assert res.policy == "objective-switching"
    sched = res.objective_schedule()
    assert sum(r["epochs"] for r in sched) == n and all(r["objective"] in OBJECTIVES for r in sched)
    # the same decisions in the env give the same states and the same schedule
    env = ObjectiveSwitchingEnv(small, CAP, state_config=UW)
    obs, _ = env.reset()
    states = [obs]
    for a in res.objectives[:-1]:
        states.append(env.step(int(a))[0])
    env.step(int(res.objectives[-1]))
    np.testing.assert_array_equal(np.stack(states), np.stack(seen))
    np.testing.assert_array_equal(env.replay.engine.start, res.start)
    # rewards per epoch: the definition over the recorded boundaries, as the env reports them
    env.reset()
    rewards = [env.step(int(a))[1] for a in res.objectives]
    np.testing.assert_allclose(res.epoch_rewards(), rewards, rtol=1e-12)
    agg = res.aggregates()
    assert agg.height == n + 1 and agg["u_cpu"].null_count() == 1


def test_a_switching_replay_differs_from_both_fixed_objectives(small):
    u, w = replay_objectives(small, CAP, U, state_config=UW), replay_objectives(small, CAP, W, state_config=UW)
    mixed = replay_objectives(small, CAP, lambda s: U if s[3] > 0.3 else W, state_config=UW)
    assert not np.array_equal(mixed.start, u.start) and not np.array_equal(mixed.start, w.start)
    assert np.isfinite(mixed.metrics()["mean_wait"][0])


def test_horizon_and_bad_objectives(small):
    base = replay_objectives(small, CAP, W, state_config=UW)
    longer = replay_objectives(small, CAP, W, horizon_s=(len(base.objectives) + 10) * 3600, state_config=UW)
    assert len(longer.objectives) == len(base.objectives) + 10
    np.testing.assert_array_equal(longer.start, base.start)
    assert (longer.epoch_rewards()[-10:] == 0.0).all()  # idle epochs cost nothing (aligned reward)
    with pytest.raises(ValueError, match="index"):
        replay_objectives(small, CAP, 2, state_config=UW)
    with pytest.raises(ValueError, match="controller chose"):
        replay_objectives(small, CAP, lambda s: 7, state_config=UW)


def test_batch_policy_adapts_a_batched_policy():
    one = batch_policy(lambda states: np.array([states.shape[0] - 1 + int(states[0, 0] > 0)]))
    assert one(np.zeros(N_FEATURES, np.float32)) == 0 and one(np.ones(N_FEATURES, np.float32)) == 1


def test_replay_evaluator_scores_a_policy(warehouse):
    from metapilot.models.evaluation.checkpoint import make_replay_evaluator

    req = TupleRequest(CLUSTER, None, datetime(1996, 10, 18, tzinfo=timezone.utc), datetime(1996, 10, 19, tzinfo=timezone.utc),
                       state=UW)
    evaluate = make_replay_evaluator(warehouse, req)
    always_w = evaluate(lambda s: np.full(len(s), W))
    always_u = evaluate(lambda s: np.full(len(s), U))
    for out in (always_w, always_u):
        # the score is the publish gate's, against the 21 baselines of the window: <= -1 (1 = best on all)
        assert np.isfinite(out["score"]) and out["score"] <= -1.0 and out["score"] == -out["gate"]["score"]
        assert out["epochs"] >= 24 and out["share_U"] + out["share_W"] == pytest.approx(1.0)
        assert 0 < out["util_cpu"] <= 1 and out["max_wait_s"] >= out["mean_wait_s"] >= 0
    assert always_u["share_U"] == 1.0 and always_w["share_W"] == 1.0
    again = evaluate(lambda s: np.full(len(s), W))
    assert {k: v for k, v in again.items() if k != "wall_s"} == {k: v for k, v in always_w.items() if k != "wall_s"}
    # the mean reward of the window's 24 epochs of the replay the fixed-W validation sees
    from metapilot.models.evaluation.checkpoint import replay_summary
    from metapilot.models.simulator.capacity import Capacity
    from metapilot.warehouse.sim_store import load_replay_window

    wl, rows = load_replay_window(warehouse, CLUSTER, req.window_from, req.window_to)
    cap = Capacity.from_rows(rows)
    res = replay_objectives(wl, cap, W, horizon_s=24 * 3600, state_config=UW)
    assert replay_summary(res, 24)["reward_mean_window"] == pytest.approx(always_w["reward_mean_window"])
    assert always_w["reward_mean_window"] == pytest.approx(float(res.epoch_rewards()[:24].mean()))
    # fixed W is FCFS+EASY, one of the 21 baselines: the gate finds it dominated by none but itself
    assert always_w["gate"]["candidate"]["mean_wait_s"] == pytest.approx(always_w["mean_wait_s"])


def test_replay_evaluator_also_judges_the_training_weeks(warehouse):
    """With the last training weeks, the evaluator scores candidates on the checkpoint window only
    (the choice), and checks a policy on the training weeks by the same gate on request."""
    from metapilot.models.evaluation.checkpoint import make_replay_evaluator

    day = lambda d: datetime(1996, 10, d, tzinfo=timezone.utc)  # noqa: E731
    req = TupleRequest(CLUSTER, None, day(18), day(19), state=UW)
    policy = lambda s: np.full(len(s), U)  # noqa: E731
    alone = make_replay_evaluator(warehouse, req)
    assert alone.check_training(policy) is None
    on_training_days = make_replay_evaluator(warehouse, TupleRequest(CLUSTER, None, day(15), day(18), state=UW))(policy)
    both = make_replay_evaluator(warehouse, req, training=(day(15), day(18)))
    assert {k: v for k, v in both(policy).items() if k != "wall_s"} == \
        {k: v for k, v in alone(policy).items() if k != "wall_s"}
    check = both.check_training(policy)
    assert check["gate"] == on_training_days["gate"]
    assert check["mean_bsld"] == pytest.approx(on_training_days["mean_bsld"])
    assert check["window"] == [day(15).isoformat(), day(18).isoformat()]


def test_the_training_check_reuses_the_tunings_fixed_replays(warehouse):
    """The tuning replayed the 21 fixed rules on the same training weeks: the check reads them from
    the tuning (same verdict as replaying them again), and only when the weeks and partition match."""
    from metapilot.models.controller.tuning import Tuning, fixed_of, fixed_outcomes
    from metapilot.models.evaluation.checkpoint import make_replay_evaluator
    from metapilot.warehouse.sim_store import load_replay_window

    day = lambda d: datetime(1996, 10, d, tzinfo=timezone.utc)  # noqa: E731
    weeks = (day(15), day(18))
    wl, rows = load_replay_window(warehouse, CLUSTER, *weeks)
    fixed = fixed_outcomes(wl, Capacity.from_rows(rows))
    tuning = {"fixed": [f.__dict__ for f in fixed], "window": [t.isoformat() for t in weeks], "partition": None}
    assert fixed_of(tuning, weeks) == fixed
    assert fixed_of(tuning, (day(15), day(19))) is None and fixed_of(tuning, weeks, "batch") is None
    assert fixed_of(None, weeks) is None and fixed_of({**tuning, "window": None}, weeks) is None
    assert set(Tuning.__dataclass_fields__) >= {"window", "partition"}  # what tune_window stores

    req = TupleRequest(CLUSTER, None, day(18), day(19), state=UW)
    policy = lambda s: np.full(len(s), U)  # noqa: E731
    fresh = make_replay_evaluator(warehouse, req, training=weeks).check_training(policy)
    reused = make_replay_evaluator(warehouse, req, training=weeks, tuning=tuning).check_training(policy)
    assert reused == fresh
    # the outcomes really come from the tuning: a tuning that says otherwise changes the verdict's reference
    doctored = {**tuning, "fixed": [{**f.__dict__, "mean_bsld": f.mean_bsld * 10} for f in fixed]}
    moved = make_replay_evaluator(warehouse, req, training=weeks, tuning=doctored).check_training(policy)
    assert moved["gate"]["best_bsld"]["mean_bsld"] == pytest.approx(10 * fresh["gate"]["best_bsld"]["mean_bsld"])


def test_cli_train_with_replay_tuples_and_replay_checkpoints(tmp_path):
    """`metapilot train --sources as-run,replay`: the dataset holds both sources, the checkpoint is
    chosen by replay score, and the card records the replay metrics."""
    from metapilot.warehouse.db import connect
    from typer.testing import CliRunner

    from metapilot.cli import app

    db = tmp_path / "w.duckdb"
    con = connect(db)
    load_warehouse(con)
    con.close()
    r = CliRunner().invoke(app, ["train", "--cluster", CLUSTER, "--train-from", TRAIN[0], "--train-to", TRAIN[1],
                                 "--sources", "as-run,replay", "--steps", "60", "--fqe-steps", "10", "--baselines", "",
                                 "--no-progress", "--db", str(db)])
    assert r.exit_code == 0, r.output
    con = connect(db, read_only=True)
    (path,) = con.execute("SELECT path FROM policies").fetchone()
    by_source = dict(con.execute("SELECT source, count(*) FROM mdp_transitions GROUP BY 1").fetchall())
    con.close()
    assert by_source["as-run"] == 72 + 18 and by_source["replay"] == 8 * 2 * (72 + 18)  # train + checkpoint windows
    card = json.loads((Path(path) / "model_card.json").read_text())
    assert np.isfinite(card["replay"]["score"]) and 0 <= card["replay"]["share_SJF"] <= 1
    assert card["gate"]["candidate"]["mean_wait_s"] == pytest.approx(card["replay"]["mean_wait_s"])
    # the candidate was judged on its (three) training days as well, by the same gate
    assert card["gate_training"] == card["replay"]["training"]["gate"]
    assert card["gate_training"]["candidate"]["mean_bsld"] == pytest.approx(card["replay"]["training"]["mean_bsld"])


def test_replay_evaluator_refuses_a_window_without_jobs(warehouse):
    """A checkpoint window that holds no jobs (a gap in the log) is an error that says so, not a
    crash on the missing figures."""
    from metapilot.models.evaluation.checkpoint import make_replay_evaluator

    req = TupleRequest(CLUSTER, None, datetime(2001, 1, 1, tzinfo=timezone.utc), datetime(2001, 1, 8, tzinfo=timezone.utc),
                       state=UW)
    with pytest.raises(LookupError, match="no jobs of cluster .* were submitted in .*choose windows that hold jobs"):
        make_replay_evaluator(warehouse, req)
