"""The lookahead features (SPEC §7 planner costs in the state): defined once, the same in the
replay, the as-run history and the advice, carried by the tuples into training and the artifact."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import numpy as np
import polars as pl
import pytest
from controller_fixtures import CLUSTER, load_warehouse, read_swf, warehouse  # noqa: F401  (module-scoped fixture)
from metapilot.models.controller.dataset import DatasetConfig, build_dataset, dataset_hash, observations
from metapilot.models.controller.lookahead import LOOKBACK_S, asrun_lookahead_costs
from metapilot.models.controller.objectives import Menu
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig
from metapilot.models.controller.replay import replay_objectives
from metapilot.models.controller.tuning import apply_tuning
from metapilot.models.controller.tuples import state_matrix
from metapilot.models.simulator import Capacity
from metapilot.transforms.state import (
    FEATURE_NAMES,
    StateConfig,
    lookahead_features,
    n_features,
    state_features,
)
from metapilot.warehouse.sim_store import load_replay_window

FROM = datetime(1996, 10, 15, tzinfo=timezone.utc)
TO = datetime(1996, 10, 18, tzinfo=timezone.utc)
LA = StateConfig(lookahead_h=6.0)


def test_lookahead_features_are_pure_and_documented():
    f = lookahead_features(np.array([[3600.0, 0.0, 7200.0, 0.0, 10 * 3600.0]]), 3600)
    assert f.shape == (1, 6) and f.dtype == np.float32
    assert f[0, 1] == 0 and f[0, 3] == 0 and f[0, 5] == 0  # the best objectives, and a best cost of 0
    assert f[0, 0] == pytest.approx(np.log1p(1.0) / 4) and f[0, 4] > f[0, 2] > f[0, 0]
    assert lookahead_features(np.zeros((2, 5)), 3600).sum() == 0  # nothing waits: all zero
    names = [f.name for f in state_features(LA)]
    assert names[:16] == list(FEATURE_NAMES) and names[16:] == [f"la_{n}" for n in LA.menu] + ["la_min"]
    assert n_features(LA) == 22 and n_features(StateConfig()) == 16


def test_tuning_gives_the_state_the_teachers_lookahead():
    tuning = {"planner": PlannerConfig(24.0, 30.0, 12.0, slowdown=0.5).to_dict(), "reward_lam": 50.0}
    cfg = apply_tuning(DatasetConfig(sources=("as-run", "planner")), tuning)
    assert (cfg.state.lookahead_h, cfg.state.lookahead_lam, cfg.state.lookahead_slowdown) == (24.0, 30.0, 0.5)
    rule = {"planner": PlannerConfig(0.0, 0.0, 6.0, base="SJF").to_dict(), "reward_lam": 0.0}
    assert apply_tuning(DatasetConfig(), rule).state.lookahead_h > 0  # a rule teacher: the default horizon
    assert apply_tuning(DatasetConfig(lookahead=False), tuning).state.lookahead_h == 0


@pytest.mark.parametrize("forecast_h", [0.0, 24.0])
def test_the_as_run_view_equals_the_replays_own_view(warehouse, forecast_h):  # noqa: F811
    """Replay the window under SJF, store that schedule as if it were the history, and rebuild the
    lookahead costs from the warehouse: they equal the probe's on the live engine, boundary by
    boundary (also with the arrivals forecast from a day before)."""
    from metapilot.warehouse.db import connect_memory

    la = replace(LA, lookahead_forecast_h=forecast_h)
    wl, rows = load_replay_window(warehouse, CLUSTER, FROM, TO)
    cap = Capacity.from_rows(rows)
    res = replay_objectives(wl, cap, 0, 3600, la, lookahead=True, horizon_s=72 * 3600)
    assert res.lookahead_costs.shape == (len(res.objectives) + 1, len(LA.menu))
    assert (res.lookahead_costs > 0).any()
    origin = FROM.timestamp()
    history = read_swf().join(pl.DataFrame({"job_id": wl.job_ids.astype(str),
                                            "sim_start": origin + res.start, "sim_run": wl.run}), on="job_id")
    us = lambda c: (pl.col(c) * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    history = history.with_columns(us("sim_start").alias("start_time"),
                                   (pl.col("sim_start") + pl.col("sim_run")).pipe(lambda e: (e * 1e6).cast(pl.Int64)
                                                                                  .cast(pl.Datetime("us", "UTC")))
                                   .alias("end_time")).drop("sim_start", "sim_run")
    con = connect_memory()
    load_warehouse(con, history)
    n = 72
    grid = origin + 3600.0 * np.arange(n + 1)
    got = asrun_lookahead_costs(con, CLUSTER, FROM, TO, grid, res.aggregates().head(n + 1), state=la)
    np.testing.assert_allclose(got, res.lookahead_costs[: n + 1], rtol=1e-9)
    con.close()


def test_tuples_carry_the_lookahead_into_the_dataset(warehouse):  # noqa: F811
    cfg = DatasetConfig(state=LA, sources=("as-run", "replay", "planner"), planner=PlannerConfig(6.0, 0.0, 24.0))
    splits = build_dataset(warehouse, CLUSTER, FROM, TO, TO, datetime(1996, 10, 19, tzinfo=timezone.utc), config=cfg,
                           store=True)
    for frame in (splits.train, splits.checkpoint):
        s = observations(frame)
        assert s.shape == (frame.height, 22)
        assert set(frame["s_lookahead"].list.len().to_list()) == {6}
        np.testing.assert_array_equal(s[:, 16:], state_matrix(frame)[:, 16:])
        assert (s[:, 16:] > 0).any()
    # the planner's own trajectory: its choice is a cheapest objective of the features wherever it
    # looked ahead (something queued, no guard)
    own = splits.train.filter((pl.col("source") == "planner") & (pl.col("behaviour_policy") == "planner"))
    la = state_matrix(own)[:, 16:21]
    pick = own["action"].to_numpy()
    m = (own["s_queue_len"].to_numpy() > 0) & (own["s_wait_max"].to_numpy() < np.log10(1 + 24 * 3600) / 6)
    assert m.sum() >= 5 and (la[m, pick[m]] == 0).all()
    assert (la[m].max(axis=1) > 0).any()  # and somewhere the objectives' costs differ
    # stored and loaded back: the same tuples (what the pipeline's training reads instead of rebuilding them)
    stored = warehouse.execute("SELECT count(*) FROM mdp_transitions WHERE len(s_lookahead) = 6").fetchall()[0][0]
    assert stored == splits.train.height + splits.checkpoint.height
    again = build_dataset(warehouse, CLUSTER, FROM, TO, TO, datetime(1996, 10, 19, tzinfo=timezone.utc), config=cfg,
                          store=False, reuse=True)
    assert dataset_hash(again.train) == dataset_hash(splits.train)
    assert dataset_hash(again.checkpoint) == dataset_hash(splits.checkpoint)


def test_a_lookahead_policy_replays_publishes_and_advises(warehouse, tmp_path):  # noqa: F811
    from metapilot.models.controller.advice import Advisor, state_from_json
    from metapilot.models.controller.artifact import publish
    from metapilot.models.controller.train import TrainConfig, train_policy

    cfg = DatasetConfig(state=LA, sources=("as-run", "planner"), planner=PlannerConfig(6.0, 0.0, 24.0))
    splits = build_dataset(warehouse, CLUSTER, FROM, TO, TO, datetime(1996, 10, 19, tzinfo=timezone.utc), config=cfg,
                           store=False)
    result = train_policy(splits.train, splits.checkpoint,
                          TrainConfig(n_steps=100, n_steps_per_epoch=50, fqe_steps=20, baselines=(), show_progress=False))
    art = publish(result, splits, db=tmp_path / "w.duckdb", cluster=CLUSTER, con=warehouse)
    adv = Advisor(art.policy_id, tmp_path / "w.duckdb", art.sums_sha256)
    assert adv.policy.n_features == 22 and adv.card["feature_names"][-1] == "la_min"
    a = adv.advise_at(warehouse, "1996-10-18T03:00:00")
    assert list(a.state)[16:] == [f"la_{n}" for n in LA.menu] + ["la_min"]
    row = splits.checkpoint.filter((pl.col("epoch_start") == pl.lit(splits.checkpoint_window[0]).dt.offset_by("3h"))
                                   & (pl.col("source") == "as-run"))
    got = np.array([list(a.state.values())], dtype=np.float32)
    np.testing.assert_array_equal(got[:, :16], state_matrix(row)[:, :16])
    # the moment's view holds the jobs submitted in the 30 days before it (those of earlier days that
    # still wait or run at 03:00 included), and so does the as-run tuple of the same boundary
    t = datetime(1996, 10, 18, 3, tzinfo=timezone.utc).timestamp()
    agg = pl.DataFrame({k: [v] for k, v in zip(adv.card["state"]["aggregates"], [t] + [0.0] * 15, strict=True)})
    agg = agg.with_columns(pl.lit(1.0).alias("queue_len"))
    costs = asrun_lookahead_costs(warehouse, CLUSTER, t - LOOKBACK_S, t + 1, np.array([t]), agg, state=LA)
    np.testing.assert_allclose(got[:, 16:], lookahead_features(costs, 3600), atol=1e-6)
    np.testing.assert_allclose(got[:, 16:], state_matrix(row)[:, 16:], atol=1e-6)
    assert (got[:, 16:] > 0).any()
    assert adv.decide(state_from_json({"features": a.state}, adv.policy)).action == a.action
    # the weekly report scores the observed week with the same states
    from metapilot.models.controller.advice import score_recommendations

    assert score_recommendations(warehouse, art.policy_id, "1996-W42", db=tmp_path / "w.duckdb") == 7 * 24
    rec = warehouse.execute("SELECT action FROM recommendations WHERE policy_id = ? AND epoch_start = "
                            "TIMESTAMPTZ '1996-10-18 03:00:00+00'", [art.policy_id]).fetchall()
    assert rec == [(a.action,)]
    with pytest.raises(ValueError, match="lookahead_costs"):
        state_from_json({"aggregates": {k: 0 for k in adv.card["state"]["aggregates"]}}, adv.policy)
    # the replay feeds the same vector to the policy: a policy that reads the cheapest objective off
    # the features (keeping the one in force on a tie) replays exactly as the planner with the same
    # horizon and no guard
    wl, rows = load_replay_window(warehouse, CLUSTER, FROM, TO)
    cap = Capacity.from_rows(rows)
    last = [0]  # the planner starts on its base objective: the menu's first

    def cheapest(s: np.ndarray) -> int:
        if s[3] > 0 and s[16 + last[0]] > 0:  # something waits and the objective in force is not a cheapest
            last[0] = int(np.argmin(s[16:21]))
        return last[0]

    by_features = replay_objectives(wl, cap, cheapest, 3600, LA)
    planner = LookaheadPlanner(Menu.of(LA), PlannerConfig(6.0, 0.0, None), 3600)
    planned = replay_objectives(wl, cap, planner, 3600, replace(LA, lookahead_h=0.0))
    np.testing.assert_array_equal(by_features.objectives, planned.objectives)
    assert len(set(planned.objectives.tolist())) > 1


def test_the_gym_env_observes_the_lookahead_features(warehouse):  # noqa: F811
    from metapilot.models.controller.env import ObjectiveSwitchingEnv

    wl, rows = load_replay_window(warehouse, CLUSTER, FROM, TO)
    env = ObjectiveSwitchingEnv(wl, Capacity.from_rows(rows), state_config=LA, max_epochs=48)
    obs, _ = env.reset()
    seen = [obs]
    for k in range(48):
        obs, _, term, trunc, _ = env.step(k % len(LA.menu))
        seen.append(obs)
        if term or trunc:
            break
    s = np.stack(seen)
    assert s.shape[1] == 22 and env.observation_space.shape == (22,)
    assert all(env.observation_space.contains(o) for o in seen) and (s[:, 16:] > 0).any()
    # the same numbers as the replay's own probe along the same actions
    res = replay_objectives(wl, Capacity.from_rows(rows), lambda st, it=iter(range(10_000)): next(it) % 5, 3600, LA,
                            lookahead=True)
    np.testing.assert_allclose(s[:, 16:], lookahead_features(res.lookahead_costs[: len(seen)], 3600), atol=1e-6)


def test_asrun_views_leave_out_jobs_that_ran_at_an_unknown_time():
    """A job that ran at a time the log does not give (SWF wait -1) is not in any as-run view: it
    used to wait there forever, and the views (and the lookahead's cost of them) grew with every
    such job. The as-run queue's SQL leaves it out the same way (tests/test_state_reward.py)."""
    from metapilot.models.controller.asrun import asrun_aggregates
    from metapilot.warehouse.db import connect_memory

    jobs = read_swf()
    ghosts = jobs.head(50).with_columns(
        (pl.col("job_id") + "-ghost").alias("job_id"),
        pl.lit(FROM.replace(hour=2), dtype=pl.Datetime("us", "UTC")).alias("submit_time"),
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("start_time"),
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("end_time"),
        pl.lit(None, dtype=pl.Int64).alias("wait_s"))
    got = {}
    for name, frame in (("plain", jobs), ("ghosts", pl.concat([jobs, ghosts], how="vertical_relaxed"))):
        con = connect_memory()
        load_warehouse(con, frame)
        agg = asrun_aggregates(con, CLUSTER, FROM, TO, config=LA)
        grid = agg["epoch_start"].to_numpy().astype(np.float64)
        got[name] = (agg, asrun_lookahead_costs(con, CLUSTER, FROM, TO, grid, agg, state=LA))
        con.close()
    (agg, costs), (agg_g, costs_g) = got["plain"], got["ghosts"]
    assert (agg["queue_len"] > 0).sum() > 10 and (costs > 0).any()
    np.testing.assert_array_equal(costs_g, costs)
    for c in agg.columns:
        if c != "arrivals":
            assert agg_g[c].to_list() == agg[c].to_list(), c
    assert agg_g["arrivals"].sum() == agg["arrivals"].sum() + 50
