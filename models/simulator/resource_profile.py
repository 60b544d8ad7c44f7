"""The conservative planning profile: each pool's free resources as a step function of time.

A pool's profile is a stretch of its segment of `State.pt` (segment starts) / `State.pf` (free
resources from that start on), sized in `build_state` at two boundaries per job of the pool,
plus a margin. The stretch begins at `phead` within the segment and has room on both sides: the
past is dropped by moving `phead`, and a boundary is inserted or removed by moving whichever side
of it is shorter, so no edit moves the whole profile.
"""

from __future__ import annotations

from metapilot.models.simulator.jit import jit
from metapilot.models.simulator.state import INF, fits


@jit
def pf_base(P, st, p):
    """Where pool p's profile begins in `pt` / `pf`."""
    return P.poff[p] + st.phead[p]


@jit
def _pf_move(P, st, src, dst, n):
    """Move n entries of pt / pf from src to dst (overlapping ranges allowed)."""
    if dst < src:
        for q in range(n):
            st.pt[dst + q] = st.pt[src + q]
            for r in range(3):
                st.pf[dst + q, r] = st.pf[src + q, r]
    else:
        for q in range(n - 1, -1, -1):
            st.pt[dst + q] = st.pt[src + q]
            for r in range(3):
                st.pf[dst + q, r] = st.pf[src + q, r]


@jit
def pf_drop(P, st, p, now):
    """Forget profile segments that ended at or before now (the profile's start moves on; when
    it has no room left after its end, it is moved back to the middle of its segment)."""
    o = pf_base(P, st, p)
    n = st.plen[p]
    k = 0
    while k + 1 < n and st.pt[o + k + 1] <= now:
        k += 1
    if k > 0:
        st.phead[p] += k
        st.plen[p] = n - k
        st.pf_linked[p] = False
        n -= k
    if st.phead[p] + n + 2 > P.psize[p]:
        h = (P.psize[p] - n) >> 1
        _pf_move(P, st, P.poff[p] + st.phead[p], P.poff[p] + h, n)
        st.phead[p] = h
        st.pf_linked[p] = False


