"""The offline-RL controller on a real cluster-year (KTH-SP2, 28,467 jobs, 100 processors).

Measures, on this machine (2 shared cores):
- building the as-run tuples (DuckDB range joins + action inference) for ~8,000 hourly epochs;
- training with the CLI defaults (DiscreteCQL 10k steps, checkpoints chosen by DiscreteFQE, BC /
  DQN / BCQ baselines) and the time per 10k gradient steps of each algorithm (one torch thread);
- decision latency of the TorchScript policy on one core (torch.set_num_threads(1)) and of the same
  network from `policy.npz` (numpy): p50/p99 of 10,000 single-state decisions (target p99 < 0.1 ms),
  next to d3rlpy's own predict;
- the whole advice for a timestamp in a warm process (state from the warehouse + decision),
  target < 50 ms.

Run: .venv/bin/python bench/bench_controller.py [--steps 10000] [--no-write] [--quick]
Writes docs/benchmarks.md under the "Controller" heading (other sections are kept).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from metapilot.models.controller.advice import Advisor  # noqa: E402
from metapilot.models.controller.artifact import load_policy, publish  # noqa: E402
from metapilot.models.controller.objectives import Menu  # noqa: E402
from metapilot.models.controller.dataset import (  # noqa: E402
    DatasetConfig,
    build_dataset,
    observations,
    to_mdp_dataset,
)
from metapilot.models.controller.train import TrainConfig, train_policy  # noqa: E402
from metapilot.warehouse.db import connect  # noqa: E402

from bench.common import machine, write_section  # noqa: E402

KTH = next(p for p in (REPO / "tests" / "data" / "reference" / "KTH-SP2.normalised.swf.gz",
                       REPO.parent / "shared" / "data" / "reference" / "KTH-SP2.normalised.swf.gz") if p.exists())
CLUSTER = "kth-sp2"
TRAIN = ("1996-09-23T00:00:00", "1997-06-01T00:00:00")
VALID = ("1997-06-01T00:00:00", "1997-08-29T00:00:00")


def load_kth(con) -> int:
    """The normalised KTH-SP2 trace through the real loader (capacity: its header, 100 processors)."""
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    rep = ingest_file(con, KTH, IngestOptions(cluster=CLUSTER), bytes(32))
    assert rep.outcome == "loaded", rep.message
    return rep.jobs_written


def pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q))


def decision_latency(folder: Path, states: np.ndarray, n: int = 10_000) -> dict:
    import torch

    torch.set_num_threads(1)
    mod = load_policy(folder, torchscript=True).module
    pol = load_policy(folder)  # policy.npz: what advise, validation and the report load
    xs = [torch.from_numpy(states[i % len(states)].reshape(1, -1).copy()) for i in range(n)]
    out = {}
    with torch.inference_mode():
        for x in xs[:500]:
            mod(x)
        lat = np.empty(n)
        for i, x in enumerate(xs):
            t0 = time.perf_counter_ns()
            mod(x)
            lat[i] = time.perf_counter_ns() - t0
    out["module"] = lat / 1e6
    lat = np.empty(n)
    for i in range(n):  # numpy in, numpy out (policy.npz): what advise does
        s = states[i % len(states)].reshape(1, -1)
        t0 = time.perf_counter_ns()
        pol.q_values(s)
        lat[i] = time.perf_counter_ns() - t0
    out["numpy"] = lat / 1e6
    return out


def d3rlpy_latency(algo, states: np.ndarray, n: int = 2_000) -> np.ndarray:
    import torch

    torch.set_num_threads(1)
    lat = np.empty(n)
    for i in range(n):
        s = states[i % len(states)].reshape(1, -1)
        t0 = time.perf_counter_ns()
        algo.predict(s)
        lat[i] = time.perf_counter_ns() - t0
    return lat / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--quick", action="store_true", help="1,000 steps, for a smoke run")
    args = ap.parse_args()
    steps = 1_000 if args.quick else args.steps

    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="bench-controller-"))
    db = tmp / "kth.duckdb"
    con = connect(db)
    n_jobs = load_kth(con)

    t0 = time.perf_counter()
    dcfg = DatasetConfig(sources=("as-run", "replay"))
    splits = build_dataset(con, CLUSTER, *TRAIN, *VALID, config=dcfg)
    t_dataset = time.perf_counter() - t0
    asrun = splits.train.filter(pl.col("source") == "as-run")
    n_epochs = asrun.height + splits.checkpoint.filter(pl.col("source") == "as-run").height
    acts = asrun["action"].value_counts().sort("action")["count"].to_list()

    t0 = time.perf_counter()
    to_mdp_dataset(splits.train, len(splits.state.menu))
    t_mdp = time.perf_counter() - t0

    from metapilot.models.controller.dataset import TupleRequest
    from metapilot.models.evaluation.checkpoint import make_replay_evaluator

    evaluator = make_replay_evaluator(con, TupleRequest(CLUSTER, None, splits.checkpoint_window[0], splits.checkpoint_window[1],
                                                        dcfg.state, dcfg.reward, 0, dcfg.planner))
    cfg = TrainConfig(n_steps=steps, n_steps_per_epoch=max(1, steps // 10), show_progress=True)
    t0 = time.perf_counter()
    result = train_policy(splits.train, splits.checkpoint, cfg, replay_evaluator=evaluator,
                          log=lambda m: print(m, flush=True), menu=Menu.of(dcfg.state))
    t_train = time.perf_counter() - t0
    art = publish(result, splits, db=db, cluster=CLUSTER, con=con)

    states = observations(splits.checkpoint)
    lat = decision_latency(art.folder, states)
    d3 = d3rlpy_latency(result.algo, states)

    con.close()
    import duckdb

    ro = duckdb.connect(str(db), read_only=True)
    adv = Advisor(art.policy_id, db)
    rng = np.random.default_rng(0)
    t_lo = int(datetime.fromisoformat(VALID[0]).replace(tzinfo=timezone.utc).timestamp())
    t_hi = int(datetime.fromisoformat(VALID[1]).replace(tzinfo=timezone.utc).timestamp())
    whens = rng.integers(t_lo, t_hi, 200)
    adv.advise_at(ro, int(whens[0]))  # warm
    adv_ms = np.array([adv.advise_at(ro, int(t)).latency_ms["total"] for t in whens])

    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "metapilot.cli", "advise", "--policy", art.policy_id, "--at", VALID[0],
                        "--db", str(db), "--format", "json"], capture_output=True, text=True, cwd=REPO)
    t_cli = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr

    s = result.seconds
    per10k = {k[4:]: v * 10_000 / (steps if k[4:] != "bc" else max(1, steps // 2)) for k, v in s.items() if k.startswith("fit_")}
    rows = [result.chosen, *result.baselines.values()]
    ope = "\n".join(
        f"| {r.name}{' (published)' if r is result.chosen else ''} | {r.fqe_value:,.1f} | {r.fqe_initial_value:,.1f} | "
        f"{max(r.action_shares.values()):.2f} | {r.behaviour_match:.2f} |" for r in rows)
    text = f"""## Controller

