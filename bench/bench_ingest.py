"""Ingest throughput and memory (issues: warehouse foundation; 14, ingest as the user runs it).

Measures, in one run, for CEA-Curie (SWF, 312,826 jobs) and a 5-million-line sacct file made by
replicating Open XDMoD's pozidriv reference log with new job ids:
- `metapilot ingest FILE --cluster C --db NEW` as a user runs it: a new process, timed whole
  (start-up, imports, the ingest, the summary), wall and CPU-seconds (user + system, the process
  and everything it waited for) and peak RSS, from the kernel's accounting of the child (wait4);
- `ingest_file` in a fresh process (imports excluded; `memory_limit` 1 GB), wall and CPU-seconds;
- the time polars alone takes to read the same file into a frame (imports excluded), wall and CPU;
and the ratios of both ingests to polars' read, in wall time and in CPU-seconds. The load average
of the machine is recorded with the figures: on a shared box they move with it.

    .venv/bin/python bench/bench_ingest.py [--lines 5000000] [--repeat 3] [--write docs/benchmarks.md] [--baseline-label TEXT]
        [--baseline DIR]   # also time DIR's code (a tree whose `metapilot` package is an older
                           # version, e.g. from `git archive`), in the same run, for before/after
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.common import machine, write_section  # noqa: E402

SHARED = (REPO / ".." / "shared" / "data").resolve()
CURIE = SHARED / "swf" / "CEA-Curie-2011-2.1-cln.swf.gz"
POZIDRIV = SHARED / "slurm" / "xdmod-reference" / "pozidriv.log.gz"
METAPILOT = Path(sys.executable).with_name("metapilot")


def make_sacct(path: Path, n_lines: int) -> None:
    """Replicate pozidriv.log with fresh job ids (fields 1 and 2) until n_lines lines."""
    with gzip.open(POZIDRIV, "rt", encoding="utf-8") as f:
        base = [ln.rstrip("\n").split("|", 2) for ln in f if ln.strip()]
    with open(path, "w", encoding="utf-8") as out:
        written, rep = 0, 0
        while written < n_lines:
            off = rep * 10_000_000
            block = []
            for jid, raw, rest in base:
                if written >= n_lines:
                    break
                new = str(int(jid) + off) if jid.isdigit() else f"{jid}r{rep}"
                block.append(f"{new}|{new}|{rest}\n")
                written += 1
            out.write("".join(block))
            rep += 1


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, path, fmt = sys.argv[1], sys.argv[2], sys.argv[3]
import polars as pl
commit = {"seconds": 0.0, "cpu_s": 0.0}
if mode == "ingest":
    from metapilot.warehouse.db import connect
    import metapilot.warehouse.ingest as ingest_mod
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    def timed_commit(con, st, _commit=ingest_mod.commit_staged):  # the commit: DuckDB's append and the bookkeeping
        w, c = time.perf_counter(), time.process_time()
        try:
            return _commit(con, st)
        finally:
            commit["seconds"], commit["cpu_s"] = time.perf_counter() - w, time.process_time() - c
    ingest_mod.commit_staged = timed_commit
if mode == "store":
    import duckdb
t0, c0 = time.perf_counter(), time.process_time()  # imports excluded on both sides: the work itself is measured
if mode == "store":  # DuckDB keeping the file's text as it is (26 text columns, no parse): what storing it costs
    con = duckdb.connect(sys.argv[4])
    con.execute("SET preserve_insertion_order = false")
    con.execute("CREATE TABLE raw AS SELECT * FROM read_csv(?, delim = '|', header = false, quote = '', escape = '', "
                "all_varchar = true, null_padding = true, strict_mode = false)", [path])
    con.execute("CHECKPOINT")
    rows = con.execute("SELECT count(*) FROM raw").fetchone()[0]
    con.close()
elif mode == "polars":
    if fmt == "swf":  # whitespace-separated with variable padding: lines, then 18 numeric columns
        lines = pl.read_csv(path, has_header=False, comment_prefix=";", separator="\x01", quote_char=None,
                            new_columns=["line"])
        s = lines["line"].str.replace_all("\t", " ", literal=True).str.replace_all("    ", " ", literal=True)
        while s.str.contains("  ", literal=True).any():  # literal replaces: much faster than a regex
            s = s.str.replace_all("  ", " ", literal=True)
        df = (s.str.strip_chars().str.split_exact(" ", 17).struct.unnest()
              .select(pl.all().cast(pl.Float64, strict=False)))
    else:
        df = pl.read_csv(path, has_header=False, separator="|", quote_char=None, infer_schema_length=0, truncate_ragged_lines=True)
    rows = df.height
else:
    con = connect(sys.argv[4])
    con.execute("SET memory_limit = '1GB'")
    rep = ingest_file(con, Path(path), IngestOptions(), bytes(32))
    assert rep.outcome == "loaded", rep.message
    assert rep.reconciles
    rows = rep.jobs_written
import metapilot
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "commit_s": commit["seconds"], "commit_cpu_s": commit["cpu_s"],
                  "code": str(Path(metapilot.__file__).resolve().parent.parent)}))
"""


