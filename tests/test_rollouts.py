"""Replay rollouts (models/controller/rollouts.py): the 'replay' tuple source of the MDP dataset."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import polars as pl
import pytest
from controller_fixtures import CLUSTER, warehouse  # noqa: F401  (module-scoped fixture)
from metapilot.models.controller.dataset import (
    NS_COLS,
    S_COLS,
    SOURCES,
    DatasetConfig,
    TupleRequest,
    build_dataset,
    build_tuples,
    to_episodes,
)
from metapilot.models.controller.replay import replay_objectives
from metapilot.models.simulator.epoch_replay import (
    EpochReplay,
    aggregates_frame,
)
from metapilot.models.simulator.capacity import Capacity
from metapilot.warehouse.sim_store import load_replay_window
from metapilot.models.controller.rollouts import (
    RolloutConfig,
    behaviours,
    replay_source,
    rollout,
)
from metapilot.transforms.reward import reward_from_frame
from metapilot.transforms.state import StateConfig, state_from_frame

UTC = timezone.utc
REQ = TupleRequest(CLUSTER, None, datetime(1996, 10, 15, tzinfo=UTC), datetime(1996, 10, 18, tzinfo=UTC), seed=3)
N = 72  # hourly epochs in three days
OBJECTIVES = StateConfig().menu  # the default menu: SJF, SAF, F1, WFP3, FCFS
W = OBJECTIVES.index("FCFS")


@pytest.fixture(scope="module")
def tuples(warehouse) -> pl.DataFrame:
    return replay_source(warehouse, REQ)


def test_the_source_is_registered():
    assert SOURCES["replay"] is replay_source


def test_one_tuple_per_epoch_per_behaviour_and_seed(tuples):
    names = [n for n, _ in behaviours()]
    assert names == ["random", "hold-6", "hold-24", *(f"eps0.15-{o}" for o in OBJECTIVES)]
    assert tuples.height == len(names) * 2 * N
    assert set(tuples["source"]) == {"replay"} and set(tuples["seed"]) == {3, 4}
    grid = np.datetime64("1996-10-15T00:00:00") + np.arange(N) * np.timedelta64(3600, "s")
    for (name, seed), traj in tuples.group_by(["behaviour_policy", "seed"]):
        traj = traj.sort("epoch_start")
        assert traj.height == N, (name, seed)
        np.testing.assert_array_equal(traj["epoch_start"].dt.replace_time_zone(None).to_numpy().astype("datetime64[s]"), grid)
        s, ns = traj.select(S_COLS).to_numpy(), traj.select(NS_COLS).to_numpy()
        np.testing.assert_array_equal(ns[:-1], s[1:])  # next state = the following epoch's state
        assert not traj["terminal"].any()
        # every trajectory starts from the empty cluster at the window start
        np.testing.assert_array_equal(s[0], tuples.filter(pl.col("behaviour_policy") == "random").sort(
            "seed", "epoch_start").select(S_COLS).to_numpy()[0])


def test_behaviours_mix_the_objectives(tuples):
    acts = {(n, s): t.sort("epoch_start")["action"].to_numpy() for (n, s), t in tuples.group_by(["behaviour_policy", "seed"])}
    for seed in (3, 4):
        assert set(acts[("random", seed)]) == set(range(len(OBJECTIVES)))
        for k in (6, 24):
            a = acts[(f"hold-{k}", seed)]
            switches = np.flatnonzero(np.diff(a)) + 1
            assert len(switches) >= N // k - 1 and (np.diff(switches) == k).all()  # a switch every k epochs
        for eps in (0.15,):
            for o, name in enumerate(OBJECTIVES):
                a = acts[(f"eps{eps:g}-{name}", seed)]
                assert 0.5 < (a == o).mean() < 1.0 or (a == o).all()
    assert not np.array_equal(acts[("random", 3)], acts[("random", 4)])  # seeds differ


def test_tuples_reconcile_with_the_replay(warehouse, tuples):
    """A trajectory's tuples are the replay of its actions: states from the boundaries'
    aggregates, rewards from the queue at each epoch's end and the epoch's utilisation."""
    traj = tuples.filter((pl.col("behaviour_policy") == "hold-6") & (pl.col("seed") == 3)).sort("epoch_start")
    actions = traj["action"].to_numpy()
    wl, cap_rows = load_replay_window(warehouse, CLUSTER, REQ.window_from, REQ.window_to)
    rows, used, _ = rollout(EpochReplay(wl, Capacity.from_rows(cap_rows)), actions)
    assert used.shape == (N, 5)  # resource-seconds of cores, GPUs, memory; job-seconds queued; largest started wait
    agg = aggregates_frame(rows, used, 3600)
    np.testing.assert_array_equal(traj.select(S_COLS).to_numpy(), state_from_frame(agg)[:-1])
    np.testing.assert_array_equal(traj["reward"].to_numpy(), reward_from_frame(agg))
    # the same boundaries as the controller replay with the same decisions
    res = replay_objectives(wl, Capacity.from_rows(cap_rows), lambda s, it=iter(actions): int(next(it, W)), horizon_s=N * 3600)
    np.testing.assert_array_equal(res.boundary_aggregates[: N + 1], rows)
    assert agg["u_cpu"][:N].max() > 0.5 and agg["queue_len"].max() > 3


def test_rollouts_are_reproducible_and_configurable(warehouse, tuples):
    again = replay_source(warehouse, REQ)
    assert again.equals(tuples)
    small = replay_source(warehouse, REQ, RolloutConfig(seeds=1, random=False, hold_epochs=(12,), epsilons=()))
    assert set(small["behaviour_policy"]) == {"hold-12"} and small.height == N


def test_dataset_with_both_sources_chains_into_episodes(warehouse):
    cfg = DatasetConfig(sources=("as-run", "replay"))
    splits = build_dataset(warehouse, CLUSTER, REQ.window_from, REQ.window_to, REQ.window_to,
                           datetime(1996, 10, 19, tzinfo=UTC), config=cfg, store=False)
    by = dict(splits.train.group_by("source").len().iter_rows())
    assert by == {"as-run": N, "replay": 16 * N}
    ep = to_episodes(splits.train)
    assert ep.n_episodes == 1 + 16  # one per trajectory: each is unbroken
    assert splits.checkpoint.filter(pl.col("source") == "replay").height == 16 * 24
    # a source that leaked outside the window would be refused by build_tuples
    assert build_tuples(warehouse, REQ, ("replay",))["epoch_start"].max() < REQ.window_to


def test_a_partition_window_and_the_env_from_the_warehouse(warehouse):
    """A partition without its own capacity row replays on the whole cluster's ('*'), as
    validation does; the env can be built straight from a warehouse window."""
    from dataclasses import replace

    from metapilot.models.controller.env import ObjectiveSwitchingEnv

    part = replay_source(warehouse, replace(REQ, partition="batch"), RolloutConfig(seeds=1, random=True, hold_epochs=(),
                                                                                    epsilons=()))
    assert set(part["partition"]) == {"batch"} and part.height == N
    wl, cap_rows = load_replay_window(warehouse, CLUSTER, REQ.window_from, REQ.window_to, "batch")
    env = ObjectiveSwitchingEnv(wl, Capacity.from_rows(cap_rows), partition="batch")
    obs, info = env.reset()
    assert info["cap_cpu"] == 100 and env.step(W)[4]["epoch"] == 1
    with pytest.raises(ValueError, match="capacity"):
        replay_source(warehouse, replace(REQ, cluster="nope"))
