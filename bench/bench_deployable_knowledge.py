"""What knowledge a deployed scheduler has could buy the controller (issue 11): the lookahead planner
(its teacher) told more than the queue, and fixed rules that order by a run-time prediction,
against the 21 fixed baselines on each trace's last 13 training weeks (where tuning chooses),
checkpoint weeks and held-out weeks, as `pipeline` splits the trace. Only what the scheduler has
seen is used; a setting is worth building only if it passes the publish gate on all three windows.

- `persistence`: the rollouts also see the jobs of `forecast_h` hours before arriving again
  (`PlannerConfig.forecast_h`), horizon 6 / 12 h, unanchored or anchored as tuning anchors.
- `rate`: the rollouts see arrivals sampled at the rate of the last `memory` hours, each a job of
  those hours (cores, request) at a uniform time in the horizon; each objective's cost is the mean
  over 4 sampled futures (`LookaheadPlanner.views`), seeded by the boundary's time.
- `predicted`: fixed rules that order the queue by a run-time prediction (Tsafrir, Etsion and
  Feitelson 2007: the mean run time of the user's last two jobs that ended before the submit,
  capped by the request; the request without such history), shortest predicted time first (SJF-P)
  and smallest predicted area first (SAF-P), with EASY and without backfilling. The prediction
  reads the log's end times, not the replay's, so it is if anything optimistic.

    .venv/bin/python bench/bench_deployable_knowledge.py [--traces kth,curie-a,curie-b]
        [--studies persistence,rate,predicted] [--no-write]

Each window is replayed from an empty cluster at its start (as `bench_planner.py` does).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_controller_gate import REPEAT, SWF, cut, resolve  # noqa: E402
from bench_planner import read_swf, workload_of  # noqa: E402
from common import machine, write_section  # noqa: E402

from metapilot.models.controller.gate import Outcome, gate  # noqa: E402
from metapilot.models.controller.objectives import Menu  # noqa: E402
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig  # noqa: E402
from metapilot.models.controller.replay import replay_objectives  # noqa: E402
from metapilot.models.controller.tuning import TUNING_WEEKS, fixed_outcomes, lowest_slowdown  # noqa: E402
from metapilot.models.simulator import Capacity, Engine, SimResult  # noqa: E402
from metapilot.models.simulator.engine import EXCLUDED  # noqa: E402
from metapilot.models.simulator.policies import POLICIES, SAF, SJF  # noqa: E402
from metapilot.transforms.state import StateConfig  # noqa: E402
from metapilot.transforms.swf import header_capacity  # noqa: E402
from metapilot.transforms.windows import split_history, week_number, week_start  # noqa: E402

WINDOWS = ("training weeks", "checkpoint", "held out")
STUDIES = ("persistence", "rate", "predicted")
FUTURES = 4  # sampled futures per boundary (`rate`)


class SampledArrivals(LookaheadPlanner):
    """The planner whose rollouts see arrivals at the recent rate: a Poisson count at the rate of
    the last `memory_h` hours, each a job of those hours arriving at a uniform time in the horizon."""

    def __init__(self, menu: Menu, config: PlannerConfig, epoch_s: int, memory_h: float) -> None:
        super().__init__(menu, config, epoch_s)
        self.memory_s = memory_h * 3600.0

    def views(self, engine: Engine) -> list[Engine]:
        now, span = engine.now, self.n_epochs * self.epoch_s
        submit = engine.jobs.submit
        recent = np.flatnonzero((submit >= now - self.memory_s) & (submit < now) & (engine.state.status != EXCLUDED))
        rng = np.random.default_rng(int(now))
        out = []
        for _ in range(FUTURES):
            n = rng.poisson(len(recent) * span / self.memory_s) if len(recent) else 0
            jobs = rng.choice(recent, n) if n else np.zeros(0, np.int64)
            out.append(engine.planning_view(arrivals=(jobs, now + rng.random(n) * span))[0])
        return out


def predicted_run(a: np.ndarray) -> np.ndarray:
    """Per job of `read_swf`'s rows: the mean run time of its user's last two jobs that ended
    before its submit (one when only one did), capped by its request; the request otherwise."""
    sub, wait, run, req, user = a[:, 1], np.maximum(a[:, 2], 0), np.maximum(a[:, 3], 0), a[:, 8], a[:, 11]
    end = sub + wait + run
    pred = np.where(req > 0, req, np.nan)
    for u in np.unique(user):
        jobs = np.flatnonzero(user == u)
        done = jobs[np.argsort(end[jobs], kind="stable")]
        k = np.searchsorted(end[done], sub[jobs], side="right")  # the user's jobs ended by each submit
        r = run[done]
        last = r[np.maximum(k - 1, 0)]
        mean = np.where(k >= 2, (last + r[np.maximum(k - 2, 0)]) / 2, np.where(k == 1, last, np.nan))
        pred[jobs] = np.where(np.isfinite(mean), np.fmin(mean, pred[jobs]), pred[jobs])
    return np.maximum(pred, 1.0)


def ordered_by_prediction(workload, capacity: Capacity, pred: np.ndarray, policy: int, backfill: str):
    """The replay under SJF or SAF with the prediction in place of the request in the queue order
    (EASY's reservations still use the request, as a real scheduler's would)."""
    engine = Engine(workload, capacity, policy, backfill)
    engine.jobs.static_key[:, SJF] = pred
    engine.jobs.static_key[:, SAF] = pred * engine.jobs.need[:, 0]
    engine.run()
    pool = engine.jobs.pool.copy()
    pool[engine.cannot_fit] = -1
    return SimResult(workload=workload, capacity=capacity, policy=POLICIES[policy], backfill=backfill,
                     start=engine.start.copy(), end=engine.end.copy(), pool=pool, cannot_fit=engine.cannot_fit,
                     wall_s=0.0, events=0, counters={}, engine_s=0.0)


def split(a: np.ndarray, start: int) -> dict[str, tuple[datetime, datetime]]:
    """The trace's windows as `pipeline` splits them; tuning's weeks are the training window's last 13."""
    t = start + a[:, 1]
    first, last = (datetime.fromtimestamp(x, UTC) for x in (t.min(), t.max()))
    busy = [week_start(w) for w in {week_number(x) for x in t.tolist()}]
    train, checkpoint, held_out = split_history(first, last, busy_weeks=busy)
    tuning = (max(train[0], train[1] - timedelta(weeks=TUNING_WEEKS)), train[1])
    return dict(zip(WINDOWS, (tuning, checkpoint, held_out), strict=True))


