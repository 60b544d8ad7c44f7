"""The lookahead planner's forks in one compiled call (SPEC §7): from a snapshot, each setting's
schedule rolled forward to the horizon's end and priced by the aligned reward's horizon cost.

Exactly `Engine.copy()` then `Engine.advance(until, policy, backfill, fit_first)` then
`horizon_cost_kernel` for each setting in turn (the tests compare them job for job), without
going back to Python between them: a fork in Python cost ~40 array copies and the argument
unboxing of `run_until`, several times the scheduling itself (measured on KTH-SP2's planner:
1.5 ms per epoch boundary, of which ~0.2 ms scheduling). No allocation: the fork lives in
`scratch`, a state of the snapshot's shape, overwritten for each setting."""

from __future__ import annotations

from metapilot.models.simulator.event_loop import run_until
from metapilot.models.simulator.horizon import horizon_cost_kernel
from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.snapshot import view_parts
from metapilot.models.simulator.switch import switch_setting


@jit_inline
def _copy1(a, b):
    for i in range(a.shape[0]):  # (a slice assignment needs numba's reference counting, off here)
        b[i] = a[i]


@jit_inline
def _copy2(a, b):
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            b[i, k] = a[i, k]


@jit
def copy_state(src, dst):
    """Every array of `src` into `dst` (the same shapes): `Engine.copy()`'s state, in place.
    `tests/test_rollout_kernel.py` checks that no field of `State` is left out."""
    _copy1(src.clock, dst.clock)
    _copy1(src.ctr, dst.ctr)
    _copy1(src.status, dst.status)
    _copy1(src.start, dst.start)
    _copy1(src.end, dst.end)
    _copy1(src.res, dst.res)
    _copy1(src.order, dst.order)
    _copy1(src.released, dst.released)
    _copy1(src.queue, dst.queue)
    _copy1(src.qlen, dst.qlen)
    _copy1(src.qpos, dst.qpos)
    _copy1(src.running, dst.running)
    _copy1(src.rlen, dst.rlen)
    _copy2(src.used, dst.used)
    _copy2(src.busy, dst.busy)
    _copy2(src.util, dst.util)
    _copy1(src.heap_t, dst.heap_t)
    _copy1(src.heap_o, dst.heap_o)
    _copy1(src.heap_j, dst.heap_j)
    _copy1(src.pt, dst.pt)
    _copy2(src.pf, dst.pf)
    _copy1(src.plen, dst.plen)
    _copy1(src.phead, dst.phead)
    _copy1(src.next_res, dst.next_res)
    _copy1(src.scratch_j, dst.scratch_j)
    _copy1(src.scratch_s, dst.scratch_s)
    _copy1(src.checked, dst.checked)
    _copy2(src.grown, dst.grown)
    _copy2(src.grown_stamp, dst.grown_stamp)
    _copy2(src.grown_len, dst.grown_len)
    _copy1(src.pass_stamp, dst.pass_stamp)
    _copy1(src.pass_order, dst.pass_order)
    _copy1(src.pass_len, dst.pass_len)
    _copy1(src.pf_down, dst.pf_down)
    _copy1(src.pf_up, dst.pf_up)
    _copy2(src.pf_low, dst.pf_low)
    _copy1(src.pf_linked, dst.pf_linked)


@jit
def rollout_costs(J, P, st, scratch, policy, backfill, fit_first, policies, backfills, fit_firsts, until,
                  weight, t0, epoch_s, n_epochs, lam, record, out):
    """For each setting a: a fork of the snapshot `st` (whose rule, backfilling mode and fit-first
    flag are `policy`, `backfill`, `fit_first`) switched to (policies[a], backfills[a],
    fit_firsts[a]) as `Engine.advance` switches (`switch_setting`), run to `until`, its horizon cost into out[a]."""
    for a in range(policies.shape[0]):
        copy_state(st, scratch)
        pol = policies[a]
        bf = backfills[a]
        ff = fit_firsts[a]
        switch_setting(J, P, scratch, policy, backfill, pol, bf, ff)
        run_until(J, P, scratch, until, pol, bf, ff)
        out[a] = horizon_cost_kernel(J.submit, scratch.start, weight, t0, epoch_s, n_epochs, lam, record)


@jit
def view_rollout_costs(ws, cap, n, total_p, policy, backfill, fit_first, policies, backfills, fit_firsts, until,
                       weight, t0, epoch_s, n_epochs, lam, record, out):
    """`rollout_costs` from the planning view `seed_planning_view` left in `ws` (`n` jobs,
    `total_p` profile segments), its forks in `ws.fstate`."""
    J, P, st, scratch = view_parts(ws, cap, n, total_p)
    rollout_costs(J, P, st, scratch, policy, backfill, fit_first, policies, backfills, fit_firsts, until, weight,
                  t0, epoch_s, n_epochs, lam, record, out)
