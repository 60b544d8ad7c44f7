"""Offline training of the objective controller (SPEC §7): DiscreteCQL, with baselines and OPE.

`train_policy` fits DiscreteCQL on the training tuples, keeps a checkpoint per d3rlpy epoch,
and picks the checkpoint with the best DiscreteFQE estimate on the checkpoint window (or, when a
`replay_evaluator` is given, the best replay score). DiscreteBC, offline DQN and DiscreteBCQ are
trained on the same data and scored the same way, for the model card. Every fit is seeded
(`d3rlpy.seed`, deterministic torch), so the same data and config give the same weights.

The replay hook: `replay_evaluator(policy) -> {"score": float, ...}` where
`policy(states: np.ndarray[(n, n_features) float32]) -> np.ndarray[(n,) int]` (action indices).
Higher score is better; other keys are recorded as replay metrics in the model card.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import polars as pl
from metapilot.models.controller.d3 import import_d3rlpy
from metapilot.models.controller.dataset import (
    observations,
    to_episodes,
    to_mdp_dataset,
)
from metapilot.models.controller.objectives import Menu

PolicyFn = Callable[[np.ndarray], np.ndarray]
ReplayEvaluator = Callable[[PolicyFn], dict[str, float]]
ALGORITHMS: tuple[str, ...] = ("cql", "dqn", "bcq", "bc")
PUBLISHABLE: tuple[str, ...] = ("cql", "dqn")  # greedy in their Q-values: policy.pt can export them


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters. Defaults are CPU-sized: a 2x64 MLP, batch 256, ~10k steps per fit.

    gamma 0.95 ~ a one-day horizon of hourly epochs: the span over which an objective switch
    visibly changes the queue. Rewards are multiplied by `reward_multiplier` for learning
    (waits of 1e4-1e5 s give rewards of -10..-100); reported values are in reward units.
    """

    algorithm: str = "cql"
    baselines: tuple[str, ...] = ("bc", "dqn", "bcq")
    n_steps: int = 10_000
    n_steps_per_epoch: int = 1_000  # one checkpoint candidate per epoch
    batch_size: int = 256
    hidden_units: tuple[int, ...] = (64, 64)
    learning_rate: float = 3e-4
    gamma: float = 0.95
    target_update_interval: int = 200  # 50 target syncs in 10k steps: enough backups for gamma 0.95
    cql_alpha: float = 1.0
    bcq_action_flexibility: float = 0.3
    reward_multiplier: float = 0.01
    standardize: bool = True
    scaler_eps: float = 0.05  # floor added to each feature's std: bounds the inputs of rare features
    fqe_steps: int = 4_000
    fqe_learning_rate: float = 3e-4
    fqe_target_update_interval: int = 100
    max_candidates: int = 5
    seed: int = 0
    device: str = "cpu"
    num_threads: int = 1  # torch CPU threads: a 64-unit MLP gains nothing from more, and loses under load
    show_progress: bool = True

    def to_dict(self) -> dict:
        d = asdict(self)
        d["baselines"] = list(self.baselines)
        d["hidden_units"] = list(self.hidden_units)
        return d


@dataclass
class PolicyScore:
    """Off-policy (and optionally replay) estimates for one trained policy."""

    name: str
    step: int
    fqe_value: float | None  # mean over checkpoint states of Q_fqe(s, pi(s)), reward units (None: not estimated)
    fqe_initial_value: float | None  # the same over the episodes' first states
    action_shares: dict[str, float]  # share of checkpoint states where the policy picks each objective
    behaviour_match: float  # share of checkpoint states where it picks the logged action
    replay: dict[str, float] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainResult:
    """A trained controller, how it was chosen, and how it compares."""

    algo: Any  # the d3rlpy algorithm, at the chosen checkpoint
    algorithm: str
    config: TrainConfig
    chosen: PolicyScore
    candidates: list[PolicyScore]
    baselines: dict[str, PolicyScore]
    behaviour_mc_return: float | None
    scaler_mean: np.ndarray
    scaler_std: np.ndarray
    n_train: int
    n_checkpoint: int
    checkpoint_source: str  # "checkpoint window" | "training tuples (no checkpoint data)"
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def q_scale(self) -> float:
        """Multiply d3rlpy's Q-values by this to get reward units."""
        return 1.0 / self.config.reward_multiplier


