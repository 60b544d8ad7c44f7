"""The per-epoch reward of SPEC §7, vectorised, for the as-run tuples and the replay environment.

For the epoch `[t, t + epoch_s)` in which an objective was in force, the default ("aligned"):

    reward = -(A + lam * G) / (scale_jobs * epoch_s) + mu * (u_cpu + u_gpu) * [queue at t not empty]

- `A`: job-seconds of waiting accrued in the epoch by every job queued in it (the aggregate
  `wait_accrued_s` of the epoch). Over the epochs of a window, A sums to the total wait of its
  jobs, so the return ranks policies by mean wait.
- `G`: growth of the record wait, `max(0, w - record(t))`, where `w` is the largest wait seen in
  the epoch (the largest current wait of the queued jobs at `t + e`, `wait_max_s`, or of the jobs
  that started in it, `wait_started_max_s`) and `record(t)` the largest seen before in the
  trajectory: over a window G sums to its max wait, so the return ranks policies by `total wait +
  lam * max wait`, what validation reports (the tail term, weighted by `lam`: jobs' worth of
  waiting per second of max wait, chosen on the training window).
- `scale_jobs * epoch_s`: a fixed normaliser (recorded in the model card), so that ten jobs
  waiting a whole epoch cost 1.0 by default. An empty epoch costs 0: no constant.
- utilisation only where policies can change it, epochs that open with a backlog (`mu`, 0 by
  default).

The seed's reward stays available as `kind="paper"`:

    reward = empty_queue_reward                              if the queue at t + epoch_s is empty
           = -mean_wait / alpha + u_cpu + u_gpu + u_mem      otherwise

with `mean_wait` the mean current wait of the jobs queued at the end of the epoch, `alpha` 1e3
for CPU and 1e4 for GPU partitions. It scores the best mean-wait rule worst on KTH-SP2 (it
measures the age of what is still queued, not the waiting that accrues), so it is not the default.
`u_*` is the epoch's utilisation = resource-seconds used / (capacity x epoch_s); `u_gpu` counts
only where the partition has GPUs, `u_mem` only where memory capacity is known.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import polars as pl


@dataclass(frozen=True)
class ControllerRewardConfig:
    """Reward constants (SPEC §7); every one is recorded in the model card."""

    kind: str = "aligned"  # aligned | paper
    lam: float = 50.0  # aligned: weight of the max-wait growth G (chosen on the training window)
    mu: float = 0.0  # aligned: weight of utilisation in backlogged epochs
    scale_jobs: float = 10.0  # aligned: reward unit = this many jobs waiting one epoch
    empty_queue_reward: float = 4.0
    alpha_cpu: float = 1e3
    alpha_gpu: float = 1e4
    alpha: float | None = None  # forces one alpha for every partition
    use_gpu: bool | None = None  # None: where the partition has GPUs
    use_mem: bool | None = None  # None: where memory capacity is known

    def __post_init__(self) -> None:
        if self.kind not in REWARD_KINDS:
            raise ValueError(f"unknown reward {self.kind!r}; choose from {', '.join(REWARD_KINDS)}")
        if self.lam < 0 or self.scale_jobs <= 0:
            raise ValueError("the reward needs lam >= 0 and scale_jobs > 0")

    def to_dict(self) -> dict:
        return asdict(self)


REWARD_KINDS: tuple[str, ...] = ("aligned", "paper")
# The formulas in words, for the model card.
REWARD_FORMULAS: dict[str, str] = {
    "aligned": "-(A + lam * G) / (scale_jobs * epoch_s) + mu * (u_cpu + u_gpu) if the queue at the epoch start "
               "is not empty; A = job-seconds queued in the epoch, G = max(0, the largest wait seen in the epoch "
               "(queued at its end or started in it) - the largest seen before in the trajectory)",
    "paper": "empty_queue_reward if the queue at the epoch end is empty, else "
             "-mean_wait_s / alpha + u_cpu + u_gpu (GPU partitions) + u_mem (known memory)",
}


def utilisation(used_resource_s: np.ndarray, capacity: np.ndarray, epoch_s: float) -> np.ndarray:
    """Resource-seconds used in the epoch / (capacity x epoch length); 0 where capacity is 0."""
    used = np.nan_to_num(np.asarray(used_resource_s, dtype=np.float64))
    cap = np.nan_to_num(np.asarray(capacity, dtype=np.float64)) * float(epoch_s)
    return np.divide(used, cap, out=np.zeros(np.broadcast(used, cap).shape), where=cap > 0)


def reward_from_aggregates(
    *,
    queue_len_end: np.ndarray | float,
    wait_mean_end_s: np.ndarray | float,
    u_cpu: np.ndarray | float,
    u_gpu: np.ndarray | float,
    u_mem: np.ndarray | float,
    cap_gpu: np.ndarray | float,
    cap_mem: np.ndarray | float,
    queue_len_start: np.ndarray | float = 0.0,
    wait_record_s: np.ndarray | float = 0.0,
    wait_max_end_s: np.ndarray | float = 0.0,
    wait_accrued_s: np.ndarray | float = 0.0,
    wait_started_max_s: np.ndarray | float = 0.0,
    epoch_s: float = 3600.0,
    config: ControllerRewardConfig = ControllerRewardConfig(),
) -> np.ndarray:
    """Reward of each epoch (float64 array), from the aggregates at its two boundaries and what
    accrued in it (see the module docstring for both kinds).

    `cap_gpu` / `cap_mem` decide per epoch whether the partition has GPUs / known memory.
    """
    if config.kind == "aligned":
        q0, w0, w1, ws, acc, uc, ug, cg = np.broadcast_arrays(
            *(np.atleast_1d(np.nan_to_num(np.asarray(x, dtype=np.float64)))
              for x in (queue_len_start, wait_record_s, wait_max_end_s, wait_started_max_s, wait_accrued_s, u_cpu,
                        u_gpu, cap_gpu))
        )
        gpu_on = (cg > 0) if config.use_gpu is None else np.full(q0.shape, bool(config.use_gpu))
        cost = (acc + config.lam * np.maximum(np.maximum(w1, ws) - w0, 0.0)) / (config.scale_jobs * float(epoch_s))
        util = config.mu * (uc + np.where(gpu_on, ug, 0.0))
        return -cost + np.where(q0 > 0, util, 0.0)
    q, w, uc, ug, um, cg, cm = np.broadcast_arrays(
        *(np.atleast_1d(np.nan_to_num(np.asarray(x, dtype=np.float64)))
          for x in (queue_len_end, wait_mean_end_s, u_cpu, u_gpu, u_mem, cap_gpu, cap_mem))
    )
    has_gpu = cg > 0
    gpu_on = has_gpu if config.use_gpu is None else np.full(q.shape, bool(config.use_gpu))
    mem_on = (cm > 0) if config.use_mem is None else np.full(q.shape, bool(config.use_mem))
    if config.alpha is not None:
        alpha = np.full(q.shape, float(config.alpha))
    else:
        alpha = np.where(has_gpu, config.alpha_gpu, config.alpha_cpu)
    busy = -w / alpha + uc + np.where(gpu_on, ug, 0.0) + np.where(mem_on, um, 0.0)
    return np.where(q <= 0, config.empty_queue_reward, busy)


def reward_from_frame(aggregates: "pl.DataFrame", config: ControllerRewardConfig = ControllerRewardConfig()) -> np.ndarray:
    """Rewards of the n epochs between n + 1 consecutive boundaries of an aggregates frame (the
    `transforms.state` aggregates plus the epoch's `u_*` and `wait_accrued_s` on the boundary that
    opens it; one trajectory, in order: the record of the largest wait starts at its first
    boundary): the one definition the tuples, the env and the replay share."""
    if config.kind == "aligned" and "wait_accrued_s" not in aggregates.columns:
        raise ValueError("the aligned reward needs the epochs' accrued wait (`wait_accrued_s`)")
    n = aggregates.height - 1
    cur, nxt = aggregates.head(n), aggregates.tail(n)
    e = float(nxt["epoch_start"][0] - cur["epoch_start"][0]) if n else 3600.0
    col = lambda df, c: np.nan_to_num(df[c].to_numpy().astype(np.float64)) if c in df.columns else np.zeros(df.height)  # noqa: E731
    seen = np.maximum(col(nxt, "wait_max_s"), col(cur, "wait_started_max_s"))  # the largest wait seen in each epoch
    record = np.maximum.accumulate(np.r_[col(aggregates.head(1), "wait_max_s"), seen])[:n]
    return reward_from_aggregates(
        queue_len_end=col(nxt, "queue_len"), wait_mean_end_s=col(nxt, "wait_mean_s"),
        u_cpu=col(cur, "u_cpu"), u_gpu=col(cur, "u_gpu"), u_mem=col(cur, "u_mem"),
        cap_gpu=col(cur, "cap_gpu"), cap_mem=col(cur, "cap_mem"),
        queue_len_start=col(cur, "queue_len"), wait_record_s=record,
        wait_max_end_s=col(nxt, "wait_max_s"), wait_accrued_s=col(cur, "wait_accrued_s"),
        wait_started_max_s=col(cur, "wait_started_max_s"),
        epoch_s=e, config=config,
    )
