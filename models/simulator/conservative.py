"""Conservative backfilling (SPEC §6): each waiting job holds a reservation and starts when it falls due."""

from __future__ import annotations

from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.queues import q_ordered, q_remove
from metapilot.models.simulator.resource_profile import pf_add, pf_drop, pf_find
from metapilot.models.simulator.running import release_due, start_job
from metapilot.models.simulator.sorting import sort_pairs
from metapilot.models.simulator.state import INF, planned_end


@jit
def _reserve(J, P, st, p, j, now):
    t = pf_find(J, P, st, p, j, now, 0.0, 0.0, INF)
    pf_add(J, P, st, p, j, t, t + J.req[j], -1.0)
    st.res[j] = t
    if t < st.next_res[p]:
        st.next_res[p] = t


@jit
def _refresh_next(P, st, p):
    off = P.off[p]
    t = INF
    for i in range(st.qlen[p]):
        r = st.res[st.queue[off + i]]
        if r < t:
            t = r
    st.next_res[p] = t


@jit
def _compress(J, P, st, p, now, policy, fit_first):
    """Take every waiting job out of the profile, in queue order, and put it back at its
    earliest slot (never later than its current one)."""
    pf_drop(P, st, p, now)
    o = P.poff[p]  # segment 0 now holds `now`: what is free now
    k = q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
    for i in range(k):
        j = st.scratch_j[i]
        old = st.res[j]
        if old <= now:
            continue
        t = pf_find(J, P, st, p, j, now, old, old + J.req[j], old)
        if t < old:
            pf_add(J, P, st, p, j, old, old + J.req[j], 1.0)
            pf_add(J, P, st, p, j, t, t + J.req[j], -1.0)
            st.res[j] = t
    _refresh_next(P, st, p)


@jit_inline
def reserve_submitted(J, P, st, p, j, now):
    """A submitted job (already queued) gets at once its earliest reservation in the profile."""
    pf_drop(P, st, p, now)
    _reserve(J, P, st, p, j, now)


@jit_inline
def compress_after_completion(J, P, st, p, j, now, policy, fit_first):
    """Job j has completed: the rest of its planned slot is freed, then every waiting job moves
    to its earliest slot."""
    pf_drop(P, st, p, now)
    pe = planned_end(J, st, j)
    if pe > now:
        pf_add(J, P, st, p, j, now, pe, 1.0)
    _compress(J, P, st, p, now, policy, fit_first)


@jit
def start_due(J, P, st, p, now, policy):
    """Start, in job order, the waiting jobs whose reservation falls due now."""
    off = P.off[p]
    k = 0
    for i in range(st.qlen[p]):
        j = st.queue[off + i]
        if st.res[j] <= now:
            st.scratch_j[k] = j
            k += 1
    for i in range(k):
        st.scratch_s[i] = 0.0
    sort_pairs(st.scratch_s, st.scratch_j, k)  # by job index
    for i in range(k):
        j = st.scratch_j[i]
        q_remove(J, P, st, p, j, policy)
        start_job(J, P, st, p, j, now)
    _refresh_next(P, st, p)


@jit
def rebuild_profile(J, P, st, now, policy, fit_first):
    """Enter conservative mode mid-run: profile from the running jobs, then a reservation for
    every waiting job in queue order."""
    for p in range(P.cap.shape[0]):
        release_due(J, P, st, p, now)
        o = P.poff[p]
        st.pt[o] = -INF
        for r in range(3):
            st.pf[o, r] = P.cap[p, r]
        st.plen[p] = 1
        off = P.off[p]
        for i in range(st.rlen[p]):
            j = st.running[off + i]
            pf_add(J, P, st, p, j, now, planned_end(J, st, j), -1.0)
        st.next_res[p] = INF
        pf_drop(P, st, p, now)
        k = q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
        for i in range(k):
            _reserve(J, P, st, p, st.scratch_j[i], now)
