"""Steering a real Slurm against the replay engine (issue 39), and the cost of a steering cycle.

    .venv/bin/python bench/bench_slurm_live.py cycle [--jobs 10000]     # stand-in Slurm: a cycle's own time
    .venv/bin/python bench/bench_slurm_live.py live [--jobs 120 --compress 300] [--write]

`cycle`: 10,000 pending jobs answered by a stand-in squeue/scontrol (tests/steer_standin.py) that
counts its calls; three cycles (all set; then the first job starts and one arrives; then nothing
moves): the loop's own seconds (wall minus the time waiting for the stand-in), scontrol processes
and update lines.

`live`: a slice of the real KTH-SP2 trace (tests/data/kth_sp2_days22-25.swf, PROVENANCE.md) is
submitted to a real one-node Slurm (scripts/slurm.sh, 100 CPUs like the SP2) three times: Slurm's
default (multifactor, backfill), `steer` with a fixed rule (SJF+EASY), `steer` with the approved
decision (a published SAF+EASY, approved). Arrivals and run times (`sleep`) are the trace's divided
by --compress; time limits are whole minutes: the requested time divided by --limit-compress,
rounded up (dividing it by --compress would make nearly every limit 1 minute and SJF meaningless).
Each run is loaded with `metapilot collect` and replayed by the engine with the same arrivals,
run times, limits and cores (FCFS for Slurm's default: every job's priority is equal within a
run, so Slurm orders by job id; conservative backfilling: Slurm reserves for every job it tests).
Table: mean / p95 / max wait measured and predicted, per-job start difference, Kendall's tau
between the real and replayed start orders.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

SWF = REPO / "tests" / "data" / "kth_sp2_days22-25.swf"
HEADING = "Steering a live Slurm (issue 39)"


# --- the cost of one cycle ------------------------------------------------------------------------

def bench_cycle(n_jobs: int) -> dict:
    from bench_steer_churn import timed_cycle
    from steer_standin import job, make_bin

    from metapilot.models.steering.decision import named_rule
    from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
    from metapilot.models.steering.slurm_cli import SlurmCli

    tmp = Path(tempfile.mkdtemp(prefix="steer-bench-"))
    rng = random.Random(0)
    now = int(time.time())
    jobs = [job(i, limit_min=rng.randint(1, 2880), cpus=rng.choice([1, 2, 4, 8, 16, 64]),
                submit=now - rng.randint(0, 86400), partition=rng.choice(["debug", "debug", "high"]))
            for i in range(1, n_jobs + 1)]
    state = tmp / "state.json"
    state.write_text(json.dumps({"jobs": jobs, "mode": "ok"}))
    s = Steerer(SlurmCli(bin_dir=str(make_bin(tmp / "bin", state))), warehouse_connector(str(tmp / "w.duckdb")),
                named_rule("SAF+EASY"), SteerOptions("bench", step=10, max_changes=2 * n_jobs))
    s.start()
    rows = []
    for k in range(3):
        c = timed_cycle(s, state)
        rows.append({"cycle": k + 1, "changed": c["changed"], "own_s": c["own_s"], "slurm_s": c["slurm_s"],
                     "scontrol_processes": c["processes"], "update_lines": c["lines"]})
        if k == 0:  # the top job of the debug group starts, one short job arrives
            doc = json.loads(state.read_text())
            top = c["set"].filter(c["set"]["group_key"] == "debug|tier 1").sort("site_factor", descending=True)["target"][0]
            for j in doc["jobs"]:
                if str(j["job_id"]) == top:
                    j["job_state"], j["state_reason"] = "RUNNING", "None"
            doc["jobs"].append(job(n_jobs + 1, limit_min=1, cpus=1, submit=now))
            state.write_text(json.dumps(doc))
    return {"jobs": n_jobs, "cycles": rows}


# --- live against replay ---------------------------------------------------------------------------

def kth_slice(n: int, first: int) -> list[dict]:
    rows = [ln.split() for ln in SWF.read_text().splitlines() if ln.strip() and not ln.startswith(";")]
    out = []
    for r in rows[first:first + n]:
        procs = int(r[7]) if int(r[7]) > 0 else int(r[4])
        out.append({"id": r[0], "submit": int(r[1]), "run": max(int(r[3]), 1), "req": max(int(r[8]), int(r[3]), 60),
                    "cores": min(max(procs, 1), 100)})
    t0 = out[0]["submit"]
    for j in out:
        j["submit"] -= t0
    return out


def workload_plan(jobs: list[dict], compress: float, limit_compress: float) -> list[dict]:
    plan = []
    for j in jobs:
        limit_min = max(1, math.ceil(j["req"] / limit_compress / 60))
        sleep = max(1, round(j["run"] / compress))
        sleep = min(sleep, limit_min * 60 - 2)
        plan.append({**j, "at": j["submit"] / compress, "limit_min": limit_min, "sleep": sleep})
    return plan


def run_live(plan: list[dict], env: dict, db: str, steer: list[str] | None, cluster: str) -> dict[str, str]:
    """Submit the plan in real time (with a steering loop beside it), wait until every job ended;
    returns trace id -> Slurm job id."""
    loop = None
    if steer:
        loop = subprocess.Popen([sys.executable, "-m", "metapilot.cli", "steer", "--cluster", cluster, "--slurm",
                                 "--every", "2s", "--step", "100000", "--guard-h", "1000", "--db", db, *steer],
                                env=env, stdout=open(db + ".steer.log", "a"), stderr=subprocess.STDOUT)
        time.sleep(3)
    ids = {}
    t0 = time.monotonic()
    for j in plan:
        delay = j["at"] - (time.monotonic() - t0)
        if delay > 0:
            time.sleep(delay)
        out = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "--chdir", "/tmp", "-N", "1", "-n", str(j["cores"]),
                              "-t", str(j["limit_min"]), "-J", f"kth{j['id']}", "--wrap", f"sleep {j['sleep']}"],
                             env=env, capture_output=True, text=True, check=True)
        ids[j["id"]] = out.stdout.strip().split(";")[0]
    while True:
        left = subprocess.run(["squeue", "-h", "-t", "PD,R,CG", "-o", "%i"], env=env, capture_output=True, text=True).stdout
        if not left.strip():
            break
        time.sleep(2)
    if loop is not None:
        loop.send_signal(signal.SIGTERM)
        loop.wait(timeout=60)
    return ids


def measured(db: str, cluster: str, ids: dict[str, str]) -> dict[str, tuple[float, float, float]]:
    """trace id -> (submit, start, end) epoch seconds, from the warehouse `collect` loaded."""
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        rows = con.execute("SELECT job_id, epoch(submit_time), epoch(start_time), epoch(end_time) FROM jobs "
                           "WHERE cluster = ?", [cluster]).fetchall()
    finally:
        con.close()
    by_slurm = {r[0]: r[1:] for r in rows}
    return {tid: by_slurm[sid] for tid, sid in ids.items() if sid in by_slurm}


def replay(plan: list[dict], real: dict, policy: str, backfill: str, hold_s: float = 0.0,
           delay_s: float = 0.0) -> dict[str, float]:
    """trace id -> start (s after the first real submit) in the engine, given the real arrivals and run
    times; `hold_s`: the cores stay held this long after the recorded end (Slurm's COMPLETING);
    `delay_s`: a job can start only this long after its submission (the scheduling pass it waits for).
    A published decision (`policy` 'SJF-G': SJF+EASY with the guard; 'PLANNER': the planner) is
    followed by the walk forward's own deciders, deciding every steering cycle (`EVERY_S`)."""
    from metapilot.models.simulator import Capacity, simulate

    w = _workload(plan, real, hold_s, delay_s)
    if policy in PUBLISHED:
        from metapilot.models.evaluation.backtest import _planner_decider
        from metapilot.models.evaluation.walk_forward import RuleDecider, follow

        d = PUBLISHED[policy]
        if d["planner_settings"]:
            from metapilot.models.controller.planner import PlannerConfig

            cfg = PlannerConfig(**{k: v for k, v in d["planner_settings"].items() if k != "epoch_s"})
            decider = _planner_decider(cfg, False, d["guard_h"])
        else:
            decider = RuleDecider(f"{d['rule'].split('+')[0]}+{backfill.upper()}", d["guard_h"])
        r = follow(w, Capacity.single(100), [(0.0, decider)], epoch_s=EVERY_S)
    else:
        r = simulate(w, Capacity.single(100), policy, backfill)
    return {str(i): float(s) for i, s in zip(w.job_ids, r.start)}


def _workload(plan: list[dict], real: dict, hold_s: float, delay_s: float):
    from metapilot.transforms.workload import Workload

    base = min(v[0] for v in real.values())
    keep = [j for j in plan if j["id"] in real]
    submit = [real[j["id"]][0] - base + delay_s for j in keep]
    run = [max(real[j["id"]][2] - real[j["id"]][1], 1.0) + hold_s for j in keep]
    req = [max(j["limit_min"] * 60.0, r) for j, r in zip(keep, run)]
    return Workload.from_arrays(submit=submit, run=run, req_time=req, cores=[j["cores"] for j in keep],
                                job_ids=[j["id"] for j in keep])


def compare(real: dict, pred: dict) -> dict:
    from metapilot.models.steering.rank import kendall_tau

    base = min(v[0] for v in real.values())
    ids = sorted(set(real) & set(pred))
    sub = np.array([real[i][0] - base for i in ids])
    rs = np.array([real[i][1] - base for i in ids])
    ps = np.array([pred[i] for i in ids])
    rw, pw = rs - sub, ps - sub
    diff = np.abs(rs - ps)
    at_once = pw < 0.5
    latency = float(np.median(rw[at_once])) if at_once.any() else 0.0
    return {"latency": latency,
            "mean_dev_latency": (pw.mean() + latency - rw.mean()) / rw.mean() if rw.mean() > 0 else float("nan"),
            "jobs": len(ids), "mean_real": rw.mean(), "mean_pred": pw.mean(), "p95_real": np.percentile(rw, 95),
            "p95_pred": np.percentile(pw, 95), "max_real": rw.max(), "max_pred": pw.max(),
            "mean_dev": (pw.mean() - rw.mean()) / rw.mean() if rw.mean() > 0 else float("nan"),
            "start_diff_median": float(np.median(diff)), "start_diff_p95": float(np.percentile(diff, 95)),
            "tau": kendall_tau(rs, ps)}


def bench_live(n: int, first: int, compress: float, limit_compress: float, only: list[str] | None = None) -> dict:
    from slurm_fixtures import parse_exports

    plan = workload_plan(kth_slice(n, first), compress, limit_compress)
    env = {**os.environ, "METAPILOT_SLURM_CPUS": "100", "METAPILOT_SLURM_NO_INSTALL": "1"}
    start = subprocess.run(["bash", str(REPO / "scripts" / "slurm.sh"), "start"], env=env, capture_output=True, text=True)
    if start.returncode:
        raise SystemExit(start.stderr)
    env.update(parse_exports(start.stdout))
    env["PATH"] = os.environ["PATH"] + ":/usr/sbin"
    cluster = env["METAPILOT_SLURM_CLUSTER"]
    work = Path(tempfile.mkdtemp(prefix="slurm-live-"))
    results = {}
    try:
        steer_args = {"FCFS": None, "SJF": ["--policy", "SJF+EASY"], "SAF": ["--policy", "published"],
                      "SJF-G": ["--policy", "published"], "PLANNER": ["--policy", "published"]}
        runs = [(label, steer_args[rule], rule) for label, rule in RUNS if rule in (only or [r for _, r in RUNS])]
        for label, steer, rule in runs:
            db = str(work / f"{rule}.duckdb")
            if rule in PUBLISHED:
                _publish_walk_forward(db, cluster, env, PUBLISHED[rule])
            elif steer and steer[-1] == "published":
                _publish_and_approve(db, cluster, env)
            t0 = time.time()
            ids = run_live(plan, env, db, steer, cluster)
            span = time.time() - t0
            subprocess.run([sys.executable, "-m", "metapilot.cli", "collect", "--cluster", cluster, "--db", db],
                           env=env, check=True, capture_output=True, text=True, timeout=600)
            real = measured(db, cluster, ids)
            row = {"run": label, "span_s": span}
            for mode in modes_of(rule):
                row[mode] = compare(real, replay(plan, real, rule, *MODES[mode]))
            results[label] = row
            print(json.dumps(row, default=float), flush=True)
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm.sh"), "stop", env["METAPILOT_SLURM_DIR"]], env=env)
    return {"plan": {"jobs": len(plan), "first": first, "compress": compress, "limit_compress": limit_compress,
                     "limits_min": sorted({j["limit_min"] for j in plan})}, "runs": results}


MODES = {"conservative": ("conservative", 0.0), "easy": ("easy", 0.0),
         "conservative, cores freed 1 s after the end": ("conservative", 1.0),
         "easy, cores freed 1 s after the end": ("easy", 1.0),
         "conservative, both, and startable 1 s after submit": ("conservative", 1.0, 1.0),
         "easy, both, and startable 1 s after submit": ("easy", 1.0, 1.0)}
RUNS = (("Slurm's default", "FCFS"), ("steer SJF+EASY", "SJF"), ("steer the approved decision (SAF+EASY)", "SAF"),
        ("steer a published guarded rule (SJF+EASY, oldest first past 60 s)", "SJF-G"),
        ("steer the published planner (6 min horizon, decided every 2 s)", "PLANNER"))
EVERY_S = 2  # the steering loop's --every here; the replay of a published decision decides as often
# walk-forward decisions as `pipeline --backtest` publishes them, in this benchmark's compressed time (the
# guard 60 s = 5 h of trace time; the planner's epoch the loop's cycle)
PUBLISHED = {
    "SJF-G": {"rule": "SJF+EASY", "guard_h": 60.0 / 3600.0, "planner_settings": None,
              "decision": "SJF+EASY, oldest first once a job has waited 60 s"},
    "PLANNER": {"rule": "planner", "guard_h": None, "decision": "the lookahead planner (6 min horizon, lambda 0)",
                "planner_settings": {"horizon_h": 0.1, "lam": 0.0, "guard_h": None, "epoch_s": EVERY_S}},
}


def modes_of(rule: str) -> list[str]:
    """The engine modes a run is replayed under (the planner's menu is all EASY: its EASY modes only)."""
    return [m for m in MODES if rule != "PLANNER" or MODES[m][0] == "easy"]


def _publish_walk_forward(db: str, cluster: str, env: dict, ahead: dict) -> None:
    """Publish a walk-forward decision (as `pipeline --backtest` does) and approve it."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import publish_walk_forward

    con = connect(db)
    try:
        publish_walk_forward(con, cluster, {**ahead, "source": "benchmark", "backtest_id": None,
                                            "record": {"words": "benchmark: no walk forward behind it"}}, db)
    finally:
        con.close()
    subprocess.run([sys.executable, "-m", "metapilot.cli", "approve", "--cluster", cluster, "--db", db,
                    "--note", "benchmark"], env=env, check=True, capture_output=True)


def analyse(work: Path, n: int, first: int, compress: float, limit_compress: float) -> dict:
    """Recompute the table from a finished `live` run's warehouses (`work`: its slurm-live-* folder):
    each run's jobs in Slurm id order are the plan's jobs in submission order."""
    from metapilot.warehouse.db import connect

    plan = workload_plan(kth_slice(n, first), compress, limit_compress)
    results = {}
    for label, rule in RUNS:
        db = work / f"{rule}.duckdb"
        if not db.exists():
            continue
        con = connect(str(db), read_only=True)
        try:
            rows = con.execute("SELECT job_id, epoch(submit_time), epoch(start_time), epoch(end_time) FROM jobs").fetchall()
        finally:
            con.close()
        if len(rows) < len(plan):
            continue  # not collected yet
        rows = sorted(rows, key=lambda r: int(r[0]))[-len(plan):]
        real = {j["id"]: r[1:] for j, r in zip(plan, rows)}
        row = {"run": label}
        for mode in modes_of(rule):
            row[mode] = compare(real, replay(plan, real, rule, *MODES[mode]))
        results[label] = row
    return {"plan": {"jobs": len(plan), "first": first, "compress": compress, "limit_compress": limit_compress,
                     "limits_min": sorted({j["limit_min"] for j in plan})}, "runs": results}


def _publish_and_approve(db: str, cluster: str, env: dict) -> None:
    from datetime import datetime, timezone

    from metapilot.warehouse.db import connect

    con = connect(db)
    con.execute("INSERT INTO published_policies (cluster, partition, policy_id, published_at, kind, recommendation, "
                "message) VALUES (?, '*', 'bench', ?, 'fixed', 'SAF+easy', 'Keep SAF+EASY (benchmark)')",
                [cluster, datetime.now(timezone.utc)])
    con.close()
    subprocess.run([sys.executable, "-m", "metapilot.cli", "approve", "--cluster", cluster, "--db", db,
                    "--note", "benchmark"], env=env, check=True, capture_output=True)


# --- the document ------------------------------------------------------------------------------------

def section(cycle: dict | None, live: dict | None, note: str | None = None) -> str:
    from common import machine

    out = [f"## {HEADING}", "", f"Machine: {machine()}. `bench/bench_slurm_live.py`.", ""]
    if cycle:
        out += [f"**One cycle with {cycle['jobs']:,} pending jobs** (stand-in squeue/scontrol counting calls; SAF+EASY; "
                "own time = wall time minus the time waiting for the stand-in's answers, the warehouse writes "
                "included):", "",
                "| cycle | what changed | site factors set | own s | stand-in s | scontrol processes | update lines |",
                "|---|---|---:|---:|---:|---:|---:|"]
        what = ("every job ranked (all but the last of each group)", "the first job started, a short one arrived",
                "nothing moved")
        for r, w in zip(cycle["cycles"], what):
            out.append(f"| {r['cycle']} | {w} | {r['changed']:,} | {r['own_s']:.3f} | {r['slurm_s']:.3f} | "
                       f"{r['scontrol_processes']} | {r['update_lines']:,} |")
        out.append("")
    if live:
        p = live["plan"]
        out += [f"**Live against replay**: {p['jobs']} KTH-SP2 jobs (from job {p['first']} of the test slice), "
                f"arrivals and run times / {p['compress']:g}, limits = requested time / {p['limit_compress']:g} in whole "
                f"minutes ({p['limits_min']}), on a real one-node Slurm 22.05 with 100 CPUs; each run collected with "
                "`metapilot collect` and replayed by the engine with its real arrivals and run times.", "",
                "| run | engine mode | jobs | mean wait real / predicted (s) | deviation | start latency (s) | "
                "p95 real / pred | max real / pred | start diff median / p95 (s) | Kendall tau |",
                "|---|---|---:|---|---:|---:|---|---|---|---:|"]
        for label, row in live["runs"].items():
            for bf in (m for m in MODES if m in row):
                c = row[bf]
                out.append(f"| {label} | {bf} | {c['jobs']} | {c['mean_real']:.1f} / {c['mean_pred']:.1f} | "
                           f"{100 * c['mean_dev']:+.1f}% | {c['latency']:.1f} | "
                           f"{c['p95_real']:.0f} / {c['p95_pred']:.0f} | "
                           f"{c['max_real']:.0f} / {c['max_pred']:.0f} | {c['start_diff_median']:.1f} / "
                           f"{c['start_diff_p95']:.1f} | {c['tau']:.3f} |")
        base = live["runs"].get("Slurm's default")
        if base:
            b = base["conservative"]
            for label, row in live["runs"].items():
                if label != "Slurm's default":
                    c = row.get("conservative") or row["easy"]
                    out += ["", f"On the real Slurm, {label} against Slurm's default: mean wait {b['mean_real']:.1f} -> "
                                f"{c['mean_real']:.1f} s ({100 * (c['mean_real'] / b['mean_real'] - 1):+.0f}%), p95 "
                                f"{b['p95_real']:.0f} -> {c['p95_real']:.0f} s, max {b['max_real']:.0f} -> "
                                f"{c['max_real']:.0f} s (same jobs, same arrivals)."]
        if note:
            out += ["", note]
        out += ["", "Where the replay misses the real Slurm, the Slurm behaviour the engine lacks:",
                "- **Start latency**: a job that could start at once starts about a second after its submission (the "
                "scheduling pass it waits for; the \"start latency\" column is the median real wait of the jobs the "
                "replay starts at once); the last two rows let jobs start only 1 s after submission.",
                "- **Cores freed after the recorded end.** Slurm frees a job's cores about a second after the end "
                "time sacct records (COMPLETING: the epilog and slurmd's cleanup) and records times in whole "
                "seconds; the rows \"cores freed 1 s after the end\" replay with that second added to every run "
                "time. Where waits are a few seconds long this second is most of the gap.",
                "- **Steering acts once per cycle** (every 2 s here): a job submitted between cycles waits at site "
                "factor 0, behind the steered jobs, until the next cycle ranks it; the engine applies the rule at "
                "every event.",
                "- **Slurm's passes**: backfill every bf_interval (1 s) over at most bf_max_job_test jobs, reserving "
                "for each job it tests (neither EASY nor conservative); the main scheduler on events and every "
                "sched_interval; the engine schedules at every event, with one of its two textbook modes."]
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("cycle", "live", "both", "analyse"))
    ap.add_argument("--work", default=None, help="analyse: the slurm-live-* folder of a finished live run")
    ap.add_argument("--cycle-json", default=None, help="a cycle result (--json of `cycle`) to put in the section")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--first", type=int, default=200)
    ap.add_argument("--compress", type=float, default=300.0)
    ap.add_argument("--limit-compress", type=float, default=30.0)
    ap.add_argument("--write", action="store_true", help="write the section of docs/benchmarks.md")
    ap.add_argument("--json", default=None)
    ap.add_argument("--note", default=None, help="a sentence for the section (how the run went)")
    ap.add_argument("--runs", default=None, help="live: only these runs (FCFS, SJF, SAF, SJF-G, PLANNER), comma-separated")
    a = ap.parse_args()
    cycle = bench_cycle(a.jobs or 10_000) if a.what in ("cycle", "both") else None
    if a.cycle_json:
        cycle = json.loads(Path(a.cycle_json).read_text())["cycle"]
    if cycle:
        print(json.dumps(cycle, indent=1))
    only = a.runs.split(",") if a.runs else None
    live = bench_live(a.jobs or 120, a.first, a.compress, a.limit_compress, only) if a.what in ("live", "both") else None
    if a.what == "analyse":
        live = analyse(Path(a.work), a.jobs or 120, a.first, a.compress, a.limit_compress)
    if a.json:
        Path(a.json).write_text(json.dumps({"cycle": cycle, "live": live}, default=float, indent=1))
    text = section(cycle, live, a.note)
    print(text)
    if a.write:
        from common import write_section

        write_section(HEADING, text)


if __name__ == "__main__":
    main()
