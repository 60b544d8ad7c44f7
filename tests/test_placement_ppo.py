"""The PPO placement agent (SPEC §11, issue 15): its observations, masking, deterministic training,
artifact, CLI and the weekly report's placement section. Tiny settings: the real training is in
bench/bench_placement.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from placement_fixtures import openb_warehouse
from metapilot.models.placement import kernels as K
from metapilot.models.placement.engine import build_cluster, build_workload, typical_pods
from metapilot.models.placement.ppo import NumpyScorer, PPOConfig, build_scorer, numpy_state
from metapilot.models.placement.rollout import PlacementEnv, PlacementRewardConfig, sub_cluster, unique_rows
from metapilot.models.placement.train import train
from metapilot.transforms.openb import POD_HEADER, parse_node_list, parse_pod_list, placement_pods

DATA = Path(__file__).parent / "data" / "openb"
NODES = DATA / "openb_node_list_gpu_node.csv"
PODS = DATA / "openb_pod_list_gpuspec33_head.csv"
TINY = {"total_steps": 240, "rollout_steps": 120, "n_rollouts": 2, "epochs": 2, "minibatch": 64, "random_steps": 40,
        "eps_decay_steps": 400, "episode_nodes": 10, "time_pods": 30, "time_share": 0.5, "hidden": 16}


def _lines(text: str) -> pl.DataFrame:
    rows = text.rstrip("\n").split("\n")
    return pl.DataFrame({"line_no": list(range(1, len(rows) + 1)), "line": rows})


@pytest.fixture(scope="module")
def small():
    """40 nodes of the openb node list (every GPU model the head of gpuspec33 asks for) and those pods."""
    nodes, _ = parse_node_list(_lines(NODES.read_text()))
    nodes = nodes.sort("node").gather_every(30)
    res, extras = parse_pod_list(_lines(PODS.read_text()), POD_HEADER, "t")
    c = build_cluster(nodes)
    w = build_workload(placement_pods(res.jobs, extras), c)
    return c, w, typical_pods(w)


def _drive(env: PlacementEnv, choose) -> tuple[dict, int]:
    obs, _ = env.reset()
    n = 0
    while obs is not None:
        mask = env.rp.mask.copy()
        assert obs.counts.sum() == mask.sum() and mask[obs.nodes].all()
        node = int(obs.nodes[choose(obs)])
        assert mask[node]
        obs, _ = env.act(node)
        n += 1
    return env.result("t"), n


def test_masking_only_feasible_nodes_are_offered_and_every_pod_is_accounted(small):
    c, w, typ = small
    net = NumpyScorer(numpy_state(build_scorer(PPOConfig(prior={}))))
    for mode in ("time", "inflate"):
        env = PlacementEnv(c, w, mode, 3, typ)
        res, n = _drive(env, lambda o: int(np.argmax(net.scores(o.rows, o.glob))))
        assert n > 0 and res["pods"] == res["placed"] + res["failed"]
        # inflation: every placed pod was the agent's decision; time: queued pods start where room frees up
        assert n == res["placed"] if mode == "inflate" else n <= res["placed"]
    env = PlacementEnv(c, w, "inflate", 3, typ)
    obs, _ = env.reset()
    bad = int(np.flatnonzero(~env.rp.mask)[0]) if (~env.rp.mask).any() else None
    if bad is not None:
        with pytest.raises(ValueError, match="cannot take"):
            env.act(bad)


def test_features_agree_with_the_heuristics_and_merging_is_exact(small):
    c, w, typ = small
    env = PlacementEnv(c, w, "inflate", 5, typ)
    obs, _ = env.reset()
    for _ in range(15):  # some load first
        obs, _ = env.act(int(obs.nodes[0]))
    rp = env.rp
    p = env.pending
    feats = np.zeros((len(c.names), K.N_NODE_FEATURES))
    K.node_features(p, env.mem_cap, rp.cl, rp.pods, rp.typ, rp.st, feats)
    f = K.NODE_FEATURES.index("fgd")
    for n in np.flatnonzero(rp.mask):
        score = K._fgd_score(n, p, rp.cl[1], rp.cl[3], rp.cl[4], rp.cl[5], rp.cl[6], *typ, rp.st[0], w.cpu, w.ng, w.gm)
        assert int(feats[n, f] * 100.0) == score
    assert not feats[~rp.mask].any()
    # merged rows: the probability of a row is the sum over its nodes
    rows, counts, nodes = unique_rows(feats.astype(np.float32), rp.mask)
    net = NumpyScorer(numpy_state(build_scorer(PPOConfig(prior={"fgd": 3.0}))))
    glob = env.observe(p).glob
    s_all = net.scores(feats[rp.mask].astype(np.float32), glob).astype(np.float64)
    p_all = np.exp(s_all - s_all.max()) / np.exp(s_all - s_all.max()).sum()
    s_row = net.scores(rows, glob).astype(np.float64) + np.log(counts)
    p_row = np.exp(s_row - s_row.max()) / np.exp(s_row - s_row.max()).sum()
    keys = [tuple(r) for r in feats[rp.mask].astype(np.float32)]
    want = [sum(pa for k, pa in zip(keys, p_all) if k == tuple(r)) for r in rows]
    np.testing.assert_allclose(p_row, want, rtol=1e-5)
    assert counts.sum() == rp.mask.sum()


def test_sub_cluster_and_reward_terms(small):
    c, w, typ = small
    sub = sub_cluster(c, np.array([5, 1, 3]))
    assert sub.names == [c.names[1], c.names[3], c.names[5]] and sub.models == c.models
    r = PlacementRewardConfig()
    assert r.pod_term(0.1, 0, 1.0) == pytest.approx(-10 * 0.1 - 1 + 2)
    assert r.pod_term(0.0, 100, 0.0) == pytest.approx(-(1.5 ** 20))
    sizes = PlacementRewardConfig(success_unit="gpu").sizes(w)
    gpu = w.ng * w.gm > 0
    assert sizes[gpu].mean() == pytest.approx(1.0)


def test_training_is_deterministic_from_its_seed(small):
    c, w, typ = small
    runs = [train(c, w, PPOConfig(seed=s, **TINY), typical=typ) for s in (7, 7, 8)]
    a, b, d = (r.net.state_dict() for r in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], d[k]) for k in a)
    h = runs[0].history
    assert runs[0].steps >= TINY["total_steps"] and len(h) >= 2
    assert h[0]["epsilon"] < 1.0 and {"kl", "reward_mean", "lr"} <= set(h[0])


def test_config_round_trips_and_schedule():
    cfg = PPOConfig(seed=3, reward=PlacementRewardConfig(w_load=2.0))
    again = PPOConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    d = PPOConfig()
    assert (d.clip, d.lr, d.kl_stop, d.kl_patience, d.lr_decay, d.reward_jump) == (0.2, 3e-4, 0.01, 10, 0.8, 0.3)
    assert 4 <= d.epochs <= 6
    assert d.epsilon(0) == 1.0 and d.epsilon(1000) == pytest.approx(0.8) and d.epsilon(50_000) == 0.1


def test_artifact_round_trip_and_tampering(small, tmp_path):
    from metapilot.models.controller.artifact import ArtifactIntegrityError
    from metapilot.models.placement.artifact import load_agent, publish, registry_row

    c, w, typ = small
    cfg = PPOConfig(seed=1, **TINY)
    net = build_scorer(cfg)
    db = tmp_path / "w.duckdb"
    data = {"nodes": len(c.names), "gpus": int(c.ngpu.sum()), "pods": w.n, "sha256": "x" * 64,
            "from": "2024-01-01T00:00:00+00:00", "to": "2024-01-02T00:00:00+00:00"}
    art = publish(net, cfg, db=db, cluster="t", training={"decisions": 10}, evaluation={"inflate": {}}, data=data)
    assert art.folder.parent == tmp_path / "policies" and (art.folder / "SHA256SUMS").exists()
    row = registry_row(art)
    assert row["algorithm"] == "PPO" and row["sums_sha256"] == art.sums_sha256
    agent = load_agent(art.folder, art.sums_sha256)
    env = PlacementEnv(c, w, "inflate", 0, typ)
    obs, _ = env.reset()
    with torch.no_grad():
        want = net(torch.from_numpy(obs.rows), torch.from_numpy(obs.glob)).numpy()
    np.testing.assert_allclose(agent.scores(obs), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(NumpyScorer(numpy_state(net)).scores(obs.rows, obs.glob), want, rtol=1e-4, atol=1e-5)
    card = json.loads((art.folder / "model_card.json").read_text())
    assert card["hyper_parameters"]["clip"] == 0.2 and card["features"]["node"] == list(K.NODE_FEATURES)
    with pytest.raises(ArtifactIntegrityError, match="registry"):
        load_agent(art.folder, "0" * 64)
    (art.folder / "model.pt").write_bytes(b"tampered")
    with pytest.raises(ArtifactIntegrityError, match="model.pt"):
        load_agent(art.folder)


def test_cli_place_train_then_replay_with_the_policy_and_report_section(tmp_path, site_key):
    from metapilot.models.reporting.data import _placement
    from metapilot.models.reporting.render import placement_table
    from metapilot.warehouse.db import connect
    from typer.testing import CliRunner

    from metapilot.cli.app import app

    db = openb_warehouse(tmp_path, PODS)
    out = tmp_path / "train.json"
    r = CliRunner().invoke(app, ["place", "train", "--cluster", "ob", "--steps", "150", "--seed", "2",
                                 "--json", str(out), "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert "kept checkpoint" in r.output
    trained = json.loads(out.read_text())
    pid = trained["policy_id"]
    assert set(trained["evaluation"]) == {"time", "inflate"}
    card = json.loads((Path(trained["path"]) / "model_card.json").read_text())
    assert card["training"]["checkpoint"] in {r["snapshot"] for r in card["training"]["checkpoints"]}
    assert card["hyper_parameters"]["prior"] in card["hyper_parameters"]["priors"]
    rep = tmp_path / "replay.json"
    r = CliRunner().invoke(app, ["place", "replay", "--cluster", "ob", "--policy", pid, "--mode", "inflate", "--seed", "2",
                                 "--json", str(rep), "--db", str(db)])
    assert r.exit_code == 0, r.output
    got = json.loads(rep.read_text())
    assert got["policy"] == pid and got["pods"] == got["placed"] + got["failed"]
    assert got["gpu_alloc_share"] == trained["evaluation"]["inflate"]["gpu_alloc_share"]  # the artifact replays the same
    con = connect(db, read_only=True)
    try:
        assert con.execute("SELECT algorithm FROM policies WHERE policy_id = ?", [pid]).fetchall() == [("PPO",)]
        rows = _placement(con, "ob")
    finally:
        con.close()
    assert {(r["policy"], r["mode"]) for r in rows} == {(pid, "time"), (pid, "inflate")}
    head, body = placement_table({"placement": rows})
    assert head[:3] == ["mode", "policy", "pods"] and len(body) == 2
    r = CliRunner().invoke(app, ["place", "replay", "--cluster", "ob", "--policy", "nope", "--db", str(db)])
    assert r.exit_code != 0 and "no policy" in r.output


def test_checkpoint_verdict_counts_the_missed_goals():
    from metapilot.models.placement.select import dominated_by, verdict

    heur = {"fgd": {"failed": 5, "imbalance": 0.10}, "least-loaded": {"failed": 9, "imbalance": 0.05}}
    assert dominated_by({"failed": 5, "imbalance": 0.12}, heur) == ["fgd"]
    assert dominated_by({"failed": 5, "imbalance": 0.10}, heur) == []  # equal on both is not dominated
    assert dominated_by({"failed": 6, "imbalance": 0.04}, heur) == []
    ref = {"gpu_alloc_share": 0.95, "imbalance": 0.10}
    good = verdict({"failed": 6, "imbalance": 0.04}, {"gpu_alloc_share": 0.94, "imbalance": 0.09}, heur, ref)
    assert good["missed"] == 0 and good["margin"] > 0
    bad = verdict({"failed": 9, "imbalance": 0.2}, {"gpu_alloc_share": 0.90, "imbalance": 0.11}, heur, ref)
    assert bad["missed"] == 3 and not bad["alloc_ok"] and not bad["imbalance_ok"] and bad["margin"] < 0


def test_selection_keeps_the_snapshot_that_meets_the_goals_and_training_records_it(small):
    from metapilot.models.placement.select import Reference, Snapshot, select
    from metapilot.models.placement.train import numpy_chooser

    c, w, typ = small
    ref = Reference.of(c, w, typ, [1])
    snaps = [Snapshot(name, 0, numpy_state(build_scorer(PPOConfig(prior=p))))
             for name, p in (("fragmenting", {"fgd": -10.0, "dvar": 3.0}), ("packing", {"fgd": 10.0, "dvar": -3.0}))]
    for order in (snaps, snaps[::-1]):
        best, rows = select(c, w, order, numpy_chooser, typ, ref)
        assert [r["snapshot"] for r in rows] == [s.label for s in order]
        assert order[best].label == "packing"
        assert rows[best]["missed"] <= min(r["missed"] for r in rows)
        assert rows[best]["alloc"] > min(r["alloc"] for r in rows)
    res = train(c, w, PPOConfig(seed=7, **TINY | {"select_every": 1}), typical=typ)
    labels = [r["snapshot"] for r in res.selection]
    assert labels[0] == "prior" and len(labels) == len(res.history) + 1 and res.selected in labels
    assert len(res.starts) == len(PPOConfig().priors) and res.config.prior in PPOConfig().priors
    kept = next(r for r in res.selection if r["snapshot"] == res.selected)
    assert kept["missed"] == min(r["missed"] for r in res.selection)
    off = train(c, w, PPOConfig(seed=7, **TINY | {"select_every": 0}), typical=typ)
    assert off.selected is None and off.selection == [] and off.starts == []
