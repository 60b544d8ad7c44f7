"""The walk forward on real traces, as an operator runs it: `metapilot ingest`, then `metapilot
backtest` with its defaults in a new process (wall time and peak memory of the command), then one
table per trace: every deployable contender and the bar's two references, the bar (a)-(d), the goal
beyond it, each period's decision, and the trade-off the tail guard buys (bounded slowdown against
max wait over its settings, for the best rule overall and the reference, followed over the span).

    .venv/bin/python bench/bench_walk_forward.py                         # KTH-SP2, Lublin-256, HPC2N
    .venv/bin/python bench/bench_walk_forward.py --traces curie-all --dask local:2
    .venv/bin/python bench/bench_walk_forward.py --traces kth --no-write  # print only

Traces as in bench_controller_gate.py (`TRACES`); nothing is tuned per trace.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_controller_gate import REPEAT, SWF, cut, resolve  # noqa: E402
from common import REPO, machine, write_section  # noqa: E402

METAPILOT = str(REPO / ".venv" / "bin" / "metapilot")
SHOWN = ("metapilot", "current", "guarded-leader", "leader", "planner", "oracle", "as-run")


def fmt_s(s: float | None) -> str:
    return "–" if s is None else f"{s:,.0f}"


def times(v: float, of: float) -> str:
    """v as a multiple of `of`; where today's rule waits nothing: 1.00x if v waits nothing too, else '–'."""
    return f"{v / of:.2f}x" if of else ("1.00x" if not v else "–")


def pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1%}"


def run(name: str, tmp: Path, dask: str | None) -> dict:
    file, cluster, lo, hi = resolve(name)
    log = tmp / f"{cluster}.swf"
    jobs = cut(SWF / file, log, lo, hi, REPEAT.get(name.partition("@")[0], 1))
    db = tmp / cluster / "w.duckdb"
    subprocess.run([METAPILOT, "ingest", str(log), "--cluster", cluster, "--db", str(db)], check=True,
                   capture_output=True, text=True, cwd=REPO)
    out = tmp / cluster / "bt.json"
    cmd = [METAPILOT, "backtest", "--cluster", cluster, "--db", str(db), "--json", str(out),
           *(["--dask", dask] if dask else [])]
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        return {"name": name, "cluster": cluster, "jobs": jobs, "error": (p.stdout[-2000:] + p.stderr[-2000:])}
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    replay = re.search(r"continuous replays: ([\d.]+) s", p.stdout + p.stderr)
    past = re.search(r"past replays at \d+ origins: ([\d.]+) s", p.stdout + p.stderr)
    doc = json.loads(out.read_text())
    return {"name": name, "cluster": cluster, "jobs": jobs, "wall_s": wall, "cmd": " ".join(cmd[1:]),
            "rss_gb": int(rss.group(1)) / 1e6 if rss else None, "replay_s": float(replay.group(1)) if replay else None,
            "past_s": float(past.group(1)) if past else None, "doc": doc, "guard": guard_tradeoff(db, doc)}


def guard_tradeoff(db: Path, doc: dict) -> list[dict]:
    """The best rule overall and the reference, each followed over the span with every guard
    setting (none, then the thresholds the guarded leader chooses among): bsld and max wait."""
    from datetime import datetime

    from metapilot.models.evaluation.choice import guard_thresholds_h, recent_tail
    from metapilot.models.evaluation.walk_forward import Figures, RuleDecider, follow, jobs_between
    from metapilot.models.simulator import Capacity
    from metapilot.transforms.workload import normalise
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.sim_store import load_capacity, load_window

    t0, t1 = (datetime.fromisoformat(x) for x in doc["span"])
    con = connect(str(db), read_only=True)
    try:
        capacity = Capacity.from_rows(load_capacity(con, doc["cluster"], t0))
        workload = normalise(load_window(con, doc["cluster"], t0, t1), t0)
    finally:
        con.close()
    rows = []
    span_s = (t1 - t0).total_seconds()
    current = jobs_between(follow(workload, capacity, [(0.0, RuleDecider(doc["current"]))], epoch_s=3600), 0.0, span_s)
    for rule in dict.fromkeys([doc["reference_any"], doc["reference"]]):
        for h in (None, *guard_thresholds_h(recent_tail(current, span_s))):  # as the guarded leader's, from this span
            f = Figures.of(jobs_between(follow(workload, capacity, [(0.0, RuleDecider(rule, h))], epoch_s=3600),
                                        0.0, (t1 - t0).total_seconds()))
            rows.append({"rule": rule, "guard_h": h, "bsld": f.bsld_mean, "wait_mean_s": f.wait_mean_s,
                         "wait_max_s": f.wait_max_s, "wait_p99_s": f.wait_p99_s})
    return rows


