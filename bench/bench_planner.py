"""The lookahead planner's decision time per epoch (SPEC §7 target: p99 < 10 ms on one core), and
the cost of tuning it, on real traces.

    .venv/bin/python bench/bench_planner.py [--no-write]

Each decision: the scheduler's view of the cluster (`Engine.planning_view`: running and queued
jobs only), copied and rolled forward `horizon_h` hours under each objective of the default menu.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED, machine, write_section  # noqa: E402

from metapilot.ground.cores import workers  # noqa: E402
from metapilot.models.controller.objectives import Menu  # noqa: E402
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig  # noqa: E402
from metapilot.models.controller.replay import replay_objectives  # noqa: E402
from metapilot.models.controller.tuning import tune_planner  # noqa: E402
from metapilot.models.simulator import Capacity  # noqa: E402
from metapilot.transforms.state import StateConfig  # noqa: E402
from metapilot.transforms.lines import open_binary  # noqa: E402
from metapilot.transforms.swf import SwfHeader, parse_swf_header  # noqa: E402
from metapilot.transforms.workload import normalise  # noqa: E402

UTC = timezone.utc
CASES = [  # trace, capacity (cores), window
    ("KTH-SP2-1996-2.1-cln.swf.gz", 100, "1997-06-02", "1997-08-29"),
    ("CEA-Curie-2011-2.1-cln.swf.gz", 93_312, "2012-06-04", "2012-09-03"),
]


def read_swf(path: Path) -> tuple[np.ndarray, SwfHeader]:
    """An SWF file's jobs (its first 12 fields: id, submit, wait, run, procs, ..., requested time,
    user) and its header, as ingest parses it; gzipped or plain."""
    rows, head = [], []
    with io.TextIOWrapper(open_binary(path)) as f:
        for line in f:
            if line.startswith(";"):
                head.append(line)
                continue
            x = line.split()
            if len(x) >= 18:
                rows.append([float(v) for v in x[:12]])
    return np.array(rows), parse_swf_header(head)


def workload_of(a: np.ndarray, start: int, lo: datetime, hi: datetime):
    """The jobs of `read_swf` submitted in [lo, hi), replayed from an empty cluster at `lo`."""
    t = start + a[:, 1]
    a = a[(t >= lo.timestamp()) & (t < hi.timestamp())]
    ts = lambda s: (pl.Series(s * 1e6).cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    known = lambda c: pl.Series(np.where(a[:, c] >= 0, a[:, c], np.nan)).fill_nan(None).cast(pl.Int64)  # noqa: E731
    df = pl.DataFrame({"job_id": a[:, 0].astype(int).astype(str), "submit_time": ts(start + a[:, 1]),
                       "start_time": ts(start + a[:, 1] + np.maximum(a[:, 2], 0)), "run_s": known(3),
                       "timelimit_s": known(8), "req_cpus": known(7), "alloc_cpus": known(4)})
    return normalise(df, lo)


def window(file: str, lo: str, hi: str):
    """The trace `file` (under the shared SWF folder) over [lo, hi) (UTC dates)."""
    day = lambda d: datetime.fromisoformat(d).replace(tzinfo=UTC)  # noqa: E731
    rows, header = read_swf(SHARED / "swf" / file)
    return workload_of(rows, header.unix_start_time or 0, day(lo), day(hi))


class Timed(LookaheadPlanner):
    def reset(self) -> None:
        super().reset()
        self.times: list[float] = []
        self.rolled: list[bool] = []

    def plan(self, engine, aggregates, settings) -> int:
        t0 = time.perf_counter()
        a = super().plan(engine, aggregates, settings)
        self.times.append(time.perf_counter() - t0)
        self.rolled.append(self.fresh and bool(self.costs.any()))  # it rolled every objective forward
        return a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    sc = StateConfig()
    lines = ["| trace, window | jobs | planner | decisions | p50 (ms) | p99 (ms) | max (ms) | with rollouts | "
             "their p50 (ms) | their p99 (ms) | tuning, 13 weeks (s): one process / workers |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    planners = [("6 h, lam 50, guard 24 h", PlannerConfig(horizon_h=6.0, lam=50.0, guard_h=24.0)),
                ("24 h, lam 50, guard 24 h", PlannerConfig(horizon_h=24.0, lam=50.0, guard_h=24.0)),
                ("12 h, anchored on SAF, slowdown weight 1", PlannerConfig(horizon_h=12.0, lam=0.0, guard_h=None,
                                                                            base="SAF", margin=0.02, slowdown=1.0))]
    n_settings = 0
    started = datetime.now(UTC)
    for file, cores, lo, hi in CASES:
        w = window(file, lo, hi)
        cap = Capacity.single(cores)
        for k, (label, cfg) in enumerate(planners):
            p = Timed(Menu.of(sc), cfg)
            replay_objectives(w, cap, p, state_config=sc)
            ms = np.array(p.times) * 1e3
            rolled = ms[np.array(p.rolled, dtype=bool)]
            tune = "–"
            if k == 0:  # as `pipeline` runs it (one worker process per usable core), and in one process
                quarter = w.select(w.submit < 13 * 7 * 86_400)
                walls = []
                for n in (1, None):
                    t0 = time.perf_counter()
                    n_settings = len(tune_planner(quarter, cap, sc, workers=n).rows)
                    walls.append(time.perf_counter() - t0)
                tune = f"{walls[0]:.1f} / {walls[1]:.1f} ({workers()})"
            lines.append(f"| {file.split('-')[0]}-{file.split('-')[1]} {lo}..{hi} | {len(w):,} | {label} | {len(ms):,} | "
                         f"{np.percentile(ms, 50):.2f} | {np.percentile(ms, 99):.2f} | {ms.max():.2f} | {len(rolled):,} | "
                         f"{np.percentile(rolled, 50):.2f} | {np.percentile(rolled, 99):.2f} | {tune} |")
            print(lines[-1], flush=True)
    text = ("## Lookahead planner: decision time and tuning (issue 11)\n\n"
            f"Command: `.venv/bin/python bench/bench_planner.py`. Machine: {machine()}; decisions in one process, one core; "
            f"run {started:%Y-%m-%d %H:%M} UTC. "
            "A decision = the planning view + one rollout per objective of the default menu (5); in epochs that "
            "open with an empty queue, or past the guard, nothing is rolled forward, so the p50 over all decisions "
            "is near 0 and the columns 'their p50 / p99' are over the decisions that rolled every objective forward. "
            f"Tuning = every setting of the default grid ({n_settings} settings: lookaheads, anchored lookaheads, "
            "guarded rules) replayed over 13 weeks, in one process and in one worker process per usable core (their "
            "number in brackets), as `pipeline` runs it.\n\n"
            + "\n".join(lines))
    if not args.no_write:
        write_section("Lookahead planner: decision time and tuning (issue 11)", text)


if __name__ == "__main__":
    main()
