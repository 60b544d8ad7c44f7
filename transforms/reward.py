"""The per-epoch reward of SPEC §7, vectorised, for the as-run tuples and the replay environment.

For the epoch `[t, t + epoch_s)` in which an objective was in force:

    reward = empty_queue_reward                              if the queue at t + epoch_s is empty
           = -mean_wait / alpha + u_cpu + u_gpu + u_mem      otherwise

- `mean_wait`: mean current wait (s) of the jobs queued at the *end* of the epoch (the
  aggregate `wait_mean_s` of the next boundary): what the epoch's decisions left behind.
- `u_*`: the epoch's utilisation = resource-seconds used within `[t, t + epoch_s)` /
  (capacity x epoch_s). `u_gpu` counts only where the partition has GPUs; `u_mem` only where
  the memory capacity is known (SWF traces have none).
- `alpha`: 1e3 for CPU partitions, 1e4 for GPU partitions (partitions with GPU capacity),
  unless `RewardConfig.alpha` forces one value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class RewardConfig:
    """Reward constants (SPEC §7); every one is recorded in the model card."""

    empty_queue_reward: float = 4.0
    alpha_cpu: float = 1e3
    alpha_gpu: float = 1e4
    alpha: float | None = None  # forces one alpha for every partition
    use_gpu: bool | None = None  # None: where the partition has GPUs
    use_mem: bool | None = None  # None: where memory capacity is known

    def to_dict(self) -> dict:
        return asdict(self)


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
    config: RewardConfig = RewardConfig(),
) -> np.ndarray:
    """Reward of each epoch (float64 array), from the queue at its end and its utilisation.

    `cap_gpu` / `cap_mem` decide per epoch whether the partition has GPUs / known memory.
    """
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
