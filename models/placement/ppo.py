"""The PPO placement agent's settings and network (SPEC §11).

One small network scores every node where the pod fits, from that node's row of
`kernels.NODE_FEATURES` and the decision's `rollout.GLOBAL_FEATURES`; the policy is the softmax of
the scores over the feasible nodes (infeasible nodes are never scored: masked), so the same weights
run on 16 nodes or 1,213. A value head reads the global features and the mean node row.

The score is `prior . node_row + mlp(node_row, global)`: a linear term over the node features,
initialised from `PPOConfig.prior` (default: FGD's score minus the spread a node would add, the
two heuristics the agent is to combine), and an MLP whose last layer starts at zero. PPO trains
both; with `prior = {}` the agent starts from a uniform policy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch
from torch import nn

from metapilot.models.placement import kernels as K
from metapilot.models.placement.rollout import GLOBAL_FEATURES, N_GLOBAL, PlacementRewardConfig

DEFAULT_PRIOR = {"fgd": 10.0, "dvar": -3.0}
# FGD's score with less weight on the spread: multi-GPU lists need it to pack (see docs/benchmarks.md)
PRIOR_CHOICES = (DEFAULT_PRIOR, {"fgd": 10.0, "dvar": -1.0}, {"fgd": 10.0, "dvar": -0.5})


@dataclass
class PPOConfig:
    """PPO as the seed gives it (SPEC §11) plus what a run needs; every field is in the model card."""

    seed: int = 0
    total_steps: int = 200_000  # placement decisions at most (the KL switch usually stops training first)
    rollout_steps: int = 4096  # decisions per update (whole episodes: a batch may run over)
    n_rollouts: int = 2  # rollout tasks per update (parallel on Dask)
    clip: float = 0.2
    lr: float = 3e-4
    epochs: int = 4  # 4-6 in the seed
    minibatch: int = 512  # decisions per gradient step
    gamma: float = 0.99
    gae_lambda: float = 0.95
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    # exploration: uniform random nodes for the first `random_steps`, then epsilon-greedy around the
    # sampled policy with epsilon = max(eps_min, eps_start - step / eps_decay_steps)
    random_steps: int = 1000
    eps_start: float = 0.9
    eps_min: float = 0.1
    eps_decay_steps: int = 10_000
    # deterministic (training stops, argmax from then on) once the update's KL stays below kl_stop
    # for kl_patience updates in a row (0: never), counted once epsilon is at its floor
    kl_stop: float = 0.01
    kl_patience: int = 10
    # learning rate x lr_decay when the mean reward per decision moves by more than reward_jump (relative)
    lr_decay: float = 0.8
    reward_jump: float = 0.3
    reward: PlacementRewardConfig = field(default_factory=PlacementRewardConfig)
    hidden: int = 64
    prior: dict = field(default_factory=lambda: dict(DEFAULT_PRIOR))
    # starting points to choose `prior` from on the cluster's own list before training (the same for
    # every list; empty or one: `prior` as given); the model card records the one chosen
    priors: list = field(default_factory=lambda: [dict(p) for p in PRIOR_CHOICES])
    # training episodes: this many nodes drawn at random (0: the whole cluster), an inflation on them,
    # or with probability time_share (lists with times) a stretch of time_pods pods in time order
    episode_nodes: int = 128
    time_share: float = 0.25
    time_pods: int = 2000
    inflate_to: float = 1.0  # training inflations stop when the drawn GPUs reach this x the nodes'
    # checkpoint choice (`models/placement/select.py`): a snapshot before training and every
    # `select_every` updates (0: keep the last weights), each replayed on the whole cluster in time
    # mode and in inflate mode with `select_seeds` seeds
    select_every: int = 4
    select_seeds: int = 2

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> PPOConfig:
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        if isinstance(d.get("reward"), dict):
            d["reward"] = PlacementRewardConfig(**d["reward"])
        return cls(**d)

    def epsilon(self, step: int) -> float:
        """The chance of a uniformly random feasible node at global decision `step`."""
        if step < self.random_steps:
            return 1.0
        return max(self.eps_min, self.eps_start - step / self.eps_decay_steps)


class Scorer(nn.Module):
    """Scores of nodes (`scores`) and the value of a decision (`value`); `forward` is the one-decision
    entry point that the TorchScript artifact keeps: rows (k, F), global (G,) -> scores (k,)."""

    def __init__(self, hidden: int = 64, prior: dict | None = None) -> None:
        super().__init__()
        nf, ng = K.N_NODE_FEATURES, N_GLOBAL
        self.linear = nn.Linear(nf, 1, bias=False)
        self.mlp = nn.Sequential(nn.Linear(nf + ng, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 1))
        self.v = nn.Sequential(nn.Linear(nf + ng, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                               nn.Linear(hidden, 1))
        with torch.no_grad():
            self.linear.weight.zero_()
            for name, w in (prior or {}).items():
                self.linear.weight[0, K.NODE_FEATURES.index(name)] = float(w)
            self.mlp[-1].weight.mul_(0.01)
            self.mlp[-1].bias.zero_()

    def scores(self, rows: torch.Tensor, glob_rows: torch.Tensor) -> torch.Tensor:
        """(R, F) node rows and (R, G) the global features of their decision -> (R,) scores."""
        return self.linear(rows).squeeze(-1) + self.mlp(torch.cat([rows, glob_rows], dim=-1)).squeeze(-1)

    def value(self, glob: torch.Tensor, mean_rows: torch.Tensor) -> torch.Tensor:
        """(B, G) global features and (B, F) count-weighted mean node rows -> (B,) values."""
        return self.v(torch.cat([mean_rows, glob], dim=-1)).squeeze(-1)

    def forward(self, rows: torch.Tensor, glob: torch.Tensor) -> torch.Tensor:
        return self.scores(rows, glob.unsqueeze(0).expand(rows.shape[0], glob.shape[0]))


class NumpyScorer:
    """The same network in numpy, for rollouts: a decision scores a few dozen rows, where torch's
    per-call overhead (and its threads, on a shared machine) would cost more than the arithmetic."""

    def __init__(self, state: dict[str, np.ndarray]) -> None:
        a = {k: np.asarray(v, np.float32) for k, v in state.items()}
        self.lin = a["linear.weight"][0]
        self.m = [(a[f"mlp.{i}.weight"].T.copy(), a[f"mlp.{i}.bias"]) for i in (0, 2, 4)]
        self.v = [(a[f"v.{i}.weight"].T.copy(), a[f"v.{i}.bias"]) for i in (0, 2, 4)]

    @staticmethod
    def _mlp(layers: list, x: np.ndarray) -> np.ndarray:
        for i, (wt, b) in enumerate(layers):
            x = x @ wt + b
            if i < len(layers) - 1:
                x = np.tanh(x)
        return x[..., 0]

    def scores(self, rows: np.ndarray, glob: np.ndarray) -> np.ndarray:
        x = np.concatenate([rows, np.broadcast_to(glob, (rows.shape[0], glob.shape[0]))], axis=1)
        return rows @ self.lin + self._mlp(self.m, x)

    def value(self, glob: np.ndarray, mean_row: np.ndarray) -> float:
        return float(self._mlp(self.v, np.concatenate([mean_row, glob])[None])[0])


def build_scorer(cfg: PPOConfig) -> Scorer:
    """The network of a config, its initial weights drawn from the config's seed."""
    torch.manual_seed(cfg.seed)
    return Scorer(cfg.hidden, cfg.prior)


def numpy_state(net: nn.Module) -> dict[str, np.ndarray]:
    """Weights as plain arrays: what a rollout task is handed (any worker, no pickled modules)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}


def load_state(net: nn.Module, state: dict[str, np.ndarray]) -> nn.Module:
    net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in state.items()})
    return net


def feature_doc() -> dict:
    """The agent's input, for the model card."""
    return {"node": list(K.NODE_FEATURES), "global": list(GLOBAL_FEATURES),
            "defined_in": "models/placement/kernels.py (node_features), models/placement/rollout.py (observe)"}


__all__ = ["PPOConfig", "Scorer", "NumpyScorer", "build_scorer", "numpy_state", "load_state", "feature_doc", "DEFAULT_PRIOR"]
