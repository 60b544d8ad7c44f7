"""A CPU-heavy openb pod list, built from the default one the way the FGD paper's `cpuNNN` lists
are (issue 54): in `cpu050`..`cpu250` the CPU-only pods make up NNN/10 percent of the pods ("proportion
of non-GPU workloads in terms of task number", the simulator's experiments/plot/
plot_openb_nongpu_alloc_bar.py: cpu050 is 5%, cpu250 25%); 13.3% in `default`. The paper's files keep
the default list's 7,064 GPU pods as they are and add CPU-only pods drawn from its 1,088 (`cpu250` in
alibaba/clusterdata: 2,356 CPU-only pods, their rows copied whole, then the GPU pods in their order).

Here: the default list's GPU pods kept as they are, its CPU-only pods replaced by
round(NN / (100 - NN) x GPU pods) drawn from them, seeded, with replacement; rows kept whole (times
included), ordered by creation time, renamed `openb-pod-NNNN` (as `make_gpushare.py`). Deterministic
for a seed.

    .venv/bin/python bench/make_cpuheavy.py [--share 25] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
import polars as pl
from make_gpushare import DEFAULT


def cpuheavy(pods: pl.DataFrame, share: float, seed: int) -> pl.DataFrame:
    """`pods` with its CPU-only pods redrawn so that they make up a `share` of all pods."""
    if not 0.0 <= share < 1.0:
        raise ValueError(f"share {share} is a fraction of the pods, below 1")
    rng = np.random.default_rng(seed)
    cpu = pods.filter(pl.col("num_gpu") == 0)
    gpu = pods.filter(pl.col("num_gpu") > 0)
    n_cpu = int(round(share / (1.0 - share) * gpu.height))
    take = np.sort(rng.integers(0, cpu.height, size=n_cpu))
    out = pl.concat([cpu[take], gpu])
    out = out.with_row_index("_k").sort(["creation_time", "_k"]).drop("_k")
    return out.with_columns(pl.format("openb-pod-{}", pl.int_range(pl.len()).cast(pl.Utf8).str.zfill(4)).alias("name"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--share", type=float, default=25.0, help="CPU-only pods, percent of all pods")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    pods = pl.read_csv(gzip.decompress(DEFAULT.read_bytes()), infer_schema_length=0)
    pods = pods.with_columns(pl.col("num_gpu", "creation_time").cast(pl.Int64))
    out = cpuheavy(pods, args.share / 100.0, args.seed)
    path = args.out or DEFAULT.with_name(f"openb_pod_list_cpu{round(args.share * 10):03d}.csv.gz")
    text = out.select(pods.columns).cast(pl.Utf8).write_csv(null_value="")
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    c = out.filter(pl.col("num_gpu") == 0)
    cpu_all = out["cpu_milli"].cast(pl.Int64).sum()
    print(f"{path}: {out.height} pods, {c.height} CPU-only ({100 * c.height / out.height:.1f}%), "
          f"their CPU {100 * c['cpu_milli'].cast(pl.Int64).sum() / cpu_all:.1f}% of the CPU requested")


if __name__ == "__main__":
    main()
