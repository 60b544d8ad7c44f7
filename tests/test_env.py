"""The objective-switching env (models/simulator/epoch_replay.py) on real KTH-SP2 jobs (367 jobs, 100 cores).

The strongest check is "one definition, two paths": the env's aggregates, states and rewards at
every boundary equal what the as-run code (SQL over a jobs table, transforms.asrun_state) finds in
the *simulated* schedule written out as a log."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl
import pytest
from controller_fixtures import read_swf
from gymnasium.utils.env_checker import check_env
from metapilot.models.controller.dataset import tuples_from_aggregates
from metapilot.models.controller.env import ObjectiveSwitchingEnv, observation_bounds
from metapilot.models.simulator import Capacity, simulate
from metapilot.models.simulator.epoch_replay import (
    A,
    EpochReplay,
    StateEncoder,
    _definition_state,
    _probe_aggregates,
    capacity_totals,
    definition_reward,
    epoch_reward,
    fast_reward_ok,
)
from metapilot.transforms.reward import ControllerRewardConfig
from metapilot.transforms.state import (
    AGGREGATES,
    N_FEATURES,
    StateConfig,
    state_from_frame,
)
from metapilot.transforms.workload import Workload, normalise
from metapilot.warehouse.asrun_queries import asrun_aggregates

START = datetime(1996, 10, 15, tzinfo=timezone.utc)  # midnight before the first job (12:03): none at t = 0
CAP = Capacity.single(100)
CLUSTER = "kth-sim"
UW = StateConfig(menu=("U", "W"))  # the seed's two objectives: U = SJF+EASY, W = FCFS+EASY
U, W = 0, 1


@pytest.fixture(scope="module")
def workload() -> Workload:
    return normalise(read_swf(), START)


def run_episode(env: ObjectiveSwitchingEnv, actions) -> dict:
    """Step until terminated; `actions(k)` picks epoch k's objective."""
    obs, info = env.reset(seed=1)
    out = {"obs": [obs], "agg": [env._agg], "info": [info], "reward": [], "action": []}
    k, done = 0, False
    while not done:
        a = actions(k)
        obs, r, term, trunc, info = env.step(a)
        for key, v in (("obs", obs), ("agg", env._agg), ("info", info), ("reward", r), ("action", a)):
            out[key].append(v)
        done = term or trunc
        k += 1
    out["terminated"] = term
    return out


