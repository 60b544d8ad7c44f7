"""The controller chain on real KTH-SP2 jobs: tuples, dataset, training, artifact, advice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from controller_fixtures import CLUSTER, load_warehouse, warehouse  # noqa: F401  (module-scoped fixture)
from metapilot.models.controller.asrun import infer_actions, kendall_tau_b
from metapilot.models.controller.dataset import (
    NS_COLS,
    S_COLS,
    DatasetConfig,
    build_dataset,
    dataset_hash,
    load_tuples,
    to_episodes,
    to_mdp_dataset,
    tuples_from_aggregates,
)
from metapilot.models.controller.objectives import Menu, menu_names
from metapilot.models.simulator.objectives import queue_order
from metapilot.transforms.reward import ControllerRewardConfig
from metapilot.transforms.state import StateConfig
from metapilot.transforms.asrun_state import to_epoch_s
from metapilot.transforms.state import state_from_frame
from metapilot.warehouse.asrun_queries import asrun_aggregates

TRAIN = ("1996-10-15T00:00:00", "1996-10-18T00:00:00")
UW = StateConfig(menu=("U", "W"))  # the seed's two objectives: U = SJF+EASY, W = FCFS+EASY
U, W = 0, 1
DEFAULT_NAMES = StateConfig().menu
REPO = Path(__file__).resolve().parents[1]


# --- objectives and action inference -----------------------------------------------------------------


def _queue(**over):
    q = dict(submit_s=np.array([-500.0, -400, -300]), req_time_s=np.array([1000.0, 200, 100]),
             cores=np.array([8.0, 2, 4]), job_seq=np.array([1, 2, 3]), now_s=0.0, origin_s=-1000.0)
    return q | over


def test_objective_orders():
    """Each objective orders a queue as the engine's own priority score does (SPEC §6)."""
    assert menu_names("default") == DEFAULT_NAMES == ("SJF", "SAF", "F1", "WFP3", "FCFS")
    assert menu_names("uw") == ("U", "W") and menu_names("sjf, wfp3") == ("SJF", "WFP3")
    assert queue_order("W", **_queue()).tolist() == [0, 1, 2] == queue_order("FCFS", **_queue()).tolist()  # oldest first
    assert queue_order("U", **_queue()).tolist() == [2, 1, 0] == queue_order("SJF", **_queue()).tolist()  # shortest first
    assert queue_order("SAF", **_queue()).tolist() == [1, 2, 0]  # areas 8000, 400, 400: the tie goes to the older
    # WFP3 at t=0: (w/r)^3 * n = (500/1000)^3*8 = 1.0, (400/200)^3*2 = 16, (300/100)^3*4 = 108: most urgent first
    assert queue_order("WFP3", **_queue()).tolist() == [2, 1, 0]
    assert queue_order("WFP3", **_queue(req_time_s=np.array([100.0, 200, 1000]))).tolist() == [0, 1, 2]
    # equal requested times: oldest first, then job id
    assert queue_order("U", **_queue(req_time_s=np.array([100.0, 100, 1000]))).tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        queue_order("X", **_queue())
    with pytest.raises(ValueError):
        menu_names("SJF")  # a menu has two objectives or more
    m = Menu.of("default")
    assert m.names[m.tail_first] == "WFP3" and m.names[m.user_first] == "FCFS"


def test_kendall_tau_b_matches_scipy():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        x = rng.integers(0, 5, n).astype(float)
        y = rng.permutation(n).astype(float)
        expected = kendalltau(x, y, variant="b").statistic
        got = kendall_tau_b(x, y)
        assert (np.isnan(expected) and np.isnan(got)) or got == pytest.approx(expected)


