"""The walk forward's folds on a Dask cluster of 1, 2 and 4 workers (issue 52): wall time of
`metapilot backtest --relearn --dask tcp://...` on one warehouse, each worker a separate process
started by `scripts/dask-cluster.sh` (no nanny, one thread, METAPILOT_WORKERS=1), and what each
worker read and wrote (/proc/PID/io, read just before the cluster stops) beside the size of what
the scheduler shipped to it (the fold task's arguments, pickled).

    python bench/bench_dask_workers.py --log ../shared/data/swf/KTH-SP2-1996-2.1-cln.swf.gz \
        --cluster KTH-SP2 --workers 1,2,4 --out /tmp/dask-bench
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "dask-cluster.sh"


def proc_io(pid: int) -> dict[str, int]:
    """rchar/wchar (every read and write) and read_bytes/write_bytes (what reached the disk)."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return {}
    return {k: int(v) for k, v in (ln.split(": ") for ln in text.splitlines())}


def shipped_bytes(db: str, cluster: str) -> int:
    """The pickled size of one fold task's arguments (what the scheduler sends a worker)."""
    import cloudpickle

    from metapilot.flows.backtest import plan_origins

    name, first, busy, origins, _ = plan_origins(db, cluster, 4, None, None, None)
    return len(cloudpickle.dumps((str(Path(db).resolve()), name, first, busy, origins[-1], 2000, True)))


def run(log: str, cluster: str, workers: list[int], out: Path, steps: int) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    db = str(out / "w.duckdb")
    metapilot = [sys.executable, "-m", "metapilot.cli"]
    if not Path(db).exists():
        subprocess.run([*metapilot, "ingest", log, "--db", db], check=True, capture_output=True)
    rows = []
    for n in workers:
        started = subprocess.run(["bash", str(SCRIPT), "start", str(n)], check=True, capture_output=True, text=True)
        env = dict(ln[len("export "):].split("=", 1) for ln in started.stdout.splitlines())
        folder = Path(env["METAPILOT_DASK_DIR"])
        try:
            t0 = time.perf_counter()
            res = subprocess.run([*metapilot, "backtest", "--db", db, "--cluster", cluster, "--relearn", "--steps",
                                  str(steps), "--dask", env["METAPILOT_DASK_ADDRESS"], "--json",
                                  str(out / f"bt-{n}.json")], capture_output=True, text=True)
            wall = time.perf_counter() - t0
            io = {p.stem: proc_io(int(p.read_text())) for p in sorted(folder.glob("worker-*.pid"))}
        finally:
            subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], capture_output=True)
        row = {"workers": n, "wall_s": round(wall, 1), "rc": res.returncode, "io": io}
        if res.returncode:
            row["error"] = res.stdout[-2000:] + res.stderr[-2000:]
        rows.append(row)
        print(json.dumps(row), flush=True)
    rows.append({"shipped_bytes_per_fold": shipped_bytes(db, cluster),
                 "warehouse_bytes": os.path.getsize(db)})
    print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--out", default="/tmp/metapilot-dask-bench")
    a = ap.parse_args()
    rows = run(a.log, a.cluster, [int(x) for x in a.workers.split(",")], Path(a.out), a.steps)
    (Path(a.out) / "results.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
