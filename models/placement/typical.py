"""FGD's target workload (the "typical pods"), as the FGD paper's simulator computes it.

hkust-adsl/kubernetes-scheduler-simulator, `pkg/utils/frag.go`, `GetTypicalPods`, with the options
its experiment scripts pass (`scripts/generate_config_and_run.py`: `isInvolvedCpuPods: true`,
`podPopularityThreshold: 95`, `podIncreaseStep: 1`, `gpuResWeight: 0`):

- a pod's shape is `PodResource` (`pkg/type/resource.go`): CPU (the scheduler's non-zero request,
  `GetNonzeroRequests`: 100 milli-CPU for a pod that asks for none), milli-GPU per GPU, GPU count,
  GPU type constraint; CPU-only pods count (`isInvolvedCpuPods`), each pod once (`gpuResWeight` 0);
- shapes sorted by count, most common first, equal counts by the shape, largest first
  (`SortTargetPodInDecreasingCount`: `sort.Reverse` of `TargetPodList.Less`);
- shapes taken one at a time (`podIncreaseStep` 1) until they make up at least the threshold
  percentage of the pods, then their frequencies renormalised over the kept ones.

No constant is fitted to a pod list: the threshold is the paper's.
"""

from __future__ import annotations

import numpy as np
import polars as pl

# simontype.DefaultTypicalPodPopularityThreshold is 60; the paper's runs pass 95.
POPULARITY_THRESHOLD = 95
NONZERO_MILLI_CPU = 100  # k8s scheduler util.DefaultMilliCPURequest (GetNonzeroRequests)


def target_pod_list(cpu: np.ndarray, gm: np.ndarray, ng: np.ndarray, spec: np.ndarray,
                    threshold: int = POPULARITY_THRESHOLD) -> pl.DataFrame:
    """The typical pods (`GetTypicalPods`): columns cpu, gm, ng, spec, p (renormalised frequency),
    most common first. `spec` is a GPU-type constraint's index (-1: none), ordered as its string."""
    if not 0 < threshold <= 100:
        raise ValueError(f"popularity threshold {threshold} is a percentage in (0, 100]")
    cpu = np.where(np.asarray(cpu) == 0, NONZERO_MILLI_CPU, cpu)
    gm = np.where(np.asarray(ng) == 0, 0, gm)  # GetGpuMilliFromPodAnnotation: no GPU, no milli-GPU
    keys = pl.DataFrame({"cpu": cpu, "gm": gm, "ng": ng, "spec": spec}).cast(pl.Int64)
    counts = keys.group_by("cpu", "gm", "ng", "spec").len()
    # Less: count, then MilliCpu, MilliGpu, GpuNumber, GpuType; Reverse: all descending
    counts = counts.sort(["len", "cpu", "gm", "ng", "spec"], descending=True)
    total = float(keys.height)
    expected = threshold * total / 100.0
    cum = counts["len"].cast(pl.Float64).cum_sum().to_numpy()
    k = int(np.searchsorted(cum, expected, side="left")) + 1  # first prefix with cum >= expected
    k = min(k, counts.height)
    top = counts.head(k)
    return top.with_columns((pl.col("len") / pl.col("len").sum()).alias("p")).drop("len")


def grouped(top: pl.DataFrame) -> tuple:
    """The typical pods as the compiled fragment measure (`kernels.node_frag`) reads them: GPU
    shapes grouped by (milli-GPU, GPUs, type), each group's CPUs ascending with cumulative
    frequencies (for a binary search on the node's CPU left), and the CPU-only pods' frequency."""
    nogpu = top.filter(pl.col("gm") == 0)
    gpu = top.filter(pl.col("gm") > 0).sort(["gm", "ng", "spec", "cpu"])
    groups = gpu.group_by("gm", "ng", "spec", maintain_order=True).agg(pl.col("cpu"), pl.col("p"))
    g_cpu, g_cum, g_start, g_len = [], [], [], []
    for cpus, ps in zip(groups["cpu"].to_list(), groups["p"].to_list()):
        g_start.append(len(g_cpu))
        g_len.append(len(cpus))
        g_cpu.extend(cpus)
        g_cum.extend(np.cumsum(ps).tolist())
    return (groups["gm"].to_numpy().astype(np.int64), groups["ng"].to_numpy().astype(np.int64),
            groups["spec"].to_numpy().astype(np.int64),
            np.array([sum(p) for p in groups["p"].to_list()], np.float64),
            np.array(g_start, np.int64), np.array(g_len, np.int64), np.array(g_cpu, np.int64),
            np.array(g_cum, np.float64), float(nogpu["p"].sum()))


__all__ = ["POPULARITY_THRESHOLD", "target_pod_list", "grouped"]
