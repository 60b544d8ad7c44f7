"""Where the Slurm replay's time goes (issue 51 item 5): counts and doubling experiments on a copy of its kernel.

The kernel is compiled (numba), so no profiler sees inside it. This script copies the text of
models/simulator/slurm/{kernel,bits,nodes,node_space,priority,will_run_cache}.py into a temporary package and
compiles variants:
- `count`: the same loop with counters (events, main and backfill passes, jobs each tests, will_run and
  space_allowed calls with the running jobs / map slots they walk, queue sorts and their lengths; the will-run
  tests asked and those computed, not kept from before: `will_run_cache`);
- `x2 <part>` (`--kinds`: which; all by default): one part of the work done twice (the second call overwrites the first's outputs, so the
  schedule stays the same, checked job for job): the extra time is what that part costs.
Each variant is checked to give the same start times as the real replay. The copies are patched at anchor
lines of the kernel's text; an anchor that is no longer there stops the script (it then needs updating).

    .venv/bin/python bench/profile_slurm_replay.py [--curie 20000] [--repeat 2] [--kinds "x2 lazy check" ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

SRC = REPO / "models" / "simulator" / "slurm"
JIT_IMPORT = "from metapilot.models.simulator.jit import jit_nrt"
COUNTERS = ("events", "main passes", "jobs tested in main passes", "backfill passes", "backfill passes skipped",
            "jobs tested in backfill passes", "will-run tests asked", "space_allowed calls",
            "running jobs at will_run calls (sum)", "map slots at space_allowed calls (sum)", "queue sorts",
            "queued jobs sorted (sum)", "reservations made", "jobs started by backfill", "jobs started by main",
            "will-run tests computed (not kept)")


KINDS = ("x2 will_run", "x2 space_allowed", "x2 lazy check", "x2 queue sort", "x2 main-pass pick",
         "x2 space_reserve")


def _sub(text: str, pattern: str, repl: str, count: int = 0) -> str:
    new, n = re.subn(pattern, repl, text, count=count, flags=re.M)
    if n == 0:
        raise SystemExit(f"anchor not found in kernel.py: {pattern!r}: update bench/profile_slurm_replay.py")
    return new


def cache_variant(kind: str, src: Path = SRC) -> str:
    """will_run_cache.py's text for one variant: the will-run tests it computes counted, or done twice."""
    text = (src / "will_run_cache.py").read_text()
    if kind == "count":
        text = _sub(text, r"^(def will_run_kept\((?:.*\n)*?.*rel)\):", r"\1, cnt):", 1)
        text = _sub(text, r"^(\s+)start, k = will_run\(", f"\\1cnt[{len(COUNTERS) - 1}] += 1\n\\1start, k = will_run(", 1)
    elif kind == "x2 will_run":
        text = _sub(text, r"^(\s+)start, k = will_run\(((?:.*\n)*?.*rel, gen\))\n",
                    r"\1start, k = will_run(\2\n\1start, k = will_run(\2\n", 1)
    return text