def fidelity(f: dict | None) -> str:
    if not f or f.get("far"):  # far apart: the decision's reason already says so, in numbers
        return ""
    tau = "–" if f.get("kendall_tau") is None else f"{f['kendall_tau']:.2f}"
    return (f"; replay of the current rule vs as run over the past: mean wait {f['wait_mean_replay_s']:,.0f} vs "
            f"{f['wait_mean_asrun_s']:,.0f} s, waited > 1 min {f['waited_replay']:.0%} vs {f['waited_asrun']:.0%}, "
            f"tau {tau}")


def never_worse(doc: dict) -> bool:
    """Following MetaPilot was not worse than the current rule on mean wait or bsld beyond the idle
    tolerance (60 s, 0.05)."""
    by = {c["kind"]: c for c in doc["contenders"]}
    me, cur = by["metapilot"], by["current"]
    return me["wait_mean_s"] <= cur["wait_mean_s"] + 60.0 and me["bsld_mean"] <= cur["bsld_mean"] + 0.05


def overview(results: list[dict]) -> str:
    """One line per trace: the bar, never worse than the current rule, the max wait against its, the
    regrets, and whether it said keep (and why)."""
    lines = ["| trace | jobs | periods | `backtest` wall | bar (a)-(d) | never worse than current | max wait / current's "
             "| regret bsld [95% CI] | regret mean wait [95% CI] | kept the current rule in |",
             "|---|---:|---:|---:|---|---|---:|---:|---:|---|"]
    for r in results:
        if "error" in r:
            first = next((x for x in r["error"].splitlines() if "error" in x.lower() or "refus" in x.lower()),
                         r["error"].strip().splitlines()[-1] if r["error"].strip() else "")
            lines.append(f"| {r['cluster']} | {r['jobs']:,} | – | – | refused | – | – | – | – | {first.strip()} |")
            continue
        doc = r["doc"]
        by = {c["kind"]: c for c in doc["contenders"]}
        me, cur = by["metapilot"], by["current"]

        def ci(key: str) -> str:
            iv = me.get(f"{key}_ci")
            return pct(me.get(key)) + (f" [{pct(iv[0])}, {pct(iv[1])}]" if iv and iv[0] is not None else "")

        kept = sum(1 for p in doc["periods"] if p["decision"] == doc["current"])
        bar = doc["bar"]
        lines.append(f"| {r['cluster']} | {r['jobs']:,} | {len(doc['periods'])} | {r['wall_s'] / 60:.1f} min | "
                     f"{'met' if bar.get('met') else 'not met' + (' (keep: ' + bar['why'].split(':')[0] + ')' if bar.get('why') else '')} | "
                     f"{'yes' if never_worse(doc) else '**no**'} | {times(me['wait_max_s'], cur['wait_max_s'])} | "
                     f"{ci('regret_bsld')} | {ci('regret_wait_mean')} | {kept} of {len(doc['periods'])} periods |")
    return "\n".join(lines) + "\n"


