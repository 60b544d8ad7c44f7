"""Replay rollouts: the simulated half of the offline-RL dataset (SPEC §7, source 'replay').

The as-run history only shows the objectives the real scheduler happened to follow; replaying
the same window under behaviour policies that mix the objectives shows the controller what each
objective does from states the history visited and from states it never did:

- `random`: a uniformly random objective every epoch;
- `hold-k`: an objective held for k epochs, then another one (random start and phase);
- `eps<e>-<O>`: objective O, except that with probability e the epoch's objective is drawn
  uniformly (epsilon-greedy around each fixed objective).

Each (behaviour, seed) is one trajectory over the request's epoch grid (the same grid as the
as-run tuples: `transforms.asrun_state.epoch_grid`), read through `EpochReplay` (the env's path)
and turned into tuples by `models.controller.dataset.tuples_from_aggregates`, like the as-run
ones. The replay starts from an empty cluster at the window start with the jobs submitted in the
window; the window end cuts the trajectory (not terminal: the backlog goes on).

Importing this module registers the source: `build_dataset(..., sources=("as-run", "replay"))`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl
from metapilot.models.controller.dataset import (
    TUPLE_SCHEMA,
    TupleRequest,
    register_source,
    tuples_from_aggregates,
)
from metapilot.models.controller.lookahead import LookaheadProbe
from metapilot.models.controller.objectives import Menu
from metapilot.models.simulator.epoch_replay import (
    N_AGG,
    N_SUMS,
    EpochReplay,
    aggregates_frame,
)
from metapilot.models.simulator.capacity import Capacity
from metapilot.transforms.asrun_state import epoch_grid
from metapilot.warehouse.sim_store import load_replay_window

Behaviour = Callable[[int, np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class RolloutConfig:
    """Which behaviour policies, how many seeds each. The defaults (3 + one epsilon-greedy per
    objective of the menu, x 2 seeds) build a cluster-year of KTH-SP2 in seconds on one core."""

    seeds: int = 2
    random: bool = True
    hold_epochs: tuple[int, ...] = (6, 24)
    epsilons: tuple[float, ...] = (0.15,)


DEFAULT_CONFIG = RolloutConfig()
_config = DEFAULT_CONFIG


def set_default_config(config: RolloutConfig) -> None:
    """Change the configuration `replay_source` uses when called by `build_dataset`."""
    global _config
    _config = config


def _random(m: int) -> Behaviour:
    def actions(n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, m, n)

    return actions


def _hold(k: int, m: int) -> Behaviour:
    def actions(n: int, rng: np.random.Generator) -> np.ndarray:
        phase = int(rng.integers(0, k))
        blocks = (np.arange(n) + phase) // k
        nb_ = int(blocks[-1]) + 1 if n else 0
        seq = np.empty(nb_, dtype=np.int64)
        if nb_:
            seq[0] = rng.integers(0, m)
            for b in range(1, nb_):  # another objective than the block before (loop over blocks, not jobs)
                seq[b] = (seq[b - 1] + rng.integers(1, m)) % m
        return seq[blocks]

    return actions


def _eps(eps: float, objective: int, m: int) -> Behaviour:
    def actions(n: int, rng: np.random.Generator) -> np.ndarray:
        explore = rng.random(n) < eps
        return np.where(explore, rng.integers(0, m, n), objective)

    return actions


def behaviours(config: RolloutConfig = DEFAULT_CONFIG, menu: Menu = Menu()) -> list[tuple[str, Behaviour]]:
    """(name, actions(n, rng)) of every behaviour policy the configuration asks for."""
    m = len(menu)
    out: list[tuple[str, Behaviour]] = []
    if config.random:
        out.append(("random", _random(m)))
    out += [(f"hold-{k}", _hold(int(k), m)) for k in config.hold_epochs]
    out += [(f"eps{e:g}-{name}", _eps(float(e), a, m)) for e in config.epsilons for a, name in enumerate(menu.names)]
    return out


def rollout(replay: EpochReplay, actions: np.ndarray,
            probe: LookaheadProbe | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Run one trajectory from the window start: the n + 1 boundaries' aggregates, what each
    of the n epochs added up (`EPOCH_SUMS`) and, with a `probe`, the boundaries' lookahead costs."""
    n = len(actions)
    rows = np.empty((n + 1, N_AGG))
    used = np.empty((n, N_SUMS))
    costs = None
    rows[0] = replay.reset()
    if probe is not None:
        probe.reset()
        costs = np.empty((n + 1, len(replay.settings)))
        costs[0] = probe.costs(replay.engine, rows[0], replay.settings)
    for k in range(n):
        used[k] = replay.advance(int(actions[k]))
        rows[k + 1] = replay.aggregates()
        if probe is not None:
            costs[k + 1] = probe.costs(replay.engine, rows[k + 1], replay.settings)
    return rows, used, costs


def replay_source(con: duckdb.DuckDBPyConnection, request: TupleRequest, config: RolloutConfig | None = None) -> pl.DataFrame:
    """Tuples of the request's window from replay rollouts under every behaviour x seed."""
    config = config or _config
    try:
        workload, rows = load_replay_window(con, request.cluster, request.window_from, request.window_to,
                                          request.partition)
        capacity = Capacity.from_rows(rows)
    except LookupError as e:
        raise ValueError(str(e)) from None
    e = int(request.state.epoch_s)
    n = len(epoch_grid(request.window_from, request.window_to, e))
    menu = Menu.of(request.state)
    replay = EpochReplay(workload, capacity, epoch_s=e, long_tail_s=request.state.long_tail_s,
                         partition=request.partition, objectives=menu.specs)
    probe = LookaheadProbe(request.state) if request.state.lookahead_h > 0 else None
    frames = []
    for name, behaviour in behaviours(config, menu):
        for i in range(config.seeds):
            seed = int(request.seed) + i
            rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
            actions = np.asarray(behaviour(n, rng), dtype=np.int64)
            rows, used, costs = rollout(replay, actions, probe)
            frames.append(tuples_from_aggregates(
                aggregates_frame(rows, used, e), actions,
                cluster=request.cluster, partition=request.partition,
                window_from=request.window_from, window_to=request.window_to,
                source="replay", behaviour_policy=name, seed=seed,
                state_config=request.state, reward_config=request.reward, lookahead_costs=costs,
            ))
    return pl.concat(frames) if frames else pl.DataFrame(schema=TUPLE_SCHEMA)


register_source("replay", replay_source)