def variant(kind: str, src: Path = SRC) -> str:
    """kernel.py's text for one variant."""
    text = (src / "kernel.py").read_text()
    if kind == "count":
        text, n = re.subn(r"^(def run_slurm\([^)]*?out_start, out_end, out_prio, stop)\):", r"\1, cnt):", text, count=1,
                          flags=re.M | re.S)
        if n != 1:
            raise SystemExit("anchor not found: run_slurm's signature")
        text = _sub(text, r"^(\s+)clock = t\n", r"\1clock = t\n\1cnt[0] += 1\n", 1)
        text = _sub(text, r"^(\s+)order = _queue_order\((.*)\)\n",
                    r"\1order = _queue_order(\2)\n\1cnt[10] += 1\n\1cnt[11] += n_pend\n")
        text = _sub(text, r"^(\s+)depth = queue_depth if passes == 1 else -1\n",
                    r"\1depth = queue_depth if passes == 1 else -1\n\1cnt[1] += 1\n", 1)
        text = _sub(text, r"^(\s+)tested \+= 1\n(\s+)for w in range\(n_words\):\n(\s+)allowed\[w\] = part_bits",
                    r"\1tested += 1\n\1cnt[2] += 1\n\2for w in range(n_words):\n\3allowed[w] = part_bits", 1)
        text = _sub(text, r"^(\s+)if last >= 0:\n", r"\1if last < 0:\n\1    cnt[4] += 1\n\1if last >= 0:\n\1    cnt[3] += 1\n", 1)
        text = _sub(text, r"^(\s+)j = order\[pos\]\n(\s+)pos \+= 1\n",
                    r"\1j = order[pos]\n\1cnt[5] += 1\n\2pos += 1\n", 1)
        text = _sub(text, r"^(\s+)ts, k = will_run_kept\(((?:.*\n)*?.*pick_cpus, rel)\)\n",
                    r"\1cnt[6] += 1\n\1cnt[8] += n_running\n\1ts, k = will_run_kept(\2, cnt)\n", 1)
        text = _sub(text, r"^(\s+)later, cursor = space_allowed\(",
                    r"\1cnt[7] += 1\n\1cnt[9] += n_slots\n\1later, cursor = space_allowed(", 1)
        text = _sub(text, r"^(\s+)n_slots = space_reserve\((.*)\n(\s+)res\)\n(\s+)break\n",
                    r"\1cnt[12] += 1\n\1n_slots = space_reserve(\2\n\3res)\n\4break\n", 1)
        text = _sub(text, r"^(\s+)if part_excl\[p\]:\n(\s+)n_slots = space_reserve",
                    r"\1cnt[13] += 1\n\1if part_excl[p]:\n\2n_slots = space_reserve", 1)
        text = _sub(text, r"^(\s+)bf_dirty = True\n(\s+)n_pend = _drop_started",
                    r"\1bf_dirty = True\n\1cnt[14] += 1\n\2n_pend = _drop_started", 1)
    elif kind == "x2 space_allowed":
        text = _sub(text, r"^(\s+)later, cursor = space_allowed\(((?:.*\n).*allowed, cursor\))\n",
                    r"\1later, _c = space_allowed(\2\n\1later, cursor = space_allowed(\2\n", 1)
    elif kind == "x2 queue sort":
        text = _sub(text, r"^(\s+)order = _queue_order\((.*)\)\n",
                    r"\1order = _queue_order(\2)\n\1order = _queue_order(\2)\n")
    elif kind == "x2 main-pass pick":
        text = _sub(text, r"^(\s+)k = pick\(cpus\[j\], ([^)]*)\)\n", r"\1k = pick(cpus[j], \2)\n\1k = pick(cpus[j], \2)\n", 1)
    elif kind == "x2 space_reserve":
        text = _sub(text, r"^(\s+)n_slots = space_reserve\(s_begin, s_end, s_next, s_avail, n_slots, pick_node, k, s_r, "
                    r"e_r,\n(\s+)res\)\n",
                    r"\1n_slots = space_reserve(s_begin, s_end, s_next, s_avail, n_slots, pick_node, k, s_r, e_r,\n\2res)"
                    r"\n\1n_slots = space_reserve(s_begin, s_end, s_next, s_avail, n_slots, pick_node, k, s_r, e_r,\n\2res)"
                    "\n", 1)
    elif kind == "x2 lazy check":  # the backfill's "can it start now at all" before a job's reservation
        text = _sub(text, r"^(\s+)if lazy:\n(\s+)space_allowed\(((?:.*\n)*?.*allowed, 0\))\n",
                    r"\1if lazy:\n\2space_allowed(\3\n\2_n = count(allowed) + free_on(allowed, live, free, cpus[j])\n"
                    r"\2space_allowed(\3\n", 1)
    elif kind.startswith("logged passes:"):
        text = logged_passes(text, kind.removeprefix("logged passes:"))
    elif kind not in ("copy", "x2 will_run"):  # will_run is doubled in will_run_cache.py
        raise ValueError(kind)
    return text


def logged_passes(text: str, npy: str) -> str:
    """kernel.py's text with the backfill passes at given instants (a sorted .npy of epoch seconds, e.g. the
    `_attempt_backfill: beginning` lines of slurmctld's log) instead of every bf_interval on the clock's grid:
    what the replay would do if it knew when Slurm's passes ran (bench_slurm_live.py --sensitivity)."""
    text = _sub(text, r"^@jit_nrt\ndef _next_tick\(x, iv\):",
                f"BF_T = np.load({npy!r})\n\n\n@jit_nrt\ndef _next_pass(x):\n    i = np.searchsorted(BF_T, x)\n"
                "    return BF_T[i] if i < BF_T.shape[0] else np.inf\n\n\n@jit_nrt\ndef _next_tick(x, iv):", 1)
    text = _sub(text, r"next_bf = _next_tick\(t0, bf_interval\)", "next_bf = _next_pass(t0)", 1)
    text = _sub(text, r"next_bf = _next_tick\(clock, bf_interval\)", "next_bf = _next_pass(clock)", 1)
    return _sub(text, r"next_bf = t \+ bf_interval", "next_bf = _next_pass(t + 1e-6)", 1)