def settings(study: str, anchor: str) -> list[tuple[str, PlannerConfig, float]]:
    """(label, planner setting, memory in hours for `rate`) of a planner study."""
    anchors = (None, anchor)
    if study == "persistence":
        return [(f"forecast {f:g} h, horizon {h:g} h, " + (f"anchored on {b}" if b else "unanchored"),
                 PlannerConfig(horizon_h=h, lam=0.0, guard_h=None, base=b, margin=0.02 if b else 0.0, forecast_h=f), 0.0)
                for f, h, b in itertools.product((1.0, 6.0, 24.0, 168.0), (6.0, 12.0), anchors)]
    return [(f"rate of {m:g} h, horizon {h:g} h, " + (f"anchored on {b}" if b else "unanchored"),
             PlannerConfig(horizon_h=h, lam=0.0, guard_h=None, base=b, margin=0.02 if b else 0.0), m)
            for m, h, b in itertools.product((6.0, 24.0), (6.0, 12.0), anchors)]


def cell(o: Outcome, fixed: list[Outcome]) -> tuple[str, bool]:
    """A table cell: the bounded slowdown against the best fixed rule's, and whether the gate passes."""
    v = gate(o, fixed)
    dom = f", dominated by {v.dominated_by[0]}" if v.dominated_by else ""
    return f"{o.mean_bsld:.2f} vs {v.best_bsld.mean_bsld:.2f}{dom}{' **pass**' if v.passes else ''}", v.passes


