"""Ingest throughput and memory (issue: warehouse foundation).

Measures, in one run, for CEA-Curie (SWF, 312,826 jobs) and a 5-million-line sacct file made by
replicating Open XDMoD's pozidriv reference log with new job ids:
- end-to-end ingest (parse, validate with the GX suite, pseudonymise, load, merge) in jobs/s,
- the time polars alone takes to read the same file into a frame, and the ratio,
- peak resident memory of the ingest process.
Each measurement runs in a fresh subprocess so peak RSS is its own.

    .venv/bin/python bench/bench_ingest.py [--lines 5000000] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
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
if mode != "polars":
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest import IngestOptions, ingest_file
t0 = time.perf_counter()  # imports excluded on both sides: the work itself is measured
if mode == "polars":
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
wall = time.perf_counter() - t0
print(json.dumps({"rows": rows, "seconds": wall, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_child(mode: str, path: Path, fmt: str, db: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), fmt, str(db)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=5_000_000)
    ap.add_argument("--write", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        big = tmp / "pozidriv-x.log"
        make_sacct(big, args.lines)
        curie_plain = tmp / "curie.swf"
        with gzip.open(CURIE, "rb") as f:
            curie_plain.write_bytes(f.read())
        for name, path, fmt in (("CEA-Curie SWF (312,826 jobs)", curie_plain, "swf"),
                                (f"sacct 26 fields, {args.lines:,} lines", big, "sacct")):
            ing = run_child("ingest", path, fmt, tmp / f"{fmt}.duckdb")
            pol = run_child("polars", path, fmt, tmp / "x.duckdb")
            rows.append((name, ing, pol))
    lines = ["| input | jobs | ingest s | jobs/s | polars read s | ratio | peak RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, ing, pol in rows:
        lines.append(f"| {name} | {ing['rows']:,} | {ing['seconds']:.2f} | {ing['rows'] / ing['seconds']:,.0f} | "
                     f"{pol['seconds']:.2f} | {ing['seconds'] / pol['seconds']:.1f}x | {ing['peak_rss_mib']:,.0f} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        section = (f"## Ingest\n\nCommand: `.venv/bin/python bench/bench_ingest.py --lines {args.lines} --write {args.write}`  \n"
                   f"Machine: {machine()}  \nDate: {time.strftime('%Y-%m-%d')}\n\n"
                   "End to end = hash the file, detect, parse, validate with the GX suite, keyed hashing, stage, load "
                   "into DuckDB, merge check, bookkeeping, one transaction (fresh process, `memory_limit` 1 GB; "
                   "Python imports excluded on both sides). Polars read = `pl.read_csv` of the same uncompressed "
                   "file into a frame (SWF: its 18 whitespace-separated fields as numeric columns; sacct: its 26 `|` fields as strings). Ratio = ingest / polars read. "
                   "Open XDMoD's shredder, the tool operators use today, parses line by line into MySQL.\n\n" + table + "\n")
        write_section("Ingest", section, args.write)


if __name__ == "__main__":
    main()
