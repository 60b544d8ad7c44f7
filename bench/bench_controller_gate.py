"""Does the learned controller win on held-out weeks? `metapilot pipeline` as a user runs it, on
real traces, then every contender of its held-out validation: the 21 fixed baselines, each menu
objective held fixed, the planner it was taught by, the guarded rule, the oracle bound, the
learned controller (CQL) and the as-run history, with mean / max / p99 wait, mean bounded
slowdown and utilisation while jobs wait; the publish gate's decision; and the controller's
distance to the best fixed mean and the best fixed max.

    .venv/bin/python bench/bench_controller_gate.py            # KTH-SP2 + two CEA-Curie windows
    .venv/bin/python bench/bench_controller_gate.py --traces kth --steps 2000
    .venv/bin/python bench/bench_controller_gate.py --traces curie-all --no-write   # the whole CEA-Curie trace
    .venv/bin/python bench/bench_controller_gate.py --traces nasa,lublin,kth-x3,hpc2n --no-write   # more checks
    .venv/bin/python bench/bench_controller_gate.py --traces curie-b --sources as-run,planner,replay   # an ablation
    .venv/bin/python bench/bench_controller_gate.py --traces curie-all@2012-04-30..2012-08-27 --no-write --keep DIR
        # any trace cut to another window (rolling windows); --keep leaves each log and warehouse in DIR

Each trace window is cut from the SWF file (header kept) so that `pipeline` splits it by time
(60% training, 15% checkpoint choice, 25% held out) as it would split a site's own history.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, SHARED, machine, write_section  # noqa: E402

from metapilot.models.controller.gate import Outcome, better, gate  # noqa: E402
from metapilot.transforms.lines import open_binary  # noqa: E402

SWF = SHARED / "swf"
TRACES = {  # name: (file, cluster, window from, window to)
    "kth": ("KTH-SP2-1996-2.1-cln.swf.gz", "KTH-SP2", None, None),
    "curie-a": ("CEA-Curie-2011-2.1-cln.swf.gz", "CEA-Curie-A", "2012-02-06", "2012-06-04"),
    "curie-b": ("CEA-Curie-2011-2.1-cln.swf.gz", "CEA-Curie-B", "2012-06-04", "2012-10-15"),
    # not in the default run: the whole CEA-Curie trace (36 weeks; 5 checkpoint weeks, 10 held out)
    "curie-all": ("CEA-Curie-2011-2.1-cln.swf.gz", "CEA-Curie", None, None),
    # opt-in: short traces (3 months each) as further checks of the default settings
    "nasa": ("NASA-iPSC-1993-3.1-cln.swf.gz", "NASA-iPSC", None, None),
    "lublin": ("lublin_256.synthetic-model.swf.gz", "Lublin-256", None, None),
    # opt-in: a history longer than a year, KTH-SP2 three times over (`REPEAT`; 2.85 years, 85,428 jobs)
    "kth-x3": ("KTH-SP2-1996-2.1-cln.swf.gz", "KTH-SP2-x3", None, None),
    # opt-in: a big centre's multi-year history with gaps, the whole CEA-Curie trace three times over (`REPEAT`;
    # 938,478 jobs over 4.1 years; its first submit comes a year after the header's start time, so the copies
    # are a year apart: two year-long gaps, as in a log with an outage or a break in the accounting)
    "curie-x3": ("CEA-Curie-2011-2.1-cln.swf.gz", "CEA-Curie-x3", None, None),
    # opt-in: the 3,170-job HPC2N subset (57 days, 240 processors): the shortest history the pipeline accepts
    "hpc2n": ("HPC2N-subset-3170jobs.swf", "HPC2N", None, None),
    # opt-in (issue 48): a busy 1,024-node cluster (RICC, 447,794 jobs over five months) and a grid (LCG,
    # 188,041 jobs over 15 days: shorter than the walk forward's seven weeks of warmup)
    "ricc": ("RICC-2010-2.swf.gz", "RICC", None, None),
    "lcg": ("LCG-2005-1.swf.gz", "LCG", None, None),
}
REPEAT = {"kth-x3": 3, "curie-x3": 3}  # copies of the trace laid end to end, each a week after the last one's final submit
COLS = ("wait_mean_s", "wait_max_s", "wait_p99_s", "bsld_mean", "util_cpu_backlog", "bsld_mean_1min")


def cut(src: Path, dst: Path, lo: str | None, hi: str | None, repeat: int = 1) -> int:
    """Copy the SWF header and the jobs submitted in [lo, hi) (UTC dates), `repeat` times end to end
    (renumbered, each copy a week after the last submit of the one before); returns the job count."""
    start = 0
    t_lo = datetime.fromisoformat(lo).replace(tzinfo=timezone.utc).timestamp() if lo else None
    t_hi = datetime.fromisoformat(hi).replace(tzinfo=timezone.utc).timestamp() if hi else None
    jobs = []
    with io.TextIOWrapper(open_binary(src)) as f, open(dst, "w") as out:  # gzipped or plain
        for line in f:
            if line.startswith(";"):
                if "UnixStartTime" in line:
                    start = int(line.split(":", 1)[1])
                out.write(line)
                continue
            fields = line.split()
            if len(fields) < 18:
                continue
            t = start + float(fields[1])
            if (t_lo is None or t >= t_lo) and (t_hi is None or t < t_hi):
                jobs.append(fields)
        span = max(float(x[1]) for x in jobs) + 7 * 86400 if jobs else 0.0
        for k in range(repeat):
            for i, x in enumerate(jobs):
                if repeat > 1:  # renumbered, submitted k spans later
                    x = [str(k * len(jobs) + i + 1), str(int(float(x[1]) + k * span)), *x[2:]]
                out.write(" ".join(x) + "\n")
    return len(jobs) * repeat


def resolve(spec: str) -> tuple[str, str, str | None, str | None]:
    """A trace name of `TRACES`, or `name@FROM..TO`: that trace's file cut to another window (UTC dates),
    under a cluster name that carries the window's start, so that rolling windows can be compared."""
    name, _, window = spec.partition("@")
    if name not in TRACES:
        raise SystemExit(f"unknown trace {name!r}; choose from {', '.join(TRACES)} (or NAME@YYYY-MM-DD..YYYY-MM-DD)")
    file, cluster, lo, hi = TRACES[name]
    if window:
        lo, _, hi = window.partition("..")
        cluster = f"{cluster}-{lo}"
    return file, cluster, lo or None, hi or None


