"""Dataset build time on a large real trace (issue: controller): CEA-Curie, 312,826 jobs on
93,312 cores, ingested without Prefect, then the MDP tuples of a one-year training window and a
three-month checkpoint window: as-run (DuckDB over `jobs`) and replay rollouts (the simulator's
objective-switching env, default behaviours x seeds), hourly epochs.

    .venv/bin/python bench/bench_dataset.py [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import SHARED, machine, write_section  # noqa: E402

CURIE = SHARED / "swf" / "CEA-Curie-2011-2.1-cln.swf.gz"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    from metapilot.models.controller.dataset import DatasetConfig, build_dataset
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    with tempfile.TemporaryDirectory() as tmp:
        con = connect(Path(tmp) / "curie.duckdb")
        t0 = time.perf_counter()
        rep = ingest_file(con, CURIE, IngestOptions(), bytes(32))
        t_ingest = time.perf_counter() - t0
        first = con.execute("SELECT min(submit_time) FROM jobs").fetchall()[0][0]
        train = (first, first + timedelta(days=365))
        valid = (train[1], train[1] + timedelta(days=91))
        rows = []
        for sources in (("as-run",), ("replay",), ("as-run", "replay")):
            t0 = time.perf_counter()
            splits = build_dataset(con, rep.cluster, *train, *valid, config=DatasetConfig(sources=sources), store=False)
            rows.append((" + ".join(sources), splits.train.height + splits.checkpoint.height, time.perf_counter() - t0))
        con.close()
    table = ["| tuple sources | tuples (train + checkpoint) | build s |", "|---|---:|---:|"]
    table += [f"| {s} | {n:,} | {t:.1f} |" for s, n, t in rows]
    text = "\n".join([
        "## Dataset (CEA-Curie)", "",
        "Command: `.venv/bin/python bench/bench_dataset.py`  ",
        f"Machine: {machine()}  ", f"Date: {time.strftime('%Y-%m-%d')}", "",
        f"CEA-Curie ({rep.jobs_written:,} jobs, 93,312 cores from the SWF header) ingested in {t_ingest:.1f} s; "
        f"train window {train[0]:%Y-%m-%d}..{train[1]:%Y-%m-%d} (8,760 hourly epochs), validation "
        f"{valid[0]:%Y-%m-%d}..{valid[1]:%Y-%m-%d}. Replay = the default behaviour policies (random switching, "
        "held objectives, epsilon-greedy) x seeds, each a full replay of the window.", "",
        *table,
    ])
    print(text)
    if not args.no_write:
        write_section("Dataset (CEA-Curie)", text)


if __name__ == "__main__":
    main()