def test_infer_actions_by_hand():
    base = _queue()

    def epoch(t, starts):
        return pl.DataFrame({
            "epoch_start": [t] * 3, "job_seq": base["job_seq"], "submit_s": base["submit_s"] + t,
            "start_s": [None if s is None else t + s for s in starts],
            "started_in_epoch": [s is not None for s in starts], "req_time_s": base["req_time_s"],
            "cores": base["cores"], "gpus": [0.0] * 3, "mem": [0.0] * 3,
        }, schema_overrides={"start_s": pl.Float64})

    # epoch 0: the shortest job, then the next shortest, the longest never -> U order
    # epoch 3600: oldest first -> W; epoch 7200: nothing started from the queue -> holds W
    queues = pl.concat([epoch(0, [None, 20, 10]), epoch(3600, [100, 200, None])])
    acts = infer_actions(queues, np.array([0, 3600, 7200]), 3600, menu=Menu.of(UW))
    assert acts["action"].to_list() == [U, W, W]
    assert acts["inferred"].to_list() == [True, True, False]
    assert acts["tau_U"][0] == pytest.approx(1.0) and acts["tau_W"][0] == pytest.approx(-1.0)
    assert acts["n_started"].to_list() == [2, 2, 0]


# --- tuples ------------------------------------------------------------------------------------------


def test_asrun_tuples_reconcile_with_epochs(warehouse):
    from metapilot.models.controller.asrun import asrun_tuples

    tup = asrun_tuples(warehouse, CLUSTER, *TRAIN, state_config=UW)
    agg = asrun_aggregates(warehouse, CLUSTER, *TRAIN)
    n = 72  # 3 days of hourly epochs
    assert tup.height == n == agg.height - 1
    assert tup["source"].unique().to_list() == ["as-run"] and tup["seed"].null_count() == n
    t_us = tup["epoch_start"].dt.epoch("s").to_numpy()
    assert np.array_equal(t_us, to_epoch_s(TRAIN[0]) + 3600 * np.arange(n))
    s, ns = tup.select(S_COLS).to_numpy(), tup.select(NS_COLS).to_numpy()
    np.testing.assert_array_equal(ns[:-1], s[1:])  # next state = the following epoch's state
    np.testing.assert_array_equal(s, state_from_frame(agg)[:-1])
    np.testing.assert_array_equal(ns[-1], state_from_frame(agg)[-1])
    # aligned reward by hand: job-seconds queued in the epoch, growth of the record of the largest wait
    nxt, cur = agg.tail(n), agg.head(n)
    seen = np.maximum(nxt["wait_max_s"].to_numpy(), cur["wait_started_max_s"].to_numpy())  # largest wait seen in the epoch
    record = np.maximum.accumulate(np.r_[cur["wait_max_s"][0], seen])[:n]  # the largest seen before it
    lam = ControllerRewardConfig().lam
    hand = -(cur["wait_accrued_s"].to_numpy() + lam * np.maximum(seen - record, 0)) / (10 * 3600)
    np.testing.assert_allclose(tup["reward"].to_numpy(), hand)
    # the accrued wait of a window is the waiting of its jobs: queued at some epoch boundary or not
    assert (cur["wait_accrued_s"].to_numpy() >= 0).all() and cur["wait_accrued_s"].sum() > 0
    # the seed's reward: the queue at the epoch's end, the epoch's utilisation (100 cores, no GPU, no memory)
    paper = asrun_tuples(warehouse, CLUSTER, *TRAIN, state_config=UW, reward_config=ControllerRewardConfig(kind="paper"))
    hand = np.where(nxt["queue_len"].to_numpy() == 0, 4.0,
                    -nxt["wait_mean_s"].to_numpy() / 1e3 + cur["used_cpu_s"].to_numpy() / (100 * 3600))
    np.testing.assert_allclose(paper["reward"].to_numpy(), hand)
    assert set(tup["action"].unique().to_list()) == {U, W}  # the real history shows both behaviours
    assert not tup["terminal"].any()


def test_tuples_from_aggregates_checks_lengths(warehouse):
    agg = asrun_aggregates(warehouse, CLUSTER, *TRAIN)
    with pytest.raises(ValueError, match="n \\+ 1 boundaries"):
        tuples_from_aggregates(agg, np.zeros(agg.height, dtype=int), cluster=CLUSTER, partition=None,
                               window_from=TRAIN[0], window_to=TRAIN[1], source="replay", behaviour_policy="random", seed=1)
    with pytest.raises(ValueError, match="indices"):
        tuples_from_aggregates(agg, np.full(agg.height - 1, 5), cluster=CLUSTER, partition=None,
                               window_from=TRAIN[0], window_to=TRAIN[1], source="replay", behaviour_policy="random", seed=1)


