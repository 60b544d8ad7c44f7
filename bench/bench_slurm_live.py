"""Steering a real Slurm against the replay engine (issue 39), and the cost of a steering cycle.

    .venv/bin/python bench/bench_slurm_live.py cycle [--jobs 10000]     # stand-in Slurm: a cycle's own time
    .venv/bin/python bench/bench_slurm_live.py live [--jobs 120 --compress 300] [--write]
    .venv/bin/python bench/bench_slurm_live.py fidelity [--out DIR --jobs 200 --first 19400 --compress 60] [--write]
    .venv/bin/python bench/bench_slurm_live.py --analyse DIR/fidelity.json [--write]

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

`fidelity` (issue 51): the replay of what Slurm does (`replay_slurm`, from the same slurm.conf) against
the real Slurm, on a longer, less compressed slice of the whole KTH-SP2 trace (default 200 jobs from
job index 19400, a busy stretch: arrivals, run times and limits / 60, limits at most 8 minutes; a
quarter of the jobs, chosen with a seed, in the `high` partition, PriorityTier 2): Slurm's default
(multifactor) and `steer` with SJF+EASY. The raw results (per job: trace id, Slurm id, partition,
cores, limit, submit/eligible/start/end as collected, sacct's priority; what the steering loop set)
go to DIR/fidelity.json after each run, beside the slurm.conf and slurmctld's log; `--analyse FILE`
recomputes the table from them. `--users`: each job is submitted (`sbatch --uid`) as the trace's own user
of it, Unix users `mpfid<trace user id>` in one Slurm account (`mpfid`), created for the runs and removed
after: Fair Tree then ranks them by their usage, as the replay's fair-share must.
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
from collections.abc import Iterator
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
        part = ["-p", j["partition"]] if j.get("partition") else []
        part += [f"--uid={j['user']}"] if j.get("user") else []
        part += [f"--account={j['account']}"] if j.get("account") else []
        part += ["-N", "1"] if j.get("nodes_asked", 1) == 1 else []  # 0: as many nodes as its CPUs need
        out = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "--chdir", "/tmp", "-n", str(j["cores"]),
                              "-t", str(j["limit_min"]), *part, "-J", f"kth{j['id']}", "--wrap", f"sleep {j['sleep']}"],
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
    """The replay's (or a second run's) starts against the real ones. `tau`: Kendall's tau-b of the start
    order, as the product reports the replay against the as-run history (`choice.fidelity`), jobs started
    in the same second counted as ties; `tau_a` (`rank.kendall_tau`) beside it, with its cap."""
    from metapilot.models.controller.asrun import kendall_tau_b
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
            "tau": kendall_tau_b(rs, ps), "tau_a": kendall_tau(rs, ps), "tau_a_cap": kendall_tau(rs, rs)}


def start_slurm(conf_extra: str = "", nodes: int = 1) -> dict[str, str]:
    """A real Slurm of 100 CPUs (scripts/slurm.sh): one node, or `nodes` nodes of 100 / `nodes` CPUs (one
    slurmd each), and the environment its commands need; `conf_extra`: lines added to its slurm.conf."""
    from slurm_fixtures import parse_exports

    if nodes < 1 or 100 % nodes:
        raise SystemExit(f"--nodes {nodes}: the 100 CPUs must split evenly over the nodes (1, 2, 4, 5, 10, ...)")
    env = {**os.environ, "METAPILOT_SLURM_CPUS": str(100 // nodes), "METAPILOT_SLURM_NODES": str(nodes),
           "METAPILOT_SLURM_NO_INSTALL": "1", "METAPILOT_SLURM_CONF_EXTRA": conf_extra}
    start = subprocess.run(["bash", str(REPO / "scripts" / "slurm.sh"), "start"], env=env, capture_output=True, text=True)
    if start.returncode:
        raise SystemExit(start.stderr)
    env.update(parse_exports(start.stdout))
    env["PATH"] = os.environ["PATH"] + ":/usr/sbin"
    return env


def bench_live(n: int, first: int, compress: float, limit_compress: float, only: list[str] | None = None) -> dict:
    plan = workload_plan(kth_slice(n, first), compress, limit_compress)
    env = start_slurm()
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


# --- fidelity: the replay of what Slurm does against the real Slurm (issue 51) ----------------------

FIDELITY_HEADING = "Replaying what Slurm does, live (issue 51)"
FIDELITY_RUNS = (("Slurm's default (multifactor)", "multifactor", None),
                 ("steer SJF+EASY", "SJF", ["--policy", "SJF+EASY"]))
FIDELITY_COMPLETE_S = (0.0, 1.0)  # the replay's rows: cores freed this long after the recorded end


def fidelity_plan(n: int, first: int, compress: float, limit_cap_min: int, high_share: float, seed: int,
                  users: bool = False, accounts: int = 0) -> list[dict]:
    """`n` jobs of the whole normalised KTH-SP2 trace from job index `first`: arrivals and run times divided
    by `compress`, limits = the requested time divided by `compress` in whole minutes, at most
    `limit_cap_min` (a job sleeps at most its limit less 2 s); each job in `high` with probability
    `high_share` (seeded), else in `debug`; `users`: each job's user the trace's (`mpfid<id>`), in one
    account, or with `accounts` > 0 in account `mpfacct<id mod accounts>`."""
    import gzip

    from common import SHARED

    path = SHARED / "reference" / "KTH-SP2.normalised.swf.gz"
    with gzip.open(path, "rt") as f:
        rows = [ln.split() for ln in f if ln.strip() and not ln.startswith(";")]
    rng = random.Random(seed)
    t0 = int(rows[first][1])
    plan = []
    for r in rows[first:first + n]:
        procs = int(r[7]) if int(r[7]) > 0 else int(r[4])
        run, req = max(int(r[3]), 1), max(int(r[8]), int(r[3]), 60)
        limit_min = min(max(1, math.ceil(req / compress / 60)), limit_cap_min)
        sleep = min(max(1, round(run / compress)), limit_min * 60 - 2)
        plan.append({"id": r[0], "submit": int(r[1]) - t0, "run": run, "req": req, "cores": min(max(procs, 1), 100),
                     "at": (int(r[1]) - t0) / compress, "limit_min": limit_min, "sleep": sleep,
                     "partition": "high" if rng.random() < high_share else "debug"})
        if users:
            plan[-1]["user"] = f"mpfid{int(r[11])}"  # lower case: sacctmgr keeps user names in lower case
            plan[-1]["account"] = f"mpfacct{int(r[11]) % accounts}" if accounts > 0 else FIDELITY_ACCOUNT
    return plan


FIDELITY_ACCOUNT = "mpfid"


def add_users(env: dict, account_of: dict[str, str], shares: dict[str, int] | None = None,
              parent_of: dict[str, str] | None = None) -> list[str]:
    """Unix users (those not there yet: returned, for `remove_users`) and their associations in their Slurm
    account (`account_of`: user -> account; an account in `parent_of` below that account, the others under
    root), each account or user named in `shares` with that Fairshare (sacctmgr's default 1 otherwise); waits for the decay thread's first Fair Tree pass over them
    (PriorityCalcPeriod): until then a new association's fair-share factor is 0, a state no replay of a
    site's history starts from."""
    import pwd

    names = sorted(account_of)
    made = []
    for u in names:
        try:
            pwd.getpwnam(u)
        except KeyError:
            subprocess.run(["useradd", "-M", "-N", "-s", "/bin/sh", u], check=True, capture_output=True)
            made.append(u)
    cluster = env["METAPILOT_SLURM_CLUSTER"]
    for acct in sorted(set(account_of.values())):
        members = [u for u in names if account_of[u] == acct]
        up = [f"parent={(parent_of or {})[acct]}"] if acct in (parent_of or {}) else []
        subprocess.run(["sacctmgr", "-i", "add", "account", acct, f"cluster={cluster}", *up], env=env,
                       check=True, capture_output=True, text=True)
        subprocess.run(["sacctmgr", "-i", "add", "user", "name=" + ",".join(members), f"account={acct}",
                        f"cluster={cluster}"], env=env, check=True, capture_output=True, text=True)
    for name, share in sorted((shares or {}).items()):
        kind = "account" if name in set(account_of.values()) else "user"
        subprocess.run(["sacctmgr", "-i", "modify", kind, "where", f"name={name}", f"cluster={cluster}", "set",
                        f"fairshare={share}"], env=env, check=True, capture_output=True, text=True)
    end = time.monotonic() + 400
    while time.monotonic() < end:
        out = subprocess.run(["sshare", "-n", "-P", "-a", "-o", "User,FairShare"], env=env, capture_output=True,
                             text=True).stdout
        fs = {ln.split("|")[0]: ln.split("|")[1] for ln in out.splitlines() if ln.count("|") == 1}
        if all(fs.get(u) not in (None, "", "0.000000") for u in names):
            return made
        time.sleep(5)
    raise SystemExit(f"Fair Tree never ranked the users: sshare says {fs}")


def remove_users(names: list[str]) -> None:
    for u in names:
        subprocess.run(["userdel", u], capture_output=True)


def named(job: dict) -> dict:
    """The plan's own user and account names of a job (the runs' made-up `mpfid` users, not people): the
    record keeps them instead of the warehouse's pseudonyms, so that it replays with the tree `sshare`
    printed, without the run's site key."""
    return {k: job[k] for k in ("user", "account") if job.get(k)}


def collected_jobs(db: str, cluster: str, ids: dict[str, str], plan: list[dict], env: dict) -> list[dict]:
    """One record per planned job: the plan's side (trace id, cores, limit, sleep, partition asked for) and
    what `metapilot collect` loaded (submit/eligible/start/end epoch seconds, partition, cpus, limit, state,
    the nodes it ran on),
    plus the priority sacct last recorded for the job."""
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        rows = con.execute(
            "SELECT job_id, epoch(submit_time), epoch(eligible_time), epoch(start_time), epoch(end_time), partition, "
            "qos, timelimit_s, req_cpus, alloc_cpus, req_nodes, alloc_nodes, state, user_id, account_id, node_list "
            "FROM jobs WHERE cluster = ?",
            [cluster]).fetchall()
    finally:
        con.close()
    keys = ("submit", "eligible", "start", "end", "partition", "qos", "limit_s", "req_cpus", "alloc_cpus", "req_nodes",
            "alloc_nodes", "state", "user", "account", "node_list")
    by_slurm = {r[0]: dict(zip(keys, r[1:])) for r in rows}
    prio = {}
    res = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,Priority", "-j", ",".join(ids.values())], env=env,
                         capture_output=True, text=True)
    for ln in res.stdout.splitlines():
        parts = ln.split("|")
        if len(parts) == 2 and parts[1].strip().isdigit():
            prio[parts[0]] = int(parts[1])
    out = []
    for j in plan:
        sid = ids.get(j["id"])
        rec = by_slurm.get(sid, {}) if sid else {}
        out.append({"trace_id": j["id"], "slurm_id": sid, "cores": j["cores"], "limit_min": j["limit_min"],
                    "sleep": j["sleep"], "partition_asked": j["partition"], "priority": prio.get(sid),
                    "nodes_asked": j.get("nodes_asked", 1), **rec,
                    **named(j)})
    return out


