"""Conservative backfilling (SPEC §6): each waiting job holds a reservation and starts when it falls due.

Written for speed, with the same schedule as the plain rule: a job's reservation is the earliest
slot at the moment it is made or checked, and between two checks the profile changes only by
losing free resources (new reservations, jobs moved into a slot) or by gaining them over known
intervals (the rest of a completed job's planned slot, the slot a moved job left). A start that
did not fit at the last check can fit now only if its window [t, t + requested time) overlaps
one of the gains since; so each check searches only the starts t with t + requested time past
the earliest such gain and t before the latest one ends. `State.grown` lists the gains with a
growth stamp (`ctr[STAMP]`, one per gain), `State.checked` the stamp of each job's last check.
A compression first checks the jobs in any order with the profile as it is: if none can move,
the pass in queue order moves none either, and neither sort nor pass is done.
"""

from __future__ import annotations

from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.queues import q_ordered, q_remove
from metapilot.models.simulator.resource_profile import pf_add, pf_drop, pf_find
from metapilot.models.simulator.running import release_due, start_job
from metapilot.models.simulator.sorting import sort_pairs
from metapilot.models.simulator.state import INF, STAMP, planned_end


@jit
def _reserve(J, P, st, p, j, now):
    t = pf_find(J, P, st, p, j, now, now, 0.0, 0.0, INF, False)
    pf_add(J, P, st, p, j, t, t + J.req[j], -1.0)
    st.res[j] = t
    st.checked[j] = st.ctr[STAMP]
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
def _grew(P, st, p, a, b):
    """Record that the profile gained free resources over [a, b)."""
    s = st.ctr[STAMP] + 1
    st.ctr[STAMP] = s
    g = P.poff[p] + st.grown_len[p]
    st.grown[g, 0] = a
    st.grown[g, 1] = b
    st.grown_stamp[g] = s
    st.grown_len[p] += 1


@jit
def _forget_gains(P, st, p):
    """Drop the gains every waiting job has been checked against (those before the last pass)."""
    g = P.poff[p]
    n = st.grown_len[p]
    k = 0
    while k < n and st.grown_stamp[g + k] <= st.pass_stamp[p]:
        k += 1
    if k > 0:
        for i in range(n - k):
            st.grown[g + i, 0] = st.grown[g + i + k, 0]
            st.grown[g + i, 1] = st.grown[g + i + k, 1]
            st.grown_stamp[g + i] = st.grown_stamp[g + i + k]
        st.grown_len[p] = n - k


@jit
def _earlier_start(J, P, st, p, j, now):
    """Job j's earliest start before its reservation, or its reservation when there is none;
    only the starts whose window meets a gain since its last check are searched."""
    old = st.res[j]
    req = J.req[j]
    lo = INF
    hi = now
    g = P.poff[p]
    i = st.grown_len[p] - 1
    while i >= 0 and st.grown_stamp[g + i] > st.checked[j]:  # the gains since, newest first
        lo = min(lo, st.grown[g + i, 0] - req)
        hi = max(hi, st.grown[g + i, 1])
        i -= 1
    lo = max(lo, now)
    hi = min(hi, old)
    if lo >= hi:
        return old
    t = pf_find(J, P, st, p, j, now, lo, old, old + req, hi, True)
    return t if t < hi else old


@jit
def _none_can_move(J, P, st, p, now):
    """True when no waiting job (taken in storage order) has an earlier slot in the profile as
    it is; the jobs found unable to move are marked checked."""
    off = P.off[p]
    for i in range(st.qlen[p]):
        j = st.queue[off + i]
        if st.res[j] <= now:
            continue
        if _earlier_start(J, P, st, p, j, now) < st.res[j]:
            return False
        st.checked[j] = st.ctr[STAMP]
    return True


@jit
def _compress(J, P, st, p, now, policy, fit_first):
    """Take every waiting job out of the profile, in queue order, and put it back at its
    earliest slot (never later than its current one)."""
    pf_drop(P, st, p, now)
    if _none_can_move(J, P, st, p, now):
        return
    o = P.poff[p]  # segment 0 now holds `now`: what is free now
    k = q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
    for i in range(k):
        j = st.scratch_j[i]
        old = st.res[j]
        if old <= now:
            continue
        t = _earlier_start(J, P, st, p, j, now)
        if t < old:
            pf_add(J, P, st, p, j, old, old + J.req[j], 1.0)
            pf_add(J, P, st, p, j, t, t + J.req[j], -1.0)
            st.res[j] = t
            _grew(P, st, p, old, old + J.req[j])
        st.checked[j] = st.ctr[STAMP]
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
    _forget_gains(P, st, p)
    pe = planned_end(J, st, j)
    if pe > now:
        pf_add(J, P, st, p, j, now, pe, 1.0)
        _grew(P, st, p, now, pe)
    st.pass_stamp[p] = st.ctr[STAMP]
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
        st.pf_linked[p] = False
        off = P.off[p]
        for i in range(st.rlen[p]):
            j = st.running[off + i]
            pf_add(J, P, st, p, j, now, planned_end(J, st, j), -1.0)
        st.next_res[p] = INF
        st.grown_len[p] = 0
        st.pass_stamp[p] = st.ctr[STAMP]
        pf_drop(P, st, p, now)
        k = q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
        for i in range(k):
            _reserve(J, P, st, p, st.scratch_j[i], now)