def set_determinism(seed: int) -> None:
    """Seed python, numpy and torch, and make torch pick deterministic kernels (cuBLAS included)."""
    import os

    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts
    import_d3rlpy().seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


def check_device(device: str) -> None:
    """Refuse a CUDA device that is not there, with what to do instead."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA GPU is visible to torch {torch.__version__}; use --device cpu")


def _scaler_stats(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return obs.mean(axis=0).astype(np.float64), obs.std(axis=0).astype(np.float64)


def make_algo(name: str, config: TrainConfig, mean: np.ndarray, std: np.ndarray):
    """A d3rlpy algorithm object (not yet built) for `name` with the shared settings."""
    import_d3rlpy()
    from d3rlpy.algos import (
        DiscreteBCConfig,
        DiscreteBCQConfig,
        DiscreteCQLConfig,
        DoubleDQNConfig,
    )
    from d3rlpy.models import VectorEncoderFactory
    from d3rlpy.preprocessing import MultiplyRewardScaler, StandardObservationScaler

    enc = VectorEncoderFactory(hidden_units=list(config.hidden_units))
    scaler = StandardObservationScaler(mean=mean, std=std, eps=config.scaler_eps) if config.standardize else None
    common = dict(
        batch_size=config.batch_size, gamma=config.gamma, learning_rate=config.learning_rate,
        encoder_factory=enc, observation_scaler=scaler,
    )
    rs = MultiplyRewardScaler(config.reward_multiplier)
    if name == "cql":
        cfg = DiscreteCQLConfig(**common, reward_scaler=rs, alpha=config.cql_alpha,
                                target_update_interval=config.target_update_interval)
    elif name == "dqn":
        cfg = DoubleDQNConfig(**common, reward_scaler=rs, target_update_interval=config.target_update_interval)
    elif name == "bcq":
        cfg = DiscreteBCQConfig(**common, reward_scaler=rs, target_update_interval=config.target_update_interval,
                                action_flexibility=config.bcq_action_flexibility)
    elif name == "bc":
        cfg = DiscreteBCConfig(**common)
    else:
        raise ValueError(f"unknown algorithm {name!r}; known: {ALGORITHMS}")
    return cfg.create(device=config.device)


def module_states(algo) -> dict[str, dict]:
    """Copies of the state dicts of the algorithm's networks (no optimiser state)."""
    import torch

    mods = algo.impl.modules
    out = {}
    for f in dataclasses.fields(mods):
        m = getattr(mods, f.name)
        if isinstance(m, torch.nn.Module):
            out[f.name] = {k: v.detach().cpu().clone() for k, v in m.state_dict().items()}
    return out


def load_module_states(algo, states: dict[str, dict]) -> None:
    """Put network weights (from `module_states` or an artifact) into a built algorithm."""
    mods = algo.impl.modules
    for name, sd in states.items():
        getattr(mods, name).load_state_dict(sd)