@jit
def _pf_index(P, st, p, t):
    """Index of the segment that contains t (pt[o] <= now <= t always)."""
    o = pf_base(P, st, p)
    lo, hi = 0, st.plen[p]
    while lo < hi:  # first segment starting after t
        mid = (lo + hi) >> 1
        if st.pt[o + mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@jit
def _pf_split(P, st, p, t):
    """Index of the segment starting at t, splitting the one that contains t if needed (the
    segments before it move back one, or those after it forward, whichever are fewer)."""
    o = pf_base(P, st, p)
    n = st.plen[p]
    i = _pf_index(P, st, p, t)
    if st.pt[o + i] == t:
        return i
    room_after = st.phead[p] + n < P.psize[p]
    if st.phead[p] > 0 and (i + 1 < n - i - 1 or not room_after):  # segments 0 .. i move back one
        _pf_move(P, st, o, o - 1, i + 1)
        st.phead[p] -= 1
        o -= 1
    else:  # segments i + 1 .. n - 1 move forward one
        _pf_move(P, st, o + i + 1, o + i + 2, n - i - 1)
    st.pt[o + i + 1] = t
    for r in range(3):
        st.pf[o + i + 1, r] = st.pf[o + i, r]
    st.plen[p] = n + 1
    return i + 1


@jit
def _pf_merge(P, st, p, i):
    """Remove the boundary at segment i when it has the same free resources as segment i-1
    (the segments before it move forward one, or those after it back, whichever are fewer)."""
    o = pf_base(P, st, p)
    n = st.plen[p]
    if i <= 0 or i >= n:
        return
    for r in range(3):
        if st.pf[o + i, r] != st.pf[o + i - 1, r]:
            return
    if i < n - i - 1:  # segments 0 .. i - 1 move forward one
        _pf_move(P, st, o, o + 1, i)
        st.phead[p] += 1
    else:  # segments i + 1 .. n - 1 move back one
        _pf_move(P, st, o + i + 1, o + i, n - i - 1)
    st.plen[p] = n - 1


@jit
def pf_add(J, P, st, p, j, t0, t1, sign):
    """Add sign * need[j] to the free resources over [t0, t1)."""
    i0 = _pf_split(P, st, p, t0)
    i1 = _pf_split(P, st, p, t1)
    o = pf_base(P, st, p)
    d0 = sign * J.need[j, 0]
    d1 = sign * J.need[j, 1]
    d2 = sign * J.need[j, 2]
    for k in range(o + i0, o + i1):
        st.pf[k, 0] += d0
        st.pf[k, 1] += d1
        st.pf[k, 2] += d2
    _pf_merge(P, st, p, i1)
    _pf_merge(P, st, p, i0)
    st.pf_linked[p] = False


@jit
def pf_chains(P, st, p):
    """Link each segment to the next one with fewer free cores (`pf_down`) and with more
    (`pf_up`), plen when none, and note the least free of each resource (`pf_low`): `pf_find`
    then steps over whole runs of segments where a job fits, or does not, on cores alone when
    the other resources never bind it. Valid until the profile next changes (`pf_linked`)."""
    o = pf_base(P, st, p)
    n = st.plen[p]
    for r in range(3):
        st.pf_low[p, r] = INF
    for k in range(n - 1, -1, -1):
        f = st.pf[o + k, 0]
        d = k + 1
        while d < n and st.pf[o + d, 0] >= f:
            d = st.pf_down[o + d]
        st.pf_down[o + k] = d
        u = k + 1
        while u < n and st.pf[o + u, 0] <= f:
            u = st.pf_up[o + u]
        st.pf_up[o + k] = u
        for r in range(3):
            st.pf_low[p, r] = min(st.pf_low[p, r], st.pf[o + k, r])
    st.pf_linked[p] = True


@jit
def pf_find(J, P, st, p, j, now, lo, own_lo, own_hi, limit, chains, rebuild=True):
    """Earliest start t >= now, t < limit, where job j fits for its requested time; `limit` if
    none. Over [own_lo, own_hi) job j's own reservation is counted as free (it is moving; then
    limit <= own_lo and own_hi - own_lo is its requested time). The search begins with the
    segment that holds `lo` (>= now): the caller knows that no start before `lo` fits. With
    `chains`, runs of segments are stepped over on cores alone when GPUs and memory cannot bind
    the job (`pf_chains`, redone first if the profile changed since; without `rebuild` a changed
    profile is searched segment by segment instead: in a compression's pass nearly every move
    changes the profile, and a rebuild, O(profile), cost more than the scans it saved: RICC-2010-2,
    docs/benchmarks.md "Conservative backfilling on a busy cluster"). The result is the same
    either way; outside a run the segments short of cores are passed in a tight loop."""
    o = pf_base(P, st, p)
    n = st.plen[p]
    dur = J.req[j]
    plain_end = own_lo if own_hi > own_lo else INF  # before it, the job's own slot plays no part
    if chains and not st.pf_linked[p]:
        if rebuild:
            pf_chains(P, st, p)
        else:
            chains = False
    step = chains and J.need[j, 1] <= st.pf_low[p, 1] and J.need[j, 2] <= st.pf_low[p, 2]
    cand = 0.0
    have = False  # a run of segments where j fits began at cand
    k = _pf_index(P, st, p, lo)
    stop = min(plain_end, limit)  # outside a run, a segment starting here ends the search
    need0 = J.need[j, 0]
    while k < n:  # the starts before its own slot
        if not have and not step:  # (the segments too short of cores, in a tight loop)
            while k < n and st.pf[o + k, 0] < need0:
                if max(st.pt[o + k], now) >= stop:
                    return limit
                k += 1
            if k == n:
                break
        x = max(st.pt[o + k], now)
        if x >= plain_end:
            break
        if not have and x >= limit:
            return limit
        if fits(J.need, j, st.pf[o + k, 0], st.pf[o + k, 1], st.pf[o + k, 2]):
            if not have:
                have = True
                cand = x
            e = st.pf_down[o + k] if step else k + 1  # segments k .. e - 1 all fit
            y = min(st.pt[o + e], plain_end) if e < n else plain_end
            if cand + dur <= y:
                return cand
            k = e
        else:
            have = False
            k = st.pf_up[o + k] if step else k + 1  # segments k .. that one - 1 do not fit
    if not have:
        return limit
    # the run reached its own slot (at or past limit): there its own resources count as free
    k = _pf_index(P, st, p, own_lo)
    while k < n:
        if not fits(J.need, j, st.pf[o + k, 0] + J.need[j, 0], st.pf[o + k, 1] + J.need[j, 1],
                    st.pf[o + k, 2] + J.need[j, 2]):
            return limit
        e = st.pf_down[o + k] if step else k + 1  # (x + need is monotone in x)
        y = min(st.pt[o + e], own_hi) if e < n else own_hi
        if cand + dur <= y:
            return cand
        k = e
    return limit
