"""The walk forward's comparison over a year (issue 38's third speed target: "the continuous replay
of all contenders of a year under 60 s"): `models.evaluation.backtest.run_backtest` on 52 weeks of
KTH-SP2 laid twice end to end (the trace spans 48 weeks), with an origin every 4 weeks after the
default warmup. No fold learns (the timing is of the replays): every fold's decision is its
gate's "fixed" verdict, so MetaPilot follows the guarded leader or, where its record prefers it,
the planner with the default settings, as a fold's untuned planner would.

    .venv/bin/python bench/bench_continuous_replay.py            # prints the timings

Timed: the past replays at the origins (what the past says at each: the 21 rules and the guarded
ones, from an empty machine) and the continuous replays of every contender (21 fixed rules, the
leader, the guarded leader, the planner, the oracle, MetaPilot), each as `run_backtest` logs it,
and the whole call; in a new process, so the compiled engine is loaded from numba's cache as an
operator's run loads it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_controller_gate import SWF, cut  # noqa: E402
from common import REPO, machine  # noqa: E402

METAPILOT = str(REPO / ".venv" / "bin" / "metapilot")
CLUSTER = "KTH-SP2x2"


def main() -> None:
    from metapilot.flows.backtest import plan_origins
    from metapilot.models.evaluation.backtest import Fold, run_backtest
    from metapilot.warehouse.db import connect

    with tempfile.TemporaryDirectory() as tmp:
        log, db = Path(tmp) / "kth2.swf", str(Path(tmp) / "w.duckdb")
        jobs = cut(SWF / "KTH-SP2-1996-2.1-cln.swf.gz", log, None, None, 2)
        subprocess.run([METAPILOT, "ingest", str(log), "--cluster", CLUSTER, "--db", db], check=True,
                       capture_output=True, text=True)
        _, _, _, origins, _ = plan_origins(db, CLUSTER, 4, None, None, None)
        span_end = origins[0] + timedelta(weeks=52)
        folds = [Fold(t, None, "fixed", "bench: no learning") for t in origins if t < span_end]
        lines: list[str] = []
        con = connect(db)
        try:
            t0 = time.perf_counter()
            out = run_backtest(con, CLUSTER, folds, span_end, log=lines.append)
            total = time.perf_counter() - t0
        finally:
            con.close()
    text = "\n".join(lines)
    past = float(re.search(r"past replays at \d+ origins: ([\d.]+) s", text).group(1))
    cont = float(re.search(r"continuous replays: ([\d.]+) s", text).group(1))
    span = re.search(r"span .*", text).group(0)
    print(f"machine: {machine()}")
    print(f"{jobs:,} jobs in the doubled log; {span}; contenders: {len(out.contenders)}")
    print(f"past replays at the origins: {past:.1f} s; continuous replays of every contender: {cont:.1f} s; "
          f"run_backtest in all: {total:.1f} s")


if __name__ == "__main__":
    main()
