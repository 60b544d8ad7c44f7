"""Seeding the planner's view of a replay (SPEC §7): a small state holding only the jobs queued
and running at an instant, so a lookahead costs what the queue holds, not what the trace holds.

`seed_view` seeds a view `Engine.view` has allocated; `seed_planning_view` builds the plain view
(`Engine.planning_view()`) whole, in buffers reused from one boundary to the next (`ViewSpace`):
at every epoch boundary of every planner replay, ~40 numpy allocations and calls cost several
times the view's own scheduling (`Engine.seeded_view`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from metapilot.models.simulator.conservative import rebuild_profile
from metapilot.models.simulator.event_loop import CONSERVATIVE
from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.queues import q_push
from metapilot.models.simulator.running import release_due, start_job
from metapilot.models.simulator.sorting import sort_pairs
from metapilot.models.simulator.state import INF, NEXT_SUB, NOW, QUEUED, RUNNING, UTIL_T, Jobs, Pools, State


@jit
def seed_view(J, P, st, n_running, n_seeded, running_start, now, policy):
    """Jobs 0 .. n_running - 1 of `J` run since `running_start` (in their start order), jobs up to
    n_seeded - 1 wait, the rest (a forecast of arrivals, in submit order) are still to come; the
    clock stands at `now`."""
    for j in range(n_running):
        start_job(J, P, st, J.pool[j], j, running_start[j])
    for j in range(n_running, n_seeded):
        st.status[j] = QUEUED
        q_push(J, P, st, J.pool[j], j, policy)
    st.ctr[NEXT_SUB] = n_seeded
    st.clock[NOW] = now
    st.clock[UTIL_T] = now
    for p in range(P.cap.shape[0]):
        release_due(J, P, st, p, now)


# -- the planning view seeded in place (`Engine.seeded_view`) --------------------------------------


class ViewSpace(NamedTuple):
    """Buffers for an engine's planning view and its fork, sized for every job of the engine (a
    view never holds more): the view is seeded in them at each boundary instead of allocated, and
    `view_parts` cuts the arrays of `build_state`'s shapes out of them."""

    submit: np.ndarray  # the view's jobs (`Jobs`), full size
    run: np.ndarray
    req: np.ndarray
    need: np.ndarray
    pool: np.ndarray
    static_key: np.ndarray
    off: np.ndarray  # the view's pools (`Pools`; `cap` is the engine's)
    poff: np.ndarray
    psize: np.ndarray
    least: np.ndarray
    alive: np.ndarray  # i8: per job of the view, its index in the engine (running in start order, then queued)
    key: np.ndarray  # f8: sort keys (the running jobs' start sequence)
    running_start: np.ndarray  # f8
    vstate: State  # the view's state, full size
    fstate: State  # a fork's state (`rollout_costs`' scratch), full size


def view_space(n_jobs: int, cap: np.ndarray, static_cols: int) -> ViewSpace:
    """Buffers for the planning views of an engine of `n_jobs` jobs on pools of capacity `cap`."""
    m, npools = max(int(n_jobs), 1), cap.shape[0]
    s = 2 * m + 4 * npools  # the largest profile: 2 segments per job and 4 per pool (`build_state`)

    def state() -> State:
        return State(
            clock=np.zeros(2), ctr=np.zeros(4, np.int64), status=np.zeros(m, np.int8), start=np.zeros(m),
            end=np.zeros(m), res=np.zeros(m), order=np.zeros(m, np.int64), released=np.zeros(m, np.bool_),
            queue=np.zeros(m, np.int64), qlen=np.zeros(npools, np.int64), qpos=np.zeros(m, np.int64),
            running=np.zeros(m, np.int64), rlen=np.zeros(npools, np.int64), used=np.zeros((npools, 3)),
            busy=np.zeros((npools, 3)), util=np.zeros((npools, 3)), heap_t=np.zeros(m), heap_o=np.zeros(m, np.int64),
            heap_j=np.zeros(m, np.int64), pt=np.zeros(s), pf=np.zeros((s, 3)), plen=np.zeros(npools, np.int64),
            phead=np.zeros(npools, np.int64), next_res=np.zeros(npools), scratch_j=np.zeros(m, np.int64),
            scratch_s=np.zeros(m), checked=np.zeros(m, np.int64), grown=np.zeros((s, 2)),
            grown_stamp=np.zeros((s, 2), np.int64), grown_len=np.zeros((npools, 2), np.int64),
            pass_stamp=np.zeros(npools, np.int64), pass_order=np.zeros(m, np.int64),
            pass_len=np.zeros(npools, np.int64), pf_down=np.zeros(s, np.int64), pf_up=np.zeros(s, np.int64),
            pf_low=np.zeros((npools, 3)), pf_linked=np.zeros(npools, np.bool_))

    return ViewSpace(
        submit=np.zeros(m), run=np.zeros(m), req=np.zeros(m), need=np.zeros((m, 3)), pool=np.zeros(m, np.int64),
        static_key=np.zeros((m, static_cols)), off=np.zeros(npools, np.int64), poff=np.zeros(npools, np.int64),
        psize=np.zeros(npools, np.int64), least=np.zeros((npools, 3)), alive=np.zeros(m, np.int64),
        key=np.zeros(m), running_start=np.zeros(m), vstate=state(), fstate=state())


