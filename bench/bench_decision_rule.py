"""The walk forward's decision rule alone, on every SWF log, in minutes: `metapilot ingest`, then the
walk forward with no learning (every fold 'failed', no planner), so MetaPilot is what the rule decides
from the past at each origin (keep, or a guarded rule) and nothing else. The same judge as
`metapilot backtest` (`run_backtest`): the bar (a)-(d), the gain over the current rule, the max wait
against its, each period's decision and why, and the fidelity of the replay at each origin.

    .venv/bin/python bench/bench_decision_rule.py                 # every SWF log in ../shared/data/swf
    .venv/bin/python bench/bench_decision_rule.py --traces kth,ricc

Why: the decision rule is the product's claim and must hold on logs it was not shaped on; the full
walk forward (`bench_walk_forward.py`) learns folds for minutes per log, this checks the rule on all
of them first. Nothing is tuned per trace.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_controller_gate import REPEAT, SWF, cut, resolve  # noqa: E402
from common import REPO  # noqa: E402

if TYPE_CHECKING:
    from metapilot.models.evaluation.walk_forward_result import WalkForwardResult

ALL = ("kth", "kth-x3", "curie-all", "lublin", "hpc2n", "nasa", "ricc", "lcg")


def ingest(name: str, root: Path) -> tuple[str, Path, int]:
    file, cluster, lo, hi = resolve(name)
    db = root / cluster / "w.duckdb"
    marker = root / cluster / "jobs"
    if not marker.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        log = root / f"{cluster}.swf"
        jobs = cut(SWF / file, log, lo, hi, REPEAT.get(name, 1))
        subprocess.run([str(REPO / ".venv" / "bin" / "metapilot"), "ingest", str(log), "--cluster", cluster, "--db",
                        str(db)], check=True, capture_output=True, text=True, cwd=REPO)
        marker.write_text(str(jobs))
    return cluster, db, int(marker.read_text())


def judge(cluster: str, db: Path) -> WalkForwardResult:
    from metapilot.flows.backtest import plan_origins
    from metapilot.models.evaluation.backtest import Fold, run_backtest
    from metapilot.warehouse.db import connect

    cluster, _first, _busy, origins, span_end = plan_origins(str(db), cluster, 4, None, None, None)
    folds = [Fold(o, gate="failed", note="no learning: the decision rule alone") for o in origins]
    con = connect(str(db))
    try:
        return run_backtest(con, cluster, folds, span_end, planner=False, n_boot=500, log=print)
    finally:
        con.close()


def summary(name: str, jobs: int, doc: WalkForwardResult, wall: float) -> str:
    me, cur = doc.contender("MetaPilot"), doc.contender(f"{doc.current} (current)")
    ratio = lambda a, b: "–" if not b else f"{a / b:.2f}x"  # noqa: E731
    bar = doc.bar
    flags = "".join("+" if v else "-" for v in (bar.beats_current, bar.not_dominated, bar.regret_within_5pct,
                                                bar.starves_no_one_more))
    return (f"| {name} | {jobs:,} | {len(doc.periods)} | {me.wait_mean_s:,.0f} vs {cur.wait_mean_s:,.0f} | "
            f"{me.bsld_mean:.2f} vs {cur.bsld_mean:.2f} | {ratio(me.wait_max_s, cur.wait_max_s)} | "
            f"{'met' if bar.met else 'not met'} ({flags}) | {bar.why or ''} | {wall:.0f} s |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default=",".join(ALL))
    ap.add_argument("--root", default=str(Path(tempfile.gettempdir()) / "metapilot-decision-rule"),
                    help="where the ingested warehouses are kept between runs")
    ap.add_argument("--json", help="write every trace's result here")
    a = ap.parse_args()
    root = Path(a.root)
    lines, out = [], {}
    for name in a.traces.split(","):
        cluster, db, jobs = ingest(name, root)
        t0 = time.perf_counter()
        try:
            doc = judge(cluster, db)
        except ValueError as e:  # too short a history: the walk forward refuses, saying why
            lines.append(f"| {name} | {jobs:,} | 0 | – | – | – | refused | {e} | – |")
            print(lines[-1], flush=True)
            continue
        wall = time.perf_counter() - t0
        out[name] = doc.to_json()
        for p in doc.periods:
            print(f"  {p.start:%Y-%m-%d}: {p.decision.describe()} — {p.decision.source}", flush=True)
        lines.append(summary(name, jobs, doc, wall))
        print(lines[-1], flush=True)
    print("\n| trace | jobs | periods | mean wait (s): MetaPilot vs current | bsld | max wait / current's | bar "
          "(a b c d) | why | wall |\n|---|---:|---:|---|---|---:|---|---|---:|")
    print("\n".join(lines))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
