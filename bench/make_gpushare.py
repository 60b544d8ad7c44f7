"""A GPU-sharing-heavy openb pod list, built from the default one the way the FGD paper's
`gpushare` lists are (issue 34): the other openb lists are "sampled from the default one,
emphasizing certain types of workloads" (cluster-trace-gpu-v2023 README); in `gpushareNN` the
GPU-sharing pods (one GPU, less than 1000 milli) make up NN% of the GPU pods (43.6% in `default`).

Here: the default list's CPU-only pods kept as they are, its 7,064 GPU pods replaced by as many
drawn from it, seeded: NN% from its GPU-sharing pods (with replacement: there are 3,078), the rest
from its whole-GPU pods (without replacement); rows kept whole (times included), ordered by
creation time, renamed `openb-pod-NNNN`. Deterministic for a seed.

    .venv/bin/python bench/make_gpushare.py [--share 80] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "tests" / "data" / "openb" / "openb_pod_list_default.csv.gz"


def gpushare(pods: pl.DataFrame, share: float, seed: int) -> pl.DataFrame:
    """`pods` with its GPU pods redrawn so that a `share` of them are GPU-sharing pods."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share {share} is a fraction of the GPU pods")
    rng = np.random.default_rng(seed)
    cpu = pods.filter(pl.col("num_gpu") == 0)
    gpu = pods.filter(pl.col("num_gpu") > 0)
    is_share = (gpu["num_gpu"] == 1) & (gpu["gpu_milli"] < 1000)
    shared, whole = gpu.filter(is_share), gpu.filter(~is_share)
    n_share = int(round(share * gpu.height))
    n_whole = gpu.height - n_share
    take_s = rng.integers(0, shared.height, size=n_share)
    take_w = rng.choice(whole.height, size=n_whole, replace=n_whole > whole.height)
    out = pl.concat([cpu, shared[np.sort(take_s)], whole[np.sort(take_w)]])
    out = out.with_row_index("_k").sort(["creation_time", "_k"]).drop("_k")
    return out.with_columns(pl.format("openb-pod-{}", pl.int_range(pl.len()).cast(pl.Utf8).str.zfill(4)).alias("name"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--share", type=int, default=80, help="GPU-sharing pods, percent of the GPU pods")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    pods = pl.read_csv(gzip.decompress(DEFAULT.read_bytes()), infer_schema_length=0)
    pods = pods.with_columns(pl.col("num_gpu", "gpu_milli", "creation_time").cast(pl.Int64))
    out = gpushare(pods, args.share / 100.0, args.seed)
    path = args.out or DEFAULT.with_name(f"openb_pod_list_gpushare{args.share}.csv.gz")
    cols = pods.columns
    text = out.select(cols).cast(pl.Utf8).write_csv(null_value="")
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    g = out.filter(pl.col("num_gpu") > 0)
    s = ((g["num_gpu"] == 1) & (g["gpu_milli"] < 1000)).sum()
    print(f"{path}: {out.height} pods, {g.height} with GPUs, {s} GPU-sharing ({100 * s / g.height:.1f}%)")


if __name__ == "__main__":
    main()