@jit_inline
def _cut(st, n, total_p):
    """The first `n` jobs' (and `total_p` profile segments') part of full-size state buffers, in
    the shapes `build_state` gives a state of `n` jobs."""
    m = max(n, 1)
    return State(
        st.clock, st.ctr, st.status[:n], st.start[:n], st.end[:n], st.res[:n], st.order[:n], st.released[:n],
        st.queue[:m], st.qlen, st.qpos[:n], st.running[:m], st.rlen, st.used, st.busy, st.util, st.heap_t[:m],
        st.heap_o[:m], st.heap_j[:m], st.pt[:total_p], st.pf[:total_p], st.plen, st.phead, st.next_res,
        st.scratch_j[:m], st.scratch_s[:m], st.checked[:n], st.grown[:total_p], st.grown_stamp[:total_p],
        st.grown_len, st.pass_stamp, st.pass_order[:m], st.pass_len, st.pf_down[:total_p], st.pf_up[:total_p],
        st.pf_low, st.pf_linked)


@jit_inline
def view_parts(ws, cap, n, total_p):
    """The seeded view's jobs, pools and state, and its fork's state, as slices of `ws`."""
    J = Jobs(ws.submit[:n], ws.run[:n], ws.req[:n], ws.need[:n], ws.pool[:n], ws.static_key[:n])
    P = Pools(cap, ws.off, ws.poff, ws.psize, ws.least)
    return J, P, _cut(ws.vstate, n, total_p), _cut(ws.fstate, n, total_p)


@jit
def seed_planning_view(J, P, st, policy, backfill, fit_first, ws):
    """`Engine.planning_view()` into `ws`: the running jobs (in start order) and the queued ones
    (in job order), requested times as run times, no arrivals; `build_state`'s empty state, seeded
    by `seed_view`, conservative reservations rebuilt when the engine plans them. Returns the
    view's number of jobs and profile size (`view_parts`)."""
    n_all = J.submit.shape[0]
    now = st.clock[NOW]
    nr = 0
    for j in range(n_all):
        if st.status[j] == RUNNING:
            ws.alive[nr] = j
            ws.key[nr] = st.order[j]
            nr += 1
    sort_pairs(ws.key, ws.alive, nr)  # start sequence numbers are distinct: the start order
    n = nr
    for j in range(n_all):
        if st.status[j] == QUEUED:
            ws.alive[n] = j
            n += 1
    npools = P.cap.shape[0]
    for p in range(npools):
        ws.psize[p] = 0  # the pool's job count, for now
        for r in range(3):
            ws.least[p, r] = INF
    for i in range(n):
        j = ws.alive[i]
        ws.submit[i] = J.submit[j]
        ws.req[i] = J.req[j]
        ws.run[i] = J.req[j]
        for r in range(3):
            ws.need[i, r] = J.need[j, r]
        for k in range(J.static_key.shape[1]):
            ws.static_key[i, k] = J.static_key[j, k]
        p = J.pool[j]
        ws.pool[i] = p
        ws.psize[p] += 1
        for r in range(3):
            ws.least[p, r] = min(ws.least[p, r], J.need[j, r])
    total_p = 0
    # offsets: exclusive sums of the counts (queue/running segments) and of the profile sizes
    acc_jobs = 0
    for p in range(npools):
        count = ws.psize[p]
        ws.off[p] = acc_jobs
        acc_jobs += count
        ws.psize[p] = 2 * count + 4
        ws.poff[p] = total_p
        total_p += ws.psize[p]
    _reset(ws.vstate, n, total_p, ws.poff, P.cap)
    for i in range(nr):
        ws.running_start[i] = st.start[ws.alive[i]]
    VJ, VP, vst, _ = view_parts(ws, P.cap, n, total_p)
    seed_view(VJ, VP, vst, nr, n, ws.running_start, now, policy)
    if backfill == CONSERVATIVE:
        rebuild_profile(VJ, VP, vst, now, policy, fit_first)
    return n, total_p


@jit_inline
def _reset(st, n, total_p, poff, cap):
    """`build_state`'s empty state for `n` jobs and `total_p` profile segments, in place."""
    m = max(n, 1)
    for i in range(m):
        st.start[i] = np.nan
        st.end[i] = np.nan
        st.res[i] = INF
        st.heap_t[i] = 0.0
        st.scratch_s[i] = 0.0
        st.order[i] = -1
        st.queue[i] = 0
        st.qpos[i] = 0
        st.running[i] = 0
        st.heap_o[i] = 0
        st.heap_j[i] = 0
        st.scratch_j[i] = 0
        st.checked[i] = 0
        st.pass_order[i] = 0
        st.status[i] = 0
        st.released[i] = False
    for k in range(total_p):
        st.pt[k] = -INF
        st.pf_down[k] = 0
        st.pf_up[k] = 0
        for r in range(3):
            st.pf[k, r] = 0.0
        for c in range(2):
            st.grown[k, c] = 0.0
            st.grown_stamp[k, c] = 0
    for p in range(cap.shape[0]):
        for r in range(3):
            st.pf[poff[p], r] = cap[p, r]
            st.used[p, r] = 0.0
            st.busy[p, r] = 0.0
            st.util[p, r] = 0.0
            st.pf_low[p, r] = 0.0
        st.qlen[p] = 0
        st.rlen[p] = 0
        st.plen[p] = 1
        st.phead[p] = 0
        st.pass_stamp[p] = 0
        st.pass_len[p] = 0
        st.next_res[p] = INF
        st.grown_len[p, 0] = 0
        st.grown_len[p, 1] = 0
        st.pf_linked[p] = False
    st.clock[NOW] = 0.0
    st.clock[UTIL_T] = 0.0
    for c in range(4):
        st.ctr[c] = 0
