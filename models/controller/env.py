"""The controller's MDP as a `gymnasium.Env` over the objective-switching replay (SPEC §6, §7).

An action picks the objective (an index into the menu, `models.controller.objectives.Menu`) that
the replay engine runs under for the next decision epoch; the observation is the §7 state at the
epoch boundary; the reward is §7's for the epoch just run. The cluster is read through the
simulator's `EpochReplay` (`models.simulator.epoch_replay`), the same path as the controller
replay and the rollouts, so a feature cannot differ between them.
"""

from __future__ import annotations

from dataclasses import replace

import gymnasium as gym
import numpy as np

from metapilot.models.controller.lookahead import LookaheadProbe
from metapilot.models.controller.objectives import Menu
from metapilot.models.simulator.capacity import Capacity
from metapilot.models.simulator.epoch_replay import (
    EpochReplay,
    StateEncoder,
    aggregates_dict,
    definition_reward,
    epoch_reward,
    fast_reward_ok,
)
from metapilot.transforms.reward import ControllerRewardConfig
from metapilot.transforms.state import (
    LOG_COUNT_SCALE,
    LOG_TIME_SCALE,
    LOOKAHEAD_MIN_SCALE,
    LOOKAHEAD_SCALE,
    RATIO_CLIP,
    StateConfig,
    lookahead_feature_list,
    lookahead_features,
)
from metapilot.transforms.workload import Workload


def observation_bounds(config: StateConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Box bounds of the state: ratios in [0, RATIO_CLIP], ln(1 + ratio), shares in [0, 1],
    sin/cos in [-1, 1]; log-scaled times up to 1e15 s and counts up to 1e9 (finite, so that
    agents that normalise by the bounds can); lookahead features (with `config`'s) of costs up
    to 1e15 job-epochs."""
    t = np.log10(1.0 + 1e15) / LOG_TIME_SCALE
    c = np.log10(1.0 + 1e9) / LOG_COUNT_SCALE
    q = float(np.log1p(RATIO_CLIP))
    low = np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1], dtype=np.float32)
    high = np.array([RATIO_CLIP] * 3 + [c, q, q, q, t, t, 1.0, t, c, 1, 1, 1, 1], dtype=np.float32)
    n_la = len(lookahead_feature_list(config)) if config is not None else 0
    if n_la:
        big = float(np.log1p(1e15))
        low = np.r_[low, np.zeros(n_la, np.float32)]
        high = np.r_[high, [big / LOOKAHEAD_SCALE] * (n_la - 1), [big / LOOKAHEAD_MIN_SCALE]].astype(np.float32)
    return low, high


class ObjectiveSwitchingEnv(gym.Env):
    """Replay of a workload where each step runs one decision epoch under the chosen objective.

    - action: index into the menu of `state_config` (`models.controller.objectives.Menu`);
    - observation: `transforms.state` features at the boundary after the epoch (float32);
    - reward: SPEC §7 for the epoch (`ControllerRewardConfig`: aligned by default);
    - terminated: every job of the workload has finished; truncated: `max_epochs` reached;
    - info: the raw aggregates of the boundary, `u_*` of the epoch, the epoch index and objective.

    The replay is deterministic: `reset(seed=...)` only seeds `np_random` (for wrappers)."""

    metadata = {"render_modes": []}

    def __init__(self, workload: Workload, capacity: Capacity, *, epoch_s: int | None = None,
                 state_config: StateConfig | None = None, reward_config: ControllerRewardConfig | None = None,
                 partition: str | None = None, max_epochs: int | None = None) -> None:
        sc = state_config or StateConfig()
        if epoch_s is not None:
            sc = replace(sc, epoch_s=int(epoch_s))
        self.state_config = sc
        self.reward_config = reward_config or ControllerRewardConfig()
        self.max_epochs = max_epochs
        self.menu = Menu.of(sc)
        self.replay = EpochReplay(workload, capacity, epoch_s=sc.epoch_s, long_tail_s=sc.long_tail_s,
                                  partition=partition, objectives=self.menu.specs)
        self.encoder = StateEncoder(sc, self.replay.origin_s, sc.epoch_s)
        self.probe = None
        if sc.lookahead_h > 0:
            self.probe = LookaheadProbe(sc)
        self.fast_reward = fast_reward_ok(self.reward_config, sc.epoch_s)
        low, high = observation_bounds(sc)
        self.observation_space = gym.spaces.Box(low=low, high=high, dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(self.menu))
        self._agg: np.ndarray | None = None
        self._record = 0.0  # largest wait at any boundary so far (the aligned reward's tail term)

    @property
    def epoch_s(self) -> int:
        return self.state_config.epoch_s

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._agg = self.replay.reset()
        self._record = 0.0
        if self.probe is not None:
            self.probe.reset()
        return self._observe(self._agg, 0), {**aggregates_dict(self._agg), "epoch": 0}

    def _observe(self, agg: np.ndarray, k: int) -> np.ndarray:
        obs = self.encoder(agg, k)
        if self.probe is None:
            return obs
        costs = self.probe.costs(self.replay.engine, agg, self.replay.settings)
        return np.concatenate([obs, lookahead_features(costs, self.epoch_s)[0]])

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._agg is None:
            raise RuntimeError("call reset() before step()")
        a = int(action)
        if not 0 <= a < len(self.menu):
            raise ValueError(f"action {action!r} is not an index into the menu {self.menu.names}")
        rp = self.replay
        sums = rp.advance(a)
        agg0, agg = self._agg, rp.aggregates()
        self._agg = agg
        record = max(self._record, float(agg0[12]))
        self._record = max(record, float(agg[12]), float(sums[4]))
        obs = self._observe(agg, rp.k)
        if self.fast_reward:
            reward, u = epoch_reward(agg0, agg, sums, rp.epoch_s, self.reward_config, record)
        else:
            r, uu = definition_reward(agg0, agg, sums, rp.epoch_s, self.reward_config, record)
            reward, u = float(r[0]), uu[0]
        terminated = rp.done
        truncated = bool(self.max_epochs is not None and rp.k >= self.max_epochs and not terminated)
        info = aggregates_dict(agg)
        info.update(u_cpu=float(u[0]), u_gpu=float(u[1]), u_mem=float(u[2]), epoch=rp.k, objective=self.menu.names[a],
                    wait_accrued_s=float(sums[3]), wait_started_max_s=float(sums[4]))
        return obs, float(reward), bool(terminated), truncated, info


__all__ = ["ObjectiveSwitchingEnv", "observation_bounds"]