def steered_rows(db: str) -> list[dict]:
    """What the steering loop set: job, site factor, rank, when (epoch s), released when."""
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        rows = con.execute("SELECT job_id, site_factor, rank, group_key, epoch(set_at), epoch(released_at) "
                           "FROM steered_jobs ORDER BY set_at").fetchall()
    finally:
        con.close()
    return [dict(zip(("job_id", "site_factor", "rank", "group", "set_at", "released_at"), r)) for r in rows]


def fidelity_shares(plan: list[dict], account_shares: list[int], user_shares: bool) -> dict[str, int]:
    """The Fairshare of each account (`account_shares[i]` for `mpfacct<i>`) and, with `user_shares`, of
    each user (1 + (the trace's user id // 3) mod 3: the account is the id mod 3): unequal shares at both
    levels of the tree."""
    shares = {f"mpfacct{i}": int(v) for i, v in enumerate(account_shares)}
    if user_shares:
        shares.update({j["user"]: 1 + int(j["user"].removeprefix("mpfid")) // 3 % 3 for j in plan if j.get("user")})
    return shares


def bench_fidelity(out: Path, n: int, first: int, compress: float, limit_cap_min: int, high_share: float, seed: int,
                   only: list[str] | None = None, users: bool = False, accounts: int = 0,
                   priority_flags: str = "", account_shares: list[int] | None = None,
                   user_shares: bool = False, nested: bool = False, nodes: int = 1) -> Path:
    """Run the plan on a real Slurm once per run of FIDELITY_RUNS (or `only`: their rule names); the raw
    results go to out/fidelity.json after each run, beside the slurm.conf the runs used (fidelity.slurm.conf),
    the association tree as `sshare -a -l -P` printed it before the first run (sshare.txt: what a site gives
    the replay with --shares) and slurmctld's log; `priority_flags`: the cluster's PriorityFlags (e.g.
    NO_FAIR_TREE); `account_shares`, `user_shares`: unequal Fairshare (`fidelity_shares`); `nested`: the last
    account below the one before it (a three-level tree); `nodes`: the 100 CPUs on that many nodes (each
    pending job's reservation then holds only the nodes it would use). Returns the JSON's path."""
    out.mkdir(parents=True, exist_ok=True)
    plan = fidelity_plan(n, first, compress, limit_cap_min, high_share, seed, users, accounts)
    if nodes > 1:  # a job of more CPUs than a node has spans nodes: no -N, as a site's `sbatch -n` would
        for j in plan:
            j["nodes_asked"] = 0
    shares = fidelity_shares(plan, account_shares or [], user_shares)
    parent_of = {f"mpfacct{accounts - 1}": f"mpfacct{accounts - 2}"} if nested and accounts >= 2 else {}
    account_of = {j["user"]: j["account"] for j in plan if j.get("user")}
    names = sorted(account_of)
    doc = {"plan": {"jobs": len(plan), "first": first, "compress": compress, "limit_cap_min": limit_cap_min,
                    "high_share": high_share, "seed": seed, "users": len(names),
                    "accounts": len(set(account_of.values())), "trace": "KTH-SP2.normalised.swf.gz",
                    "limits_min": sorted({j["limit_min"] for j in plan}),
                    "high_jobs": sum(j["partition"] == "high" for j in plan),
                    **({"nodes": nodes} if nodes > 1 else {}),
                    **({"priority_flags": priority_flags} if priority_flags else {}),
                    **({"shares": shares} if shares else {}), **({"parents": parent_of} if parent_of else {})},
           "conf": "fidelity.slurm.conf", "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": {}}
    path = out / "fidelity.json"
    env = start_slurm(f"PriorityFlags={priority_flags}" if priority_flags else "", nodes)
    cluster = env["METAPILOT_SLURM_CLUSTER"]
    sdir = Path(env["METAPILOT_SLURM_DIR"])
    import shutil

    shutil.copy(env["SLURM_CONF"], out / "fidelity.slurm.conf")
    doc["slurm_dir"] = str(sdir)
    # slurmctld's log says what each backfill pass tested and where it planned each job (no effect on
    # what Slurm decides; the conf file stays as the runs' replay reads it)
    flags = subprocess.run(["scontrol", "setdebugflags", "+Backfill"], env=env, capture_output=True, text=True)
    doc["debug_flags"] = "Backfill" if flags.returncode == 0 else f"none ({flags.stderr.strip()})"
    made: list[str] = []
    try:
        if names:
            made = add_users(env, account_of, shares, parent_of)
            doc["fair_tree_ready"] = time.time()
            tree = subprocess.run(["sshare", "-a", "-l", "-P"], env=env, capture_output=True, text=True)
            if tree.returncode == 0:
                (out / "sshare.txt").write_text(tree.stdout)
                doc["sshare"] = "sshare.txt"
        for label, rule, steer in FIDELITY_RUNS:
            if only and rule not in only:
                continue
            db = str(out / f"{rule}.duckdb")
            t0 = time.time()
            ids = run_live(plan, env, db, steer, cluster)
            span = time.time() - t0
            time.sleep(3)  # slurmdbd has the last ends
            subprocess.run([sys.executable, "-m", "metapilot.cli", "collect", "--cluster", cluster, "--db", db],
                           env=env, check=True, capture_output=True, text=True, timeout=600)
            run = {"rule": rule, "steer": steer, "started": t0, "span_s": span,
                   "jobs": collected_jobs(db, cluster, ids, plan, env)}
            if steer:
                run["steered"] = steered_rows(db)
                if Path(db + ".steer.log").exists():
                    shutil.copy(db + ".steer.log", out / f"{rule}.steer.log")
            doc["runs"][label] = run
            path.write_text(json.dumps(doc, default=float, indent=0))
            shutil.copy(sdir / "log" / "slurmctld.log", out / "slurmctld.log")
            print(f"{label}: {len(ids)} jobs in {span:.0f} s", flush=True)
    finally:
        for log in [sdir / "log" / "slurmctld.log", *sorted((sdir / "log").glob("slurmd*.log"))]:
            if log.exists():
                shutil.copy(log, out / log.name)
        subprocess.run(["bash", str(REPO / "scripts" / "slurm.sh"), "stop", str(sdir)], env=env)
        remove_users(made)
    return path


def keep_results(out: Path, dest: Path) -> None:
    """A run's raw results where the repository keeps them (bench/results/...): its JSON, slurm.conf,
    association tree and slurmctld's log (gzipped); not its warehouse or site key (the records carry the
    runs' made-up users' own names)."""
    import gzip
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for path in [out / "fidelity.json", out / "fidelity.slurm.conf", out / "sshare.txt", *out.glob("*.steer.log")]:
        if path.exists():
            shutil.copy(path, dest / path.name)
    if (out / "slurmctld.log").exists():
        with open(out / "slurmctld.log", "rb") as f, gzip.open(dest / "slurmctld.log.gz", "wb") as g:
            shutil.copyfileobj(f, g)


def fidelity_frame(jobs: list[dict], base: float = 0.0):
    """The replay's input for one run: real submit times (epoch seconds less `base`), real run times
    (end - start), the limit, cores and partition each job ran with, the nodes it asked for (`-N 1`, or 0:
    any number), its user, QOS and account."""
    import polars as pl

    done = [j for j in jobs if j.get("start") is not None and j.get("end") is not None]
    return pl.DataFrame({
        "job_id": [j["trace_id"] for j in done],
        "submit": [float(j["submit"] - base) for j in done],
        "run": [float(j["end"] - j["start"]) for j in done],
        "time_limit": [float(j["limit_s"] if j.get("limit_s") else 60 * j["limit_min"]) for j in done],
        "cpus": [int(j.get("alloc_cpus") or j["cores"]) for j in done],
        "nodes": [j.get("nodes_asked", 1) for j in done],
        "partition": [j.get("partition") or j["partition_asked"] for j in done],
        "user": [j.get("user") for j in done],
        "qos": [j.get("qos") for j in done],
        "account": [j.get("account") for j in done],
    }, schema={"job_id": pl.Utf8, "submit": pl.Float64, "run": pl.Float64, "time_limit": pl.Float64,
               "cpus": pl.Int64, "nodes": pl.Int64, "partition": pl.Utf8, "user": pl.Utf8, "qos": pl.Utf8,
               "account": pl.Utf8})


REPLAY_ORIGIN = "epoch"  # the replay's clock: "epoch" (Slurm's own) or "first" (0 at the first submit)


def slurmctld_boot(conf_path: Path) -> float:
    """The epoch second slurmctld started (its log beside the runs' slurm.conf: "slurmctld version ...
    started"), where its decay passes begin; 0 without the log."""
    log = slurmctld_log(conf_path)
    if log is None:
        return 0.0
    for t, msg in _log_lines(log):  # its first lines: the rest is not read
        if "slurmctld version" in msg and "started on cluster" in msg:
            return t
    return 0.0


def bar_conf(conf_path: Path):
    """The runs' slurm.conf as the bar replays it: the priority recalculations from slurmctld's start, as a
    site's `scontrol show config` gives it; the association tree's shares from `sshare` where the run saved
    it, named as `collect` stored the jobs' names (`--shares` to the commands)."""
    from metapilot.models.simulator.slurm import read_shares, read_slurm_conf
    from metapilot.transforms.privacy import keyed_hash
    from metapilot.warehouse.secret import read_key

    conf = read_slurm_conf(conf_path).with_priority(calc_origin_s=slurmctld_boot(conf_path))
    if (conf_path.parent / "sshare.txt").exists():
        tree = read_shares(conf_path.parent / "sshare.txt")
        key = read_key(conf_path.parent / "secret.key")
        conf = conf.with_shares(tree.renamed(lambda x: keyed_hash(x, key)) if key is not None else tree)
    return conf


def replay_frame(jobs: list[dict], conf_path: Path, rule: str, complete_s: float, extra_run: np.ndarray | None = None):
    """The run replayed by `replay_slurm` (its frame: `start` in s after the first real submit, `init_prio`),
    on Slurm's own clock (`origin_s` = the first submit's epoch second: backfill rounds reservations to
    bf_resolution on that clock, so the replay's grid falls where Slurm's did) unless REPLAY_ORIGIN says
    otherwise; the conf as `bar_conf` reads it, with `complete_s` (what `--complete-s` gives the commands).
    `extra_run`: seconds added to each job's run time (a drawn latency, `drawn_latency_rows`)."""
    import polars as pl

    from metapilot.models.simulator.slurm import replay_slurm

    first = min(j["submit"] for j in jobs if j.get("start") is not None and j.get("end") is not None)
    conf = bar_conf(conf_path).with_sched(complete_s=complete_s)
    frame = fidelity_frame(jobs, first)
    if extra_run is not None:
        frame = frame.with_columns(pl.col("run") + pl.Series(extra_run))
    plan = json.loads((conf_path.parent / "fidelity.json").read_text())["plan"]
    if not plan.get("users"):  # every job was root's, in root's own association (the records hold its pseudonym)
        frame = frame.with_columns(pl.lit("root").alias("user"), pl.lit("root").alias("account"))
    return replay_slurm(frame, conf, rule=rule, origin_s=first if REPLAY_ORIGIN == "epoch" else 0.0)


def replay_run(jobs: list[dict], conf_path: Path, rule: str, complete_s: float) -> dict[str, float]:
    """trace id -> start (s after the first real submit) in the replay (`replay_frame`)."""
    out = replay_frame(jobs, conf_path, rule, complete_s)
    return {str(i): float(s) for i, s in zip(out["job_id"], out["start"])}


def initial_priorities(path: Path, label: str, complete_s: float) -> dict | None:
    """The replay's priority of each job at its submission against slurmctld's (`InitPrio` in its log): how
    many are equal, how many within 1%, of how many (None without the log, or for a steered run, whose
    order is the site factor's)."""
    log = slurmctld_log(path)
    doc = json.loads(path.read_text())
    run = doc["runs"][label]
    if log is None or run["rule"] != "multifactor":
        return None
    real = {jid: e["init_prio"] for jid, e in log_events(log).items() if "init_prio" in e}
    out = replay_frame(run["jobs"], path.parent / doc["conf"], run["rule"], complete_s)
    mine = {str(i): p for i, p in zip(out["job_id"], out["init_prio"])}
    pairs = [(real[j["slurm_id"]], mine[str(j["trace_id"])]) for j in run["jobs"]
             if j["slurm_id"] in real and mine.get(str(j["trace_id"])) is not None]
    return {"jobs": len(pairs), "equal": sum(a == b for a, b in pairs),
            "within_1pct": sum(abs(a - b) <= 0.01 * max(a, 1.0) for a, b in pairs)}


def slurmctld_log(path: Path) -> Path | None:
    """slurmctld's log kept beside a fidelity JSON (as copied, or gzipped), if any."""
    for name in ("slurmctld.log", "slurmctld.log.gz"):
        if (path.parent / name).exists():
            return path.parent / name
    return None


def start_latency(path: Path, label: str) -> float | None:
    """The mean time (s) from a completion to the start it lets through, from slurmctld's log (millisecond
    stamps): over the jobs of the run that waited, their start less the last completion before it (the
    completion handled, the cores freed, the next scheduling pass). None without the log."""
    log = slurmctld_log(path)
    if log is None:
        return None
    run = json.loads(path.read_text())["runs"][label]
    ev = log_events(log)
    sids = {j["slurm_id"] for j in run["jobs"]}
    done = np.array(sorted(e["done"] for k, e in ev.items() if k in sids and "done" in e))
    lags = []
    for j in run["jobs"]:
        e = ev.get(j["slurm_id"], {})
        if "start" in e and j.get("start") is not None and j["start"] - j["submit"] > 2:
            i = np.searchsorted(done, e["start"]) - 1
            if i >= 0 and e["start"] - done[i] < 2:  # a start 2 s or more after the last completion: not its trigger
                lags.append(e["start"] - done[i])
    return float(np.mean(lags)) if lags else None


def analyse_fidelity(path: Path, textbook: bool = True) -> dict:
    """The table from a fidelity JSON (no Slurm): each run replayed by `replay_slurm` from the saved
    slurm.conf (rule multifactor for Slurm's default, the steered rule for a steered run) with each
    complete_s of FIDELITY_COMPLETE_S and with the run's own start latency (`start_latency`, rounded to
    0.1 s) as complete_s; `textbook`: also the issue-39 engine (EASY) for reference."""
    doc = json.loads(path.read_text())
    conf = path.parent / doc["conf"]
    rows = []
    for label, run in doc["runs"].items():
        real = {j["trace_id"]: (j["submit"], j["start"], j["end"]) for j in run["jobs"]
                if j.get("start") is not None and j.get("end") is not None}
        lat = start_latency(path, label)
        values = [(cs, f"complete_s={cs:g}") for cs in FIDELITY_COMPLETE_S]
        if lat is not None:
            values.insert(1, (round(lat, 1), f"complete_s={round(lat, 1):g} (the run's start latency)"))
        for cs, what in values:
            pred = replay_run(run["jobs"], conf, run["rule"], cs)
            row = {"run": label, "replay": f"replay_slurm {run['rule']}, {what}", **compare(real, pred)}
            if "start latency" in what:
                row["init_prio"] = initial_priorities(path, label, cs)
            rows.append(row)
        if textbook:
            plan = [{"id": j["trace_id"], "limit_min": j["limit_min"], "cores": j["cores"]} for j in run["jobs"]]
            pol = "FCFS" if run["rule"] == "multifactor" else run["rule"]
            rows.append({"run": label, "replay": f"textbook {pol}+EASY (issue 39's engine)",
                         **compare(real, replay(plan, real, pol, "easy"))})
    return {"plan": doc["plan"], "started": doc.get("started"), "rows": rows}


def job_differences(path: Path, label: str, complete_s: float = 0.0) -> list[dict]:
    """Job by job for one run: real and replayed start (s after the first submit), sorted by the difference."""
    doc = json.loads(path.read_text())
    run = doc["runs"][label]
    pred = replay_run(run["jobs"], path.parent / doc["conf"], run["rule"], complete_s)
    done = [j for j in run["jobs"] if j.get("start") is not None]
    base = min(j["submit"] for j in done)
    out = [{"id": j["trace_id"], "slurm_id": j["slurm_id"], "partition": j.get("partition"), "cpus": j["cores"],
            "limit_min": j["limit_min"], "submit": j["submit"] - base, "start": j["start"] - base,
            "pred": pred[j["trace_id"]], "diff": pred[j["trace_id"]] - (j["start"] - base)} for j in done]
    return sorted(out, key=lambda r: -abs(r["diff"]))


def _log_lines(log: Path) -> Iterator[tuple[float, str]]:
    """slurmctld's log as (epoch seconds with milliseconds, message), read as it is consumed."""
    import gzip
    import re
    from datetime import datetime

    pat = re.compile(r"^\[(\S+)\] (.*)$")
    with (gzip.open(log, "rt", errors="replace") if log.suffix == ".gz" else open(log, errors="replace")) as f:
        for ln in f:
            m = pat.match(ln.rstrip("\n"))
            if m:  # the log's local time, as the epoch fields
                yield datetime.fromisoformat(m.group(1)).timestamp(), m.group(2)


def log_events(log: Path) -> dict[str, dict]:
    """Slurm job id -> what slurmctld's log says, in epoch seconds with milliseconds: `submit` (and
    `init_prio`, the priority it was given), `start` and how (`main`: the main scheduler's "sched:
    Allocate"; `backfill`: a backfill pass's start), `done` (the completion slurmctld handled)."""
    out: dict[str, dict] = {}
    for t, msg in _log_lines(log):
        if msg.startswith("_slurm_rpc_submit_batch_job: JobId="):
            jid = msg.split("JobId=")[1].split()[0]
            out.setdefault(jid, {})["submit"] = t
            if "InitPrio=" in msg:
                out[jid]["init_prio"] = float(msg.split("InitPrio=")[1].split()[0])
        elif msg.startswith("sched: Allocate JobId="):
            jid = msg.split("JobId=")[1].split()[0]
            out.setdefault(jid, {}).update(start=t, how="main")
        elif "_start_job: Started JobId=" in msg or msg.startswith("backfill: Started JobId="):
            jid = msg.split("JobId=")[1].split()[0]
            out.setdefault(jid, {}).update(start=t, how="backfill")
        elif msg.startswith("_job_complete: JobId=") and msg.endswith(" done"):
            jid = msg.split("JobId=")[1].split()[0]
            out.setdefault(jid, {})["done"] = t
    return out


def diagnose(path: Path, label: str, complete_s: float = 0.0, top: int = 15) -> str:
    """Where one run's replay misses: how its jobs started (main scheduler or backfill), the start latency
    of jobs that waited for nothing, and the jobs of largest start difference with what the log says."""
    doc = json.loads(path.read_text())
    run = doc["runs"][label]
    log = slurmctld_log(path)
    ev = log_events(log) if log else {}
    diffs = job_differences(path, label, complete_s)
    lines = [f"{label}: replay_slurm {run['rule']}, complete_s={complete_s:g}"]
    hows = [ev.get(j["slurm_id"], {}).get("how") for j in run["jobs"]]
    lines.append(f"  starts: main scheduler {hows.count('main')}, backfill {hows.count('backfill')}, "
                 f"unknown {sum(h is None for h in hows)}")
    lat = [ev[j["slurm_id"]]["start"] - ev[j["slurm_id"]]["submit"] for j in run["jobs"]
           if "start" in ev.get(j["slurm_id"], {}) and "submit" in ev[j["slurm_id"]] and j["start"] - j["submit"] <= 2]
    if lat:
        lines.append(f"  jobs started within 2 s of submission: {len(lat)}, submit -> start (log, ms precision): "
                     f"median {np.median(lat):.2f} s, max {max(lat):.2f} s")
    gap = [ev[j["slurm_id"]]["done"] - j["end"] for j in run["jobs"] if "done" in ev.get(j["slurm_id"], {})]
    if gap:
        lines.append(f"  completion handled by slurmctld - recorded end: median {np.median(gap):.2f} s, "
                     f"p95 {np.percentile(gap, 95):.2f} s")
    sign = np.array([d["diff"] for d in diffs])
    lines.append(f"  replay earlier than Slurm: {(sign < -0.5).sum()} jobs, later: {(sign > 0.5).sum()}, "
                 f"same second (+-0.5): {(np.abs(sign) <= 0.5).sum()}")
    for d in diffs[:top]:
        e = ev.get(d["slurm_id"], {})
        lines.append(f"  job {d['id']} (Slurm {d['slurm_id']}, {d['partition']}, {d['cpus']} cpus, {d['limit_min']} min): "
                     f"submit {d['submit']:.0f} start real {d['start']:.0f} replay {d['pred']:.0f} "
                     f"({d['diff']:+.0f} s), started by {e.get('how')}")
    return "\n".join(lines)


def plan_tag(plan: dict, first: dict) -> str:
    """What a later file's workload changes from the first's, in words ('' where nothing does)."""
    words = []
    if (plan["jobs"], plan["compress"]) != (first["jobs"], first["compress"]):
        words.append(f"{plan['jobs']} jobs, times / {plan['compress']:g}")
    if plan["limit_cap_min"] != first["limit_cap_min"]:
        words.append(f"limits at most {plan['limit_cap_min']} min")
    if plan["seed"] != first["seed"]:
        words.append(f"partitions drawn with seed {plan['seed']}")
    if plan.get("nodes", 1) != first.get("nodes", 1):
        words.append(f"{plan.get('nodes', 1)} nodes of {100 // plan.get('nodes', 1)} CPUs")
    flags = plan.get("priority_flags", "")
    if (plan.get("users", 0) != first.get("users", 0) or plan.get("accounts", 1) != first.get("accounts", 1)
            or flags != first.get("priority_flags", "") or plan.get("shares") != first.get("shares")
            or plan.get("parents") != first.get("parents")):
        in_accounts = f" in {plan['accounts']} accounts" if plan.get("accounts", 1) > 1 else ""
        if plan.get("shares"):
            in_accounts += " with unequal shares"
        if plan.get("parents"):
            in_accounts += ", one below another"
        algo = ("depth-oblivious fair-share" if "DEPTH_OBLIVIOUS" in flags
                else "classic fair-share" if "NO_FAIR_TREE" in flags else "Fair Tree")
        words.append(f"{plan['users']} users (the trace's){in_accounts}, {algo} between them" if plan.get("users")
                     else "every job root's")
    return "".join(", " + w for w in words)


def sensitivity(path: Path) -> list[dict]:
    """What moves each run's replay (the experiments behind "what the replay still lacks"): the replay as
    the bar reads it (sacct's seconds, complete_s = the run's start latency), with every submission seen
    0.3 or 0.5 s late, and with slurmctld's millisecond submit and run times instead of sacct's seconds
    (complete_s 0, 0.05, 0.1: the completion handled 0.02-0.04 s after the sleep), and with each completion's
    latency drawn (`drawn_latency_rows`)."""
    import polars as pl

    from metapilot.models.simulator.slurm import replay_slurm

    doc = json.loads(path.read_text())
    conf = bar_conf(path.parent / doc["conf"])
    log = slurmctld_log(path)
    ev = log_events(log) if log else {}
    rows = []
    for label, run in doc["runs"].items():
        jobs = [j for j in run["jobs"] if j.get("start") is not None and j.get("end") is not None]
        lat = start_latency(path, label)
        lat = round(lat, 1) if lat is not None else 0.0
        real = {j["trace_id"]: (j["submit"], j["start"], j["end"]) for j in jobs}
        first = min(j["submit"] for j in jobs)
        for late in (0.0, 0.3, 0.5):
            frame = fidelity_frame(jobs, first).with_columns(pl.col("submit") + late)
            out = replay_slurm(frame, conf.with_sched(complete_s=lat), rule=run["rule"], origin_s=first)
            c = compare(real, {str(i): float(t) for i, t in zip(out["job_id"], out["start"])})
            rows.append({"run": label, "inputs": "sacct's seconds" + (f", submissions seen {late:g} s late" if late
                                                                      else ""), "complete_s": lat, **c})
        rows += millisecond_rows(label, run["rule"], jobs, ev, conf, (0.0, 0.05, 0.1), "slurmctld's milliseconds")
        rows += drawn_latency_rows(path, label, lat)
    return rows


LATENCY_DRAWS = 16


def drawn_latency_rows(path: Path, label: str, lat: float, draws: int = LATENCY_DRAWS) -> list[dict]:
    """The run replayed as the bar reads it (`replay_frame`) `draws` times, with each completion's latency drawn
    (uniform on [0, 2 x the run's mean latency], added to the job's run time; complete_s 0), seeded: the
    replay's own spread where the record leaves the sub-second instants open, and the mean of the draws'
    starts (the replay's expectation given the record), to see whether that expectation meets the bar where
    one replay does not."""
    doc = json.loads(path.read_text())
    run = doc["runs"][label]
    jobs = [j for j in run["jobs"] if j.get("start") is not None and j.get("end") is not None]
    real = {j["trace_id"]: (j["submit"], j["start"], j["end"]) for j in jobs}
    rng = np.random.default_rng(0)
    starts = []
    for _ in range(draws):
        out = replay_frame(jobs, path.parent / doc["conf"], run["rule"], 0.0, rng.random(len(jobs)) * 2 * lat)
        starts.append(dict(zip(map(str, out["job_id"]), out["start"].to_numpy().astype(float))))
    singles = sorted((compare(real, s) for s in starts), key=lambda c: c["mean_dev"])
    mean = {i: float(np.mean([s[i] for s in starts])) for i in starts[0]}
    what = f"sacct's seconds, each completion's latency drawn ({draws} draws, mean {lat:g} s)"
    return [{"run": label, "inputs": f"{what}: the draws' mean start", "complete_s": lat, **compare(real, mean)},
            {"run": label, "inputs": f"{what}: the draw of least mean wait", "complete_s": lat, **singles[0]},
            {"run": label, "inputs": f"{what}: the draw of most mean wait", "complete_s": lat, **singles[-1]}]


def millisecond_rows(label: str, rule: str, jobs: list[dict], ev: dict[str, dict], conf, complete_s: tuple[float, ...],
                     inputs: str) -> list[dict]:
    """One run replayed from slurmctld's millisecond submissions, starts and completions (`log_events`) instead of
    sacct's seconds, once per completing time; none when the log misses a job."""
    import polars as pl

    from metapilot.models.controller.asrun import kendall_tau_b
    from metapilot.models.simulator.slurm import replay_slurm

    timed = [j for j in jobs if all(k in ev.get(j["slurm_id"], {}) for k in ("submit", "start", "done"))]
    if len(timed) < len(jobs):
        return []
    e = [ev[j["slurm_id"]] for j in timed]
    base = min(x["submit"] for x in e)
    frame = fidelity_frame(timed, 0.0).with_columns(pl.Series("submit", [x["submit"] - base for x in e]),
                                                     pl.Series("run", [x["done"] - x["start"] for x in e]))
    rs = np.array([x["start"] - base for x in e])
    sub = np.array([x["submit"] - base for x in e])
    rows = []
    for cs in complete_s:
        ps = replay_slurm(frame, conf.with_sched(complete_s=cs), rule=rule, origin_s=base)["start"].to_numpy()
        rw, pw = rs - sub, ps - sub
        rows.append({"run": label, "inputs": inputs, "complete_s": cs, "mean_dev": (pw.mean() - rw.mean()) / rw.mean(),
                     "tau": kendall_tau_b(rs, ps)})
    return rows


def logged_pass_rows(path: Path) -> list[dict]:
    """Each run replayed from slurmctld's millisecond submissions and completions with the backfill passes at
    the instants slurmctld's log says they began (`_attempt_backfill: beginning`), not on the replay's whole-second
    grid: a copy of the kernel built for the run (`profile_slurm_replay.logged_passes`). The main scheduler's
    passes leave no line unless they start a job, so they stay modelled. Says how much the passes' sub-second
    instants alone explain (eleventh session: not enough to converge)."""

    import shutil

    import metapilot.models.simulator.slurm.replay as replay_mod
    import profile_slurm_replay as prof

    doc = json.loads(path.read_text())
    log = slurmctld_log(path)
    if log is None:
        return []
    ev = log_events(log)
    root = Path(tempfile.mkdtemp(prefix="logged-passes-"))
    npy = root / "passes.npy"
    np.save(npy, np.array([t for t, m in _log_lines(log) if m.endswith("_attempt_backfill: beginning")]))
    sys.path.insert(0, str(root))
    real_kernel = replay_mod.run_slurm
    replay_mod.run_slurm = prof.build(f"logged passes:{npy}", root).run_slurm
    conf = bar_conf(path.parent / doc["conf"])
    rows = []
    try:
        for label, run in doc["runs"].items():
            jobs = [j for j in run["jobs"] if j.get("start") is not None and j.get("end") is not None]
            rows += millisecond_rows(label, run["rule"], jobs, ev, conf, (0.0, 0.05),
                                     "slurmctld's milliseconds and its logged backfill passes")
    finally:
        replay_mod.run_slurm = real_kernel
        sys.path.remove(str(root))
        shutil.rmtree(root, ignore_errors=True)  # the copy is loaded: its files are not needed again
    return rows


def merge_fidelity(results: list[dict]) -> dict:
    """Several fidelity analyses (one a JSON) as one table: a run of a later file is labelled with what its
    workload changes from the first's (`plan_tag`), and a run of a workload already run again as such."""
    first = results[0]["plan"]
    rows = []
    seen: dict[str, int] = {}
    for r in results:
        tag = plan_tag(r["plan"], first)
        for label in dict.fromkeys(row["run"] for row in r["rows"]):
            seen[label + tag] = seen.get(label + tag, 0) + 1
        rows += [{**row, "run": row["run"] + tag + (f", run {seen[row['run'] + tag]} of the same workload"
                                                     if seen[row["run"] + tag] > 1 else "")} for row in r["rows"]]
    return {"plan": first, "plans": [r["plan"] for r in results], "started": ", ".join(
        str(r.get("started")) for r in results), "rows": rows, "conf": results[0].get("conf")}


BAR_MEAN, BAR_TAU = 0.05, 0.98


def slurm_against_itself(paths: list[Path]) -> list[dict]:
    """Each run repeated on the same workload (the same plan and run, in two fidelity files) set against
    its first run as a replay would be: the later run's waits on the first run's submit times, so its mean
    wait deviation and Kendall's tau of the start order say how closely Slurm reproduces itself. Not a
    ceiling for a replay: a replay reads each run's own record (its submissions' seconds)."""
    firsts: dict[tuple[str, str], dict] = {}
    first_plan = json.loads(paths[0].read_text())["plan"]
    rows = []
    for path in paths:
        doc = json.loads(path.read_text())
        key_plan = json.dumps({k: v for k, v in doc["plan"].items() if v or k != "users"}, sort_keys=True)  # 0 users: root's
        for label, run in doc["runs"].items():
            real = {j["trace_id"]: (j["submit"], j["start"], j["end"]) for j in run["jobs"]
                    if j.get("start") is not None and j.get("end") is not None}
            key = (key_plan, label)
            if key not in firsts:
                firsts[key] = real
                continue
            first = firsts[key]
            base = min(v[0] for v in first.values())
            again = {i: first[i][0] - base + (v[1] - v[0]) for i, v in real.items() if i in first}
            rows.append({"run": label + plan_tag(doc["plan"], first_plan),
                         "file": str(path), **compare(first, again)})
    return rows


def bar_lines(result: dict) -> list[str]:
    """Per run, whether the bar (mean wait within 5%, Kendall's tau >= 0.98) is met by the replay with the
    run's own start latency as complete_s."""
    out = []
    for c in result["rows"]:
        if "start latency" not in c["replay"]:
            continue
        ok = abs(c["mean_dev"]) <= BAR_MEAN and c["tau"] >= BAR_TAU
        ip = c.get("init_prio")
        prio = (f"; initial priorities (slurmctld's InitPrio) {ip['equal']} of {ip['jobs']} equal, "
                f"{ip['within_1pct']} within 1%" if ip else "")
        out.append(f"- {c['run']}: mean wait {100 * c['mean_dev']:+.1f}%, tau-b {c['tau']:.3f} (tau-a {c['tau_a']:.3f}): "
                   f"**{'met' if ok else 'not met'}**" + ("" if ok else " (" + ", ".join(
                       x for x, bad in (("mean wait", abs(c["mean_dev"]) > BAR_MEAN), ("tau-b", c["tau"] < BAR_TAU))
                       if bad) + ")") + prio)
    return out


def conf_settings(conf_path: Path) -> str:
    """The slurm.conf settings the replay follows, in one line (Slurm's defaults where the file is silent)."""
    from metapilot.models.simulator.slurm import read_slurm_conf

    c = read_slurm_conf(conf_path)
    s, pr = c.sched, c.priority
    parts = ", ".join(f"`{p.name}` PriorityTier={p.priority_tier}{' (default)' if p.default else ''}"
                      for p in c.partitions)
    return (f"{len(c.nodes)} node{'s' if len(c.nodes) > 1 else ''} of {c.nodes[0].cpus} CPUs (select/cons_tres, CR_Core), partitions {parts} on it; "
            f"sched/backfill with bf_interval={s.bf_interval}, sched_interval={s.sched_interval}, "
            f"bf_window={s.bf_window_min} min, bf_resolution={s.bf_resolution} s, bf_max_job_test={s.bf_max_job_test}, "
            f"default_queue_depth={s.default_queue_depth}, batch_sched_delay={s.batch_sched_delay} s; "
            f"priority/multifactor with PriorityWeightAge="
            f"{pr.weight_age}, PriorityWeightFairshare={pr.weight_fairshare}, PriorityWeightPartition="
            f"{pr.weight_partition}, PriorityWeightQOS={pr.weight_qos}, PriorityWeightJobSize={pr.weight_job_size}, "
            f"PriorityMaxAge={pr.max_age_s / 86400:g} days, PriorityCalcPeriod={pr.calc_period_s / 60:g} min, "
            f"{'Fair Tree' if pr.fair_tree else 'depth-oblivious fair-share' if pr.depth_oblivious else 'classic fair-share'}")


def fidelity_section(result: dict, note: str | None = None, conf_path: Path | None = None) -> str:
    from common import machine

    p = result["plan"]
    seeds = [q["seed"] for q in result.get("plans", [p])]
    highs = [q["high_jobs"] for q in result.get("plans", [p])]
    out = [f"## {FIDELITY_HEADING}", "",
           f"Machine: {machine()}; runs started {result.get('started')}. Command: `.venv/bin/python "
           f"bench/bench_slurm_live.py fidelity --out DIR` (each run's raw results in DIR/fidelity.json beside the "
           "slurm.conf the runs used and slurmctld's log; the table again from them, without Slurm: "
           "`.venv/bin/python bench/bench_slurm_live.py --analyse DIR/fidelity.json [...] --diagnose`).", "",
           f"Workload: {p['jobs']} jobs of the normalised KTH-SP2 trace from job index {p['first']}, arrivals and run "
           f"times / {p['compress']:g}, limits = requested time / {p['compress']:g} in whole minutes, at most "
           f"{p['limit_cap_min']} ({p['limits_min']}); each job in `high` (PriorityTier=2) with probability "
           f"{p['high_share']:g} (seed {' / '.join(map(str, seeds))}: {' / '.join(map(str, highs))} jobs), the others "
           "in `debug` (PriorityTier=1); a real one-node Slurm 22.05 (`scripts/slurm.sh`); each run collected with "
           "`metapilot collect` and replayed by `replay_slurm` from the same slurm.conf with its real submit times "
           "(epoch seconds: Slurm's own clock), run times (end - start), limits, CPUs and partitions; the steered run "
           "with the rule `steer` applied (`rule='SJF'`).", ""]
    if conf_path is not None and conf_path.exists():
        out += [f"The slurm.conf settings that matter: {conf_settings(conf_path)}.", ""]
    out += ["| run | replay | jobs | mean wait real / predicted (s) | deviation | p95 real / pred | max real / pred | "
            "start diff median / p95 (s) | Kendall tau-b | tau-a (of at most) |",
            "|---|---|---:|---|---:|---|---|---|---:|---:|"]
    for c in result["rows"]:
        out.append(f"| {c['run']} | {c['replay']} | {c['jobs']} | {c['mean_real']:.1f} / {c['mean_pred']:.1f} | "
                   f"{100 * c['mean_dev']:+.1f}% | {c['p95_real']:.0f} / {c['p95_pred']:.0f} | "
                   f"{c['max_real']:.0f} / {c['max_pred']:.0f} | {c['start_diff_median']:.1f} / "
                   f"{c['start_diff_p95']:.1f} | {c['tau']:.3f} | {c['tau_a']:.3f} ({c['tau_a_cap']:.3f}) |")
    bars = bar_lines(result)
    if bars:
        out += ["", "Kendall's tau-b of the start order, as the product reports the replay against the as-run history "
                "(`choice.fidelity`, scipy's `kendalltau`): ties, jobs started in the same second, count as ties. "
                "Tau-a (in brackets: the most any replay could score, the real order against itself) counts every "
                "tie against the replay, so on these runs a perfect replay scores 0.984-0.992.", "",
                "The bar (mean wait within 5%, Kendall's tau-b of the start order at least 0.98), the replay with "
                "each run's own start latency as complete_s:", *bars]
    if note:
        out += ["", note]
    out.append("")
    return "\n".join(out)


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
    # a run stopped with kill (SIGINT is ignored in a background job) still stops its Slurm and removes its users
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap.add_argument("what", nargs="?", choices=("cycle", "live", "both", "analyse", "fidelity"))
    ap.add_argument("--work", default=None, help="analyse: the slurm-live-* folder of a finished live run")
    ap.add_argument("--analyse", default=None, metavar="FILE", nargs="+",
                    help="the fidelity table again from fidelity runs' JSON files (no Slurm needed)")
    ap.add_argument("--sensitivity", action="store_true",
                    help="with --analyse: each run replayed with submissions seen late, with slurmctld's millisecond "
                         "times, and with those and its logged backfill passes (what moves the replay)")
    ap.add_argument("--diagnose", action="store_true",
                    help="fidelity: where each run's replay misses, job by job, with what slurmctld's log says")
    ap.add_argument("--out", default=None, help="fidelity: the folder for the raw results (default bench/out/fidelity-<time>)")
    ap.add_argument("--cycle-json", default=None, help="a cycle result (--json of `cycle`) to put in the section")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--first", type=int, default=None, help="live: 200 (of the test slice); fidelity: 19400 (of the trace)")
    ap.add_argument("--compress", type=float, default=None, help="live: 300; fidelity: 60")
    ap.add_argument("--limit-compress", type=float, default=30.0)
    ap.add_argument("--limit-cap", type=int, default=8, help="fidelity: the longest limit, minutes")
    ap.add_argument("--high-share", type=float, default=0.25, help="fidelity: the share of jobs in the `high` partition")
    ap.add_argument("--seed", type=int, default=51, help="fidelity: the partition choice's seed")
    ap.add_argument("--users", action="store_true", help="fidelity: each job run by its trace user (Unix users "
                    "mpfid<id>, created and removed, in one Slurm account): fair-share between them")
    ap.add_argument("--accounts", type=int, default=0, help="fidelity with --users: the users in this many Slurm "
                    "accounts (mpfacct<id mod N>), for Fair Tree between accounts")
    ap.add_argument("--priority-flags", default="", help="fidelity: the cluster's PriorityFlags (e.g. NO_FAIR_TREE: "
                    "classic fair-share)")
    ap.add_argument("--account-shares", default=None, help="fidelity with --accounts: each account's Fairshare, "
                    "comma-separated (mpfacct0 first)")
    ap.add_argument("--nested", action="store_true", help="fidelity with --accounts N: the last account below the "
                    "one before it (a three-level tree)")
    ap.add_argument("--user-shares", action="store_true", help="fidelity with --users: each user's Fairshare 1 + "
                    "(its trace id // 3) mod 3")
    ap.add_argument("--nodes", type=int, default=1, help="fidelity: the 100 CPUs on this many nodes (one slurmd "
                    "each, on this host): reservations hold nodes, not the whole cluster")
    ap.add_argument("--keep", default=None, metavar="DIR", help="fidelity: also copy the run's raw results (no "
                    "warehouse, no key) to DIR, e.g. bench/results/issue51-fidelity/run-NAME")
    ap.add_argument("--write", action="store_true", help="write the section of docs/benchmarks.md")
    ap.add_argument("--json", default=None)
    ap.add_argument("--note", default=None, help="a sentence for the section (how the run went)")
    ap.add_argument("--runs", default=None, help="live: only these runs (FCFS, SJF, SAF, SJF-G, PLANNER); fidelity: "
                    "(multifactor, SJF); comma-separated")
    a = ap.parse_args()
    only = a.runs.split(",") if a.runs else None
    if a.what == "fidelity" or a.analyse:
        if a.analyse:
            paths = [Path(x) for x in a.analyse]
        else:
            out = Path(a.out) if a.out else REPO / "bench" / "out" / time.strftime("fidelity-%Y%m%d-%H%M", time.gmtime())
            paths = [bench_fidelity(out, a.jobs or 200, 19400 if a.first is None else a.first, a.compress or 60.0,
                                    a.limit_cap, a.high_share, a.seed, only, a.users, a.accounts, a.priority_flags,
                                    [int(x) for x in a.account_shares.split(",")] if a.account_shares else None,
                                    a.user_shares, a.nested, a.nodes)]
            if a.keep:
                keep_results(out, Path(a.keep))
        result = merge_fidelity([analyse_fidelity(x) for x in paths])
        if a.json:
            Path(a.json).write_text(json.dumps(result, default=float, indent=1))
        conf = paths[0].parent / json.loads(paths[0].read_text())["conf"]
        text = fidelity_section(result, a.note, conf)
        print(text)
        again = slurm_against_itself(paths)
        if again:
            print("\nSlurm against itself (the same workload run twice; the second run's waits on the first run's "
                  "submit times):\n\n| run | jobs | mean wait first / again (s) | deviation | p95 | max | "
                  "Kendall tau-b (tau-a) |\n|---|---:|---|---:|---|---|---:|")
            for r in again:
                print(f"| {r['run']} | {r['jobs']} | {r['mean_real']:.1f} / {r['mean_pred']:.1f} | "
                      f"{100 * r['mean_dev']:+.1f}% | {r['p95_real']:.0f} / {r['p95_pred']:.0f} | "
                      f"{r['max_real']:.0f} / {r['max_pred']:.0f} | {r['tau']:.3f} ({r['tau_a']:.3f}) |")
        if a.sensitivity:
            print("| run | inputs | complete_s | mean wait deviation | Kendall tau |\n|---|---|---:|---:|---:|")
            for path in paths:
                for r in sensitivity(path) + logged_pass_rows(path):
                    print(f"| {r['run']}{plan_tag(json.loads(path.read_text())['plan'], result['plan'])} | "
                          f"{r['inputs']} | {r['complete_s']:g} | {100 * r['mean_dev']:+.1f}% | {r['tau']:.3f} |")
        if a.diagnose:
            for path in paths:
                for label in json.loads(path.read_text())["runs"]:
                    lat = start_latency(path, label)
                    print(diagnose(path, label, round(lat, 1) if lat is not None else 0.0))
        if a.write:
            from common import write_section

            write_section(FIDELITY_HEADING, text)
        return
    if a.what is None:
        ap.error("what to run: cycle, live, both, analyse or fidelity (or --analyse FILE)")
    first = 200 if a.first is None else a.first
    compress = a.compress or 300.0
    cycle = bench_cycle(a.jobs or 10_000) if a.what in ("cycle", "both") else None
    if a.cycle_json:
        cycle = json.loads(Path(a.cycle_json).read_text())["cycle"]
    if cycle:
        print(json.dumps(cycle, indent=1))
    live = bench_live(a.jobs or 120, first, compress, a.limit_compress, only) if a.what in ("live", "both") else None
    if a.what == "analyse":
        live = analyse(Path(a.work), a.jobs or 120, first, compress, a.limit_compress)
    if a.json:
        Path(a.json).write_text(json.dumps({"cycle": cycle, "live": live}, default=float, indent=1))
    text = section(cycle, live, a.note)
    print(text)
    if a.write:
        from common import write_section

        write_section(HEADING, text)


if __name__ == "__main__":
    main()
