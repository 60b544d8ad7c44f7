"""`warm_up` (run by scripts/setup.sh) compiles what a user's commands then run, not something near it: after it,
the walk forward's planner, the controller's epoch replay and the Slurm replay on real jobs compile nothing new.
Numba compiles one machine code per argument types; a real call whose types the warm-up's tiny calls missed would
compile on a user's first command (the Slurm replay alone takes 33 s cold) and, in a fresh clone, once in every
test process that meets it."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

import numpy as np
from controller_fixtures import read_swf
from numba.core.registry import CPUDispatcher

from metapilot.models.simulator import Capacity, warm_up
from metapilot.models.simulator.engine import Engine, SettingCodes
from metapilot.models.simulator.epoch_replay import EpochReplay, StateEncoder
from metapilot.models.simulator.objectives import queue_order
from metapilot.models.simulator.slurm import parse_slurm_conf
from metapilot.models.simulator.slurm.replay import simulate_slurm
from metapilot.transforms.state import StateConfig
from metapilot.transforms.workload import normalise

START = datetime(1996, 10, 15, tzinfo=timezone.utc)


def _compiled() -> dict[str, int]:
    """Every compiled function of the simulator's modules and how many machine codes it holds."""
    out = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("metapilot.models.simulator"):
            continue
        for attr, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == name:
                out[f"{name}.{attr}"] = len(obj.signatures)
    return out


def test_after_warm_up_the_planner_epoch_replay_and_slurm_replay_compile_nothing_new():
    warm_up()
    before = _compiled()
    assert before, "no compiled function found"
    workload = normalise(read_swf(), START)
    engine = Engine(workload, Capacity.single(64), "WFP3", "easy")
    codes = SettingCodes((("FCFS", "easy", False), ("SAF", "conservative", True), ("UNICEF", "none", False)))
    for t in np.arange(1, 200, 7) * 3600.0:
        engine.advance(t, "SJF" if t % 2 else "F1", "conservative" if t % 3 else "easy", bool(t % 5))
        until = engine.now + 6 * 3600.0
        engine.fork_costs(codes, until, np.ones(len(workload.submit)), 3600.0, 6, 30.0, 3600.0)
        engine.seeded_view().fork_costs(codes, until, np.zeros(0), 3600.0, 6, 0.0, 0.0)
        engine.planning_view(forecast_s=3600.0, span_s=7200.0)
    replay = EpochReplay(workload, Capacity.single(64))
    replay.reset()
    for k in range(48):
        replay.advance(k % 3)
    StateEncoder(StateConfig(), replay.origin_s)(replay.aggregates())
    queue_order("SJF", submit_s=workload.submit, req_time_s=workload.req_time, cores=workload.cores,
                job_seq=np.arange(len(workload.submit), dtype=np.float64), now_s=1e6)
    conf = parse_slurm_conf("NodeName=n[1-8] CPUs=8 Weight=2\nNodeName=m[1-4] CPUs=16 Weight=1\n"
                            "PartitionName=a Nodes=ALL Default=YES PriorityTier=2\n"
                            "PriorityType=priority/multifactor\nPriorityWeightAge=1000\n"
                            "PriorityWeightFairshare=10000\nPriorityWeightJobSize=100\n")
    simulate_slurm(workload, conf, "multifactor")
    simulate_slurm(workload, conf, "SJF")
    after = _compiled()
    grew = {k: (before.get(k, 0), v) for k, v in after.items() if v > before.get(k, 0)}
    assert not grew, f"compiled after warm_up (machine codes before, after): {grew}"
