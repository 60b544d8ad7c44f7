"""The replay's event loop (SPEC §6): events one at a time, in SPEC order, each with its pool's step.

At equal times: submissions (by submit time, then job id = job index), then completions (in
start order), then conservative reservations that fall due. The planning view of a running job
is that it holds its resources from its start to start + requested time; its completion
releases the rest.
"""

from __future__ import annotations

from metapilot.models.simulator.completions import heap_pop
from metapilot.models.simulator.conservative import (
    compress_after_completion,
    reserve_submitted,
    start_due,
)
from metapilot.models.simulator.easy import step_list
from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.queues import q_push
from metapilot.models.simulator.running import complete_job, release_due
from metapilot.models.simulator.state import (
    EXCLUDED,
    HEAP_N,
    INF,
    NEXT_SUB,
    NOW,
    QUEUED,
    UTIL_T,
)

# Backfilling modes.
NONE, EASY, CONSERVATIVE = 0, 1, 2


@jit
def _advance_clock(P, st, t):
    """Move the clock to t, integrating the resources in use since the last event."""
    dt = t - st.clock[UTIL_T]
    if dt > 0:  # (the clock starts at the window start, so dt is finite)
        for p in range(P.cap.shape[0]):
            for r in range(3):
                st.util[p, r] += st.busy[p, r] * dt
        st.clock[UTIL_T] = t
    if t > st.clock[NOW]:
        st.clock[NOW] = t


@jit_inline
def _next_submission(J, st):
    """Index of the next job to submit (never-fitting jobs are skipped for good); n when none."""
    n = J.submit.shape[0]
    ns = st.ctr[NEXT_SUB]
    while ns < n and st.status[ns] == EXCLUDED:
        ns += 1
    st.ctr[NEXT_SUB] = ns
    return ns


@jit_inline
def _next_reservation(P, st):
    """Earliest pending conservative reservation and its pool (inf, -1 when none)."""
    t_res = INF
    p_res = -1
    for p in range(P.cap.shape[0]):
        if st.next_res[p] < t_res:
            t_res = st.next_res[p]
            p_res = p
    return t_res, p_res


@jit
def run_until(J, P, st, until, policy, backfill, fit_first):
    """Handle every event at or before `until` with the given rule and backfilling mode (and,
    with `fit_first`, the jobs that fit the free resources first). Returns the events handled."""
    n = J.submit.shape[0]
    events = 0
    while True:
        ns = _next_submission(J, st)
        t_sub = J.submit[ns] if ns < n else INF
        t_comp = st.heap_t[0] if st.ctr[HEAP_N] > 0 else INF
        t_res = INF
        p_res = -1
        if backfill == CONSERVATIVE:
            t_res, p_res = _next_reservation(P, st)
        t = min(t_sub, min(t_comp, t_res))
        if t == INF or t > until:
            break
        _advance_clock(P, st, t)
        now = st.clock[NOW]
        events += 1
        if t_sub == t:  # submissions first: queue the job, then its pool's step
            j = ns
            st.ctr[NEXT_SUB] = ns + 1
            p = J.pool[j]
            st.status[j] = QUEUED
            q_push(J, P, st, p, j, policy)
            if backfill == CONSERVATIVE:
                reserve_submitted(J, P, st, p, j, now)
            else:
                step_list(J, P, st, p, now, policy, backfill == EASY, fit_first)
        elif t_comp == t:  # then completions, in start order
            j = heap_pop(st)
            p = J.pool[j]
            complete_job(J, P, st, p, j, now)
            if backfill == CONSERVATIVE:
                compress_after_completion(J, P, st, p, j, now, policy, fit_first)
            else:
                step_list(J, P, st, p, now, policy, backfill == EASY, fit_first)
        else:  # then the conservative reservations that fall due
            start_due(J, P, st, p_res, now, policy)
    if until != INF:
        _advance_clock(P, st, until)
    return events


@jit
def release_all_due(J, P, st, now):
    """Apply the planned-end release in every pool (what `Engine.planned_used` reads)."""
    for p in range(P.cap.shape[0]):
        release_due(J, P, st, p, now)