def run(name: str, steps: int, tmp: Path, extra: tuple[str, ...] = ()) -> dict:
    file, cluster, lo, hi = resolve(name)
    log = tmp / f"{cluster}.swf"
    jobs = cut(SWF / file, log, lo, hi, REPEAT.get(name.partition("@")[0], 1))
    db = tmp / cluster / "w.duckdb"
    t0 = time.perf_counter()
    p = subprocess.run([str(REPO / ".venv" / "bin" / "metapilot"), "pipeline", str(log), "--cluster", cluster,
                        "--steps", str(steps), "--db", str(db), *extra], capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"pipeline failed on {name}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    vid, pid = con.execute("SELECT heldout_id, policy_id FROM heldout_replays ORDER BY created_at DESC LIMIT 1").fetchone()
    rows = con.execute(f"SELECT contender, kind, {', '.join(COLS)}, window_from, window_to FROM heldout_replays "
                       "WHERE heldout_id = ? AND status = 'ok'", [vid]).fetchall()
    decision = con.execute("SELECT kind, recommendation, message FROM published_policies ORDER BY published_at DESC "
                           "LIMIT 1").fetchone()
    card = json.loads(Path(con.execute("SELECT path FROM policies WHERE policy_id = ?", [pid]).fetchone()[0],
                           "model_card.json").read_text())
    con.close()
    return {"name": name, "cluster": cluster, "jobs": jobs, "wall_s": wall, "rows": rows, "decision": decision,
            "planner": card.get("planner"), "gate": card.get("gate"), "gate_training": card.get("gate_training"),
            "tuning_s": (card.get("tuning") or {}).get("seconds")}


def fmt_s(s: float | None) -> str:
    return "–" if s is None else f"{s:,.0f}"


def rel(x: float, best: float) -> str:
    """`x` against the best fixed value, in percent ('equal' where no job waited under either)."""
    return f"{x / best - 1:+.1%}" if best > 0 else ("equal (0 s)" if x == 0 else f"+{fmt_s(x)} s")


def held_out_verdict(res: dict):
    """The publish gate's rule applied to the held-out window (a lead under 0.5% is a tie)."""
    rows = res["rows"]
    fixed = [r for r in rows if r[1] in ("baseline", "objective")]
    ctrl = next(r for r in rows if r[0] == "MetaPilot")
    return ctrl, gate(Outcome(ctrl[0], ctrl[2], ctrl[3], ctrl[5]), [Outcome(r[0], r[2], r[3], r[5]) for r in fixed])


def walk_forward(res: dict):
    """The operator's alternative, chosen before the held-out weeks: the fixed rule the gate recommends on
    the checkpoint weeks, and the controller against that one rule held out (the gate's rule); None
    when the card names no recommendation or the validation lacks that rule."""
    kind, rec, _ = res["decision"]  # a refusal names the rule to keep (or none, where nothing waited)
    name = rec if kind == "fixed" else ((res["gate"] or {}).get("recommended") or {}).get("name")
    row = next((r for r in res["rows"] if r[0] == name and r[1] == "baseline"), None)
    if row is None:
        return None
    ctrl = next(r for r in res["rows"] if r[0] == "MetaPilot")
    return row, gate(Outcome(ctrl[0], ctrl[2], ctrl[3], ctrl[5]), [Outcome(row[0], row[2], row[3], row[5])])


def walk_words(res: dict) -> str:
    w = walk_forward(res)
    if w is None:
        return "no recommended rule"
    row, v = w
    return f"{'wins' if v.passes else 'loses'} against {row[0]} (bsld {row[5]:.2f})"


def training_words(res: dict) -> str:
    g = res.get("gate_training")
    if not g:
        return "not checked"
    return (f"{'passed' if g['passes'] else 'failed'} (bsld {g['candidate']['mean_bsld']:.2f} vs "
            f"{g['best_bsld']['mean_bsld']:.2f}, {g['best_bsld']['name']}"
            f"{'; ' + '; '.join(g['reasons']) if g.get('reasons') else ''})")


def summary(results: list[dict]) -> str:
    """One line per trace window: did the gate publish, and would the controller have won held out?"""
    lines = ["| trace window | checkpoint gate | last training weeks | controller held out: bsld vs best fixed | held out "
             "| outcome | held out vs the rule recommended on the checkpoint weeks | held out, runs ≥ 1 min: bsld vs best "
             "fixed |", "|---|---|---|---|---|---|---|---|"]
    for res in results:
        ctrl, v = held_out_verdict(res)
        published = res["decision"][0] == "controller"
        outcome = {(True, True): "published, wins", (True, False): "**published, loses**",
                   (False, True): "refused, would win", (False, False): "refused, would lose"}[published, v.passes]
        if not v.passes and not any(better(b, a) for a, b in ((ctrl[2], v.best_mean.mean_wait_s),
                                                              (ctrl[3], v.best_max.max_wait_s),
                                                              (ctrl[5], v.best_bsld.mean_bsld))):
            outcome = outcome.replace("lose", "tie")  # within a tie of the best fixed value on every measure
        card_gate = res["gate"] or {}
        lines.append(f"| {res['cluster']} ({res['rows'][0][8]:%Y-%m-%d} .. {res['rows'][0][9]:%Y-%m-%d}) | "
                     f"{'passed' if card_gate.get('passes') else 'refused'} | {training_words(res)} | {ctrl[5]:.2f} vs "
                     f"{v.best_bsld.mean_bsld:.2f} ({v.best_bsld.name}) | "
                     f"{'holds' if v.passes else 'fails: ' + '; '.join(v.reasons)} | {outcome} | {walk_words(res)} | "
                     f"{one_minute_words(res)} |")
    return "\n".join(lines)


def best_one_minute(rows: list) -> tuple | None:
    """The fixed contender of lowest mean bounded slowdown over the jobs that ran a minute or more."""
    fixed = [r for r in rows if r[1] in ("baseline", "objective") and r[7] is not None]
    return min(fixed, key=lambda r: r[7]) if fixed else None


def one_minute_words(res: dict) -> str:
    """The controller's mean bounded slowdown over the jobs that ran a minute or more, against the best
    fixed rule's on the same jobs: whether a held-out lead or loss is more than a few sub-minute jobs."""
    ctrl = next(r for r in res["rows"] if r[0] == "MetaPilot")
    best = best_one_minute(res["rows"])
    if ctrl[7] is None or best is None:
        return "–"
    return f"{ctrl[7]:.2f} vs {best[7]:.2f} ({best[0]}), {rel(ctrl[7], best[7])}"


def table(res: dict) -> str:
    rows = res["rows"]
    ctrl, held_out = held_out_verdict(res)
    best_mean, best_max = held_out.best_mean.mean_wait_s, held_out.best_max.max_wait_s
    best_bsld = held_out.best_bsld.mean_bsld
    best_row = best_one_minute(rows)
    best_1min = best_row[7] if best_row else float("nan")
    dominated = held_out.dominated_by  # the publish gate's own rule: a lead under 0.5% is a tie
    lines = [f"### {res['cluster']}: held-out {rows[0][8]:%Y-%m-%d} .. {rows[0][9]:%Y-%m-%d}",
             "",
             f"{res['jobs']:,} jobs in the trace window; `metapilot pipeline` took {res['wall_s']:.0f} s "
             f"(planner tuning {res['tuning_s'] or 0:.0f} s). Teacher: `{json.dumps(res['planner'])}`.",
             "",
             "| contender | kind | mean wait (s) | max wait (s) | p99 wait (s) | mean bsld | bsld, runs ≥ 1 min "
             "| util. while jobs wait |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    order = {"controller": 0, "planner": 1, "bound": 2, "objective": 3, "baseline": 4, "history": 5}
    for r in sorted(rows, key=lambda r: (order.get(r[1], 9), r[2])):
        if r[2] is None:  # no job of the window in this contender (e.g. an as-run history without start times)
            lines.append(f"| {r[0]} | {r[1]} | – | – | – | – | – | – |")
            continue
        mark = lambda v, b: f"**{v}**" if b else v  # noqa: E731
        lines.append(f"| {r[0]} | {r[1]} | {mark(fmt_s(r[2]), r[2] <= best_mean)} | {mark(fmt_s(r[3]), r[3] <= best_max)} "
                     f"| {fmt_s(r[4])} | {mark(f'{r[5]:.2f}', r[5] <= best_bsld)} | "
                     f"{'–' if r[7] is None else mark(f'{r[7]:.2f}', r[7] <= best_1min)} | "
                     f"{'–' if r[6] is None else f'{100 * r[6]:.1f}%'} |")
    kind, rec, msg = res["decision"]
    card_gate = res["gate"] or {}
    lines += ["",
              f"- Controller vs the best fixed mean: {rel(ctrl[2], best_mean)}; vs the best fixed max: "
              f"{rel(ctrl[3], best_max)}; bsld {ctrl[5]:.2f} vs best fixed {best_bsld:.2f}; over the jobs that ran 1 min "
              f"or more, {'–' if ctrl[7] is None else f'{ctrl[7]:.2f}'} vs best fixed {best_1min:.2f}.",
              f"- Dominated on (mean, max) by: {', '.join(dominated) or 'none'}. Held out, the gate's conditions "
              f"{'hold' if held_out.passes else 'fail: ' + '; '.join(held_out.reasons)}.",
              f"- Publish gate (checkpoint window): {'passed' if card_gate.get('passes') else 'failed'} "
              f"({'; '.join(card_gate.get('reasons') or []) or 'no fixed rule dominates it, lowest bsld'}). "
              f"Decision: {kind} — {msg}",
              f"- Gate on the last training weeks: {training_words(res)}."]
    w = walk_forward(res)
    if w is not None:
        row, v = w
        lines.append(f"- Walk forward: the rule recommended on the checkpoint weeks, {row[0]}, held out: {fmt_s(row[2])} s / "
                     f"{fmt_s(row[3])} s / bsld {row[5]:.2f}; the controller against that rule alone: "
                     f"{'passes' if v.passes else 'fails: ' + '; '.join(v.reasons)}.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="kth,curie-a,curie-b")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--sources", default=None, help="pipeline --sources (default: the pipeline's)")
    ap.add_argument("--seeds", default=None, help="pipeline --seeds (default: the pipeline's)")
    ap.add_argument("--keep", default=None, help="keep each trace's log and warehouse under this folder")
    args = ap.parse_args()
    out, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or tmp
        Path(d).mkdir(parents=True, exist_ok=True)
        for name in args.traces.split(","):
            extra = (("--sources", args.sources) if args.sources else ()) + (("--seeds", args.seeds) if args.seeds else ())
            results.append(run(name.strip(), args.steps, Path(d), extra))
            out.append(table(results[-1]))
            print(out[-1], "\n", flush=True)
    out.insert(0, summary(results))
    print(out[0], flush=True)
    text = ("## Controller on held-out weeks (issue 11)\n\n"
            f"Command: `.venv/bin/python bench/bench_controller_gate.py --traces {args.traces} --steps {args.steps}` "
            f"(each trace window through `metapilot pipeline`, default settings but `--steps`). Machine: {machine()}. "
            "Bold: the best fixed value of the column is matched or beaten.\n\n" + "\n\n".join(out))
    if not args.no_write:
        write_section("Controller on held-out weeks (issue 11)", text)


if __name__ == "__main__":
    main()