def schedule_frame(workload: Workload, start: np.ndarray, end: np.ndarray) -> pl.DataFrame:
    """The simulated schedule written out as canonical job rows (a 'log' of the replay)."""
    origin = int(workload.window_start.timestamp())
    ts = lambda s: (pl.Series((origin + s) * 1e6).round().cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    return pl.DataFrame({
        "cluster": CLUSTER, "job_id": workload.job_ids.astype(str), "partition": "batch",
        "submit_time": ts(workload.submit), "start_time": ts(start), "end_time": ts(end),
        "run_s": workload.run, "timelimit_s": workload.req_time,
        "req_cpus": workload.cores, "alloc_cpus": workload.cores,
    })


def test_gymnasium_check_env(workload):
    env = ObjectiveSwitchingEnv(workload, CAP)
    check_env(env, skip_render_check=True)
    assert env.action_space.n == len(StateConfig().menu) == 5
    assert ObjectiveSwitchingEnv(workload, CAP, state_config=UW).action_space.n == 2
    assert env.observation_space.shape == (N_FEATURES,) and env.observation_space.dtype == np.float32


@pytest.mark.parametrize("objective, rule, fit_first", [(W, "FCFS", False), (U, "SJF", False)])
def test_a_fixed_objective_is_its_engine(workload, objective, rule, fit_first):
    """Fixed W = FCFS + EASY; fixed U = SJF + EASY: the same schedule, job by job,
    whatever the epoch length."""
    ref = simulate(workload, CAP, rule, "easy", fit_first=fit_first)
    for epoch_s in (3600, 600):
        env = ObjectiveSwitchingEnv(workload, CAP, epoch_s=epoch_s, state_config=UW)
        ep = run_episode(env, lambda k: objective)
        assert ep["terminated"]
        eng = env.replay.engine
        np.testing.assert_array_equal(eng.start, ref.start)
        np.testing.assert_array_equal(eng.end, ref.end)
        # terminated at the first boundary after the last job ended
        last = np.nanmax(ref.end)
        assert (len(ep["action"]) - 1) * epoch_s < last <= len(ep["action"]) * epoch_s


def test_the_objectives_differ_here(workload):
    u = simulate(workload, CAP, "SJF", "easy")
    w = simulate(workload, CAP, "FCFS", "easy")
    assert not np.array_equal(u.start, w.start)


def test_boundaries_equal_the_asrun_code_on_the_simulated_schedule(workload):
    """Switching objectives (every 5 epochs, 6-hour phase shift), the env's aggregates, states and
    rewards at every boundary equal transforms.asrun_state + models.controller.dataset on the
    schedule the env produced."""
    env = ObjectiveSwitchingEnv(workload, CAP, state_config=UW)
    ep = run_episode(env, lambda k: U if (k + 6) // 5 % 2 else W)
    eng = env.replay.engine
    n = len(ep["action"])
    assert n > 100 and set(ep["action"]) == {U, W}
    frame = schedule_frame(workload, eng.start.copy(), eng.end.copy())
    cap = pl.DataFrame({"partition": ["*"], "valid_from_s": [0], "cores": [100], "gpus": [0], "mem_mib": [None]})
    asrun = asrun_aggregates(frame, CLUSTER, START, START + timedelta(hours=n), capacity=cap)
    assert asrun.height == n + 1
    mine = np.stack(ep["agg"])
    for i, name in enumerate(AGGREGATES):
        np.testing.assert_allclose(mine[:, i], asrun[name].to_numpy().astype(float), rtol=1e-12, atol=0, err_msg=name)
    # the info dict holds the same raw aggregates, and the epoch's utilisation
    info = pl.DataFrame(ep["info"][1:])
    for name in ("queue_len", "wait_max_s", "arrivals", "used_cpu"):
        np.testing.assert_array_equal(info[name].to_numpy(), mine[1:, A[name]])
    np.testing.assert_allclose(info["u_cpu"].to_numpy(), asrun["u_cpu"].to_numpy()[:n], rtol=1e-12, atol=1e-15)
    # the job-seconds queued in each epoch (the aligned reward's A): the engine's count = the SQL's
    np.testing.assert_allclose(info["wait_accrued_s"].to_numpy(), asrun["wait_accrued_s"].to_numpy()[:n], rtol=1e-12)
    assert info["wait_accrued_s"].sum() == pytest.approx(float(np.nansum(eng.start - workload.submit)))
    # states: the same definition on both sides
    np.testing.assert_allclose(np.stack(ep["obs"]), state_from_frame(asrun), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.stack(ep["obs"]), state_from_frame(pl.DataFrame(
        {name: mine[:, i] for i, name in enumerate(AGGREGATES)}).with_columns(pl.col("epoch_start").cast(pl.Int64))))
    # rewards: the as-run tuples' reward of the same epochs and actions
    tup = tuples_from_aggregates(asrun, np.array(ep["action"]), cluster=CLUSTER, partition=None, window_from=START,
                                 window_to=START + timedelta(hours=n), source="as-run", behaviour_policy="test", seed=0,
                                 state_config=UW)
    np.testing.assert_allclose(ep["reward"], tup["reward"].to_numpy(), rtol=1e-12, atol=1e-12)
    # something happened: queues, waits and long waits were seen
    assert mine[:, A["queue_len"]].max() > 5 and mine[:, A["wait_max_s"]].max() > 3600


def test_fast_observation_and_reward_are_the_definitions(workload):
    """The env's scalar paths give the definitions' numbers bit for bit (probe rows, a real
    episode, and another time zone / epoch length)."""
    for sc in (StateConfig(), StateConfig(epoch_s=900, timezone="Europe/Stockholm", long_tail_s=3600)):
        enc = StateEncoder(sc, int(START.timestamp()), sc.epoch_s)
        assert enc.fast
        probes = _probe_aggregates(np.random.default_rng(5), 300, int(START.timestamp()), sc.epoch_s)
        got = np.stack([enc(p) for p in probes])
        np.testing.assert_array_equal(got, _definition_state(probes, sc))
    env = ObjectiveSwitchingEnv(workload, CAP)
    ep = run_episode(env, lambda k: k % 2)
    np.testing.assert_array_equal(np.stack(ep["obs"]), _definition_state(np.stack(ep["agg"]), env.state_config))
    for rc in (ControllerRewardConfig(), ControllerRewardConfig(lam=0.0, mu=0.5, scale_jobs=3.0),
               ControllerRewardConfig(kind="paper", alpha=5e3, use_mem=True, empty_queue_reward=1.0)):
        assert fast_reward_ok(rc, 3600)
        rng = np.random.default_rng(3)
        start, end = _probe_aggregates(rng, 200, 0, 3600), _probe_aggregates(rng, 200, 3600, 3600)
        sums = np.c_[start[:, 4:7] * 3600 * rng.uniform(0, 1, (200, 3)), start[:, 7] * 3600 * rng.uniform(0, 1, 200),
                     start[:, 12] * rng.choice([0.0, 0.5, 3.0], 200)]
        record = start[:, 12] * rng.uniform(1, 2, 200)
        want, _ = definition_reward(start, end, sums, 3600, rc, record)
        got = [epoch_reward(a, b, x, 3600, rc, r)[0] for a, b, x, r in zip(start, end, sums, record, strict=True)]
        assert got == want.tolist()


def test_reset_replays_the_same_episode(workload):
    env = ObjectiveSwitchingEnv(workload, CAP)
    a = run_episode(env, lambda k: (k // 3) % 2)
    b = run_episode(env, lambda k: (k // 3) % 2)
    np.testing.assert_array_equal(np.stack(a["obs"]), np.stack(b["obs"]))
    assert a["reward"] == b["reward"]
    assert all(env.observation_space.contains(o) for o in a["obs"])


def test_truncation_errors_and_bounds(workload):
    env = ObjectiveSwitchingEnv(workload, CAP, max_epochs=3)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    obs, info = env.reset()
    assert info["epoch"] == 0 and info["queue_len"] == 0 and obs.dtype == np.float32
    flags = [env.step(W)[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    with pytest.raises(ValueError, match="index"):
        env.step(len(env.menu))
    low, high = observation_bounds()
    assert low.shape == high.shape == (N_FEATURES,) and (low < high).all()


def test_boundary_zero_and_arrivals_by_hand():
    """Two 4-core jobs on 4 cores, hourly epochs. j0 submitted at 0 (runs 2 h), j1 at 1800 s
    (runs 1 h). Boundary 0: nothing handled yet. Boundary 1 (3600): j0 runs, j1 waits 1800 s,
    2 arrivals in [0, 3600). Boundary 2: j0 ended at 7200, j1 starts at 7200: running, queue empty."""
    w = Workload.from_arrays(submit=[0, 1800], run=[7200, 3600], cores=[4, 4])
    env = ObjectiveSwitchingEnv(w, Capacity.single(4), state_config=UW)
    _, i0 = env.reset()
    assert (i0["queue_len"], i0["used_cpu"], i0["arrivals"]) == (0, 0.0, 0)
    _, r1, _, _, i1 = env.step(W)
    assert (i1["queue_len"], i1["used_cpu"], i1["wait_mean_s"], i1["arrivals"]) == (1, 4.0, 1800.0, 2)
    # aligned reward: j1 queued 1800 s of the epoch (A), the largest wait grew from 0 to 1800 s (G)
    lam = ControllerRewardConfig().lam
    assert i1["u_cpu"] == 1.0 and i1["wait_accrued_s"] == 1800.0
    assert r1 == pytest.approx(-(1800 + lam * 1800) / (10 * 3600))
    _, r2, term, _, i2 = env.step(U)
    assert (i2["queue_len"], i2["used_cpu"], i2["arrivals"], term) == (0, 4.0, 0, False)
    # j1 starts at 7200 after 5400 s: the record wait grows from 1800 to 5400 s
    assert i2["wait_accrued_s"] == 3600.0 and i2["wait_started_max_s"] == 5400.0
    assert r2 == pytest.approx(-(3600 + lam * 3600) / (10 * 3600))
    assert i2["objective"] == "U"
    *_, term, _, i3 = env.step(U)
    assert term and i3["used_cpu"] == 0.0 and i3["u_cpu"] == 1.0
    # the seed's reward on the same epochs: -mean wait at the end / 1e3 + utilisation; 4 for an empty queue
    paper = ObjectiveSwitchingEnv(w, Capacity.single(4), state_config=UW, reward_config=ControllerRewardConfig(kind="paper"))
    paper.reset()
    assert paper.step(W)[1] == pytest.approx(-1800 / 1e3 + 1.0) and paper.step(U)[1] == 4.0


def test_capacity_totals_follow_the_asrun_rule():
    cap = Capacity.from_rows([
        {"partition": "a", "cores": 10, "gpus": 2, "mem_mib": 100},
        {"partition": "b", "cores": 5, "gpus": 0, "mem_mib": None},
    ])
    np.testing.assert_array_equal(capacity_totals(cap), [15, 2, 100])  # sum; unknown memory counts 0
    np.testing.assert_array_equal(capacity_totals(cap, "b"), [5, 0, 0])
    star = Capacity.from_rows([{"partition": "*", "cores": 8}, {"partition": "a", "cores": 4}])
    np.testing.assert_array_equal(capacity_totals(star), [8, 0, 0])


def test_an_empty_workload_is_done_at_once():
    rp = EpochReplay(Workload.from_arrays(submit=[], run=[]), CAP)
    agg = rp.reset()
    assert rp.done and agg[A["queue_len"]] == 0 and agg[A["cap_cpu"]] == 100


def test_gpus_memory_and_two_pools_match_the_asrun_code_too():
    """A synthetic two-partition cluster with GPUs and memory: the same one-definition check."""
    rng = np.random.default_rng(11)
    n = 400
    part = rng.integers(0, 2, n)
    run = rng.integers(60, 20_000, n).astype(float)
    w = Workload.from_arrays(
        submit=np.sort(rng.integers(600, 6 * 86_400, n)).astype(float), run=run, req_time=run * rng.uniform(1, 3, n).round(),
        cores=rng.integers(1, 9, n), gpus=np.where(part == 0, rng.integers(0, 3, n), 0), mem=rng.integers(1, 20, n) * 1000.0,
        partition=part, partitions=("gpu", "cpu"), job_ids=[str(i) for i in range(n)], window_start=START)
    cap = Capacity.from_rows([{"partition": "gpu", "cores": 16, "gpus": 4, "mem_mib": 64_000},
                              {"partition": "cpu", "cores": 24, "gpus": 0, "mem_mib": 96_000}])
    env = ObjectiveSwitchingEnv(w, cap)
    ep = run_episode(env, lambda k: (k // 4) % 2)
    eng = env.replay.engine
    k = len(ep["action"])
    origin = int(START.timestamp())
    ts = lambda s: (pl.Series((origin + s) * 1e6).round().cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    frame = pl.DataFrame({
        "cluster": CLUSTER, "job_id": w.job_ids.astype(str), "partition": [w.partitions[p] for p in w.partition],
        "submit_time": ts(w.submit), "start_time": ts(eng.start), "end_time": ts(eng.end), "run_s": w.run,
        "timelimit_s": w.req_time, "req_cpus": w.cores, "alloc_cpus": w.cores, "req_gpus": w.gpus, "alloc_gpus": w.gpus,
        "req_mem_mib": w.mem, "alloc_mem_mib": w.mem,
    })
    caps = pl.DataFrame({"partition": ["gpu", "cpu"], "valid_from_s": [0, 0], "cores": [16, 24], "gpus": [4, 0],
                         "mem_mib": [64_000, 96_000]})
    asrun = asrun_aggregates(frame, CLUSTER, START, START + timedelta(hours=k), capacity=caps)
    mine = np.stack(ep["agg"])
    for i, name in enumerate(AGGREGATES):
        np.testing.assert_allclose(mine[:, i], asrun[name].to_numpy().astype(float), rtol=1e-12, atol=0, err_msg=name)
    info = pl.DataFrame(ep["info"][1:])
    for u in ("u_cpu", "u_gpu", "u_mem"):
        np.testing.assert_allclose(info[u].to_numpy(), asrun[u].to_numpy()[:k], rtol=1e-12, atol=1e-15, err_msg=u)
    assert mine[:, A["used_gpu"]].max() > 0 and mine[:, A["queued_mem"]].max() > 0
    tup = tuples_from_aggregates(asrun, np.array(ep["action"]), cluster=CLUSTER, partition=None, window_from=START,
                                 window_to=START + timedelta(hours=k), source="as-run", behaviour_policy="t", seed=0)
    np.testing.assert_allclose(ep["reward"], tup["reward"].to_numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.stack(ep["obs"]), _definition_state(mine, env.state_config))