def study_trace(name: str, studies: tuple[str, ...]) -> list[str]:
    file, cluster, lo, hi = resolve(name)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "trace.swf"
        cut(SWF / file, log, lo, hi, REPEAT.get(name, 1))
        a, header = read_swf(log)
    start = header.unix_start_time or 0
    declared = header_capacity(header)  # the cores `pipeline` takes from the header
    if not declared:
        raise SystemExit(f"{file}: the SWF header declares no capacity (MaxProcs or MaxNodes)")
    capacity = Capacity.single(int(declared[0]["cores"]))
    sc = StateConfig()
    menu = Menu.of(sc)
    wins = split(a, start)
    work = {k: workload_of(a, start, *v) for k, v in wins.items()}
    fixed = {k: fixed_outcomes(w, capacity) for k, w in work.items()}
    runs = [replay_objectives(work["training weeks"], capacity, i, sc.epoch_s, sc) for i in range(len(menu))]
    anchor = lowest_slowdown(menu, runs, 1)[0]
    spans = "; ".join(f"{k} {v[0]:%Y-%m-%d}..{v[1]:%Y-%m-%d}" for k, v in wins.items())
    out = [f"### {cluster}", "", f"{spans}. Anchor (lowest bounded slowdown held fixed over the training weeks): {anchor}.", ""]
    for study in studies:
        rows, passed = [], 0
        if study == "predicted":
            by_id = dict(zip(a[:, 0].astype(int).astype(str), predicted_run(a), strict=True))
            for policy, bf in itertools.product((SJF, SAF), ("easy", "none")):
                label = f"{POLICIES[policy]}-P+{bf}"
                cells = []
                for k, w in work.items():
                    pred = np.fmin([by_id[j] for j in w.job_ids], np.where(np.isfinite(w.req_time), w.req_time, np.inf))
                    res = ordered_by_prediction(w, capacity, pred, policy, bf)
                    cells.append(cell(Outcome.of(label, res.metrics().row(0, named=True)), fixed[k]))
                passed += all(ok for _, ok in cells)
                rows.append(f"| {label} | " + " | ".join(c for c, _ in cells) + " |")
        else:
            for label, cfg, memory in settings(study, anchor):
                cells = []
                for k, w in work.items():
                    planner = (SampledArrivals(menu, cfg, sc.epoch_s, memory) if study == "rate"
                               else LookaheadPlanner(menu, cfg, sc.epoch_s))
                    res = replay_objectives(w, capacity, planner, sc.epoch_s, sc)
                    cells.append(cell(Outcome.of(label, res.metrics().row(0, named=True)), fixed[k]))
                passed += all(ok for _, ok in cells)
                rows.append(f"| {label} | " + " | ".join(c for c, _ in cells) + " |")
        out += [f"**{study}**: {passed} of {len(rows)} pass all three windows.", "",
                "| setting | " + " | ".join(f"{k}: bsld vs best fixed" for k in WINDOWS) + " |",
                "|---|---|---|---|", *rows, ""]
        print("\n".join(out[-len(rows) - 4:]), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="kth,curie-a,curie-b")
    ap.add_argument("--studies", default=",".join(STUDIES))
    ap.add_argument("--no-write", action="store_true", help="print the section instead of writing docs/benchmarks.md")
    args = ap.parse_args()
    studies = tuple(s for s in args.studies.split(",") if s)
    unknown = set(studies) - set(STUDIES)
    if unknown:
        raise SystemExit(f"unknown studies {sorted(unknown)}; choose from {', '.join(STUDIES)}")
    t0 = time.perf_counter()
    body = []
    for name in args.traces.split(","):
        body += study_trace(name, studies)
    text = "\n".join([
        "## What deployable knowledge buys (issue 11)", "",
        f"Command: `.venv/bin/python bench/bench_deployable_knowledge.py --traces {args.traces} --studies {','.join(studies)}`. "
        f"Machine: {machine()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {time.perf_counter() - t0:.0f} s. "
        "Cells: mean bounded slowdown against the best of the 21 fixed baselines on the same window, the first fixed "
        "rule that dominates on (mean wait, max wait) if one does, and **pass** where the publish gate passes.", "",
        *body])
    if args.no_write:
        print(text)
    else:
        write_section("What deployable knowledge buys (issue 11)", text)


if __name__ == "__main__":
    main()
