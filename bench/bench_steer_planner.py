"""What one `steer` cycle costs under a published planner decision (issue 50, item 3), at 1,000 and
10,000 pending jobs, against the stand-in Slurm (tests/steer_standin.py) answering crafted
`squeue --json` / `sinfo --json`.

    .venv/bin/python bench/bench_steer_planner.py [--pending 1000,10000] [--cycles 3]

Per queue size: the planner's own decision from the live answers (`LivePlanner.decide`: the view
built from squeue/sinfo, then every objective of the menu forked to the horizon), a whole dry-run
cycle in process (`Steerer.cycle`: the loop's own seconds, Slurm's answers excluded), and the
command an operator runs, `metapilot steer --policy published --once --dry-run`, in a new process
(imports and the warehouse included). The loop refuses an `--every` under twice the measured cycle.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

PLANNER = {"horizon_h": 12.0, "lam": 0.0, "guard_h": None}
RECORD = {"words": "bench: no walk forward behind it", "span_from": "2026-01-01T00:00:00+00:00"}


def make_state(folder: Path, pending: int, running: int = 60, seed: int = 0) -> Path:
    """A queue of `pending` jobs and `running` ones on the stand-in's 64-core node."""
    from steer_standin import job

    rng = random.Random(seed)
    now = int(time.time())
    jobs = [job(i, limit_min=rng.randint(10, 2880), cpus=1, state="RUNNING", reason="None",
                submit=now - 7200 - i, start_time=now - rng.randint(60, 7000)) for i in range(1, running + 1)]
    jobs += [job(running + i, limit_min=rng.randint(1, 2880), cpus=rng.choice([1, 2, 4, 8, 16, 64]),
                 submit=now - 86400 + i * 8) for i in range(1, pending + 1)]
    state = folder / "state.json"
    state.write_text(json.dumps({"jobs": jobs, "mode": "ok", "cluster": "bench"}))
    return state


def publish(db: str) -> None:
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import publish_walk_forward

    con = connect(db)
    try:
        publish_walk_forward(con, "bench", {"rule": "planner", "guard_h": None, "planner_settings": PLANNER,
                                            "decision": "the lookahead planner (bench)", "source": "bench",
                                            "backtest_id": None, "record": RECORD}, db)
    finally:
        con.close()


def bench(pending: int, cycles: int) -> dict:
    from steer_standin import make_bin
    from bench_steer_churn import timed_cycle

    from metapilot.models.steering.decision import published
    from metapilot.models.steering.live_planner import LivePlanner
    from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
    from metapilot.models.steering.slurm_cli import SlurmCli
    from metapilot.models.steering.squeue import parse_sinfo, parse_squeue
    from metapilot.warehouse.db import connect

    tmp = Path(tempfile.mkdtemp(prefix="steer-planner-"))
    state = make_state(tmp, pending)
    bin_dir = str(make_bin(tmp / "bin", state))
    db = str(tmp / "w.duckdb")
    publish(db)
    cli = SlurmCli(bin_dir=bin_dir)
    jobs = parse_squeue(cli.squeue_json())[1]
    nodes = parse_sinfo(cli.sinfo_json())
    live = LivePlanner(PLANNER)
    decide = []
    for _ in range(cycles):
        live.decide(jobs, nodes, time.time())
        decide.append(live.last_s)
    con = connect(db, read_only=True)
    try:
        decision = published(con, "bench")
    finally:
        con.close()
    s = Steerer(cli, warehouse_connector(db), decision, SteerOptions("bench", dry_run=True, step=10_001))
    s.start()
    cyc = [timed_cycle(s, state) for _ in range(cycles)]
    r = subprocess.run([str(REPO / ".venv" / "bin" / "metapilot"), "approve", "--cluster", "bench", "--db", db],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    t0 = time.perf_counter()
    r = subprocess.run([str(REPO / ".venv" / "bin" / "metapilot"), "steer", "--cluster", "bench", "--slurm",
                        "--policy", "published", "--once", "--dry-run", "--slurm-bin", bin_dir, "--db", db],
                       capture_output=True, text=True, cwd=REPO)
    command = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    return {"pending": pending, "decide": decide, "cycle": [c["own_s"] for c in cyc],
            "slurm": [c["slurm_s"] for c in cyc], "status": cyc[-1]["status"], "command_s": command,
            "line": r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""}


def markdown(rows: list[dict]) -> str:
    from common import machine

    out = [f"Machine: {machine()}. Planner {PLANNER} (the live view: running jobs since their start, pending jobs, "
           "the node's cores; every objective of the menu forked to the horizon).", "",
           "| pending | planner decision (median of runs) | dry-run cycle, loop's own s (median) | stand-in Slurm s | "
           "`metapilot steer --once --dry-run`, new process | --every refused below |",
           "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        took = statistics.median(r["decide"])
        out.append(f"| {r['pending']:,} | {took:.3f} s | {statistics.median(r['cycle']):.3f} s | "
                   f"{statistics.median(r['slurm']):.3f} s | {r['command_s']:.1f} s | {2 * took:.1f} s |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pending", default="1000,10000")
    ap.add_argument("--cycles", type=int, default=3)
    a = ap.parse_args()
    rows = [bench(int(n), a.cycles) for n in a.pending.split(",")]
    for r in rows:
        print(r["line"])
    print(markdown(rows))


if __name__ == "__main__":
    main()
