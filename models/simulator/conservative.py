"""Conservative backfilling (SPEC §6): each waiting job holds a reservation and starts when it falls due.

Written for speed, with the same schedule as the plain rule: a job's reservation is the earliest
slot at the moment it is made or checked, and between two checks the profile changes only by
losing free resources (new reservations, jobs moved into a slot) or by gaining them over known
intervals (the rest of a completed job's planned slot, the slot a moved job left). A start that
did not fit at the last check can fit now only if its window [t, t + requested time) overlaps
one of the gains since; so each check searches only the starts t with t + requested time past
the earliest such gain and t before the latest one ends. `State.grown` keeps the gains' starts
and ends with a growth stamp (`ctr[STAMP]`, one per gain), `State.checked` the stamp of each
job's last check. A compression first checks the jobs in any order with the profile as it is:
if none can move, the pass in queue order moves none either, and neither sort nor pass is done.
The pass's queue order is kept from one pass to the next (`State.pass_order`) and only mended.
Each move changes the profile and makes its chains (`pf_chains`) stale; a pass redoes them only
once `REBUILD_AFTER` jobs have been looked at since its last move, and searches segment by segment
before that: on a busy cluster (RICC-2010-2: ~2,000 waiting jobs, ~1,100 segments, ~370 moves a
pass, a search every ~6 jobs) a rebuild after each move was half the replay's time. Schedules are
the same either way (bench/bench_conservative.py checks them).
"""

from __future__ import annotations

from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.queues import priority, q_ordered, q_remove
from metapilot.models.simulator.resource_profile import pf_add, pf_base, pf_drop, pf_find
from metapilot.models.simulator.running import release_due, start_job
from metapilot.models.simulator.sorting import sort_pairs
from metapilot.models.simulator.state import INF, QUEUED, STAMP, planned_end

# A pass redoes the profile's stale chains for a search only after this many jobs looked at
# since its last move (before that it searches segment by segment); see the docstring above.
REBUILD_AFTER = 8


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
    """Record that the profile gained free resources over [a, b). A check needs only the least
    start and the greatest end of the gains since its stamp: each is kept as a stack of the
    entries not beaten by a later one (stamps and values both monotone), so a check reads it
    with one binary search."""
    s = st.ctr[STAMP] + 1
    st.ctr[STAMP] = s
    g = P.poff[p]
    n = st.grown_len[p, 0]
    while n > 0 and st.grown[g + n - 1, 0] >= a:
        n -= 1
    st.grown[g + n, 0] = a
    st.grown_stamp[g + n, 0] = s
    st.grown_len[p, 0] = n + 1
    n = st.grown_len[p, 1]
    while n > 0 and st.grown[g + n - 1, 1] <= b:
        n -= 1
    st.grown[g + n, 1] = b
    st.grown_stamp[g + n, 1] = s
    st.grown_len[p, 1] = n + 1


@jit
def _gains_since(P, st, p, c, col):
    """Least start (col 0) or greatest end (col 1) of the gains with a stamp after c: the first
    stack entry with such a stamp (the caller knows the top one has one)."""
    g = P.poff[p]
    lo, hi = 0, st.grown_len[p, col] - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if st.grown_stamp[g + mid, col] > c:
            hi = mid
        else:
            lo = mid + 1
    return st.grown[g + lo, col]


@jit
def _forget_gains(P, st, p):
    """Drop the gains every waiting job has been checked against (those before the last pass)."""
    g = P.poff[p]
    for col in range(2):
        n = st.grown_len[p, col]
        k = 0
        while k < n and st.grown_stamp[g + k, col] <= st.pass_stamp[p]:
            k += 1
        if k > 0:
            for i in range(n - k):
                st.grown[g + i, col] = st.grown[g + i + k, col]
                st.grown_stamp[g + i, col] = st.grown_stamp[g + i + k, col]
            st.grown_len[p, col] = n - k


@jit
def _earlier_start(J, P, st, p, j, now, rebuild):
    """Job j's earliest start before its reservation, or its reservation when there is none;
    only the starts whose window meets a gain since its last check are searched (`rebuild`:
    `pf_find`'s, whether stale chains are redone first)."""
    old = st.res[j]
    n = st.grown_len[p, 0]
    c = st.checked[j]
    if n == 0 or st.grown_stamp[P.poff[p] + n - 1, 0] <= c:  # no gain since
        return old
    req = J.req[j]
    lo = max(_gains_since(P, st, p, c, 0) - req, now)
    hi = min(max(_gains_since(P, st, p, c, 1), now), old)
    if lo >= hi:
        return old
    t = pf_find(J, P, st, p, j, now, lo, old, old + req, hi, True, rebuild)
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
        if _earlier_start(J, P, st, p, j, now, True) < st.res[j]:
            return False
        st.checked[j] = st.ctr[STAMP]
    return True


@jit
def _pass_order(J, P, st, p, policy, now):
    """The waiting jobs in queue order, left in `pass_order`; their number. The last pass's
    order, less the jobs started since and plus those submitted since, is nearly sorted, so an
    insertion sort (with `q_ordered`'s keys and ties) costs about one look per job; -1 when a
    key is NaN, which only `q_ordered` orders as before."""
    off = P.off[p]
    k = 0
    for i in range(st.pass_len[p]):
        j = st.pass_order[off + i]
        if st.status[j] != QUEUED:
            continue
        key = priority(J, j, policy, now)
        if key != key:
            return -1
        q = k  # (q <= k <= i: only entries already read are overwritten)
        while q > 0 and (key < st.scratch_s[q - 1] or (key == st.scratch_s[q - 1] and j < st.pass_order[off + q - 1])):
            st.pass_order[off + q] = st.pass_order[off + q - 1]
            st.scratch_s[q] = st.scratch_s[q - 1]
            q -= 1
        st.pass_order[off + q] = j
        st.scratch_s[q] = key
        k += 1
    st.pass_len[p] = k
    return k


@jit
def _compress(J, P, st, p, now, policy, fit_first):
    """Take every waiting job out of the profile, in queue order, and put it back at its
    earliest slot (never later than its current one)."""
    pf_drop(P, st, p, now)
    if _none_can_move(J, P, st, p, now):
        return
    off = P.off[p]
    k = -1 if fit_first else _pass_order(J, P, st, p, policy, now)
    if k < 0:
        o = pf_base(P, st, p)  # segment 0 now holds `now`: what is free now
        k = q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
        for i in range(k):
            st.pass_order[off + i] = st.scratch_j[i]
        st.pass_len[p] = k
    since = 0  # jobs looked at since the last move
    for i in range(k):
        j = st.pass_order[off + i]
        old = st.res[j]
        if old <= now:
            continue
        t = _earlier_start(J, P, st, p, j, now, since >= REBUILD_AFTER)
        since += 1
        if t < old:
            since = 0
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
    st.pass_order[P.off[p] + st.pass_len[p]] = j
    st.pass_len[p] += 1


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
        st.phead[p] = 0
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
        st.grown_len[p, 0] = 0
        st.grown_len[p, 1] = 0
        st.pass_stamp[p] = st.ctr[STAMP]
        pf_drop(P, st, p, now)
        o = pf_base(P, st, p)  # segment 0 now holds `now`: what is free now
        k = q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
        for i in range(k):
            _reserve(J, P, st, p, st.scratch_j[i], now)
            st.pass_order[off + i] = st.scratch_j[i]
        st.pass_len[p] = k
