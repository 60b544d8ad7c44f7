"""What one arrival costs the steering loop at 10,000 pending (issue 49, item 3), against a stand-in
Slurm (tests/steer_standin.py) answering crafted `squeue --json` and counting every call and update line.

    .venv/bin/python bench/bench_steer_churn.py [--jobs 10000] [--cycles 10]

Per rule (FCFS: every arrival ranks last; SJF and SAF: it ranks anywhere): a first cycle lays the
queue out; then each cycle the group's first job starts and one job arrives; the updates sent (one
RPC a line: the factors differ, so a job a line), scontrol processes, the loop's own seconds (wall
minus the stand-in's answers) and the stand-in's. Then every factor cleared behind the loop's back
(a slurmctld restarted from an old state): what the cap on updates per cycle (--max-changes, 2000)
does to the cycles that set them again.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def timed_cycle(s, state) -> dict:
    """One steering cycle on the stand-in, timed: its own seconds, Slurm's, and the scontrol updates it sent."""
    from steer_standin import calls

    before = len(calls(state))
    t0 = time.perf_counter()
    out = s.cycle()
    wall = time.perf_counter() - t0
    new = calls(state)[before:]
    updates = [c for c in new if c["tool"] == "scontrol" and not c["argv"]]
    return {"status": out.row["status"], "changed": out.row["changed"], "own_s": wall - out.row["slurm_seconds"],
            "slurm_s": out.row["slurm_seconds"], "processes": len(updates),
            "lines": sum(c["lines"] - 1 for c in updates), "set": out.set}


def bench_rule(rule: str, n_jobs: int, cycles: int, seed: int = 0) -> dict:
    from steer_standin import job, make_bin

    from metapilot.models.steering.decision import named_rule
    from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
    from metapilot.models.steering.slurm_cli import SlurmCli

    tmp = Path(tempfile.mkdtemp(prefix="steer-churn-"))
    rng = random.Random(seed)
    now = int(time.time())
    jobs = [job(i, limit_min=rng.randint(1, 2880), cpus=rng.choice([1, 2, 4, 8, 16, 64]),
                submit=now - 86400 + i * 8) for i in range(1, n_jobs + 1)]
    state = tmp / "state.json"
    state.write_text(json.dumps({"jobs": jobs, "mode": "ok", "cluster": "bench"}))
    s = Steerer(SlurmCli(bin_dir=str(make_bin(tmp / "bin", state))), warehouse_connector(str(tmp / "w.duckdb")),
                named_rule(f"{rule}+EASY"), SteerOptions("bench", step=10_001, max_changes=20_000))
    s.start()
    first = timed_cycle(s, state)
    steady = []
    next_id = n_jobs + 1
    for _ in range(cycles):
        doc = json.loads(state.read_text())
        cur = json.loads(state.read_text()).get("site_factors", {})
        top = max((j for j in doc["jobs"] if j["job_state"] == "PENDING"), key=lambda j: cur.get(str(j["job_id"]), 0))
        top["job_state"], top["state_reason"] = "RUNNING", "None"
        doc["jobs"].append(job(next_id, limit_min=rng.randint(1, 2880), cpus=rng.choice([1, 2, 4, 8, 16, 64]),
                               submit=now + next_id))
        next_id += 1
        state.write_text(json.dumps(doc))
        steady.append(timed_cycle(s, state))
    # every factor cleared behind the loop's back: set again, at most --max-changes a cycle
    s.opts.max_changes = 2000
    doc = json.loads(state.read_text())
    doc["site_factors"] = {}
    state.write_text(json.dumps(doc))
    restore = []
    while True:
        r = timed_cycle(s, state)
        restore.append(r)
        if r["changed"] == 0 or len(restore) > 10:
            break
    return {"rule": rule, "first": first, "steady": steady, "restore": restore}


def markdown(results: list[dict], n_jobs: int) -> str:
    out = [f"**One arrival at {n_jobs:,} pending** (one group; each cycle the first job starts and one arrives; step "
           "10,001; stand-in squeue/scontrol/sprio counting calls and lines):", "",
           "| rule | cycle | updates (RPCs) | scontrol processes | own s | stand-in s |", "|---|---|---:|---:|---:|---:|"]
    for r in results:
        f = r["first"]
        out.append(f"| {r['rule']} | first: the queue laid out | {f['lines']:,} | {f['processes']} | {f['own_s']:.3f} | "
                   f"{f['slurm_s']:.3f} |")
        lines = [c["lines"] for c in r["steady"]]
        own = [c["own_s"] for c in r["steady"]]
        sl = [c["slurm_s"] for c in r["steady"]]
        out.append(f"| {r['rule']} | {len(lines)} arrivals: median (max) | {statistics.median(lines):g} ({max(lines)}) | "
                   f"{statistics.median([c['processes'] for c in r['steady']]):g} | {statistics.median(own):.3f} "
                   f"({max(own):.3f}) | {statistics.median(sl):.3f} |")
    out += ["", "**Every factor cleared behind the loop's back** (then set again, --max-changes 2000 a cycle):", "",
            "| rule | updates per cycle until none differs |", "|---|---|"]
    for r in results:
        counts = ", ".join(f"{c['lines']:,}" for c in r["restore"])
        out.append(f"| {r['rule']} | {counts} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--rules", default="FCFS,SJF,SAF")
    a = ap.parse_args()
    results = [bench_rule(rule, a.jobs, a.cycles) for rule in a.rules.split(",")]
    print(markdown(results, a.jobs))


if __name__ == "__main__":
    main()