def _run(cmd: list[str], env: dict | None = None, cwd: Path = REPO) -> tuple[str, dict]:
    """Run a child to its end; its stdout and the kernel's account of it (and of every process it
    waited for): wall, CPU-seconds (user + system), peak RSS."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}:\n{stdout[-2000:]}\n{stderr[-4000:]}")
    return stdout, {"wall_s": wall, "proc_cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mib": ru.ru_maxrss / 1024}


def _env(code: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "METAPILOT_DB")}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env


def run_child(mode: str, path: Path, fmt: str, db: Path, code: Path | None = None) -> dict:
    # run outside the repository: `python -c` puts the working directory first on sys.path, which
    # would shadow the code under test (--baseline) with this checkout's `metapilot` folder
    stdout, acct = _run([sys.executable, "-c", CHILD, mode, str(path), fmt, str(db)], env=_env(code), cwd=db.parent)
    inner = json.loads(stdout.strip().splitlines()[-1])
    if code is not None and Path(inner["code"]) != code.resolve():
        raise RuntimeError(f"the child ran {inner['code']}, not {code}")
    return {**acct, "rows": inner["rows"], "seconds": inner["seconds"], "cpu_s": inner["cpu_s"],
            "commit_s": inner["commit_s"], "commit_cpu_s": inner["commit_cpu_s"]}


def run_command(path: Path, cluster: str, tmp: Path, rows: int, code: Path | None = None) -> dict:
    """`metapilot ingest` as a user runs it, into a new warehouse (the site key is created)."""
    work = Path(tempfile.mkdtemp(dir=tmp))
    _, acct = _run([str(METAPILOT), "ingest", str(path), "--cluster", cluster, "--db", str(work / "w.duckdb")],
                   env=_env(code), cwd=work)
    return {**acct, "rows": rows, "seconds": acct["wall_s"], "cpu_s": acct["proc_cpu_s"]}


NOTES = (
    'Issue 14 (the command as users run it): without a configured Prefect server (`PREFECT_API_URL`, '
    'environment or profile) `metapilot ingest` runs the ingest directly, with no temporary Prefect API '
    'and no Prefect import (`--flow` runs it as a flow anyway; with a server it is always a flow); per '
    'chunk, sacct job ids skip the regex when they are plain numbers, '
    'State/Timelimit/Elapsed/ReqMem/TRES/GRES values and the names to hash are resolved once per distinct'
    ' value through categorical codes instead of `unique` and a join, and names already hashed are found '
    "by a join instead of a Python loop; times parse without polars' strptime cache; lines are checked as"
    ' UTF-8 by polars; 16 MiB chunks; the staged rows no longer carry the file hash and load time (the '
    "commit adds them); DuckDB's memory is capped at 256 MiB for the load and the capacity inference (512 MiB before issue 53), "
    'which now sums events per instant before its running sum (before: a window over every start and end,'
    " 6 s and 1.2 GB of RSS on the 5M-line file); the command lets polars' allocator keep freed pages 1 s"
    " (page faults were a fifth of its CPU). Where the command's time goes now (perf, 1M lines): polars "
    "~34%, DuckDB's load and compression ~22%, the kernel (page faults, file reads) ~20%, Python ~12% "
    '(imports included). Issue 53: chunks are parsed, then checked and written, two at a time in threads; a job '
    'log is staged while it is hashed; the time and size bounds write their reasons only for the rows that fail; '
    'UTC logs skip the second (fall-back) reading of Start and End; lines are read by polars\' own line reader, '
    'each block copied once; the key hashes wait in the stage folder, not in memory.'
)


def _median(runs: list[dict]) -> dict:
    """Each figure's median over the repeats (peak RSS: the largest)."""
    out = dict(runs[0])
    for k in ("seconds", "cpu_s", "wall_s", "proc_cpu_s", "commit_s", "commit_cpu_s"):
        if k in out:
            out[k] = statistics.median(r[k] for r in runs)
    out["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    return out


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=5_000_000)
    ap.add_argument("--write", type=Path, default=None)
    ap.add_argument("--baseline-label", default="the code before the change",
                    help="what --baseline is, for the document (e.g. a commit)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement (medians are reported)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a tree whose `metapilot` package is the code to compare against (timed in the same run)")
    args = ap.parse_args()
    results = []
    load_start = _load()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        big = tmp / "pozidriv-x.log"
        make_sacct(big, args.lines)
        curie_plain = tmp / "curie.swf"
        with gzip.open(CURIE, "rb") as f:
            curie_plain.write_bytes(f.read())
        for name, path, fmt, cluster in (("CEA-Curie SWF (312,826 jobs)", curie_plain, "swf", "CEA-Curie"),
                                         (f"sacct 26 fields, {args.lines:,} lines", big, "sacct", "pozidriv")):
            codes = [("", None)] + ([("before: ", args.baseline)] if args.baseline else [])
            pols, stores, runs = [], [], {tag: ([], []) for tag, _ in codes}
            for rep in range(args.repeat):  # round-robin, so that a change of load touches every figure alike
                pols.append(run_child("polars", path, fmt, tmp / "x.duckdb"))
                if fmt == "sacct":  # `|`-separated text DuckDB's own reader takes as it is
                    stores.append(run_child("store", path, fmt, tmp / "store.duckdb"))
                    (tmp / "store.duckdb").unlink()
                for tag, code in codes:
                    db = tmp / f"{fmt}-{rep}.duckdb"
                    ing = run_child("ingest", path, fmt, db, code)
                    db.unlink()
                    cmd = run_command(path, cluster, tmp, ing["rows"], code)
                    runs[tag][0].append(ing)
                    runs[tag][1].append(cmd)
                    print(f"{tag}{name} #{rep + 1}: command {cmd['wall_s']:.1f} s wall {cmd['cpu_s']:.1f} CPU-s, "
                          f"in-process {ing['seconds']:.1f} s {ing['cpu_s']:.1f} CPU-s, polars {pols[-1]['seconds']:.2f} s "
                          f"{pols[-1]['cpu_s']:.2f} CPU-s; load {_load()}", flush=True)
            results.append((name, _median(pols), _median(stores) if stores else None,
                            {tag: (_median(i), _median(c)) for tag, (i, c) in runs.items()}))
    load_end = _load()
    head = ("| input | code | what | jobs | wall s | CPU-s | jobs/s (wall) | x polars wall | x polars CPU | peak RSS MiB |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    def row(name: str, code: str, what: str, r: dict, pol: dict, seconds: str = "seconds", cpu: str = "cpu_s",
            rss: bool = True) -> str:
        peak = f"{r['peak_rss_mib']:,.0f}" if rss else ""
        return (f"| {name} | {code} | {what} | {r['rows']:,} | {r[seconds]:.2f} | {r[cpu]:.2f} | "
                f"{r['rows'] / r[seconds]:,.0f} | {r[seconds] / pol['seconds']:.1f}x | "
                f"{r[cpu] / pol['cpu_s']:.1f}x | {peak} |")

    for name, pol, store, runs in results:
        lines.append(f"| {name} | | polars read | {pol['rows']:,} | {pol['seconds']:.2f} | {pol['cpu_s']:.2f} | | 1.0x | 1.0x | |")
        if store is not None:
            lines.append(row(name, "", "DuckDB keeping the file's text (`read_csv` into a table, no parse)", store, pol))
        for tag, (ing, cmd) in runs.items():
            code = tag.rstrip(": ") or "this"
            for what, r in (("`metapilot ingest` (new process)", cmd), ("`ingest_file` (in-process)", ing)):
                lines.append(row(name, code, what, r, pol))
            lines.append(row(name, code, "of which the commit (DuckDB's append, checks, bookkeeping)", ing, pol,
                             "commit_s", "commit_cpu_s", rss=False))
    table = "\n".join(lines)
    print(table)
    print(f"load average (1/5/15 min): {load_start} at the start, {load_end} at the end")
    if args.write:
        section = (f"## Ingest\n\nCommand: `.venv/bin/python bench/bench_ingest.py --lines {args.lines} --repeat {args.repeat} --write {args.write}"
                   f"{' --baseline DIR' if args.baseline else ''}`  \n"
                   f"Machine: {machine()}; load average (1/5/15 min) {load_start} at the start, {load_end} at the end  \n"
                   f"Date: {time.strftime('%Y-%m-%d')}\n\n"
                   "`metapilot ingest FILE --cluster C --db NEW` = the command as a user runs it, in a new process, "
                   "timed whole: start-up, imports, hash the file, detect, parse, validate with the GX suite, keyed "
                   "hashing, stage, load into DuckDB, merge check, bookkeeping, one transaction, the summary; CPU-s = "
                   "user + system time of the process and of every process it waited for, peak RSS its largest "
                   "(kernel accounting, `wait4`). Each figure is the median of the runs (peak RSS: the largest), taken "
                   "round-robin. `ingest_file` = the same work in a fresh process, Python imports "
                   "excluded (`memory_limit` 1 GB). Polars read = `pl.read_csv` of the same uncompressed file into a "
                   "frame (SWF: its 18 whitespace-separated fields as numeric columns; sacct: its 26 `|` fields as "
                   "strings), imports excluded. Ratios = ingest / polars' read in the same run. Open XDMoD's shredder, "
                   "the tool operators use today, parses line by line into MySQL.\n\n" + table + "\n\n"
                   + (f"`before` = {args.baseline_label}, timed in the same run. " if args.baseline else "") + NOTES + "\n")
        write_section("Ingest", section, args.write)


if __name__ == "__main__":
    main()