`{' '.join(['.venv/bin/python', 'bench/bench_controller.py'] + sys.argv[1:])}` on {machine()} (training
uses one torch thread; load average {load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end:
p99 figures move with it), {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Data: KTH-SP2 normalised
({n_jobs:,} jobs, 100 processors), train {TRAIN[0][:10]}..{TRAIN[1][:10]}, validation {VALID[0][:10]}..{VALID[1][:10]},
hourly epochs; tuples from the as-run history and from replay rollouts (7 behaviour policies x 2 seeds);
checkpoint chosen by replay on the checkpoint window (score: mean reward per epoch).

| stage | figure |
|---|---|
| dataset build, train + checkpoint: as-run ({n_epochs:,} epochs: aggregates, queues, action inference) + replay rollouts; {splits.train.height + splits.checkpoint.height:,} tuples | {t_dataset:.2f} s |
| inferred as-run actions in training (first two objectives) | {acts[0]:,} / {acts[1] if len(acts) > 1 else 0:,} |
| d3rlpy MDPDataset of {splits.train.height:,} training tuples | {t_mdp:.2f} s |
| `train_policy`, CLI defaults ({steps:,} steps, FQE {cfg.fqe_steps:,} steps x {len(result.candidates)} checkpoints + 3 baselines) | {t_train:.0f} s |
| per 10k gradient steps: {', '.join(f'{k} {v:.1f} s' for k, v in per10k.items())} | |
| FQE, all checkpoints of {cfg.algorithm} | {s.get(f'ope_{cfg.algorithm}_checkpoints', 0):.1f} s |
| TorchScript decision, 1 thread, 10,000 single states: p50 / p99 | {pct(lat['module'], 50) * 1e3:.1f} / {pct(lat['module'], 99) * 1e3:.1f} µs |
| the same network from `policy.npz` (`ScriptedPolicy.q_values`, what `advise` uses): p50 / p99 | {pct(lat['numpy'], 50) * 1e3:.1f} / {pct(lat['numpy'], 99) * 1e3:.1f} µs |
| d3rlpy `predict`, single state: p50 / p99 | {pct(d3, 50) * 1e3:.1f} / {pct(d3, 99) * 1e3:.1f} µs |
| advice for a timestamp, warm process (state from DuckDB + decision), 200 times: p50 / p99 | {pct(adv_ms, 50):.1f} / {pct(adv_ms, 99):.1f} ms |
| `metapilot advise --at ...` as a fresh process (Python start-up and imports included; no torch) | {t_cli:.2f} s |

Off-policy evaluation on the checkpoint window ({result.n_checkpoint:,} tuples; DiscreteFQE, reward units per
epoch discounted with gamma {cfg.gamma}; higher is better). Logged behaviour's discounted return per state:
{result.behaviour_mc_return:,.1f}.

| policy | FQE value (all states) | FQE value (first states) | largest objective share | agrees with logged |
|---|---|---|---|---|
{ope}

Targets: decision p99 < 0.1 ms (MetaPilot's paper: 2.5-21.1 ms), advice < 50 ms warm, training of one
cluster-year < 10 min on 2 cores. Policy `{art.policy_id}`.
"""
    print(text)
    if not args.no_write:
        write_section("Controller", text)


if __name__ == "__main__":
    main()
