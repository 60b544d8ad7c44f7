"""The conservative planning profile: each pool's free resources as a step function of time.

A pool's profile is a segment of `State.pt` (segment starts) / `State.pf` (free resources from
that start on), sized in `build_state` at two boundaries per job of the pool, plus a margin.
"""

from __future__ import annotations

from metapilot.models.simulator.jit import jit
from metapilot.models.simulator.state import INF, fits


@jit
def pf_drop(P, st, p, now):
    """Forget profile segments that ended at or before now."""
    o = P.poff[p]
    n = st.plen[p]
    k = 0
    while k + 1 < n and st.pt[o + k + 1] <= now:
        k += 1
    if k > 0:
        for i in range(n - k):
            st.pt[o + i] = st.pt[o + i + k]
            for r in range(3):
                st.pf[o + i, r] = st.pf[o + i + k, r]
        st.plen[p] = n - k


@jit
def _pf_split(P, st, p, t):
    """Index of the segment starting at t, splitting the one that contains t if needed."""
    o = P.poff[p]
    n = st.plen[p]
    lo, hi = 0, n
    while lo < hi:  # first segment starting after t
        mid = (lo + hi) >> 1
        if st.pt[o + mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    i = lo - 1  # the segment containing t (pt[o] <= now <= t always)
    if st.pt[o + i] == t:
        return i
    for q in range(n, i + 1, -1):
        st.pt[o + q] = st.pt[o + q - 1]
        for r in range(3):
            st.pf[o + q, r] = st.pf[o + q - 1, r]
    st.pt[o + i + 1] = t
    for r in range(3):
        st.pf[o + i + 1, r] = st.pf[o + i, r]
    st.plen[p] = n + 1
    return i + 1


@jit
def _pf_merge(P, st, p, i):
    """Remove the boundary at segment i when it has the same free resources as segment i-1."""
    o = P.poff[p]
    n = st.plen[p]
    if i <= 0 or i >= n:
        return
    for r in range(3):
        if st.pf[o + i, r] != st.pf[o + i - 1, r]:
            return
    for q in range(i, n - 1):
        st.pt[o + q] = st.pt[o + q + 1]
        for r in range(3):
            st.pf[o + q, r] = st.pf[o + q + 1, r]
    st.plen[p] = n - 1


@jit
def pf_add(J, P, st, p, j, t0, t1, sign):
    """Add sign * need[j] to the free resources over [t0, t1)."""
    i0 = _pf_split(P, st, p, t0)
    i1 = _pf_split(P, st, p, t1)
    o = P.poff[p]
    for k in range(i0, i1):
        for r in range(3):
            st.pf[o + k, r] += sign * J.need[j, r]
    _pf_merge(P, st, p, i1)
    _pf_merge(P, st, p, i0)


@jit
def pf_find(J, P, st, p, j, now, own_lo, own_hi, limit):
    """Earliest start t >= now, t < limit, where job j fits for its requested time; `limit` if
    none. Over [own_lo, own_hi) job j's own reservation is counted as free (it is moving)."""
    o = P.poff[p]
    n = st.plen[p]
    dur = J.req[j]
    cand = -1.0
    have = False
    for k in range(n):
        b = st.pt[o + k + 1] if k + 1 < n else INF
        if b <= now:
            continue
        x = st.pt[o + k]
        if x < now:
            x = now
        while x < b:
            if not have and x >= limit:
                return limit
            y = b
            inside = False
            if own_hi > own_lo:
                if x < own_lo:
                    y = min(b, own_lo)
                elif x < own_hi:
                    y = min(b, own_hi)
                    inside = True
            add = 1.0 if inside else 0.0
            if fits(J.need, j, st.pf[o + k, 0] + add * J.need[j, 0], st.pf[o + k, 1] + add * J.need[j, 1],
                    st.pf[o + k, 2] + add * J.need[j, 2]):
                if not have:
                    have = True
                    cand = x
                if cand + dur <= y:
                    return cand
            else:
                have = False
            x = y
    return limit