def test_dataset_store_split_and_mix(warehouse):
    from metapilot.models.controller import dataset as ds

    # a fake second source, as the simulator's rollouts will register one
    def replay(con, req):
        agg = asrun_aggregates(con, req.cluster, req.window_from, req.window_to, config=req.state)
        acts = np.random.default_rng(req.seed).integers(0, 2, agg.height - 1)
        return tuples_from_aggregates(agg, acts, cluster=req.cluster, partition=req.partition, window_from=req.window_from,
                                      window_to=req.window_to, source="replay", behaviour_policy="random", seed=req.seed,
                                      state_config=req.state, reward_config=req.reward)

    ds.register_source("test-replay", replay)
    try:
        cfg = DatasetConfig(sources=("as-run", "test-replay"))
        older = build_dataset(warehouse, CLUSTER, "1996-10-15T00:00:00", "1996-10-16T00:00:00",
                              "1996-10-16T00:00:00", "1996-10-16T06:00:00", config=cfg)
        assert older.train.height == 2 * 24 and older.older_mixed == 0
        again = build_dataset(warehouse, CLUSTER, "1996-10-15T00:00:00", "1996-10-16T00:00:00",
                              "1996-10-16T00:00:00", "1996-10-16T06:00:00", config=cfg)
        stored = load_tuples(warehouse, CLUSTER, "1996-10-15T00:00:00", "1996-10-16T06:00:00", spec=older.spec)
        assert stored.height == 2 * 24 + 2 * 6  # stored once: rebuilding replaces, never duplicates
        assert dataset_hash(again.train) == dataset_hash(older.train)
        assert dataset_hash(stored.filter(pl.col("epoch_start") < pl.lit(older.train_window[1]))) == dataset_hash(older.train)

        sp = build_dataset(warehouse, CLUSTER, "1996-10-16T00:00:00", "1996-10-18T00:00:00", config=cfg)
        new = sp.train.filter(pl.col("epoch_start") >= pl.lit(sp.train_window[0]))
        assert new.height == 2 * 48
        assert sp.older_mixed == round(0.1 / 0.9 * new.height) == sp.train.height - new.height
        assert sp.train.filter(pl.col("epoch_start") < pl.lit(sp.train_window[0]))["epoch_start"].max() < sp.train_window[0]
        # validation: after training, never overlapping, cut at the last submitted job
        assert sp.checkpoint_window[0] == sp.train_window[1]
        assert sp.checkpoint["epoch_start"].min() >= sp.train_window[1]
        assert sp.checkpoint.height == 2 * ((to_epoch_s(sp.checkpoint_window[1]) - to_epoch_s(sp.checkpoint_window[0])) // 3600)
        with pytest.raises(ValueError, match="by time"):
            build_dataset(warehouse, CLUSTER, *TRAIN, "1996-10-17T00:00:00", "1996-10-18T06:00:00", config=cfg)
    finally:
        ds.SOURCES.pop("test-replay", None)
        warehouse.execute("DELETE FROM mdp_transitions")


def test_episodes_and_mdp_dataset(warehouse):
    from metapilot.models.controller.asrun import asrun_tuples

    tup = asrun_tuples(warehouse, CLUSTER, *TRAIN)
    split = pl.concat([tup.head(30), tup.tail(20)])  # a gap: two episodes
    ep = to_episodes(split)
    assert ep.n_transitions == 50 and ep.n_episodes == 2 and len(ep.observations) == 52
    mdp = to_mdp_dataset(split, len(DEFAULT_NAMES), fast_sampling=False)
    assert mdp.transition_count == 50
    # every d3rlpy transition is one of our tuples
    keys = {tuple(np.r_[r[: len(S_COLS)], r[-len(NS_COLS):]].round(6)) for r in split.select(S_COLS + NS_COLS).to_numpy()}
    for e in mdp.episodes:
        for i in range(e.transition_count):
            tr = mdp.transition_picker(e, i)
            assert tuple(np.r_[tr.observation, tr.next_observation].round(6)) in keys
    fast = to_mdp_dataset(split, len(DEFAULT_NAMES))
    b = fast.sample_transition_batch(64)
    def key(s, a, r, ns):
        return tuple(np.r_[s, [a, r], ns].astype(np.float32).round(4))

    rows = {key(*x) for x in zip(split.select(S_COLS).to_numpy(), split["action"], split["reward"],
                                 split.select(NS_COLS).to_numpy())}
    for x in zip(b.observations, b.actions[:, 0], b.rewards[:, 0], b.next_observations):
        assert key(*x) in rows


# --- training, artifact, advice --------------------------------------------------------------------


FAST = dict(n_steps=300, n_steps_per_epoch=100, fqe_steps=100, show_progress=False, max_candidates=3)


@pytest.fixture(scope="module")
def trained(warehouse, tmp_path_factory):
    from metapilot.models.controller.artifact import publish
    from metapilot.models.controller.train import TrainConfig, train_policy

    splits = build_dataset(warehouse, CLUSTER, *TRAIN)
    result = train_policy(splits.train, splits.checkpoint, TrainConfig(**FAST, baselines=("bc", "dqn", "bcq")))
    db = tmp_path_factory.mktemp("wh") / "w.duckdb"
    art = publish(result, splits, db=db, cluster=CLUSTER, con=warehouse)
    return splits, result, art, db


def test_training_reports_ope_and_baselines(trained):
    splits, result, art, _ = trained
    assert result.algorithm == "cql" and set(result.baselines) == {"bc", "dqn", "bcq"}
    assert len(result.candidates) == 3 and result.chosen in result.candidates
    assert result.chosen.fqe_value == max(c.fqe_value for c in result.candidates)
    for sc in [result.chosen, *result.baselines.values()]:
        assert np.isfinite(sc.fqe_value) and sum(sc.action_shares.values()) == pytest.approx(1.0)
        assert set(sc.action_shares) == set(DEFAULT_NAMES)
    assert result.checkpoint_source == "checkpoint window" and result.n_checkpoint == splits.checkpoint.height


def test_artifact_round_trip(trained, warehouse):
    from metapilot.ground.files import SUMS
    from metapilot.models.controller.artifact import load_d3rlpy, load_policy
    from metapilot.models.controller.dataset import observations
    from metapilot.models.controller.train import q_values

    splits, result, art, _ = trained
    files = sorted(p.name for p in art.folder.iterdir())
    assert files == sorted(["policy.pt", "policy.npz", "model.pt", "d3rlpy_config.json", "model_card.json", SUMS])
    obs = observations(splits.checkpoint)
    expected = q_values(result.algo, obs, result.q_scale)  # d3rlpy predict_value, in reward units
    pol = load_policy(art.folder, art.sums_sha256)
    scripted = load_policy(art.folder, art.sums_sha256, torchscript=True)
    assert pol.arrays is not None and pol.module is None and scripted.arrays is None
    for p in (pol, scripted):
        np.testing.assert_allclose(p.q_values(obs), expected, rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(p.act(obs), result.algo.predict(obs))
    np.testing.assert_allclose(pol.q_values(obs), scripted.q_values(obs), rtol=1e-5, atol=1e-5)
    algo = load_d3rlpy(art.folder)
    np.testing.assert_allclose(q_values(algo, obs, result.q_scale), expected, rtol=1e-6)
    card = json.loads((art.folder / "model_card.json").read_text())
    for key in ("training_window", "dataset", "state", "actions", "reward", "hyper_parameters", "ope", "code_version"):
        assert card[key] is not None
    assert [f["name"] for f in card["state"]["features"]] == card["feature_names"]
    assert card["actions"]["0"]["name"] == "SJF" and card["reward"]["constants"]["kind"] == "aligned"
    assert card["state"]["config"]["menu"] == list(DEFAULT_NAMES) and len(card["actions"]) == len(DEFAULT_NAMES)
    assert card["dataset"]["sha256"] == dataset_hash(splits.train)
    row = warehouse.execute("SELECT policy_id, sums_sha256, algorithm, train_from FROM policies").fetchall()
    assert row == [(art.policy_id, art.sums_sha256, "cql", splits.train_window[0])]


def test_model_weights_load_without_pickle(trained):
    import torch

    _, _, art, _ = trained
    states = torch.load(art.folder / "model.pt", weights_only=True)  # refuses anything but tensors & containers
    assert set(states) >= {"q_funcs", "targ_q_funcs"}


def test_tampered_artifact_is_refused(trained, tmp_path):
    import shutil

    from metapilot.models.controller.artifact import (
        ArtifactIntegrityError,
        load_policy,
        verify,
    )

    _, _, art, _ = trained
    copy = tmp_path / art.policy_id
    shutil.copytree(art.folder, copy)
    verify(copy)
    data = bytearray((copy / "policy.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / "policy.pt").write_bytes(bytes(data))
    with pytest.raises(ArtifactIntegrityError) as e:
        load_policy(copy)
    msg = str(e.value)
    assert "policy.pt" in msg and "expected" in msg and "actual" in msg and "retrain" in msg
    # a forger who also rewrites SHA256SUMS is caught by the registry's hash of it
    shutil.rmtree(copy)
    shutil.copytree(art.folder, copy)
    card = json.loads((copy / "model_card.json").read_text())
    card["ope"]["chosen"]["fqe_value"] = 1e9
    (copy / "model_card.json").write_text(json.dumps(card))
    from metapilot.ground.files import write_sums
    from metapilot.models.controller.artifact import FILES, NUMPY_FILE

    write_sums(copy, FILES + (NUMPY_FILE,))
    verify(copy)  # self-consistent...
    with pytest.raises(ArtifactIntegrityError, match="registry"):
        load_policy(copy, expected_sums_sha256=art.sums_sha256)
    # the numpy arrays are checked like the rest, and a policy.npz slipped into a folder is refused
    shutil.rmtree(copy)
    shutil.copytree(art.folder, copy)
    np.savez(copy / NUMPY_FILE, mean=np.zeros(3, np.float32))
    with pytest.raises(ArtifactIntegrityError, match="policy.npz"):
        load_policy(copy)
    (copy / NUMPY_FILE).unlink()
    write_sums(copy, FILES)
    with pytest.raises(ArtifactIntegrityError, match="registry"):  # removing it changes the registered sums
        load_policy(copy, expected_sums_sha256=art.sums_sha256)
    old = load_policy(copy)  # a folder from before policy.npz: the TorchScript serves
    assert old.arrays is None and old.act(np.zeros((1, old.n_features), np.float32)).shape == (1,)


def test_same_seed_same_policy(warehouse):
    from metapilot.models.controller.artifact import weights_digest
    from metapilot.models.controller.train import (
        TrainConfig,
        module_states,
        train_policy,
    )

    splits = build_dataset(warehouse, CLUSTER, *TRAIN, store=False)
    cfg = TrainConfig(**(FAST | {"n_steps": 200, "max_candidates": 2}), baselines=())
    a = train_policy(splits.train, splits.checkpoint, cfg)
    b = train_policy(splits.train, splits.checkpoint, cfg)
    assert weights_digest(module_states(a.algo)) == weights_digest(module_states(b.algo))
    assert a.chosen.fqe_value == b.chosen.fqe_value
    obs = splits.checkpoint.select(S_COLS).to_numpy().astype(np.float32)
    np.testing.assert_array_equal(a.algo.predict(obs), b.algo.predict(obs))
    c = train_policy(splits.train, splits.checkpoint, TrainConfig(**(FAST | {"n_steps": 200, "max_candidates": 2}), baselines=(), seed=1))
    assert weights_digest(module_states(c.algo)) != weights_digest(module_states(a.algo))


def test_advise_for_a_time_and_a_state(trained, warehouse):
    from metapilot.models.controller.advice import Advisor, state_from_json

    splits, result, art, db = trained
    adv = Advisor(art.policy_id, db, art.sums_sha256)
    at = "1996-10-18T03:00:00"
    a = adv.advise_at(warehouse, at)
    row = splits.checkpoint.filter(pl.col("epoch_start") == pl.lit(splits.checkpoint_window[0]).dt.offset_by("3h"))
    state = row.select(S_COLS).to_numpy().astype(np.float32)
    np.testing.assert_array_equal(np.array([list(a.state.values())], dtype=np.float32), state)
    q = adv.policy.q_values(state)[0]
    assert a.q_values == pytest.approx(dict(zip(DEFAULT_NAMES, q, strict=True)))
    assert a.objective == DEFAULT_NAMES[int(np.argmax(q))]
    assert a.latency_ms["decision"] < 50
    b = adv.decide(state_from_json({"features": a.state}, adv.policy))
    assert b.objective == a.objective
    c = adv.decide(state_from_json(list(a.state.values()), adv.policy))
    assert c.q_values == b.q_values


def test_cli_advise_json_without_d3rlpy_or_prefect(trained, tmp_path):
    """`metapilot advise` in a fresh process: correct answer, and neither d3rlpy nor Prefect loaded."""
    from controller_fixtures import load_warehouse as load
    from metapilot.models.controller.artifact import register
    from metapilot.warehouse.db import connect

    splits, result, art, db = trained
    con = connect(db)
    load(con)
    card = json.loads((art.folder / "model_card.json").read_text())
    register(con, card, art.folder, art.sums_sha256, result)
    con.close()
    code = (
        "import sys, json\n"
        "from typer.testing import CliRunner\n"
        "from metapilot.cli import app\n"
        f"r = CliRunner().invoke(app, ['advise', '--policy', {art.policy_id!r}, '--at', '1996-10-18T03:00:00', "
        f"'--db', {str(db)!r}, '--format', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "out = json.loads(r.stdout)\n"  # the JSON is stdout; warnings go to stderr
        "out['heavy'] = sorted(m for m in ('d3rlpy', 'prefect') if m in sys.modules)\n"
        "print(json.dumps(out))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["heavy"] == [] and out["objective"] in DEFAULT_NAMES and "note" not in out
    assert out["published"] is False and "for comparison only" in out["warning"]  # no publish decision yet
    assert set(out["q_values"]) == set(DEFAULT_NAMES)


def test_cli_dataset_writes_parquet(tmp_path):
    from metapilot.warehouse.db import connect
    from typer.testing import CliRunner

    from metapilot.cli import app

    db = tmp_path / "w.duckdb"
    con = connect(db)
    load_warehouse(con)
    con.close()
    r = CliRunner().invoke(app, ["dataset", "--cluster", CLUSTER, "--train-from", TRAIN[0], "--train-to", TRAIN[1],
                                 "--sources", "as-run", "--db", str(db), "--out", str(tmp_path / "ds")])
    assert r.exit_code == 0, r.output
    train = pl.read_parquet(tmp_path / "ds" / "train.parquet")
    assert train.height == 72 and set(train["split"].unique()) == {"train"}
    summary = json.loads((tmp_path / "ds" / "summary.json").read_text())
    assert summary["train"]["tuples"] == 72 and summary["dataset_sha256"] == dataset_hash(train.drop("split"))


def test_cli_train_publishes_and_registers(tmp_path):
    from metapilot.models.controller.artifact import load_policy
    from metapilot.warehouse.db import connect
    from typer.testing import CliRunner

    from metapilot.cli import app

    db = tmp_path / "w.duckdb"
    con = connect(db)
    load_warehouse(con)
    con.close()
    r = CliRunner().invoke(app, ["train", "--cluster", CLUSTER, "--train-from", TRAIN[0], "--train-to", TRAIN[1],
                                 "--steps", "100", "--fqe-steps", "20", "--baselines", "", "--no-progress",
                                 "--sources", "as-run", "--db", str(db)])
    assert r.exit_code == 0, r.output
    con = connect(db, read_only=True)
    (pid, path, sums), = con.execute("SELECT policy_id, path, sums_sha256 FROM policies").fetchall()
    con.close()
    assert pid in r.output
    assert "off-policy condition of the publish gate: " in r.output and "against the logged behaviour's" in r.output
    assert load_policy(path, sums).policy_id == pid
    r = CliRunner().invoke(app, ["dataset", "--cluster", CLUSTER, "--train-from", TRAIN[0], "--train-to", TRAIN[1],
                                 "--sources", "as-run,replay", "--db", str(db)])
    assert r.exit_code == 0, r.output  # the simulator's rollouts are a registered source
    assert "replay" in r.output