def _fit(algo, dataset, n_steps: int, config: TrainConfig, epoch_callback=None, name: str = "") -> None:
    from d3rlpy.logging import NoopAdapterFactory

    per_epoch = max(1, min(config.n_steps_per_epoch, n_steps))
    algo.fit(
        dataset, n_steps=max(per_epoch, (n_steps // per_epoch) * per_epoch), n_steps_per_epoch=per_epoch,
        logger_adapter=NoopAdapterFactory(), show_progress=config.show_progress,
        experiment_name=name or None, epoch_callback=epoch_callback,
    )


def greedy(algo) -> PolicyFn:
    """The algorithm as a plain `states -> action indices` function (for the replay hook)."""
    return lambda states: np.asarray(algo.predict(np.asarray(states, dtype=np.float32)), dtype=np.int64)


def score_policy(algo, name: str, step: int, valid_ds, valid_obs, valid_first, valid_actions,
                 config: TrainConfig, replay_evaluator: ReplayEvaluator | None, menu: Menu = Menu(),
                 fqe: bool = True) -> PolicyScore:
    """DiscreteFQE estimate of `algo` on the checkpoint tuples (+ replay metrics if hooked); with
    `fqe=False` the replay alone (no FQE values: the replay chooses, FQE is for the chosen one)."""
    acts = algo.predict(valid_obs)
    if not fqe:
        return PolicyScore(
            name=name, step=step, fqe_value=None, fqe_initial_value=None,
            action_shares={n: float(np.mean(acts == i)) for i, n in enumerate(menu.names)},
            behaviour_match=float(np.mean(acts == valid_actions)),
            replay=replay_evaluator(greedy(algo)) if replay_evaluator is not None else None,
        )
    from d3rlpy.models import VectorEncoderFactory
    from d3rlpy.ope import DiscreteFQE, FQEConfig
    from d3rlpy.preprocessing import MultiplyRewardScaler

    set_determinism(config.seed + 7919)
    fqe = DiscreteFQE(
        algo=algo,
        config=FQEConfig(
            learning_rate=config.fqe_learning_rate, batch_size=config.batch_size, gamma=config.gamma,
            target_update_interval=config.fqe_target_update_interval,
            encoder_factory=VectorEncoderFactory(hidden_units=list(config.hidden_units)),
            observation_scaler=algo.config.observation_scaler,
            reward_scaler=MultiplyRewardScaler(config.reward_multiplier),
        ),
        device=config.device,
    )
    _fit(fqe, valid_ds, config.fqe_steps, dataclasses.replace(config, n_steps_per_epoch=config.fqe_steps), name=f"FQE-{name}")
    scale = 1.0 / config.reward_multiplier
    value = float(np.mean(fqe.predict_value(valid_obs, acts))) * scale
    first_acts = algo.predict(valid_first)
    initial = float(np.mean(fqe.predict_value(valid_first, first_acts))) * scale
    replay = replay_evaluator(greedy(algo)) if replay_evaluator is not None else None
    return PolicyScore(
        name=name, step=step, fqe_value=value, fqe_initial_value=initial,
        action_shares={n: float(np.mean(acts == i)) for i, n in enumerate(menu.names)}, behaviour_match=float(np.mean(acts == valid_actions)),
        replay=replay,
    )


def discounted_return(frame: pl.DataFrame, gamma: float) -> float | None:
    """Mean discounted return-to-go of the logged behaviour over the states (cut at episode ends)."""
    if frame.height == 0:
        return None
    ep = to_episodes(frame)
    r = ep.rewards.astype(np.float64)
    ends = (ep.timeouts > 0) | (ep.terminals > 0)
    g = np.zeros_like(r)
    acc = 0.0
    for i in range(len(r) - 1, -1, -1):  # one pass over epochs (not jobs)
        if ep.timeouts[i] > 0:
            acc = 0.0
            continue
        acc = r[i] + (0.0 if ends[i] else gamma * acc)
        g[i] = acc
    return float(np.mean(g[ep.timeouts == 0]))


def _better(a: PolicyScore, b: PolicyScore | None) -> bool:
    if b is None:
        return True
    if a.replay is not None and b.replay is not None and "score" in a.replay:
        return a.replay["score"] > b.replay["score"]
    return a.fqe_value > b.fqe_value


def train_policy(
    train: pl.DataFrame,
    checkpoint: pl.DataFrame,
    config: TrainConfig = TrainConfig(),
    replay_evaluator: ReplayEvaluator | None = None,
    log: Callable[[str], None] | None = None,
    menu: Menu = Menu(),
) -> TrainResult:
    """Train the controller and its baselines on tuples whose actions index `menu`; choose the
    checkpoint by OPE (or replay)."""
    log = log or (lambda msg: None)
    if config.algorithm not in PUBLISHABLE:
        raise ValueError(f"the published policy must be one of {PUBLISHABLE} (Q-values for advise); got {config.algorithm!r}")
    if train.height == 0:
        raise ValueError("no training tuples")
    timings: dict[str, float] = {}
    check_device(config.device)
    import_d3rlpy()
    import torch

    if config.num_threads > 0:
        torch.set_num_threads(config.num_threads)
    train_ds = to_mdp_dataset(train, len(menu))
    train_obs = observations(train)
    if checkpoint.height:
        valid, vsource = checkpoint, "checkpoint window"
    else:
        valid, vsource = train, "training tuples (no checkpoint data)"
    valid_ds = to_mdp_dataset(valid, len(menu))
    valid_obs = observations(valid)
    valid_actions = valid["action"].to_numpy()
    ep = to_episodes(valid)
    starts = np.r_[0, np.flatnonzero((ep.timeouts > 0) | (ep.terminals > 0))[:-1] + 1]
    valid_first = ep.observations[starts]
    mean, std = _scaler_stats(train_obs)

    # --- the controller, with a checkpoint per epoch
    set_determinism(config.seed)
    algo = make_algo(config.algorithm, config, mean, std)
    snapshots: list[tuple[int, dict]] = []
    t0 = time.perf_counter()
    log(f"training {config.algorithm} for {config.n_steps} steps on {train.height} tuples")
    _fit(algo, train_ds, config.n_steps, config, name=config.algorithm,
         epoch_callback=lambda a, epoch, step: snapshots.append((step, module_states(a))))
    timings[f"fit_{config.algorithm}"] = time.perf_counter() - t0
    pick = np.unique(np.linspace(0, len(snapshots) - 1, min(config.max_candidates, len(snapshots))).round().astype(int))
    candidates: list[PolicyScore] = []
    best: PolicyScore | None = None
    best_states = snapshots[-1][1]
    t0 = time.perf_counter()
    for i in pick:  # chosen by replay when there is one: then FQE only for the chosen checkpoint
        step, states = snapshots[i]
        load_module_states(algo, states)
        log(f"{'replay' if replay_evaluator is not None else 'off-policy evaluation'} of checkpoint {step}")
        sc = score_policy(algo, config.algorithm, step, valid_ds, valid_obs, valid_first, valid_actions, config,
                          replay_evaluator, menu, fqe=replay_evaluator is None)
        candidates.append(sc)
        if _better(sc, best):
            best, best_states = sc, states
    load_module_states(algo, best_states)
    check_training = getattr(replay_evaluator, "check_training", None)
    if check_training is not None and best is not None and best.replay is not None:
        log(f"replay of the chosen checkpoint {best.step} on the last training weeks")
        training = check_training(greedy(algo))  # a test the choice above never saw (controller_eval)
        if training is not None:
            best.replay["training"] = training
    if replay_evaluator is not None and best is not None:
        log(f"off-policy evaluation of the chosen checkpoint {best.step}")
        scored = score_policy(algo, config.algorithm, best.step, valid_ds, valid_obs, valid_first, valid_actions,
                              config, None, menu)
        best.fqe_value, best.fqe_initial_value = scored.fqe_value, scored.fqe_initial_value
    timings[f"ope_{config.algorithm}_checkpoints"] = time.perf_counter() - t0

    # --- baselines on the same data
    baselines: dict[str, PolicyScore] = {}
    for name in config.baselines:
        if name == config.algorithm:
            continue
        log(f"baseline {name}")
        set_determinism(config.seed)
        b = make_algo(name, config, mean, std)
        t0 = time.perf_counter()
        _fit(b, train_ds, config.n_steps if name != "bc" else max(1, config.n_steps // 2), config, name=name)
        timings[f"fit_{name}"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        baselines[name] = score_policy(b, name, config.n_steps, valid_ds, valid_obs, valid_first, valid_actions, config,
                                      replay_evaluator, menu)
        timings[f"ope_{name}"] = time.perf_counter() - t0

    assert best is not None
    return TrainResult(
        algo=algo, algorithm=config.algorithm, config=config, chosen=best, candidates=candidates,
        baselines=baselines, behaviour_mc_return=discounted_return(valid, config.gamma),
        scaler_mean=mean, scaler_std=std, n_train=train.height, n_checkpoint=valid.height,
        checkpoint_source=vsource, seconds=timings,
    )


def q_values(algo, states: np.ndarray, q_scale: float = 1.0) -> np.ndarray:
    """Q-values of every action (n, n_actions) from d3rlpy, in reward units via `q_scale`."""
    states = np.asarray(states, dtype=np.float32)
    states = states.reshape(-1, states.shape[-1])
    n_actions = int(algo.action_size)
    cols = [algo.predict_value(states, np.full(len(states), a, dtype=np.int64)) for a in range(n_actions)]
    return np.stack(cols, axis=1) * q_scale
