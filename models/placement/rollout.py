"""The PPO agent's environment: the node-level replay (`engine.Replay`) stopped at every decision.

An observation is what the shared scoring network needs: one row of `kernels.NODE_FEATURES` per
node where the pod fits, identical rows merged (with their count: the policy's probability of a
row is the sum over its nodes, so merging is exact and keeps a step small on 1,213 nodes), and the
global features (`GLOBAL_FEATURES`: the cluster's load, the queue, the pod's request).

The reward is the seed's (SPEC §11), per pod: `-w_load * load_diff - queue_base ** queue_len +
w_success * success`, with `load_diff` the spread (standard deviation) of node utilisation after the
pod and `success` 1 when it is placed (or, `success_unit = "gpu"`, the pod's GPUs in units of the
list's mean GPU pod). Pods the agent is not asked about (nothing fits: failed in an
inflation, queued in a time replay) add their term to the decision before them.

Training episodes are samples: a random subset of the nodes (`episode_nodes`) and pods drawn from
the list until their GPUs reach 130% of the subset's (inflation), or a random stretch of the list
in arrival order (time replay); evaluation replays the whole cluster and list, like a heuristic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from metapilot.models.placement import kernels as K
from metapilot.models.placement.engine import Cluster, Replay, Workload, inflate_draws

GLOBAL_FEATURES = ("gpu_alloc", "util_mean", "util_std", "queue", "pod_cpu", "pod_mem", "pod_gpus", "pod_gpu_milli",
                   "pod_gpu_total", "pod_model")
N_GLOBAL = len(GLOBAL_FEATURES)
FGD_GPU = 2  # a share pod's GPU on the chosen node: FGD's choice (the features assume it)


@dataclass
class Obs:
    """One decision: unique feasible node rows, how many nodes each stands for, a node of each."""

    rows: np.ndarray  # (k, N_NODE_FEATURES) float32
    counts: np.ndarray  # (k,) int64
    nodes: np.ndarray  # (k,) the lowest node index with that row
    glob: np.ndarray  # (N_GLOBAL,) float32


@dataclass(frozen=True)
class PlacementRewardConfig:
    """The seed's reward, configurable (SPEC §11)."""

    w_load: float = 10.0
    queue_base: float = 1.5
    w_success: float = 2.0
    queue_cap: int = 20  # 1.5 ** queue_len grows without bound: the exponent is capped
    # what a success is worth: 1 a pod (the seed's), or "gpu": the pod's GPUs over the list's mean
    # GPU pod (a CPU-only pod: its CPU over the mean pod's), the measure of the FGD paper
    success_unit: str = "pod"
    # not in the seed: - w_frag * the cluster's GPU fragment share (FGD's measure, SPEC §11 frag_gpu_share)
    w_frag: float = 0.0

    def pod_term(self, load_diff: float, queue_len: int, success: float, frag: float = 0.0) -> float:
        return (-self.w_load * load_diff - self.queue_base ** min(queue_len, self.queue_cap)
                + self.w_success * success - self.w_frag * frag)

    def sizes(self, w: Workload) -> np.ndarray:
        """What placing each pod of the workload counts as (`success_unit`)."""
        if self.success_unit == "pod":
            return np.ones(w.n)
        if self.success_unit != "gpu":
            raise ValueError(f"success_unit {self.success_unit!r}: use pod or gpu")
        g = (w.ng * w.gm).astype(np.float64)
        gpu = g > 0
        mean_g = g[gpu].mean() if gpu.any() else 1.0
        mean_c = max(float(w.cpu[~gpu].mean()), 1.0) if (~gpu).any() else 1.0
        return np.where(gpu, g / mean_g, w.cpu / mean_c)


def sub_cluster(c: Cluster, idx: np.ndarray) -> Cluster:
    """The nodes `idx` of a cluster, GPU models indexed as in the whole (the workload's access matrix)."""
    idx = np.sort(idx)
    return Cluster([c.names[i] for i in idx], c.cpu[idx], c.mem[idx], c.ngpu[idx], c.model[idx], c.models)


