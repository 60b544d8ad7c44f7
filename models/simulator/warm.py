"""Compile (or load from numba's on-disk cache) what users' commands run, once, on tiny workloads: scripts/setup.sh
runs it, so that no command compiles on a user's first run (the Slurm replay alone takes 33 s cold) and the test
processes of a fresh clone do not each compile the same kernels. `tests/test_warm_up.py` checks that real calls
compile nothing new after it."""

from __future__ import annotations

import time

import numpy as np

from metapilot.models.simulator.capacity import Capacity
from metapilot.models.simulator.engine import Engine, SettingCodes, warm_up_engine
from metapilot.models.simulator.epoch_replay import EpochReplay, StateEncoder
from metapilot.models.simulator.objectives import queue_order
from metapilot.models.simulator.slurm import SlurmConf, slurm_schedule
from metapilot.models.simulator.slurm.replay import workload_frame
from metapilot.transforms.state import StateConfig
from metapilot.transforms.workload import Workload


def warm_up() -> float:
    """Every compiled path a command takes: the engine's modes, the planner's and the epoch replay's, the Slurm
    replay's; returns the seconds taken."""
    t0 = time.perf_counter()
    warm_up_engine()
    _warm_up_planner()
    _warm_up_slurm()
    return time.perf_counter() - t0


def _tiny_workload() -> Workload:
    return Workload.from_arrays(np.arange(6, dtype=np.float64), np.full(6, 5.0), cores=[1, 2, 1, 2, 1, 2])


def _warm_up_planner() -> None:
    """The walk forward's, `steer`'s and the controller's: a switch of setting, forks of the engine and of its
    seeded view, a planning view, an epoch step, its state's encoding, and the scores the as-run labelling
    orders by."""
    w, cap = _tiny_workload(), Capacity.single(2)
    e = Engine(w, cap, "FCFS", "easy")
    e.advance(2.5, "SJF", "conservative", True)
    codes = SettingCodes((("FCFS", "easy", False), ("SJF", "conservative", True), ("WFP3", "none", False)))
    e.fork_costs(codes, e.now + 10.0, np.zeros(0), 1.0, 2, 0.0, 0.0)
    e.seeded_view().fork_costs(codes, e.now + 10.0, np.zeros(0), 1.0, 2, 0.0, 0.0)
    e.planning_view()
    replay = EpochReplay(w, cap, epoch_s=2)
    replay.reset()
    replay.advance(0)
    StateEncoder(StateConfig(), replay.origin_s)
    queue_order("FCFS", submit_s=np.zeros(2), req_time_s=np.ones(2), cores=np.ones(2), job_seq=np.arange(2.0),
                now_s=1.0)


def _warm_up_slurm() -> None:
    """`--backfill slurm` and `backtest --current-conf`."""
    slurm_schedule(workload_frame(_tiny_workload()), SlurmConf.single(2, nodes=2))
