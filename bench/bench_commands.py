"""Interactive commands as users run them (issue 14: < 1.5 s warm): `metapilot sql`, `metapilot
advise --at` and a one-policy `metapilot simulate`, each a new process, timed from the shell
(Python start-up, imports, the numba cache, the work and the exit), after one untimed run (warm
OS and numba caches). Also the work inside each command, in-process, for the split.

    .venv/bin/python bench/bench_commands.py            # builds a warehouse with `metapilot pipeline`
    .venv/bin/python bench/bench_commands.py --db FILE  # a warehouse with a published KTH-SP2 policy
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CLI, REPO, machine, timed, write_section  # noqa: E402

TARGET_S = 1.5


def in_process(db: str, policy: str, at: str) -> dict[str, float]:
    """The work inside each command, warm, in this process (ms, median of 20)."""
    from metapilot.models.controller.advice import Advisor
    from metapilot.models.simulator import Capacity, simulate
    from metapilot.transforms.workload import normalise
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.sim_store import load_capacity, load_window

    con = connect(db, read_only=True)
    try:
        adv = Advisor(policy, db)
        jobs = load_window(con, "KTH-SP2", None, None, None)  # as `metapilot simulate` reads them
        cap = Capacity.from_rows(load_capacity(con, "KTH-SP2", jobs["submit_time"].min()))
        workload = normalise(jobs, None)
        res = {}
        for name, fn in (("advise: state + decision", lambda: adv.advise_at(con, at)),
                         ("simulate: replay of KTH-SP2 (SJF+easy)", lambda: simulate(workload, cap, "SJF", "easy")),
                         ("sql: SELECT count(*) FROM jobs", lambda: con.execute("SELECT count(*) FROM jobs").fetchall())):
            fn()
            ts = []
            for _ in range(20):
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            res[name] = float(np.median(ts))
        return res
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="warehouse with a published KTH-SP2 policy (default: build one)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "w.duckdb")
        if not args.db:
            subprocess.run([CLI, "pipeline", "--db", db], check=True, capture_output=True, cwd=REPO)
        pointer = Path(db).parent / "policies" / "KTH-SP2.published.json"
        policy = json.loads(pointer.read_text())["policy_id"]
        at = "1997-08-01T12:00:00"
        cases = [("`metapilot sql \"SELECT count(*) FROM jobs\"`", ["sql", "SELECT count(*) FROM jobs", "--db", db]),
                 (f"`metapilot advise --policy P --at {at}`", ["advise", "--policy", policy, "--at", at, "--db", db]),
                 ("`metapilot simulate --cluster KTH-SP2 --policy SJF` (28k jobs, stored in sim_runs)",
                  ["simulate", "--cluster", "KTH-SP2", "--policy", "SJF", "--db", db])]
        load0 = os.getloadavg()[0]
        lines = ["| command (new process) | median (s) | min (s) | max (s) | target | met |", "|---|---:|---:|---:|---:|:-:|"]
        for label, argv in cases:
            t = timed(argv, args.repeat)
            lines.append(f"| {label} | {np.median(t):.2f} | {min(t):.2f} | {max(t):.2f} | {TARGET_S} s | "
                         f"{'yes' if np.median(t) < TARGET_S else 'NO'} |")
            print(lines[-1], flush=True)
        inside = in_process(db, policy, at)
    load1 = os.getloadavg()[0]
    text = ("## Interactive commands (issue 14)\n\n"
            f"Command: `.venv/bin/python bench/bench_commands.py`. Machine: {machine()}; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load0:.1f} at the start, "
            f"{load1:.1f} at the end. Each command as a new process, timed from outside (interpreter start, "
            f"imports, work, exit), {args.repeat} runs after one untimed run; the warehouse is `metapilot pipeline` "
            "on the bundled samples. `advise` loads the policy from `policy.npz` (numpy): no torch import.\n\n"
            + "\n".join(lines) + "\n\nThe work inside each command, warm, in-process (median of 20): "
            + "; ".join(f"{k} {v:.1f} ms" for k, v in inside.items()) + ".")
    print(text)
    if not args.no_write:
        write_section("Interactive commands (issue 14)", text)


if __name__ == "__main__":
    main()
