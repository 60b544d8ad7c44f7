"""Node placement (SPEC §11, issue 15): every heuristic x every metric, both modes, on the openb pod
lists in ../shared/data/gpu/alibaba-2023/, and the FGD paper's headline (allocation at 100% arrived,
mean of 10 seeds) against its published figures. Writes the "Node placement" section of
docs/benchmarks.md.

    .venv/bin/python bench/bench_placement.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import time

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
from metapilot.transforms.lines import iter_line_chunks, read_head
from metapilot.transforms.openb import parse_node_list, parse_pod_list, placement_pods

DATA = SHARED / "gpu" / "alibaba-2023"
PREFIX = "cluster-trace-gpu-v2023_csv_openb_"
LISTS = ("default", "gpuspec33", "multigpu50")
# hkust-adsl/kubernetes-scheduler-simulator experiments/analysis/expected_results/analysis_allo_discrete.csv
# (column 100, mean of seeds 42-51): the issue and SPEC §11 quote the default list's.
PAPER = {"default": {"random": 0.863, "best-fit": 0.929, "fgd": 0.952}}


def _lines(path):
    return pl.concat([c.lines for c in iter_line_chunks(path)])


def load(name: str):
    nodes, _ = parse_node_list(_lines(DATA / f"{PREFIX}node_list_gpu_node.csv"))
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    seeds = list(range(42, 42 + args.seeds))
    out = ["## Node placement", "",
           f"`bench/bench_placement.py` on {machine()}. Alibaba openb node list (1,213 nodes, 6,212 GPUs) "
           "and pod lists from `../shared/data/gpu/alibaba-2023/`; the engine of `models/placement/` "
           f"(numba). Inflate mode: mean of {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}, as the paper's "
           "runs); time mode: seed 0. Metrics as SPEC §11 and `models/placement/engine.py` define them.", ""]
    headline = ["### FGD paper reproduction (GPU allocation at 100% arrived demand, inflate mode)", "",
                "| pod list | policy | ours (mean ± sd) | paper |", "|---|---|---|---|"]
    timings = []
    for name in LISTS:
        c, w, bad = load(name)
        typ = typical_pods(w)
        replay(c, w, "random", "time", 0, typ)  # compile once
        table = [f"### `{name}` ({w.n:,} pods{'' if w.timed else ', no times in the list'}"
                 f"{f', {bad} lines quarantined' if bad else ''})", "",
                 "| mode | policy | " + " | ".join(METRICS) + " | s/run |", "|" + "---|" * (len(METRICS) + 3)]
        for mode in ("time", "inflate"):
            for pol in POLICIES:
                runs = []
                for s in (seeds if mode == "inflate" else [0]):
                    t0 = time.perf_counter()
                    runs.append(replay(c, w, pol, mode, s, typ))
                    runs[-1]["wall"] = time.perf_counter() - t0
                mean = {}
                for k in METRICS:
                    vals = [r[k] for r in runs if r[k] is not None]
                    mean[k] = None if not vals else (float(np.mean(vals)) if isinstance(vals[0], float) else int(round(np.mean(vals))))
                wall = float(np.mean([r["wall"] for r in runs]))
                timings.append((name, mode, pol, wall))
                table.append(f"| {mode} | {pol} | " + " | ".join(fmt(mean[k]) for k in METRICS) + f" | {wall:.2f} |")
                if mode == "inflate":
                    a = np.array([r["gpu_alloc_share"] for r in runs], float)
                    paper = PAPER.get(name, {}).get(pol)
                    headline.append(f"| {name} | {pol} | {100 * a.mean():.2f}% ± {100 * a.std():.2f} | "
                                    f"{'—' if paper is None else f'{100 * paper:.1f}%'} |")
                print(name, mode, pol, {k: fmt(v) for k, v in mean.items()}, f"{wall:.2f}s", flush=True)
        out += table + [""]
    out += headline + ["",
                       "The FGD row uses the target workload of the pod shapes making up 99% of the list "
                       "(`engine.TYPICAL_SHARE`). The paper's runs pass a 95% popularity threshold; on the "
                       "default list that cut keeps 35 of 91 shapes and none of the multi-GPU ones, and our FGD "
                       "then allocates 89.6% (seed 42) where the paper reports 95.2%; with 98-100% of the "
                       "shapes it is 94.5-95.1% (seed 42). Random and BestFit need no such choice.", "",
                       "Time mode on these lists: the openb pods were sampled over 150 days, so the cluster "
                       "is almost empty (GPU allocation 0.2% time-weighted) and no pod waits; `multigpu50` has no "
                       "times at all (every pod arrives at once and stays: a one-shot fill). Inflate mode is the "
                       "experiment that separates the policies.", "",
                       "Replay of the default list under a heuristic, time mode (target < 1 s): "
                       + ", ".join(f"{p} {w:.2f} s" for n, m, p, w in timings if n == "default" and m == "time") + ".",
                       "",
                       "Not done (issue 15): the PPO agent (training time, its rows here), Dask rollouts, the "
                       "placement section of the weekly report."]
    write_section("Node placement", "\n".join(out))


if __name__ == "__main__":
    main()
