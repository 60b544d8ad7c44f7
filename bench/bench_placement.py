"""Node placement (SPEC §11, issue 15): every heuristic and the PPO agent (trained with its defaults on
each list, timed) x every metric, both modes, on the openb pod
lists in ../shared/data/gpu/alibaba-2023/, and the FGD paper's headline (allocation at 100% arrived,
mean of 10 seeds) against its published figures. Writes the "Node placement" section of
docs/benchmarks.md.

    .venv/bin/python bench/bench_placement.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np
import polars as pl
from common import SHARED, machine, write_section
from metapilot.models.placement.engine import (
    METRICS,
    POLICIES,
    build_cluster,
    build_workload,
    replay,
    typical_pods,
)
from metapilot.models.placement.select import dominated_by
from metapilot.transforms.lines import iter_line_chunks, read_head
from metapilot.transforms.openb import parse_node_list, parse_pod_list, placement_pods

DATA = SHARED / "gpu" / "alibaba-2023"
PREFIX = "cluster-trace-gpu-v2023_csv_openb_"
LISTS = ("default", "gpuspec33", "multigpu50", "gpushare80", "cpu250")
# Made from the default list by bench/make_gpushare.py and bench/make_cpuheavy.py (tests/data/openb/README.md):
# not in the shared data. cpu250 is built as the paper's list of that name (25% of the pods CPU-only).
_OPENB = Path(__file__).resolve().parent.parent / "tests" / "data" / "openb"
LOCAL = {"gpushare80": _OPENB / "openb_pod_list_gpushare80.csv.gz", "cpu250": _OPENB / "openb_pod_list_cpu250.csv.gz"}
# hkust-adsl/kubernetes-scheduler-simulator experiments/analysis/expected_results/analysis_allo_discrete.csv
# (column 100, the paper simulator's expected results): default as the issue and SPEC §11 quote it
# (mean of seeds 42-51); gpuspec33 and multigpu50 read off the file's rows, FGD over seeds 42-51,
# BestFit over 42-51 (multigpu50) or 44-51 (gpuspec33), Random over 44-51; cpu250 as issue 54 quotes it (BestFit
# 91.21 over 42-51 read off the file; FGD 93.27 over 42-46).
PAPER = {"default": {"random": 0.863, "best-fit": 0.929, "fgd": 0.952},
         "gpuspec33": {"random": 0.8391, "best-fit": 0.8046, "fgd": 0.8784},
         "multigpu50": {"random": 0.8145, "best-fit": 0.9562, "fgd": 0.9709},
         "cpu250": {"random": 0.800, "best-fit": 0.912, "fgd": 0.932}}
# Measured apart from this script (single trainings, seed 42 evaluations; scratch runs of
# models/placement/train.py), kept with the goals table it explains.
MULTIGPU_NOTE = (
    "Why the kept checkpoint matters (`models/placement/select.py`): the seed's reward (`-10 * load_diff - "
    "1.5 ** queue_len + 2 * success`, per pod) prefers spreading to packing on `multigpu50`. On the whole "
    "cluster, inflate mode, seed 42, its return is -14,540 for a FGD-like agent (allocation 97.1%) and -3,355 "
    "for one that weighs the spread 3x (allocation 75.3%, but 1,100 more small pods placed and half the summed "
    "imbalance), so PPO moves away from packing there (its last weights: 75.7-81.7% allocation). Reward variants "
    "tried earlier (success counted in GPUs with `w_load=1`, 250k decisions: 84.6% / 0.105; `w_frag=10`: 93.6% / "
    "0.1365) did not meet the goal either; the defaults stay the seed's. So training now chooses on the "
    "cluster's own list, against every heuristic, with inflate seeds of its own (1-2 for seed 0; the table "
    "uses 42-51): first its starting policy among three fixed ones, the same for every list (FGD's score with "
    "the spread weighted -3, -1 or -0.5), then the snapshot (before training, every 4 updates, last) that "
    "meets the most goals with the widest margin (up to 1%; then the latest). Where PPO's updates lose to its start, the start is kept and "
    "the `checkpoint` column says so. Not done: node metrics (`node_metrics`) as part of the agent's state.")


def _lines(path):
    return pl.concat([c.lines for c in iter_line_chunks(path)])


def load(name: str):
    nodes, _ = parse_node_list(_lines(DATA / f"{PREFIX}node_list_gpu_node.csv"))
    if name in LOCAL:
        text = gzip.decompress(LOCAL[name].read_bytes()).decode()
        rows = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        lines = pl.DataFrame({"line_no": list(range(1, len(rows) + 1)), "line": rows},
                             schema={"line_no": pl.Int64, "line": pl.Utf8})
        res, extras = parse_pod_list(lines, tuple(rows[0].split(",")), name)
    else:
        path = DATA / f"{PREFIX}pod_list_{name}.csv"
        header = tuple(read_head(path, max_lines=1)[0].strip().split(","))
        res, extras = parse_pod_list(_lines(path), header, name)
    pods = placement_pods(res.jobs, extras)
    c = build_cluster(nodes)
    return c, build_workload(pods, c), res.quarantine.height


def fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, (int, np.integer)):
        return f"{v:,}"
    return f"{v:.4f}"


def mean_metrics(runs: list[dict]) -> dict:
    mean = {}
    for k in METRICS:
        vals = [r[k] for r in runs if r[k] is not None]
        mean[k] = None if not vals else (float(np.mean(vals)) if isinstance(vals[0], float) else int(round(np.mean(vals))))
    return mean


def train_agent(c, w, typ, seed: int):
    """PPO with its defaults (inline rollouts, one torch thread: as `metapilot place train` without
    --dask); the TorchScript chooser that the artifact would hold, and the training result."""
    from metapilot.models.placement.artifact import scripted_chooser
    from metapilot.models.placement.ppo import PPOConfig
    from metapilot.models.placement.run import torch_threads
    from metapilot.models.placement.train import train

    with torch_threads(1):
        res = train(c, w, PPOConfig(seed=seed), typical=typ, log=lambda m: print("  ", m, flush=True))
    return scripted_chooser(res.net), res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--no-ppo", action="store_true", help="heuristics only")
    ap.add_argument("--ppo-seed", type=int, default=0, help="training seed of the PPO agent")
    ap.add_argument("--lists", default=",".join(LISTS), help="pod lists, comma-separated")
    args = ap.parse_args()
    seeds = list(range(42, 42 + args.seeds))
    policies = list(POLICIES) + ([] if args.no_ppo else ["ppo"])
    out = ["## Node placement", "",
           f"`.venv/bin/python bench/bench_placement.py{' --no-ppo' if args.no_ppo else ''}` on {machine()}. "
           "Alibaba openb node list (1,213 nodes, 6,212 GPUs) and pod lists from "
           "`../shared/data/gpu/alibaba-2023/` (`gpushare80` and `cpu250` from `tests/data/openb/`, made by "
           "`.venv/bin/python bench/make_gpushare.py` and `bench/make_cpuheavy.py`); the engine of `models/placement/` "
           f"(numba). Inflate mode: mean of {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}, as the paper's "
           "runs); time mode: seed 0. Metrics as SPEC §11 and `models/placement/engine.py` define them. "
           + ("" if args.no_ppo else
              f"`ppo`: the PPO agent trained with its defaults (`PPOConfig()`, seed {args.ppo_seed}) on that "
              "pod list, replayed deterministically (argmax) through its TorchScript scorer. The agent's score is "
              "a linear term over the node features plus an MLP; the linear term starts from a fixed prior (FGD's "
              "fragmentation score minus a weight on the spread a node would add), so much of `ppo`'s result is "
              "that prior; training chooses its start and its kept checkpoint on the list itself (the note under "
              "the goals table)."), ""]
    headline = ["### FGD paper reproduction (GPU allocation at 100% arrived demand, inflate mode)", "",
                "| pod list | policy | ours (mean ± sd) | paper | ours - paper |", "|---|---|---|---|---|"]
    goals = ["### PPO against the issue's goals", "",
             "| pod list | training (choices included) | checkpoint kept | time: PPO failed / imbalance | dominated by | "
             "inflate: PPO alloc (FGD) | alloc gap | PPO imbalance (FGD) | goals met |",
             "|---|---|---|---|---|---|---|---|---|"]
    timings = []
    for name in args.lists.split(","):
        c, w, bad = load(name)
        typ = typical_pods(w)
        replay(c, w, "random", "time", 0, typ)  # compile once
        table = [f"### `{name}` ({w.n:,} pods{'' if w.timed else ', no times in the list'}"
                 f"{f', {bad} lines quarantined' if bad else ''})", "",
                 "| mode | policy | " + " | ".join(METRICS) + " | s/run |", "|" + "---|" * (len(METRICS) + 3)]
        choose = train_res = None
        if not args.no_ppo:
            print(name, "training PPO", flush=True)
            choose, train_res = train_agent(c, w, typ, args.ppo_seed)
            print(name, f"PPO trained: {train_res.steps:,} decisions in {train_res.seconds:.0f} s", flush=True)
        means: dict[tuple[str, str], dict] = {}
        for mode in ("time", "inflate"):
            for pol in policies:
                runs = []
                for s in (seeds if mode == "inflate" else [0]):
                    t0 = time.perf_counter()
                    if pol == "ppo":
                        from metapilot.models.placement.run import replay_agent

                        runs.append(replay_agent(c, w, choose, "ppo", mode, s, typ))
                    else:
                        runs.append(replay(c, w, pol, mode, s, typ))
                    runs[-1]["wall"] = time.perf_counter() - t0
                mean = mean_metrics(runs)
                means[(mode, pol)] = mean
                wall = float(np.mean([r["wall"] for r in runs]))
                timings.append((name, mode, pol, wall))
                table.append(f"| {mode} | {pol} | " + " | ".join(fmt(mean[k]) for k in METRICS) + f" | {wall:.2f} |")
                if mode == "inflate":
                    a = np.array([r["gpu_alloc_share"] for r in runs], float)
                    paper = PAPER.get(name, {}).get(pol)
                    headline.append(f"| {name} | {pol} | {100 * a.mean():.2f}% ± {100 * a.std():.2f} | "
                                    f"{'—' if paper is None else f'{100 * paper:.2f}%'} | "
                                    f"{'—' if paper is None else f'{100 * (a.mean() - paper):+.2f} pp'} |")
                print(name, mode, pol, {k: fmt(v) for k, v in mean.items()}, f"{wall:.2f}s", flush=True)
        out += table + [""]
        if train_res is not None:
            t_ppo = means[("time", "ppo")]
            dom = dominated_by(t_ppo, {p: means[("time", p)] for p in POLICIES})
            i_ppo, i_fgd = means[("inflate", "ppo")], means[("inflate", "fgd")]
            gap = i_ppo["gpu_alloc_share"] - i_fgd["gpu_alloc_share"]
            within = i_ppo["gpu_alloc_share"] >= 0.98 * i_fgd["gpu_alloc_share"]
            lower = i_ppo["imbalance"] < i_fgd["imbalance"]
            met = not dom and within and lower
            goals.append(f"| {name} | {train_res.steps:,} decisions, {train_res.seconds:.0f} s"
                         f"{' (KL switch)' if train_res.converged_at else ''} | {train_res.selected}, start "
                         f"{train_res.config.prior} | {t_ppo['failed']:,} / "
                         f"{t_ppo['imbalance']:.4f} | {', '.join(dom) or 'none'} | "
                         f"{100 * i_ppo['gpu_alloc_share']:.2f}% ({100 * i_fgd['gpu_alloc_share']:.2f}%) | "
                         f"{100 * gap:+.2f} pp | {i_ppo['imbalance']:.4f} ({i_fgd['imbalance']:.4f}) | "
                         f"{'yes' if met else 'no'} |")
    out += headline + [""]
    if not args.no_ppo:
        out += goals + ["",
                        "Goals (issue 15): in time mode no heuristic at least as good on both failed pods and "
                        "imbalance and better on one; in inflate mode allocation at least 98% of FGD's and "
                        "imbalance lower than FGD's. Training time: `train()` wall time with `PPOConfig()` "
                        "defaults, rollouts inline on this machine (the 2 cores shared with other work).", "",
                        MULTIGPU_NOTE, ""]
    out += ["FGD is the paper simulator's (issue 34; `models/placement/typical.py` and `kernels.py` name the Go "
            "function of each piece): the target workload of `GetTypicalPods` with the experiment scripts' "
            "options (popularity threshold 95, step 1, CPU-only pods counted, the scheduler's non-zero CPU "
            "request), the fragment measure `NodeGpuShareFragAmountScore` (per GPU for GPU-sharing pods: the "
            "idle milli-GPU of the GPUs too small for a typical pod that fits is a fragment), the score "
            "`int(sigmoid(drop / 1000) * 100)` and a GPU-sharing pod's GPU by that integer score (first of "
            "equals), and equal node scores to the node of lowest tie rank (`engine.tie_rank`): the simulator "
            "runs on a kube-scheduler fork (mental2008/kubernetes v1.20.5-minor) whose `selectHost` takes \"the "
            "smallest lexicographical order if the score remains the same\", and it renames every node "
            "`%04d-<name>` after a seeded random permutation (`syncClusterResourceList`), so the smallest name "
            "is a random node that stays the same all run (issue 54). With a new random choice at every tie "
            "(upstream kube-scheduler) the same FGD allocates 89.6% on the default list (seed 42): the coarse "
            "integer score makes ties common, and a fixed first node packs where a random one spreads. In the "
            "trace's name order instead of the permutation (before issue 54), CPU-only pods piled onto the first "
            "nodes (2-GPU, 64-CPU) and stranded their GPUs: FGD 91.60% on `cpu250` (93.2% published), 95.09% on "
            "`default`. BestFit takes the same tie rule; Random keeps its random choice (RandomScore: a random "
            "score per node). "
            "`gpushare80`: made from the default list by `bench/make_gpushare.py` (80% of the GPU pods share a "
            "GPU; 43.6% in `default`); the paper's own `gpushare` lists are not in the shared data. `cpu250`: made "
            "from the default list by `bench/make_cpuheavy.py` as the paper's list of that name is (its GPU pods kept, "
            "CPU-only pods drawn from its own until they are 25% of the pods, 13.3% in `default`; the paper's "
            "plot calls it \"25% non-GPU workloads in terms of task number\"); at 100% arrived GPU demand its "
            "CPU demand is 103% of the cluster's.", "",
            "Time mode on these lists: the openb pods were sampled over 150 days, so the cluster "
            "is almost empty (GPU allocation 0.2% time-weighted) and no pod waits; `multigpu50` has no "
            "times at all (every pod arrives at once and stays: a one-shot fill). Inflate mode is the "
            "experiment that separates the policies.", "",
            "Replay of the default list, time mode (heuristics: target < 1 s): "
            + ", ".join(f"{p} {w:.2f} s" for n, m, p, w in timings if n == "default" and m == "time") + "."]
    write_section("Node placement", "\n".join(out))


if __name__ == "__main__":
    main()
