"""The planner's forks in one compiled call (`Engine.fork_costs`) are exactly `copy()`, then
`advance()` under each setting, then the horizon cost: on real KTH-SP2 jobs, at boundaries of
replays under every backfilling mode (conservative reservations included), from the full engine
(the oracle's fork) and from the scheduler's view, with and without slowdown weights."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest
from controller_fixtures import read_swf
from metapilot.models.controller.planner import horizon_cost, slowdown_weights
from metapilot.models.simulator import Capacity
from metapilot.models.simulator.engine import Engine, SettingCodes, State
from metapilot.models.simulator.rollout import copy_state
from metapilot.transforms.workload import normalise

START = datetime(1996, 10, 15, tzinfo=timezone.utc)
SETTINGS = (("FCFS", "easy", False), ("SJF", "easy", False), ("WFP3", "none", False), ("SAF", "conservative", False),
            ("F1", "easy", True), ("LAF", "conservative", True), ("UNICEF", "none", True))


def reference_costs(base: Engine, until: float, weight, epoch_s: float, n_epochs: int, lam: float, record: float):
    out = []
    for policy, backfill, fit_first in SETTINGS:
        fork = base.copy()
        fork.advance(until, policy, backfill, fit_first)
        out.append(horizon_cost(base.jobs.submit, fork.start, base.now, epoch_s, n_epochs, lam, record, weight))
    return np.array(out)


@pytest.mark.parametrize("mode", [("SJF", "easy"), ("FCFS", "conservative"), ("WFP3", "none")])
def test_fork_costs_equal_copy_then_advance(mode):
    workload = normalise(read_swf(), START)
    engine = Engine(workload, Capacity.single(64), *mode)  # fewer nodes than KTH-SP2's 100: queues to plan
    codes = SettingCodes(SETTINGS)
    epoch_s, n_epochs = 3600.0, 12
    checked = 0
    for t in np.arange(1, 1200, 2) * 3600.0:
        engine.advance(t)
        if engine.queued().size == 0:
            continue
        view = engine.planning_view()[0]
        for base in (engine, view):
            for lam, beta, record in ((0.0, 0.0, 0.0), (30.0, 1.0, 3600.0), (300.0, 0.5, 0.0)):
                weight = slowdown_weights(base.jobs.req, beta)
                until = base.now + n_epochs * epoch_s
                want = reference_costs(base, until, weight, epoch_s, n_epochs, lam, record)
                before = [a.copy() for a in base.state]
                got = base.fork_costs(codes, until, np.zeros(0) if weight is None else weight, epoch_s, n_epochs, lam,
                                      record)
                np.testing.assert_array_equal(got, want)
                for a, b in zip(before, base.state, strict=True):  # the snapshot itself is untouched
                    np.testing.assert_array_equal(a, b)
                checked += 1
    assert checked > 120  # boundaries with a queue, each from both snapshots and three costs


def test_copy_state_copies_every_field():
    rng = np.random.default_rng(0)
    src = State(*(rng.integers(0, 2, a.shape).astype(a.dtype) if a.dtype == np.bool_ else
                  (rng.random(a.shape) * 100).astype(a.dtype) for a in _any_state()))
    dst = State(*(np.zeros_like(a) for a in src))
    copy_state(src, dst)
    for name in State._fields:
        np.testing.assert_array_equal(getattr(dst, name), getattr(src, name), err_msg=f"State.{name} not copied")


def _any_state() -> State:
    workload = normalise(read_swf(), START)
    return Engine(workload, Capacity.single(100)).state


def _two_pools(workload):
    """KTH-SP2's jobs split over two partitions of 70 and 40 cores (every third job in the second)."""
    from metapilot.transforms.workload import Workload

    part = (np.arange(len(workload)) % 3 == 0).astype(np.int64)
    w = Workload(**{**workload.__dict__, "partition": part, "partitions": ("p0", "p1"), "report": None})
    return w, Capacity.from_rows([{"partition": "p0", "cores": 70}, {"partition": "p1", "cores": 40}])


@pytest.mark.parametrize("pools", [1, 2])
@pytest.mark.parametrize("mode", [("SJF", "easy", False), ("FCFS", "conservative", False), ("WFP3", "none", True)])
def test_the_seeded_view_is_the_planning_view(mode, pools):
    """`Engine.seeded_view` (seeded in compiled code, in reused buffers) holds what `planning_view()`
    builds, and its forks cost the same, boundary after boundary (the buffers hold the last view's
    leftovers), on one pool and on two."""
    from test_workload import KTH_NORMALISED, read_swf_frame

    workload = normalise(read_swf_frame(KTH_NORMALISED)[0]).head(6_000)
    if pools == 1:
        capacity = Capacity.single(100)
    else:
        workload, capacity = _two_pools(workload)
    engine = Engine(workload, capacity, mode[0], mode[1], fit_first=mode[2])
    codes = SettingCodes(SETTINGS)
    epoch_s, n_epochs = 3600.0, 12
    checked = 0
    for t in np.arange(1, 2400, 7) * 3600.0:
        engine.advance(t)
        if engine.queued().size == 0:
            continue
        view = engine.planning_view()[0]
        seeded = engine.seeded_view()
        np.testing.assert_array_equal(seeded.req, view.jobs.req)
        for lam, beta, record in ((0.0, 0.0, 0.0), (30.0, 1.0, 3600.0)):
            weight = slowdown_weights(view.jobs.req, beta)
            weight = np.zeros(0) if weight is None else weight
            until = engine.now + n_epochs * epoch_s
            np.testing.assert_array_equal(seeded.fork_costs(codes, until, weight, epoch_s, n_epochs, lam, record),
                                          view.fork_costs(codes, until, weight, epoch_s, n_epochs, lam, record))
        for name in State._fields:  # the view's own state, as `build_state` and `seed_view` leave it
            want = getattr(view.state, name)
            got = getattr(seeded.space.vstate, name)[:want.shape[0]]
            np.testing.assert_array_equal(got, want, err_msg=f"State.{name} of the seeded view")
        checked += 1
    assert checked > 150, checked