def build(kind: str, root: Path, src: Path = SRC):
    """Compile one variant as its own package (plain numba, no cache) and return its kernel module."""
    pkg = root / f"v_{re.sub(r'[^a-z0-9]+', '_', kind)}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    head = "import numba as _nb\njit_nrt = _nb.njit\n"
    mods = ("bits", "nodes", "node_space", "priority", "will_run_cache", "kernel")
    for mod in mods:
        if mod == "kernel":
            text = variant(kind, src)
        elif mod == "will_run_cache":
            text = cache_variant(kind, src)
        else:
            text = (src / f"{mod}.py").read_text()
        text = text.replace(JIT_IMPORT, head)
        for other in mods:
            text = text.replace(f"metapilot.models.simulator.slurm.{other}", f"{pkg.name}.{other}")
        (pkg / f"{mod}.py").write_text(text)
    return importlib.import_module(f"{pkg.name}.kernel")


def main() -> None:
    import polars as pl  # noqa: F401
    from bench_slurm_replay import LOGS, swf_clusters, uniform

    import metapilot.models.simulator.slurm.replay as replay
    from metapilot.models.simulator.slurm.replay import workload_frame
    from metapilot.transforms.parsers import ParseOptions, parse_jobs
    from metapilot.transforms.workload import normalise

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--curie", type=int, default=20_000, help="CEA-Curie's first N jobs (0: skip)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--src", default=str(SRC), help="the folder of the kernel's files (default: the repository's)")
    ap.add_argument("--kinds", nargs="+", choices=KINDS, help="the parts to double (default: all)")
    ap.add_argument("--save", help="keep the counts and extra times (JSON) here, for bench_slurm_replay.py --counts")
    args = ap.parse_args()
    saved = []
    kth = normalise(parse_jobs(LOGS[0].path, ParseOptions(fmt="swf")))
    cases = [("KTH-SP2", workload_frame(kth), uniform(1, 100))]
    if args.curie:
        cw = normalise(parse_jobs(LOGS[1].path, ParseOptions(fmt="swf"))).head(args.curie)
        cases.append((f"CEA-Curie first {args.curie:,}", workload_frame(cw), swf_clusters(LOGS[1], cw)[2][0][1]))
    real = replay.run_slurm
    root = Path(tempfile.mkdtemp(prefix="slurmprof-"))
    sys.path.insert(0, str(root))
    kinds = ("copy", "count", *(args.kinds or KINDS))
    try:
        _profile(cases, {k: build(k, root, Path(args.src)) for k in kinds}, kinds, real, args.repeat, saved)
    finally:
        replay.run_slurm = real
        shutil.rmtree(root, ignore_errors=True)  # the variants' copies, not needed after the run
    if args.save:
        Path(args.save).write_text(json.dumps(saved, indent=1))


def _profile(cases, mods, kinds, real, repeat, saved) -> None:
    """Each case replayed by every variant: the counts, and the extra time of each part done twice."""
    import metapilot.models.simulator.slurm.replay as replay
    from metapilot.models.simulator.slurm import slurm_schedule

    for name, frame, conf in cases:
        replay.run_slurm = real
        ref = slurm_schedule(frame, conf)
        ref_start = ref.jobs["start"].to_numpy()
        base = None
        case = {"case": f"{name} ({frame.height:,} jobs, {len(conf.nodes):,} nodes)", "counters": {}, "doubled": {}}
        saved.append(case)
        print(f"\n{name}: {frame.height:,} jobs, {len(conf.nodes):,} nodes; the real replay {ref.engine_s:.3f} s")
        for kind in kinds:
            mod = mods[kind]
            cnt = np.zeros(len(COUNTERS), np.int64)
            if kind == "count":
                replay.run_slurm = lambda *a, _m=mod, _c=cnt: _m.run_slurm(*a, _c)
            else:
                replay.run_slurm = mod.run_slurm
            slurm_schedule(frame, conf)  # compile
            cnt[:] = 0
            best = float("inf")
            for _ in range(repeat if kind != "count" else 1):
                cnt[:] = 0
                t0 = time.perf_counter()
                s = slurm_schedule(frame, conf)
                best = min(best, time.perf_counter() - t0)
                best = min(best, s.engine_s)
            same = np.array_equal(s.jobs["start"].to_numpy(), ref_start, equal_nan=True)
            if kind == "copy":
                base = best
                case["copy_s"] = best
            elif kind != "count":
                case["doubled"][kind.removeprefix("x2 ")] = best - base
            if not same:
                raise SystemExit(f"{kind}: the schedule changed: the patch is wrong")
            extra = "" if base is None or kind == "copy" else f" (+{best - base:.3f} s: {(best - base) / base:.0%} " \
                                                                 "of the copy's time)"
            print(f"  {kind}: {best:.3f} s{extra}; same schedule: {same}")
            if kind == "count":
                for label, v in zip(COUNTERS, cnt):
                    print(f"    {label}: {v:,}")
                    case["counters"][label] = int(v)


if __name__ == "__main__":
    main()
