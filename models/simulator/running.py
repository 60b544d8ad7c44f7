"""Starting and completing jobs, and each pool's running jobs sorted by planned end.

The running list (per-pool segment of `State.running`, sorted by planned end) holds the jobs
that still hold resources in the planning view; it gives the EASY shadow time and SPEC §6's
"a job planned to end at or before now holds nothing" release.
"""

from __future__ import annotations

from metapilot.models.simulator.completions import heap_push
from metapilot.models.simulator.jit import jit
from metapilot.models.simulator.state import DONE, RUNNING, SEQ, planned_end


@jit
def _r_insert(J, P, st, p, j):
    off = P.off[p]
    n = st.rlen[p]
    pe = planned_end(J, st, j)
    lo, hi = 0, n
    while lo < hi:  # first position with planned end > pe
        mid = (lo + hi) >> 1
        if planned_end(J, st, st.running[off + mid]) <= pe:
            lo = mid + 1
        else:
            hi = mid
    for i in range(n, lo, -1):
        st.running[off + i] = st.running[off + i - 1]
    st.running[off + lo] = j
    st.rlen[p] = n + 1


@jit
def _r_remove(J, P, st, p, j):
    off = P.off[p]
    n = st.rlen[p]
    pe = planned_end(J, st, j)
    lo, hi = 0, n
    while lo < hi:  # first position with planned end >= pe
        mid = (lo + hi) >> 1
        if planned_end(J, st, st.running[off + mid]) < pe:
            lo = mid + 1
        else:
            hi = mid
    while st.running[off + lo] != j:
        lo += 1
    for i in range(lo, n - 1):
        st.running[off + i] = st.running[off + i + 1]
    st.rlen[p] = n - 1


@jit
def release_due(J, P, st, p, now):
    """Jobs planned to end at or before now hold nothing, even before their completion event."""
    off = P.off[p]
    n = st.rlen[p]
    k = 0
    while k < n:
        j = st.running[off + k]
        if planned_end(J, st, j) > now:
            break
        st.released[j] = True
        for r in range(3):
            st.used[p, r] -= J.need[j, r]
        k += 1
    if k > 0:
        for i in range(n - k):
            st.running[off + i] = st.running[off + i + k]
        st.rlen[p] = n - k


@jit
def start_job(J, P, st, p, j, now):
    """Start a job that has already left the queue."""
    st.status[j] = RUNNING
    st.start[j] = now
    o = st.ctr[SEQ]
    st.ctr[SEQ] = o + 1
    st.order[j] = o
    heap_push(st, now + J.run[j], o, j)
    for r in range(3):
        st.busy[p, r] += J.need[j, r]
        st.used[p, r] += J.need[j, r]
    _r_insert(J, P, st, p, j)


@jit
def complete_job(J, P, st, p, j, now):
    """Job j ends now: it frees what it still holds."""
    st.status[j] = DONE
    st.end[j] = now
    for r in range(3):
        st.busy[p, r] -= J.need[j, r]
    if not st.released[j]:
        st.released[j] = True
        for r in range(3):
            st.used[p, r] -= J.need[j, r]
        _r_remove(J, P, st, p, j)
