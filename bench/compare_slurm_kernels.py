"""The Slurm replay's kernel at an earlier commit against the working tree's, in one run (issue 51 item 5).

Both versions of models/simulator/slurm/{kernel,bits,nodes,node_space,priority}.py are compiled side by side
(plain numba, no cache) as their own packages and run on the same frames, round-robin, best of `--repeat`;
each schedule is checked against the first version's start times, job for job (a speed change must not move
a job).

    .venv/bin/python bench/compare_slurm_kernels.py --old 3ea462b [--curie 20000] [--overloaded 800] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

MODULES = ("bits", "nodes", "node_space", "priority", "will_run_cache", "kernel")
JIT_IMPORT = "from metapilot.models.simulator.jit import jit_nrt"


def sources(rev: str | None, out: Path) -> Path:
    """The kernel's files at `rev` (None: the working tree) in `out`; a module missing at `rev` is skipped."""
    out.mkdir(parents=True)
    for m in MODULES:
        path = f"models/simulator/slurm/{m}.py"
        if rev is None:
            src = REPO / path
            if src.exists():
                (out / f"{m}.py").write_text(src.read_text())
            continue
        res = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True)
        if res.returncode == 0:
            (out / f"{m}.py").write_text(res.stdout)
    return out


def build(src: Path, root: Path, name: str):
    """Compile one version as package `name` under `root` (on sys.path); returns its kernel's entry point
    as the replay calls it (a kernel from before the `stop` flag called without it, one from before
    associations without `assoc` and `assoc_account`, one from before node weights without `node_weight`)."""
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for m in MODULES:
        f = src / f"{m}.py"
        if not f.exists():
            continue
        text = f.read_text().replace(JIT_IMPORT, "import numba as _nb\njit_nrt = _nb.njit\n")
        for other in MODULES:
            text = text.replace(f"metapilot.models.simulator.slurm.{other}", f"{name}.{other}")
        (pkg / f"{m}.py").write_text(text)
    run = importlib.import_module(f"{name}.kernel").run_slurm
    params = inspect.signature(run.py_func).parameters
    def adapt(*args):
        """The replay's arguments (..., user, assoc, assoc_account, assoc_share, acct_share, acct_parent,
        size_f, ..., out_start, out_end, out_prio, stop) as an older kernel takes them."""
        args = list(args)
        if "node_weight" not in params:  # before slurm.conf's node weights
            del args[17]
        if "out_prio" not in params:
            del args[-2]
        if "acct_parent" not in params:  # before the site's association tree
            del args[9:12]
        if "assoc" not in params:  # before the associations
            del args[7:9]
        if "stop" not in params:
            del args[-1]
        return run(*args)

    return adapt


def main() -> None:
    from bench_slurm_replay import LOGS, swf_clusters, uniform

    import metapilot.models.simulator.slurm.replay as replay
    from metapilot.models.simulator.slurm import slurm_schedule
    from metapilot.models.simulator.slurm.replay import workload_frame
    from metapilot.transforms.parsers import ParseOptions, parse_jobs
    from metapilot.transforms.workload import normalise

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="the commit of the kernel to compare against")
    ap.add_argument("--curie", type=int, default=20_000, help="CEA-Curie's first N jobs (0: skip)")
    ap.add_argument("--overloaded", type=int, default=0,
                    help="also N jobs of an overloaded queue (one a second, 100-2,000 s, 1-32 CPUs, seeded) on 64 "
                         "one-CPU nodes: thousands queued, every backfill pass at bf_max_job_test (0: skip)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="slurmkernels-"))
    sys.path.insert(0, str(root))
    versions = {args.old: build(sources(args.old, root / "src_old"), root, "k_old"),
                "working tree": build(sources(None, root / "src_new"), root, "k_new")}
    kth = normalise(parse_jobs(LOGS[0].path, ParseOptions(fmt="swf")))
    cases = [("KTH-SP2", workload_frame(kth), uniform(1, 100))]
    if args.curie:
        cw = normalise(parse_jobs(LOGS[1].path, ParseOptions(fmt="swf"))).head(args.curie)
        cases.append((f"CEA-Curie first {args.curie:,}", workload_frame(cw), swf_clusters(LOGS[1], cw)[2][0][1]))
    if args.overloaded:
        import polars as pl

        from metapilot.models.simulator.slurm import SlurmConf

        rng = np.random.default_rng(1)
        n = args.overloaded
        run = rng.integers(100, 2000, n).astype(float)
        cases.append((f"overloaded queue, {n:,} jobs on 64 nodes", pl.DataFrame({
            "job_id": [str(i + 1) for i in range(n)], "submit": np.arange(n, dtype=float), "run": run,
            "time_limit": run, "cpus": rng.integers(1, 33, n), "nodes": [None] * n, "partition": [None] * n,
            "user": ["u"] * n, "qos": [None] * n}, schema_overrides={"nodes": pl.Int64, "partition": pl.Utf8,
                                                                      "qos": pl.Utf8}), SlurmConf.single(1, 64)))
    real = replay.run_slurm
    try:
        for name, frame, conf in cases:
            for run in versions.values():  # compile outside the timing
                replay.run_slurm = run
                slurm_schedule(frame.head(200), conf)
            best = dict.fromkeys(versions, np.inf)
            starts = {}
            for _ in range(args.repeat):
                for label, run in versions.items():
                    replay.run_slurm = run
                    r = slurm_schedule(frame, conf)
                    best[label] = min(best[label], r.engine_s)
                    starts[label] = np.nan_to_num(r.jobs["start"].to_numpy(), nan=-1.0)
            ref = starts[args.old]
            for label in versions:
                print(f"{name}: {label}: {best[label]:.3f} s ({best[label] / best[args.old]:.2f}x); same schedule: "
                      f"{np.array_equal(starts[label], ref)}", flush=True)
    finally:
        replay.run_slurm = real
        shutil.rmtree(root, ignore_errors=True)  # the kernels' copies, not needed after the run


if __name__ == "__main__":
    main()
