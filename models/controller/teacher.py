"""The planner as a source of logged tuples (SPEC §7, source 'planner'): the lookahead planner's
own trajectory over the window, and epsilon-planner trajectories around it (with probability
epsilon the epoch's objective is drawn at random, else the planner's), so the controller learns
what the teacher does from the states the teacher visits and from states just off its path.

Like the replay rollouts, each trajectory replays the window from an empty cluster with the jobs
submitted in it, on the request's epoch grid, and its tuples come from the same aggregates through
`tuples_from_aggregates`. Importing this module registers the source.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl

from metapilot.models.controller.dataset import TUPLE_SCHEMA, TupleRequest, register_source, tuples_from_aggregates
from metapilot.models.controller.objectives import Menu
from metapilot.models.controller.planner import LookaheadPlanner
from metapilot.models.controller.replay import replay_objectives
from metapilot.models.simulator.capacity import Capacity
from metapilot.transforms.asrun_state import epoch_grid
from metapilot.warehouse.sim_store import load_replay_window


@dataclass(frozen=True)
class TeacherConfig:
    """The planner's own trajectory, plus epsilon-planner ones (each epsilon x seeds)."""

    epsilons: tuple[float, ...] = (0.1, 0.3)
    seeds: int = 1


class EpsilonPlanner:
    """The planner, except that with probability `eps` an epoch's objective is drawn at random."""

    def __init__(self, planner: LookaheadPlanner, eps: float, seed: int | list[int]) -> None:
        self.planner, self.eps, self.seed = planner, float(eps), seed  # `planner`: also its rollout costs
        self.name = f"eps{eps:g}-planner"
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        self.planner.reset()
        self.rng = np.random.default_rng(self.seed)

    def plan(self, engine, aggregates, settings) -> int:
        a = self.planner.plan(engine, aggregates, settings)  # keeps the planner's record of the largest wait
        return int(self.rng.integers(0, len(settings))) if self.rng.random() < self.eps else a


def planner_source(con: duckdb.DuckDBPyConnection, request: TupleRequest,
                   config: TeacherConfig = TeacherConfig()) -> pl.DataFrame:
    """Tuples of the request's window from the planner and the epsilon-planners."""
    try:
        workload, rows = load_replay_window(con, request.cluster, request.window_from, request.window_to,
                                            request.partition)
    except LookupError as e:
        raise ValueError(str(e)) from None
    capacity = Capacity.from_rows(rows)
    e = int(request.state.epoch_s)
    n = len(epoch_grid(request.window_from, request.window_to, e))
    menu = Menu.of(request.state)
    teachers: list[tuple[str, int | None, object]] = [("planner", None, LookaheadPlanner(menu, request.planner, e))]
    for eps in config.epsilons:
        for i in range(config.seeds):
            seed = int(request.seed) + i
            rng_seed = [seed, zlib.crc32(f"eps{eps:g}-planner".encode())]
            teachers.append((f"eps{eps:g}-planner", seed,
                             EpsilonPlanner(LookaheadPlanner(menu, request.planner, e), eps, rng_seed)))
    frames = []
    for name, seed, policy in teachers:
        res = replay_objectives(workload, capacity, policy, e, request.state, request.reward,
                                partition=request.partition, horizon_s=n * e, lookahead=request.state.lookahead_h > 0)
        agg = res.aggregates().head(n + 1)
        costs = None if res.lookahead_costs is None else res.lookahead_costs[: n + 1]
        frames.append(tuples_from_aggregates(
            agg, res.objectives[:n], cluster=request.cluster, partition=request.partition,
            window_from=request.window_from, window_to=request.window_to, source="planner",
            behaviour_policy=name, seed=seed, state_config=request.state, reward_config=request.reward,
            lookahead_costs=costs,
        ))
    return pl.concat(frames) if frames else pl.DataFrame(schema=TUPLE_SCHEMA)


register_source("planner", planner_source)