def section(r: dict) -> str:
    if "error" in r:
        return f"### {r['cluster']}\n\n`metapilot backtest` did not run:\n\n```\n{r['error'].strip()[-1500:]}\n```\n"
    doc = r["doc"]
    by = {c["name"]: c for c in doc["contenders"]}
    cur = next(c for c in doc["contenders"] if c["kind"] == "current")
    lines = [f"### {r['cluster']} ({r['jobs']:,} jobs in the log)", "",
             f"`metapilot {r['cmd']}`: **{r['wall_s'] / 60:.1f} min wall**, peak RSS {r['rss_gb']:.2f} GB; past "
             f"replays at the origins {r['past_s']} s, continuous replays of every contender {r['replay_s']} s. "
             f"Span {doc['span'][0][:10]} .. {doc['span'][1][:10]}, {len(doc['periods'])} periods; current rule "
             f"{doc['current']}; reference (best admissible, in hindsight) {doc['reference']}; best overall "
             f"{doc['reference_any']}.", "",
             "| contender | kind | mean wait (s) | p99 wait (s) | max wait (s) | bsld | regret bsld [95% CI] | "
             "regret mean wait [95% CI] | regret bsld vs best overall | max wait / current's | Jain (users) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    shown = [c for c in doc["contenders"] if c["kind"] in SHOWN or c["name"] in (doc["reference"], doc["reference_any"])]
    for c in sorted(shown, key=lambda c: (SHOWN.index(c["kind"]) if c["kind"] in SHOWN else 9, c["bsld_mean"] or 0)):
        if c.get("wait_mean_s") is None:
            lines.append(f"| {c['name']} | {c['kind']} | unavailable | | | | | | | | |")
            continue

        def ci(key: str) -> str:
            iv = c.get(f"{key}_ci")
            return pct(c.get(key)) + (f" [{pct(iv[0])}, {pct(iv[1])}]" if iv and iv[0] is not None else "")

        tag = (" (reference)" if c["name"] == doc["reference"] else "") + (
            " (best overall)" if c["name"] == doc["reference_any"] else "")
        lines.append(f"| {c['name']} | {c['kind']}{tag} | {fmt_s(c['wait_mean_s'])} | {fmt_s(c['wait_p99_s'])} | "
                     f"{fmt_s(c['wait_max_s'])} | {c['bsld_mean']:.2f} | {ci('regret_bsld')} | {ci('regret_wait_mean')} | "
                     f"{pct(c['regret_bsld_any'])} | {times(c['wait_max_s'], cur['wait_max_s'])} | "
                     f"{'–' if c.get('jain_users') is None else format(c['jain_users'], '.2f')} |")
    me, gl = by["MetaPilot"], by.get("guarded leader")
    bar = doc["bar"]
    lines += ["", f"Bar (a)-(d): **{'met' if bar.get('met') else 'not met'}** (beats {doc['current']} on mean wait and "
                  f"bsld: {bar.get('beats_current')}; dominated by no fixed rule: {bar.get('not_dominated')}"
                  f"{' (by ' + ', '.join(bar['dominated_by']) + ')' if bar.get('dominated_by') else ''}; regret <= 5%: "
                  f"{bar.get('regret_within_5pct')}; starves no one more: {bar.get('starves_no_one_more')})"
                  + (f"; {bar['why']}." if bar.get("why") else ".")]
    hi_b = (me.get("regret_bsld_ci") or [None, None])[1]
    hi_w = (me.get("regret_wait_mean_ci") or [None, None])[1]
    goal = (me["regret_bsld"] <= -0.10 and me["regret_wait_mean"] <= -0.10 and hi_b is not None and hi_b < 0
            and hi_w is not None and hi_w < 0 and gl is not None and me["bsld_mean"] < gl["bsld_mean"]
            and me["wait_mean_s"] < gl["wait_mean_s"])
    lines.append(f"Goal beyond the issue (regret <= -10% on both with the interval below zero, ahead of the guarded "
                 f"leader on both): **{'met' if goal else 'not met'}**.")
    lines += ["", "Periods (MetaPilot's decision, decided at the period's start from the past alone):", ""]
    lines += [f"- {p['from'][:10]} .. {p['to'][:10]}: {p['decision']} ({p['why']}){fidelity(p.get('fidelity'))}"
              for p in doc["periods"]]
    lines += ["", "The trade-off the tail guard buys, each rule followed over the span (guard: oldest first once a job "
                  "has waited that long; thresholds relative to the current rule's recent tail over this span, as the "
                  "guarded leader's are over the past):", "", "| rule | guard | bsld | mean wait (s) | p99 wait (s) | max wait (s) | "
                  "max wait / current's |", "|---|---|---:|---:|---:|---:|---:|"]
    for g in r["guard"]:
        guard = "none" if g["guard_h"] is None else f"{g['guard_h']:g} h"
        lines.append(f"| {g['rule']} | {guard} | {g['bsld']:.2f} | "
                     f"{fmt_s(g['wait_mean_s'])} | {fmt_s(g['wait_p99_s'])} | {fmt_s(g['wait_max_s'])} | "
                     f"{times(g['wait_max_s'], cur['wait_max_s'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="kth,lublin,hpc2n")
    ap.add_argument("--dask", default=None, help="passed to metapilot backtest --dask (e.g. local:2)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    ap.add_argument("--heading", default="Walk forward (issue 38)")
    ap.add_argument("--save", help="also keep every trace's result (JSON) here, to render again with --load")
    ap.add_argument("--load", help="render results saved by --save (several files: comma-separated) instead of running")
    args = ap.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.load:
        results = [r for f in args.load.split(",") for r in json.loads(Path(f).read_text())]
    else:
        with tempfile.TemporaryDirectory() as d:
            results = []
            for name in args.traces.split(","):
                if name:
                    results.append(run(name, Path(d), args.dask))
                    if args.save:  # after each trace: a long run keeps what it has
                        Path(args.save).write_text(json.dumps(results, default=str))
    body = overview(results) + "\n" + "\n".join(section(r) for r in results)
    cmd = f".venv/bin/python bench/bench_walk_forward.py --traces {args.traces}" + (f" --dask {args.dask}" if args.dask else "")
    text = (f"## {args.heading}\n\nCommand: `{cmd}`. Machine: {machine()}; started {started}. Defaults of "
            "`metapilot backtest` (origins every 4 weeks after 26 weeks with jobs, or half the weeks on a shorter "
            "log, seven at least; current rule FCFS+EASY; 2,000 training steps per fold), nothing tuned per trace.\n\n"
            + body)
    print(text)
    if not args.no_write:
        write_section(args.heading, text)


if __name__ == "__main__":
    main()
