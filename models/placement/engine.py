"""Node-level replay (SPEC §11): a cluster of nodes with per-GPU milli-GPU, pods placed by a policy.

Two experiments: `time` (pods arrive at their creation time, hold their resources for their
logged duration, wait in a queue when nothing fits) and `inflate` (the FGD paper's: pods drawn
at random with replacement, seeded, no departures, each placed or failed and dropped, until the
GPUs requested reach 130% of the cluster's; pods that fit no node of the empty cluster are not
drawn: `not_drawn_unfit` counts them; the result is the allocated GPU share at every arrived
percentage). The loop itself is compiled (`kernels`); this module builds its arrays from frames,
runs it, and turns its sums into the metrics of SPEC §11:

- `pods`, `placed`, `failed` (never placed: still waiting at the end of a time replay, or dropped
  in an inflation; `unfit` and `unknown_gpu_model` count the pods among them that fit no node of
  the empty cluster, and those whose GPU model no node has);
- `mean_wait_s`: mean wait of the placed pods (time mode; none in inflate mode);
- `gpu_alloc_share`: allocated milli-GPU / cluster milli-GPU: in inflate mode when the arrived
  demand reaches 100% (the paper's headline figure), in time mode time-weighted over the replay;
- `frag_gpu_share`: idle milli-GPU that the typical pods cannot use (FGD's fragment measure,
  `NodeGpuShareFragAmountScore`; typical pods = the most common pod shapes making up 95% of the
  list, `typical.target_pod_list`) / cluster milli-GPU;
- `imbalance`: standard deviation across nodes of node utilisation (mean of CPU and GPU
  allocated shares), `hot_node_share`: share of nodes above 80% CPU or GPU; both time-weighted
  (time mode) or at the 100% point (inflate);
- `idle_share`: share of cluster GPU left unallocated while pods wait, averaged over the replay
  (0 when no pod waits; in inflate mode, at the 100% point once a pod has failed).

A time replay whose pods all arrive at one instant (a list without times) has no duration to
weight by: its figures are then those of the state at the end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from metapilot.models.placement import kernels as K
from metapilot.models.placement.typical import POPULARITY_THRESHOLD, grouped, target_pod_list

POLICIES = ("random", "first-fit", "best-fit", "least-loaded", "fgd")
POLICY_CODES = {"random": K.RANDOM, "first-fit": K.FIRST_FIT, "best-fit": K.BEST_FIT,
                "least-loaded": K.LEAST_LOADED, "fgd": K.FGD}
GPU_SEL = {"random": 1, "fgd": 2}  # the others take the fitting GPU with the least milli left
MODES = ("time", "inflate")
INFLATE_TO = 1.30
METRICS = ("pods", "placed", "failed", "mean_wait_s", "gpu_alloc_share", "frag_gpu_share", "imbalance",
           "hot_node_share", "idle_share")


@dataclass
class Cluster:
    """The nodes, as arrays: capacity, GPU count and model index per node."""

    names: list[str]
    cpu: np.ndarray
    mem: np.ndarray
    ngpu: np.ndarray
    model: np.ndarray  # index into `models`, -1 for a node without GPUs
    models: list[str]

    @property
    def gpu_milli(self) -> int:
        return int(self.ngpu.sum()) * K.MILLI

    @property
    def max_gpus(self) -> int:
        return max(1, int(self.ngpu.max()) if self.ngpu.size else 1)


@dataclass
class Workload:
    """The pods, as arrays: requests, GPU-model constraint, arrival and holding time."""

    cpu: np.ndarray
    mem: np.ndarray
    ng: np.ndarray
    gm: np.ndarray
    spec: np.ndarray  # index into `specs`, -1: any model
    specs: list[str]
    access: np.ndarray  # (specs, models) bool
    t_arr: np.ndarray  # seconds
    dur: np.ndarray  # seconds, -1: never leaves
    timed: bool
    unknown_model: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    @property
    def n(self) -> int:
        return int(self.cpu.shape[0])


def build_cluster(nodes: pl.DataFrame) -> Cluster:
    """From a `nodes` frame (node, cpu_milli, memory_mib, gpus, gpu_model)."""
    if nodes.height == 0:
        raise ValueError("the cluster has no nodes: ingest its node list first (metapilot ingest NODES.csv --cluster C)")
    nodes = nodes.sort("node")
    models = sorted(m for m in nodes["gpu_model"].drop_nulls().unique().to_list())
    idx = {m: i for i, m in enumerate(models)}
    model = np.array([idx.get(m, -1) if m is not None else -1 for m in nodes["gpu_model"].to_list()], np.int64)
    ngpu = nodes["gpus"].to_numpy().astype(np.int64)
    model[ngpu == 0] = -1
    return Cluster(nodes["node"].to_list(), nodes["cpu_milli"].to_numpy().astype(np.int64),
                   nodes["memory_mib"].to_numpy().astype(np.int64), ngpu, model, models)


def build_workload(pods: pl.DataFrame, cluster: Cluster) -> Workload:
    """From a pods frame (cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, creation_s, duration_s),
    in the order of the list."""
    specs = sorted(s for s in pods["gpu_spec"].drop_nulls().unique().to_list())
    sidx = {s: i for i, s in enumerate(specs)}
    access = np.zeros((max(1, len(specs)), max(1, len(cluster.models))), np.bool_)
    for s, i in sidx.items():
        for m in s.split("|"):
            if m.strip() in cluster.models:
                access[i, cluster.models.index(m.strip())] = True
    spec = np.array([sidx[s] if s is not None else -1 for s in pods["gpu_spec"].to_list()], np.int64)
    ng = pods["num_gpu"].fill_null(0).to_numpy().astype(np.int64)
    unknown = (spec >= 0) & (ng > 0) & ~access[np.maximum(spec, 0)].any(axis=1)
    t = pods["creation_s"].to_numpy().astype(np.float64)
    dur = pods["duration_s"].fill_null(-1).to_numpy().astype(np.float64)
    timed = bool(pods["duration_s"].is_not_null().any())
    return Workload(pods["cpu_milli"].fill_null(0).to_numpy().astype(np.int64),
                    pods["memory_mib"].fill_null(0).to_numpy().astype(np.int64), ng,
                    pods["gpu_milli"].fill_null(0).to_numpy().astype(np.int64), spec, specs, access,
                    np.nan_to_num(t, nan=0.0), np.where(np.isnan(dur), -1.0, dur), timed, unknown)


def typical_pods(w: Workload, threshold: int = POPULARITY_THRESHOLD) -> tuple:
    """FGD's target workload, as the paper's simulator builds it (`typical.target_pod_list`:
    `GetTypicalPods` of pkg/utils/frag.go), grouped for the compiled fragment measure."""
    return grouped(target_pod_list(w.cpu, w.gm, w.ng, w.spec, threshold))


def tie_rank(n_nodes: int, seed: int) -> np.ndarray:
    """Each node's place among equal best-fit and FGD scores (lowest first). The FGD paper's simulator
    renames node i (in name order) `%04d-<name>` with perm[i] of a permutation drawn from the run's
    seed (pkg/simulator/simulator.go, `syncClusterResourceList`), and its scheduler gives equal scores
    to the smallest name: a random node, the same all run long. In the trace's name order instead,
    CPU-only pods pile onto the first nodes (2-GPU, 64-CPU) and FGD allocated 91.6% on `cpu250` (93.2%
    published); with the permutation, 93.2%."""
    return np.random.default_rng([seed, 0x7E]).permutation(n_nodes).astype(np.int64)


def without_gpus(cluster: Cluster, name: str = "the cluster") -> str | None:
    """Why a node list without GPUs cannot take the inflation experiment (or train the agent, whose
    goals are measured by it): its curve is the GPU share allocated as GPU demand arrives. None when
    some node has GPUs. A time replay places such pods on CPU and memory."""
    if cluster.gpu_milli > 0:
        return None
    return (f"{name}'s {len(cluster.names)} nodes have no GPUs: the inflate experiment (and the PPO agent, judged by it) "
            f"measures GPU packing, so there is nothing to inflate; `metapilot place replay --cluster {name} --mode time` "
            "places its pods on CPU and memory")


def inflate_draws(w: Workload, cluster: Cluster, seed: int, to: float = INFLATE_TO,
                  drawable: np.ndarray | None = None) -> np.ndarray:
    """Pod indices drawn at random with replacement until their GPUs reach `to` x the cluster's.

    `drawable` (a mask over the pods): only those are drawn. A pod that fits no node of the empty
    cluster is no demand the cluster could serve: drawn, one such pod asking for more GPUs than the
    cluster has made the arrived demand jump past 100% at once, and the allocation "at 100%"
    depended on whether it came first (0% on one seed, 33% on another: issue 41)."""
    if (why := without_gpus(cluster)) is not None:
        raise ValueError(why)
    rng = np.random.default_rng(seed)
    target = to * cluster.gpu_milli
    req = (w.ng * w.gm).astype(np.float64)
    pool = None if drawable is None or bool(drawable.all()) else np.flatnonzero(drawable)
    asks = req if pool is None else req[pool]
    if not asks.size or asks.sum() <= 0:
        raise ValueError("no pod that fits a node of the cluster asks for a GPU: the inflate experiment draws GPU demand "
                         "until it reaches 130% of the GPUs, and there is none; use --mode time")
    mean = max(asks.mean(), 1.0)
    out: list[np.ndarray] = []
    total = 0.0
    while total < target:
        size = int(target / mean * 1.2) + 64
        batch = rng.integers(0, w.n, size=size) if pool is None else pool[rng.integers(0, pool.size, size=size)]
        c = total + np.cumsum(req[batch])
        cut = int(np.searchsorted(c, target, side="left")) + 1
        out.append(batch[:cut])
        total = c[min(cut, len(c)) - 1]
    return np.concatenate(out).astype(np.int64)


class Replay:
    """One replay's state; `run` for a heuristic, `step`/`place` for an external chooser (PPO)."""

    def __init__(self, cluster: Cluster, w: Workload, mode: str = "time", seed: int = 0,
                 typical: tuple | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: use time or inflate")
        self.cluster, self.w, self.mode, self.seed = cluster, w, mode, seed
        n, g = len(cluster.names), cluster.max_gpus
        gfree = np.zeros((n, g), np.int64)
        for i, k in enumerate(cluster.ngpu):
            gfree[i, :k] = K.MILLI
        self.typ = typical if typical is not None else typical_pods(w)
        self.cl = (cluster.cpu.copy(), cluster.cpu.copy(), cluster.mem.copy(), gfree,
                   cluster.ngpu, cluster.model, w.access, tie_rank(n, seed))
        self.unfit = ~K.fits_empty(cluster.cpu, cluster.mem, gfree.copy(), cluster.ngpu, cluster.model, w.access,
                                   w.cpu, w.mem, w.ng, w.gm, w.spec)
        dur = w.dur if mode == "time" else np.full(w.n, -1.0)  # inflation: nobody leaves
        _, shape = np.unique(np.stack([w.cpu, w.ng, w.gm], axis=1), axis=0, return_inverse=True)
        shape = np.ascontiguousarray(shape.reshape(-1), dtype=np.int64)
        self.pods = (w.cpu, w.mem, w.ng, w.gm, w.spec, w.t_arr, dur, self.unfit, shape)
        iv = np.zeros(K.N_IV, np.int64)
        iv[K.IV_PENDING] = -1
        fv = np.zeros(K.N_FV, np.float64)
        fv[K.FV_CAP] = max(cluster.gpu_milli, 1)
        f_cache = np.zeros(n, np.float64)
        self.st = (f_cache, fv, iv, np.full(w.n, -1, np.int64), np.zeros(w.n, np.int64), np.zeros(w.n + 1, np.float64),
                   np.zeros(w.n + 1, np.int64), np.full(w.n + 1, -1, np.int64), np.zeros(n, np.bool_),
                   np.full(w.n, np.nan, np.float64),
                   # FGD's score per (pod shape, node), valid while sc_ver == node_ver (bumped when the node changes)
                   np.ones(n, np.int64), np.zeros((int(shape.max(initial=-1)) + 1, n), np.int64),
                   np.zeros((int(shape.max(initial=-1)) + 1, n), np.float64))
        self._init_sums()
        if mode == "time":
            self.order = np.argsort(w.t_arr, kind="stable").astype(np.int64)
            fv[K.FV_NOW] = float(w.t_arr[self.order[0]]) if w.n else 0.0
            fv[K.FV_T0] = fv[K.FV_NOW]
        else:
            self.order = inflate_draws(w, cluster, seed, drawable=~self.unfit)
            self.curve = np.full(int(round(INFLATE_TO * 100)) + 1, np.nan, np.float64)
            self.curve[0] = 0.0
        K.seed_rng(seed)
        self.seconds = 0.0

    def _init_sums(self) -> None:
        f_cache, fv = self.st[0], self.st[1]
        args = self.cl[1], self.cl[3], self.cl[4], self.cl[5], self.cl[6], *self.typ
        for n in range(len(self.cluster.names)):
            f_cache[n] = K.node_frag(n, *args)
        fv[K.FV_SUM_F] = f_cache.sum()

    # --- driving the loop ------------------------------------------------------------------------

    def _loop(self, code: int, gpu_sel: int) -> int:
        if self.mode == "time":
            return int(K.run_time(self.cl, self.pods, self.typ, self.st, self.order, code, gpu_sel))
        return int(K.run_inflate(self.cl, self.pods, self.typ, self.st, self.order, code, gpu_sel, self.curve))

    def run(self, policy: str) -> dict:
        """Replay to the end under a heuristic; the metrics."""
        if policy not in POLICY_CODES:
            raise ValueError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)} or a PPO policy id")
        t0 = time.perf_counter()
        self._loop(POLICY_CODES[policy], GPU_SEL.get(policy, 0))
        self.seconds += time.perf_counter() - t0
        return self.result(policy)

    def step(self) -> int | None:
        """Run to the next decision; the pod to place (feasible nodes in `mask`), or None at the end."""
        t0 = time.perf_counter()
        status = self._loop(K.EXTERNAL, 0)
        self.seconds += time.perf_counter() - t0
        return int(self.st[2][K.IV_PENDING]) if status == 1 else None

    @property
    def mask(self) -> np.ndarray:
        return self.st[8]

    def place(self, node: int, gpu_sel: int = 0) -> None:
        """Put the pending pod on `node` (must be feasible); `gpu_sel` picks the GPU of a share pod
        (0 the fitting one with least left, 1 random, 2 FGD's)."""
        if not self.st[8][node]:
            raise ValueError(f"node {node} cannot take pod {int(self.st[2][K.IV_PENDING])}")
        K.external_place(int(node), self.cl, self.pods, self.typ, self.st, gpu_sel)

    # --- state the agent sees ----------------------------------------------------------------------

    def node_features(self) -> np.ndarray:
        """Per node: CPU, memory, GPU shares left, largest GPU share left, whole GPUs free, GPU count."""
        cpu_cap, cpu_free, mem_free, gfree, ngpu = self.cl[0], self.cl[1], self.cl[2], self.cl[3], self.cl[4]
        gcap = np.maximum(ngpu, 1) * K.MILLI
        mem_cap = np.maximum(self.cluster.mem, 1)
        return np.stack([cpu_free / np.maximum(cpu_cap, 1), mem_free / mem_cap, gfree.sum(1) / gcap,
                         gfree.max(1) / K.MILLI, (gfree == K.MILLI).sum(1) / 8.0, ngpu / 8.0], axis=1).astype(np.float32)

    def pod_features(self, p: int) -> np.ndarray:
        w = self.w
        return np.array([w.cpu[p] / 128000.0, w.mem[p] / 1048576.0, w.ng[p] / 8.0, w.gm[p] / K.MILLI,
                         float(w.spec[p] >= 0)], np.float32)

    def imbalance_now(self) -> float:
        fv = self.st[1]
        n = len(self.cluster.names)
        mean = fv[K.FV_SUM_U] / n
        return float(np.sqrt(max(fv[K.FV_SUM_U2] / n - mean * mean, 0.0)))

    @property
    def queue_len(self) -> int:
        return int(self.st[2][K.IV_QLEN])

    # --- results -----------------------------------------------------------------------------------

    def result(self, policy: str) -> dict:
        fv, iv = self.st[1], self.st[2]
        w = self.w
        if self.mode == "time":
            pods = w.n
            span = fv[K.FV_SPAN]
            if span > 0:
                tw = lambda slot: float(fv[slot] / span)  # noqa: E731
            else:  # every pod arrived at the same instant (a list without times): the state at the end
                fv[K.FV_ANY_FAIL] = float(iv[K.IV_QLEN] > 0)
                K._snapshot(self.cl, self.st)
                snap = {K.FV_W_ALLOC: K.FV_SNAP_ALLOC, K.FV_W_FRAG: K.FV_SNAP_FRAG, K.FV_W_STD: K.FV_SNAP_STD,
                        K.FV_W_HOT: K.FV_SNAP_HOT, K.FV_W_IDLE: K.FV_SNAP_IDLE}
                tw = lambda slot: float(fv[snap[slot]])  # noqa: E731
            out = {"pods": pods, "placed": int(iv[K.IV_PLACED]),
                   "mean_wait_s": float(fv[K.FV_WAIT_SUM] / iv[K.IV_PLACED]) if iv[K.IV_PLACED] else None,
                   "gpu_alloc_share": tw(K.FV_W_ALLOC), "frag_gpu_share": tw(K.FV_W_FRAG), "imbalance": tw(K.FV_W_STD),
                   "hot_node_share": tw(K.FV_W_HOT), "idle_share": tw(K.FV_W_IDLE), "span_s": float(span),
                   "still_waiting": int(iv[K.IV_QLEN])}
            unknown = int(w.unknown_model.sum())
        else:
            drawn = self.order[: int(iv[K.IV_DRAWN])]
            reached = not np.isnan(self.curve[100])
            out = {"pods": int(drawn.size), "placed": int(iv[K.IV_PLACED]), "mean_wait_s": None,
                   "not_drawn_unfit": int(self.unfit.sum()),
                   "gpu_alloc_share": float(self.curve[100]) if reached else None,
                   "frag_gpu_share": float(fv[K.FV_SNAP_FRAG]) if reached else None,
                   "imbalance": float(fv[K.FV_SNAP_STD]) if reached else None,
                   "hot_node_share": float(fv[K.FV_SNAP_HOT]) if reached else None,
                   "idle_share": float(fv[K.FV_SNAP_IDLE]) if reached else None,
                   "curve": [None if np.isnan(v) else round(float(v), 6) for v in self.curve]}
            unknown = int(w.unknown_model[drawn].sum())
        out["failed"] = out["pods"] - out["placed"]
        return {"policy": policy, "mode": self.mode, "seed": self.seed, **{k: out[k] for k in METRICS},
                "unfit": int(iv[K.IV_UNFIT]), "unknown_gpu_model": unknown,
                "nodes": len(self.cluster.names), "gpus": int(self.cluster.ngpu.sum()),
                "seconds": round(self.seconds, 4), **{k: v for k, v in out.items() if k not in METRICS}}


def replay(cluster: Cluster, w: Workload, policy: str, mode: str = "time", seed: int = 0,
           typical: tuple | None = None) -> dict:
    """Replay the workload on the cluster under a heuristic; the metrics of SPEC §11."""
    return Replay(cluster, w, mode, seed, typical).run(policy)


__all__ = ["Cluster", "Workload", "Replay", "replay", "build_cluster", "build_workload", "typical_pods",
           "inflate_draws", "tie_rank", "without_gpus", "POLICIES", "MODES", "METRICS"]
