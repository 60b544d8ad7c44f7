"""Conservative backfilling on a busy cluster: replay speed of the seven conservative rules, and a check
that the schedules do not change (issue 48's speed target: RICC-2010-2's pasts).

Traces: RICC-2010-2 (8,192 cores, one pool; its first `--ricc` jobs, default 161,000: the walk
forward's largest past at its first origin), CEA-Curie (93,312 cores) and KTH-SP2 (100 processors),
each read and normalised as `bench_simulator.py` does (`kth-ff`: KTH-SP2 with fit-first). Throughput = replayed jobs / wall time of one
`simulate()` (engine set-up included, numba compilation excluded: warmed up first).

The identical-schedule check: `--save FILE.npz` keeps every job's start time per trace and rule,
`--compare FILE.npz` checks the run's against them with `np.array_equal` (NaN equal to NaN) and
says which differ. `--simulator MODULE` replays with another copy of the simulator package (for
instance the code before a change, copied under another name and put on PYTHONPATH), so both sides
of a before/after run in one checkout.

Run: .venv/bin/python bench/bench_conservative.py [--traces ricc,curie,kth,kth-ff] [--ricc 161000]
         [--rules FCFS,SJF,...] [--save F.npz | --compare F.npz] [--simulator MODULE] [--json F.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from metapilot.transforms.parsers import ParseOptions, parse_jobs  # noqa: E402
from metapilot.transforms.workload import normalise  # noqa: E402

from bench.common import SHARED, machine  # noqa: E402

RULES = ("FCFS", "SJF", "SAF", "LAF", "WFP3", "UNICEF", "F1")
FILES = {  # name: (file, cores)
    "ricc": (SHARED / "swf" / "RICC-2010-2.swf.gz", 8_192),
    "curie": (SHARED / "swf" / "CEA-Curie-2011-2.1-cln.swf.gz", 93_312),
    "kth": (REPO / "tests" / "data" / "reference" / "KTH-SP2.normalised.swf.gz", 100),
}
FILES["kth-ff"] = FILES["kth"]  # KTH-SP2 with fit-first (the U objective's conservative steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default="ricc,curie,kth,kth-ff")
    ap.add_argument("--ricc", type=int, default=161_000, help="RICC's first N jobs")
    ap.add_argument("--rules", default=",".join(RULES))
    ap.add_argument("--save", type=Path, help="keep the start times here (.npz)")
    ap.add_argument("--compare", type=Path, help="check the start times against these (.npz)")
    ap.add_argument("--simulator", default="metapilot.models.simulator", help="the simulator package to replay with")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()

    sim = importlib.import_module(args.simulator)
    sim.warm_up()
    print(f"# {machine()}; simulator {args.simulator}", flush=True)
    rows, starts = [], {}
    ref = dict(np.load(args.compare)) if args.compare else None
    differ = []
    for name in args.traces.split(","):
        path, cores = FILES[name]
        w = normalise(parse_jobs(path, ParseOptions(fmt="swf")))
        if name == "ricc":
            w = w.head(args.ricc)
            name = f"ricc{args.ricc}"
        for rule in args.rules.split(","):
            c0, t0 = time.process_time(), time.perf_counter()
            r = sim.simulate(w, sim.Capacity.single(cores), rule, "conservative", fit_first=name == "kth-ff")
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            n = int(r.replayed.sum())
            start = np.asarray(r.start, np.float64)
            key = f"{name}/{rule}"
            starts[key] = start
            same = None
            if ref is not None and key in ref:
                same = bool(np.array_equal(ref[key], start, equal_nan=True))
                if not same:
                    differ.append(key)
            rows.append({"trace": name, "rule": rule, "jobs": n, "wall_s": wall, "cpu_s": cpu,
                         "jobs_per_s": n / wall, "mean_wait": float(np.nanmean(r.wait)), "identical": same})
            print(f"{name:>10} {rule:>6} conservative: {n:,} jobs {wall:8.2f} s (CPU {cpu:.2f}) {n / wall:10,.0f} jobs/s "
                  f"mean wait {rows[-1]['mean_wait']:,.1f} s" + ("" if same is None else f" identical {same}"), flush=True)
    print(f"# load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.save:
        np.savez_compressed(args.save, **starts)
    if ref is not None:
        missing = sorted(set(starts) - set(ref))
        print(f"# identical starts: {len(starts) - len(differ) - len(missing)} of {len(starts)} replays"
              + (f"; DIFFER: {', '.join(differ)}" if differ else "") + (f"; not in the reference: {', '.join(missing)}" if missing else ""))
    if args.json:
        args.json.write_text(json.dumps({"simulator": args.simulator, "machine": machine(), "rows": rows}, indent=1))
    if differ:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