def unique_rows(feats: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Identical rows of the feasible nodes merged: (rows, counts, lowest node of each), in node order."""
    nodes = np.flatnonzero(mask)
    rows = np.ascontiguousarray(feats[nodes])
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    o = np.argsort(first)
    return rows[first[o]], counts[o].astype(np.int64), nodes[first[o]]


class PlacementEnv:
    """Steps a `Replay` one decision at a time for an external chooser."""

    def __init__(self, cluster: Cluster, w: Workload, mode: str, seed: int, typical: tuple,
                 reward: PlacementRewardConfig | None = None, order: np.ndarray | None = None) -> None:
        self.cluster, self.w, self.mode = cluster, w, mode
        self.reward = reward or PlacementRewardConfig()
        self.rp = Replay(cluster, w, mode, seed, typical)
        if order is not None:  # a stretch of the list (time replay of a sample)
            self.rp.order = order.astype(np.int64)
            fv = self.rp.st[1]
            fv[K.FV_NOW] = fv[K.FV_T0] = float(w.t_arr[order[0]]) if order.size else 0.0
        self.mem_cap = np.maximum(cluster.mem, 1).astype(np.int64)
        self.feats = np.zeros((len(cluster.names), K.N_NODE_FEATURES), np.float64)
        self.size = self.reward.sizes(w)
        self.pending: int | None = None
        self._accounted = 0  # pods whose reward term is counted

    def reset(self) -> tuple[Obs | None, float]:
        """Run to the first decision: its observation (None: nothing to decide) and the reward of
        the pods handled before it."""
        return self._advance(0.0)

    def _advance(self, r: float) -> tuple[Obs | None, float]:
        p = self.rp.step()
        self.pending = p
        iv = self.rp.st[2]
        # pods the loop is done with (inflation: placed or failed; time: arrived, the pending one included)
        handled = int(iv[K.IV_DRAWN]) if self.mode == "inflate" else int(iv[K.IV_NEXT_ARR]) - (p is not None)
        loose = handled - self._accounted  # failed, queued or unfit without a decision
        self._accounted = handled
        if loose > 0:
            r += loose * self.reward.pod_term(self.rp.imbalance_now(), self.rp.queue_len, 0.0, self.frag_now())
        return (None if p is None else self.observe(p)), r

    def frag_now(self) -> float:
        """The cluster's GPU fragment share now (FGD's measure over the typical pods)."""
        fv = self.rp.st[1]
        return float(fv[K.FV_SUM_F] / fv[K.FV_CAP])

    def observe(self, p: int) -> Obs:
        rp = self.rp
        K.node_features(p, self.mem_cap, rp.cl, rp.pods, rp.typ, rp.st, self.feats)
        rows, counts, nodes = unique_rows(self.feats.astype(np.float32), rp.mask)
        fv = rp.st[1]
        w = self.w
        n = len(self.cluster.names)
        glob = np.array([fv[K.FV_ALLOC] / fv[K.FV_CAP], fv[K.FV_SUM_U] / n, rp.imbalance_now(),
                         np.log1p(rp.queue_len) / 5.0, w.cpu[p] / 128000.0, w.mem[p] / 1048576.0, w.ng[p] / 8.0,
                         w.gm[p] / K.MILLI, w.ng[p] * w.gm[p] / 8000.0, float(w.spec[p] >= 0)], np.float32)
        return Obs(rows, counts, nodes, glob)

    def act(self, node: int) -> tuple[Obs | None, float]:
        """Place the pending pod on `node`; the next observation (None at the end) and this step's reward."""
        p = self.pending
        self.rp.place(int(node), FGD_GPU)
        self._accounted += 1
        r = self.reward.pod_term(self.rp.imbalance_now(), self.rp.queue_len, float(self.size[p]), self.frag_now())
        return self._advance(r)

    def result(self, policy: str) -> dict:
        return self.rp.result(policy)


def sample_env(cluster: Cluster, w: Workload, typical: tuple, rng: np.random.Generator, *, episode_nodes: int,
               time_share: float, time_pods: int, reward: PlacementRewardConfig, inflate_to: float = 1.0) -> PlacementEnv:
    """A training episode: a random subset of the nodes, and an inflation of the list on it until the
    drawn GPUs reach `inflate_to` x the subset's (or, with probability `time_share` when the list has
    times, a random stretch of it in time order)."""
    n = len(cluster.names)
    sub = cluster if episode_nodes <= 0 or episode_nodes >= n else sub_cluster(
        cluster, rng.choice(n, size=episode_nodes, replace=False))
    seed = int(rng.integers(0, 2**31 - 1))
    if w.timed and time_share > 0 and rng.random() < time_share:
        order = np.argsort(w.t_arr, kind="stable")
        k = min(time_pods, order.size)
        start = int(rng.integers(0, order.size - k + 1))
        return PlacementEnv(sub, w, "time", seed, typical, reward, order[start:start + k])
    env = PlacementEnv(sub, w, "inflate", seed, typical, reward)
    fits = ~env.rp.unfit  # pods that fit no node of this subset are no demand it could serve
    env.rp.order = inflate_draws(w, sub, seed, inflate_to, fits if fits.any() else None)
    return env


Chooser = Callable[[Obs], int]  # an observation -> the index of the chosen row


def play(env: PlacementEnv, choose: Chooser, policy: str) -> dict:
    """Run an environment to the end with a chooser; the replay's result (SPEC §11 metrics)."""
    obs, _ = env.reset()
    while obs is not None:
        obs, _ = env.act(int(obs.nodes[choose(obs)]))
    return env.result(policy)


__all__ = ["Obs", "PlacementEnv", "PlacementRewardConfig", "GLOBAL_FEATURES", "N_GLOBAL", "sample_env", "sub_cluster",
           "unique_rows", "play"]
