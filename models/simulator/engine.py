"""The replay event loop (SPEC §6), compiled with numba, advanceable step by step.

Events are handled one at a time, each followed by a scheduling step of the job's pool. At equal
times: submissions (by submit time, then job id = job index), then completions (in start order),
then conservative reservations that fall due. The planning view of a running job is that it
holds its resources from its start to start + requested time; its completion releases the rest.

State lives in plain numpy arrays grouped in NamedTuples (`Jobs`, `Pools`, `State`) so that the
compiled functions can be cached on disk and the Python `Engine` can read the state between
calls to `advance`. Per-pool lists (queue, running jobs, conservative profile) are segments of
flat arrays, sized by the number of jobs of the pool, so nothing is allocated in the hot loop.

- queue: the pool's queued jobs; a binary heap under a static rule (first job on top), in no
  particular order under a dynamic one (WFP3, UNICEF: the first job is found by a scan of
  scores computed at the step's time). The EASY backfill pass sorts only the jobs that fit now
  (free resources only shrink during a pass, so a job that does not fit at its start never
  will), so no step re-sorts the whole queue.
- running: the pool's running jobs that still hold resources, sorted by planned end; it gives
  the EASY shadow time and the "planned end <= now holds nothing" release.
- profile (conservative only): a step function of free cores/GPUs/memory over time.

`fit_first` (the U objective of the controller) puts, at each scheduling step, the jobs that fit
the resources free when the step begins before the others, then the rule's order.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numba as nb
import numpy as np

from models.simulator.capacity import Capacity
from models.simulator.policies import is_dynamic, policy_code, score, static_scores
from transforms.workload import Workload

# Backfilling modes.
NONE, EASY, CONSERVATIVE = 0, 1, 2
BACKFILL_CODES: dict[str, int] = {"none": NONE, "easy": EASY, "conservative": CONSERVATIVE}

# Job status.
FUTURE, QUEUED, RUNNING, DONE, EXCLUDED = 0, 1, 2, 3, 4

# Slots of State.ctr.
NEXT_SUB, SEQ, HEAP_N = 0, 1, 2
# Slots of State.clock.
NOW, UTIL_T = 0, 1

INF = np.inf


def backfill_code(name: str | int) -> int:
    """Map 'none' / 'easy' / 'conservative' (or a code) to its code."""
    if isinstance(name, int):
        if name in (NONE, EASY, CONSERVATIVE):
            return name
        raise ValueError(f"unknown backfill code {name}")
    try:
        return BACKFILL_CODES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown backfill {name!r}; choose from none, easy, conservative") from None


class Jobs(NamedTuple):
    """Static job data, in submit order (ties by job id)."""

    submit: np.ndarray  # f8, seconds since the window start
    run: np.ndarray  # f8, clamped run time
    req: np.ndarray  # f8, requested time (planning)
    need: np.ndarray  # f8 (n, 3): cores, GPUs, memory
    pool: np.ndarray  # i8
    static_key: np.ndarray  # f8 (n, 7): score of each static rule (dynamic columns unused)


class Pools(NamedTuple):
    cap: np.ndarray  # f8 (P, 3)
    off: np.ndarray  # i8 (P,): start of the pool's segment in queue/running
    poff: np.ndarray  # i8 (P,): start of the pool's segment in the profile
    psize: np.ndarray  # i8 (P,): size of that profile segment


class State(NamedTuple):
    clock: np.ndarray  # f8 [now, time up to which `util` is integrated]
    ctr: np.ndarray  # i8 [next submission, start sequence, completion heap size]
    status: np.ndarray  # i1 (n,)
    start: np.ndarray  # f8 (n,)
    end: np.ndarray  # f8 (n,)
    res: np.ndarray  # f8 (n,): conservative reservation start
    order: np.ndarray  # i8 (n,): start sequence number
    released: np.ndarray  # b1 (n,): no longer holds resources in the planning view
    queue: np.ndarray  # i8 (n,) per-pool segments
    qlen: np.ndarray  # i8 (P,)
    qpos: np.ndarray  # i8 (n,): position of a queued job in its segment
    running: np.ndarray  # i8 (n,) per-pool segments, sorted by planned end
    rlen: np.ndarray  # i8 (P,)
    used: np.ndarray  # f8 (P, 3): planning holdings (running jobs with planned end > now)
    busy: np.ndarray  # f8 (P, 3): resources of started, not completed jobs
    util: np.ndarray  # f8 (P, 3): integral of busy since the last reset
    heap_t: np.ndarray  # f8 (n,) completion heap: end time
    heap_o: np.ndarray  # i8 (n,): start sequence (tie-break)
    heap_j: np.ndarray  # i8 (n,): job
    pt: np.ndarray  # f8 (S,) profile segment starts
    pf: np.ndarray  # f8 (S, 3) profile free resources
    plen: np.ndarray  # i8 (P,)
    next_res: np.ndarray  # f8 (P,): earliest pending reservation
    scratch_j: np.ndarray  # i8 (n,)
    scratch_s: np.ndarray  # f8 (n,)


# Every compiled function runs without numba's reference counting (`_nrt=False`, a numba option
# its own test suite uses; it forbids allocating arrays): the loop allocates nothing (buffers are
# preallocated in `State`, sorts are in place), and the atomic refcount updates on the many
# arrays of the state cost ~10x the scheduling itself (measured: 2.4 us vs 0.25 us per event).
jit = nb.njit(cache=True, _nrt=False)
jit_inline = nb.njit(cache=True, _nrt=False, inline="always")

# --------------------------------------------------------------------------- small helpers


@jit_inline
def _fits(need, j, f0, f1, f2):
    return need[j, 0] <= f0 and need[j, 1] <= f1 and need[j, 2] <= f2


@jit_inline
def _priority(J, j, policy, now):
    if is_dynamic(policy):
        return score(policy, J.submit[j], J.req[j], J.need[j, 0], now)
    return J.static_key[j, policy]


@jit_inline
def _pair_less(keys, jobs, a, b):
    return keys[a] < keys[b] or (keys[a] == keys[b] and jobs[a] < jobs[b])


@jit_inline
def _pair_swap(keys, jobs, a, b):
    keys[a], keys[b] = keys[b], keys[a]
    jobs[a], jobs[b] = jobs[b], jobs[a]


@jit
def _sort_pairs(keys, jobs, k):
    """Sort keys[:k], jobs[:k] together by (key, job), in place: insertion sort for the short
    lists of a typical step, heapsort beyond."""
    if k <= 24:
        for i in range(1, k):
            q = i
            while q > 0 and _pair_less(keys, jobs, q, q - 1):
                _pair_swap(keys, jobs, q, q - 1)
                q -= 1
        return
    for root in range(k // 2 - 1, -1, -1):
        _pair_sift(keys, jobs, root, k)
    for end in range(k - 1, 0, -1):
        _pair_swap(keys, jobs, 0, end)
        _pair_sift(keys, jobs, 0, end)


@jit
def _pair_sift(keys, jobs, root, end):
    while True:
        c = 2 * root + 1
        if c >= end:
            return
        if c + 1 < end and _pair_less(keys, jobs, c, c + 1):
            c += 1
        if not _pair_less(keys, jobs, root, c):
            return
        _pair_swap(keys, jobs, root, c)
        root = c


@jit
def _sort_by_priority(J, jobs, keys, k, policy, now):
    """Sort jobs[:k] in place into queue order: priority, then job index."""
    for i in range(k):
        keys[i] = _priority(J, jobs[i], policy, now)
    _sort_pairs(keys, jobs, k)


# --------------------------------------------------------------------------- completion heap


@jit_inline
def _heap_less(st, a, b):
    return st.heap_t[a] < st.heap_t[b] or (st.heap_t[a] == st.heap_t[b] and st.heap_o[a] < st.heap_o[b])


@jit
def _heap_swap(st, a, b):
    st.heap_t[a], st.heap_t[b] = st.heap_t[b], st.heap_t[a]
    st.heap_o[a], st.heap_o[b] = st.heap_o[b], st.heap_o[a]
    st.heap_j[a], st.heap_j[b] = st.heap_j[b], st.heap_j[a]


@jit
def _heap_push(st, t, o, j):
    i = st.ctr[HEAP_N]
    st.ctr[HEAP_N] = i + 1
    st.heap_t[i] = t
    st.heap_o[i] = o
    st.heap_j[i] = j
    while i > 0:
        parent = (i - 1) >> 1
        if not _heap_less(st, i, parent):
            break
        _heap_swap(st, i, parent)
        i = parent


@jit
def _heap_pop(st):
    j = st.heap_j[0]
    n = st.ctr[HEAP_N] - 1
    st.ctr[HEAP_N] = n
    if n > 0:
        _heap_swap(st, 0, n)
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and _heap_less(st, c + 1, c):
                c += 1
            if not _heap_less(st, c, i):
                break
            _heap_swap(st, i, c)
            i = c
    return j


# --------------------------------------------------------------------------- queue
# Under a static rule the pool's segment is a binary heap on (score, job index), so the first
# job in queue order is at the top; under a dynamic rule it is unordered and the first job is
# found by a scan. `qpos` gives each queued job's position either way.


@jit_inline
def _q_less(J, a, b, policy):
    ka = J.static_key[a, policy]
    kb = J.static_key[b, policy]
    return ka < kb or (ka == kb and a < b)


@jit
def _q_put(P, st, p, pos, j):
    st.queue[P.off[p] + pos] = j
    st.qpos[j] = pos


@jit
def _q_sift_up(J, P, st, p, pos, policy):
    off = P.off[p]
    j = st.queue[off + pos]
    while pos > 0:
        parent = (pos - 1) >> 1
        pj = st.queue[off + parent]
        if not _q_less(J, j, pj, policy):
            break
        _q_put(P, st, p, pos, pj)
        pos = parent
    _q_put(P, st, p, pos, j)


@jit
def _q_sift_down(J, P, st, p, pos, policy):
    off = P.off[p]
    n = st.qlen[p]
    j = st.queue[off + pos]
    while True:
        c = 2 * pos + 1
        if c >= n:
            break
        if c + 1 < n and _q_less(J, st.queue[off + c + 1], st.queue[off + c], policy):
            c += 1
        cj = st.queue[off + c]
        if not _q_less(J, cj, j, policy):
            break
        _q_put(P, st, p, pos, cj)
        pos = c
    _q_put(P, st, p, pos, j)


@jit
def _q_push(J, P, st, p, j, policy):
    pos = st.qlen[p]
    st.qlen[p] = pos + 1
    _q_put(P, st, p, pos, j)
    if not is_dynamic(policy):
        _q_sift_up(J, P, st, p, pos, policy)


@jit
def _q_remove(J, P, st, p, j, policy):
    off = P.off[p]
    last = st.qlen[p] - 1
    pos = st.qpos[j]
    st.qlen[p] = last
    if pos == last:
        return
    _q_put(P, st, p, pos, st.queue[off + last])
    if not is_dynamic(policy):
        _q_sift_down(J, P, st, p, pos, policy)
        _q_sift_up(J, P, st, p, pos, policy)


@jit
def _q_best(J, P, st, p, policy, now, fit_first, s0, s1, s2):
    """First queued job in priority order (ties: lower job index), or -1. With `fit_first`, jobs
    that fit (s0, s1, s2) -- the free resources when the step began -- come before the rest."""
    off = P.off[p]
    if st.qlen[p] == 0:
        return -1
    if not is_dynamic(policy) and not fit_first:
        return st.queue[off]
    best = -1
    best_key = 0.0
    best_miss = True
    for i in range(st.qlen[p]):
        j = st.queue[off + i]
        miss = fit_first and not _fits(J.need, j, s0, s1, s2)
        if best >= 0 and miss and not best_miss:
            continue
        key = _priority(J, j, policy, now)
        if best < 0 or (best_miss and not miss) or key < best_key or (key == best_key and j < best):
            best = j
            best_key = key
            best_miss = miss
    return best


@jit
def reorder_queues(J, P, st, policy):
    """Restore the heap order of every pool's queue after a switch to a static rule."""
    if is_dynamic(policy):
        return
    for p in range(P.cap.shape[0]):
        for pos in range(st.qlen[p] // 2 - 1, -1, -1):
            _q_sift_down(J, P, st, p, pos, policy)


@jit
def _q_ordered(J, P, st, p, policy, now, fit_first, s0, s1, s2):
    """Copy the pool's queue into scratch_j in priority order (see `_q_best`); return its length."""
    k = st.qlen[p]
    off = P.off[p]
    m = 0  # jobs that fit (s0, s1, s2) are moved to the front when fit_first
    for i in range(k):
        j = st.queue[off + i]
        st.scratch_j[i] = j
        if fit_first and _fits(J.need, j, s0, s1, s2):
            st.scratch_j[i] = st.scratch_j[m]
            st.scratch_j[m] = j
            m += 1
    _sort_by_priority(J, st.scratch_j, st.scratch_s, m, policy, now)
    _sort_by_priority(J, st.scratch_j[m:], st.scratch_s[m:], k - m, policy, now)
    return k


# --------------------------------------------------------------------------- running list


@jit_inline
def _planned_end(J, st, j):
    return st.start[j] + J.req[j]


@jit
def _r_insert(J, P, st, p, j):
    off = P.off[p]
    n = st.rlen[p]
    pe = _planned_end(J, st, j)
    lo, hi = 0, n
    while lo < hi:  # first position with planned end > pe
        mid = (lo + hi) >> 1
        if _planned_end(J, st, st.running[off + mid]) <= pe:
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
    pe = _planned_end(J, st, j)
    lo, hi = 0, n
    while lo < hi:  # first position with planned end >= pe
        mid = (lo + hi) >> 1
        if _planned_end(J, st, st.running[off + mid]) < pe:
            lo = mid + 1
        else:
            hi = mid
    while st.running[off + lo] != j:
        lo += 1
    for i in range(lo, n - 1):
        st.running[off + i] = st.running[off + i + 1]
    st.rlen[p] = n - 1


@jit
def _release_due(J, P, st, p, now):
    """Jobs planned to end at or before now hold nothing, even before their completion event."""
    off = P.off[p]
    n = st.rlen[p]
    k = 0
    while k < n:
        j = st.running[off + k]
        if _planned_end(J, st, j) > now:
            break
        st.released[j] = True
        for r in range(3):
            st.used[p, r] -= J.need[j, r]
        k += 1
    if k > 0:
        for i in range(n - k):
            st.running[off + i] = st.running[off + i + k]
        st.rlen[p] = n - k


# --------------------------------------------------------------------------- start / complete


@jit
def _start(J, P, st, p, j, now):
    """Start a job that has already left the queue."""
    st.status[j] = RUNNING
    st.start[j] = now
    o = st.ctr[SEQ]
    st.ctr[SEQ] = o + 1
    st.order[j] = o
    _heap_push(st, now + J.run[j], o, j)
    for r in range(3):
        st.busy[p, r] += J.need[j, r]
        st.used[p, r] += J.need[j, r]
    _r_insert(J, P, st, p, j)


@jit
def _complete(J, P, st, p, j, now):
    st.status[j] = DONE
    st.end[j] = now
    for r in range(3):
        st.busy[p, r] -= J.need[j, r]
    if not st.released[j]:
        st.released[j] = True
        for r in range(3):
            st.used[p, r] -= J.need[j, r]
        _r_remove(J, P, st, p, j)


# --------------------------------------------------------------------------- no backfill / EASY


@jit
def _step_list(J, P, st, p, now, policy, easy, fit_first):
    """Start jobs in queue order while the first fits; with EASY, then backfill behind the head."""
    _release_due(J, P, st, p, now)
    f0 = P.cap[p, 0] - st.used[p, 0]
    f1 = P.cap[p, 1] - st.used[p, 1]
    f2 = P.cap[p, 2] - st.used[p, 2]
    s0, s1, s2 = f0, f1, f2  # free when the step began (fit-first ordering)
    head = -1
    while st.qlen[p] > 0:
        j = _q_best(J, P, st, p, policy, now, fit_first, s0, s1, s2)
        if not _fits(J.need, j, f0, f1, f2):
            head = j
            break
        _q_remove(J, P, st, p, j, policy)
        _start(J, P, st, p, j, now)
        f0 -= J.need[j, 0]
        f1 -= J.need[j, 1]
        f2 -= J.need[j, 2]
    if easy and head >= 0 and st.qlen[p] > 1:
        _easy_backfill(J, P, st, p, now, policy, head, f0, f1, f2)


@jit
def _shadow(J, P, st, p, head, f0, f1, f2):
    """Earliest time the head fits in the planning profile, and what it leaves free then."""
    off = P.off[p]
    n = st.rlen[p]
    k = 0
    while k < n:
        j = st.running[off + k]
        f0 += J.need[j, 0]
        f1 += J.need[j, 1]
        f2 += J.need[j, 2]
        k += 1
        if _fits(J.need, head, f0, f1, f2):
            shadow = _planned_end(J, st, j)
            while k < n:  # everything ending at the same instant is free at the shadow time
                j = st.running[off + k]
                if _planned_end(J, st, j) != shadow:
                    break
                f0 += J.need[j, 0]
                f1 += J.need[j, 1]
                f2 += J.need[j, 2]
                k += 1
            return shadow, f0 - J.need[head, 0], f1 - J.need[head, 1], f2 - J.need[head, 2]
    return INF, 0.0, 0.0, 0.0  # unreachable for jobs that fit the pool


@jit
def _easy_backfill(J, P, st, p, now, policy, head, f0, f1, f2):
    shadow, x0, x1, x2 = _shadow(J, P, st, p, head, f0, f1, f2)
    # Candidates, in queue order: queued jobs (not the head) that fit now and either end by the
    # shadow time or fit the extra. Free resources and extra only shrink during the pass, so
    # the jobs left out here could not start anyway; sorting only the rest keeps steps cheap.
    off = P.off[p]
    k = 0
    for i in range(st.qlen[p]):
        j = st.queue[off + i]
        if j != head and _fits(J.need, j, f0, f1, f2) and (
                now + J.req[j] <= shadow or _fits(J.need, j, x0, x1, x2)):
            st.scratch_j[k] = j
            k += 1
    if k == 0:
        return
    _sort_by_priority(J, st.scratch_j, st.scratch_s, k, policy, now)
    for i in range(k):
        j = st.scratch_j[i]
        if not _fits(J.need, j, f0, f1, f2):
            continue
        if now + J.req[j] <= shadow:
            pass  # done (planned) by the shadow time: cannot delay the head
        elif _fits(J.need, j, x0, x1, x2):
            x0 -= J.need[j, 0]  # runs past the shadow time on resources the head leaves free
            x1 -= J.need[j, 1]
            x2 -= J.need[j, 2]
        else:
            continue
        _q_remove(J, P, st, p, j, policy)
        _start(J, P, st, p, j, now)
        f0 -= J.need[j, 0]
        f1 -= J.need[j, 1]
        f2 -= J.need[j, 2]


# --------------------------------------------------------------------------- conservative profile


@jit
def _pf_drop(P, st, p, now):
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
def _pf_add(J, P, st, p, j, t0, t1, sign):
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
def _pf_find(J, P, st, p, j, now, own_lo, own_hi, limit):
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
            if _fits(J.need, j, st.pf[o + k, 0] + add * J.need[j, 0], st.pf[o + k, 1] + add * J.need[j, 1],
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


@jit
def _c_reserve(J, P, st, p, j, now):
    t = _pf_find(J, P, st, p, j, now, 0.0, 0.0, INF)
    _pf_add(J, P, st, p, j, t, t + J.req[j], -1.0)
    st.res[j] = t
    if t < st.next_res[p]:
        st.next_res[p] = t


@jit
def _c_refresh_next(P, st, p):
    off = P.off[p]
    t = INF
    for i in range(st.qlen[p]):
        r = st.res[st.queue[off + i]]
        if r < t:
            t = r
    st.next_res[p] = t


@jit
def _c_compress(J, P, st, p, now, policy, fit_first):
    """Take every waiting job out of the profile, in queue order, and put it back at its
    earliest slot (never later than its current one)."""
    _pf_drop(P, st, p, now)
    o = P.poff[p]  # segment 0 now holds `now`: what is free now
    k = _q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
    for i in range(k):
        j = st.scratch_j[i]
        old = st.res[j]
        if old <= now:
            continue
        t = _pf_find(J, P, st, p, j, now, old, old + J.req[j], old)
        if t < old:
            _pf_add(J, P, st, p, j, old, old + J.req[j], 1.0)
            _pf_add(J, P, st, p, j, t, t + J.req[j], -1.0)
            st.res[j] = t
    _c_refresh_next(P, st, p)


@jit
def _c_start_due(J, P, st, p, now, policy):
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
    _sort_pairs(st.scratch_s, st.scratch_j, k)  # by job index
    for i in range(k):
        j = st.scratch_j[i]
        _q_remove(J, P, st, p, j, policy)
        _start(J, P, st, p, j, now)
    _c_refresh_next(P, st, p)


@jit
def rebuild_profile(J, P, st, now, policy, fit_first):
    """Enter conservative mode mid-run: profile from the running jobs, then a reservation for
    every waiting job in queue order."""
    for p in range(P.cap.shape[0]):
        _release_due(J, P, st, p, now)
        o = P.poff[p]
        st.pt[o] = -INF
        for r in range(3):
            st.pf[o, r] = P.cap[p, r]
        st.plen[p] = 1
        off = P.off[p]
        for i in range(st.rlen[p]):
            j = st.running[off + i]
            _pf_add(J, P, st, p, j, now, _planned_end(J, st, j), -1.0)
        st.next_res[p] = INF
        _pf_drop(P, st, p, now)
        k = _q_ordered(J, P, st, p, policy, now, fit_first, st.pf[o, 0], st.pf[o, 1], st.pf[o, 2])
        for i in range(k):
            _c_reserve(J, P, st, p, st.scratch_j[i], now)


# --------------------------------------------------------------------------- event loop


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


@jit
def run_until(J, P, st, until, policy, backfill, fit_first):
    """Handle every event at or before `until` with the given rule and backfilling mode (and,
    with `fit_first`, the jobs that fit the free resources first). Returns the events handled."""
    n = J.submit.shape[0]
    npools = P.cap.shape[0]
    events = 0
    while True:
        ns = st.ctr[NEXT_SUB]
        while ns < n and st.status[ns] == EXCLUDED:
            ns += 1
        st.ctr[NEXT_SUB] = ns
        t_sub = J.submit[ns] if ns < n else INF
        t_comp = st.heap_t[0] if st.ctr[HEAP_N] > 0 else INF
        t_res = INF
        p_res = -1
        if backfill == CONSERVATIVE:
            for p in range(npools):
                if st.next_res[p] < t_res:
                    t_res = st.next_res[p]
                    p_res = p
        t = min(t_sub, min(t_comp, t_res))
        if t == INF or t > until:
            break
        _advance_clock(P, st, t)
        now = st.clock[NOW]
        events += 1
        if t_sub == t:
            j = ns
            st.ctr[NEXT_SUB] = ns + 1
            p = J.pool[j]
            st.status[j] = QUEUED
            _q_push(J, P, st, p, j, policy)
            if backfill == CONSERVATIVE:
                _pf_drop(P, st, p, now)
                _c_reserve(J, P, st, p, j, now)
            else:
                _step_list(J, P, st, p, now, policy, backfill == EASY, fit_first)
        elif t_comp == t:
            j = _heap_pop(st)
            p = J.pool[j]
            _complete(J, P, st, p, j, now)
            if backfill == CONSERVATIVE:
                _pf_drop(P, st, p, now)
                pe = _planned_end(J, st, j)
                if pe > now:
                    _pf_add(J, P, st, p, j, now, pe, 1.0)
                _c_compress(J, P, st, p, now, policy, fit_first)
            else:
                _step_list(J, P, st, p, now, policy, backfill == EASY, fit_first)
        else:
            _c_start_due(J, P, st, p_res, now, policy)
    if until != INF:
        _advance_clock(P, st, until)
    return events


@jit
def release_all_due(J, P, st, now):
    for p in range(P.cap.shape[0]):
        _release_due(J, P, st, p, now)


# --------------------------------------------------------------------------- Python side


def build_state(jobs: Jobs, cap: np.ndarray, excluded: np.ndarray) -> tuple[Pools, State]:
    """Allocate the pool layout and an empty state for these jobs."""
    n = jobs.submit.shape[0]
    npools = cap.shape[0]
    counts = np.bincount(jobs.pool[~excluded], minlength=npools).astype(np.int64) if n else np.zeros(npools, np.int64)
    off = np.zeros(npools, np.int64)
    off[1:] = np.cumsum(counts)[:-1]
    psize = 2 * counts + 4
    poff = np.zeros(npools, np.int64)
    poff[1:] = np.cumsum(psize)[:-1]
    pools = Pools(cap=np.ascontiguousarray(cap, dtype=np.float64), off=off, poff=poff, psize=psize)
    total_p = int(psize.sum())
    status = np.zeros(n, np.int8)
    status[excluded] = EXCLUDED
    pt = np.full(total_p, -INF)
    pf = np.zeros((total_p, 3))
    pf[poff] = pools.cap
    t0 = min(0.0, float(jobs.submit.min())) if n else 0.0
    st = State(
        clock=np.array([t0, t0]),
        ctr=np.zeros(3, np.int64),
        status=status,
        start=np.full(n, np.nan),
        end=np.full(n, np.nan),
        res=np.full(n, INF),
        order=np.full(n, -1, np.int64),
        released=np.zeros(n, np.bool_),
        queue=np.zeros(max(n, 1), np.int64),
        qlen=np.zeros(npools, np.int64),
        qpos=np.zeros(n, np.int64),
        running=np.zeros(max(n, 1), np.int64),
        rlen=np.zeros(npools, np.int64),
        used=np.zeros((npools, 3)),
        busy=np.zeros((npools, 3)),
        util=np.zeros((npools, 3)),
        heap_t=np.zeros(max(n, 1)),
        heap_o=np.zeros(max(n, 1), np.int64),
        heap_j=np.zeros(max(n, 1), np.int64),
        pt=pt,
        pf=pf,
        plen=np.ones(npools, np.int64),
        next_res=np.full(npools, INF),
        scratch_j=np.zeros(max(n, 1), np.int64),
        scratch_s=np.zeros(max(n, 1)),
    )
    return pools, st


def warm_up() -> float:
    """Compile (or load from the cache) every mode on a tiny workload; returns seconds taken."""
    t0 = time.perf_counter()
    n = 4
    jobs = Jobs(
        submit=np.arange(n, dtype=np.float64), run=np.ones(n), req=np.full(n, 2.0),
        need=np.ones((n, 3)), pool=np.zeros(n, np.int64), static_key=np.zeros((n, 7)),
    )
    for policy in range(7):
        for backfill in (NONE, EASY, CONSERVATIVE):
            pools, st = build_state(jobs, np.array([[2.0, 2.0, 2.0]]), np.zeros(n, np.bool_))
            if backfill == CONSERVATIVE:
                rebuild_profile(jobs, pools, st, 0.0, policy, False)
            run_until(jobs, pools, st, math.inf, policy, backfill, policy == 0)
    release_all_due(jobs, pools, st, 0.0)
    return time.perf_counter() - t0


class Engine:
    """A replay that can be advanced slice by slice (the objective-switching env drives it)
    or run to the end. Jobs that can never fit their pool are excluded up front and listed in
    `cannot_fit` (job indices)."""

    def __init__(
        self, workload: Workload, capacity: Capacity, policy: str | int = "FCFS", backfill: str | int = "easy",
        fit_first: bool = False,
    ) -> None:
        self.workload = workload
        self.capacity = capacity
        need = np.stack([workload.cores, workload.gpus, workload.mem], axis=1).astype(np.float64)
        cap = capacity.matrix
        pool = capacity.pool_index(workload.partitions)[workload.partition]
        fits = (pool >= 0) & np.all(need <= cap[pool], axis=1)  # (pool -1 reads the last row: masked)
        self.cannot_fit = np.flatnonzero(~fits)
        pool = np.where(fits, pool, 0).astype(np.int64)
        submit = np.ascontiguousarray(workload.submit, dtype=np.float64)
        req = np.ascontiguousarray(workload.req_time, dtype=np.float64)
        self.jobs = Jobs(
            submit=submit, run=np.ascontiguousarray(workload.run, dtype=np.float64), req=req,
            need=np.ascontiguousarray(need), pool=pool,
            static_key=static_scores(submit, req, np.ascontiguousarray(need[:, 0])),
        )
        self.pools, self.state = build_state(self.jobs, cap, ~fits)
        self.policy = policy_code(policy)
        self.fit_first = bool(fit_first)
        self.backfill = NONE
        self._set_backfill(backfill_code(backfill))
        self._util_t = float(self.state.clock[NOW])

    # -- driving ---------------------------------------------------------------------------

    def _set_backfill(self, code: int) -> None:
        if code == self.backfill:
            return
        if code == CONSERVATIVE:
            rebuild_profile(self.jobs, self.pools, self.state, self.now, self.policy, self.fit_first)
        elif self.backfill == CONSERVATIVE:
            self.state.next_res[:] = INF  # waiting jobs drop their reservations
        self.backfill = code

    def advance(
        self, until_t: float, policy: str | int | None = None, backfill: str | int | None = None,
        fit_first: bool | None = None,
    ) -> int:
        """Handle every event at or before `until_t` under the given rule, backfilling mode and
        fit-first flag (default: those in force); the clock then stands at `until_t`.

        `fit_first`: at each scheduling step, the jobs that fit the resources free when the step
        begins go first (then the rule's order) -- the U objective's "keep the free resources
        filled". Returns the number of events handled."""
        if fit_first is not None:
            self.fit_first = bool(fit_first)
        if policy is not None and policy_code(policy) != self.policy:
            self.policy = policy_code(policy)
            reorder_queues(self.jobs, self.pools, self.state, self.policy)
        if backfill is not None:
            self._set_backfill(backfill_code(backfill))
        return int(run_until(self.jobs, self.pools, self.state, float(until_t), self.policy, self.backfill,
                             self.fit_first))

    def run(self) -> int:
        """Run to the end under the rule and mode in force."""
        return self.advance(INF)

    # -- what a gym env reads at an epoch boundary -------------------------------------------

    @property
    def now(self) -> float:
        return float(self.state.clock[NOW])

    @property
    def done(self) -> bool:
        """True when every job has been submitted and completed."""
        st = self.state
        return bool(st.ctr[NEXT_SUB] >= len(self.jobs.submit) and st.ctr[HEAP_N] == 0 and not st.qlen.any())

    def next_event_time(self) -> float:
        """Time of the next submission or completion (inf when none); pending conservative
        reservation starts are not included."""
        st = self.state
        status = st.status
        ns = int(st.ctr[NEXT_SUB])
        while ns < len(status) and status[ns] == EXCLUDED:
            ns += 1
        t_sub = float(self.jobs.submit[ns]) if ns < len(status) else INF
        t_comp = float(st.heap_t[0]) if st.ctr[HEAP_N] > 0 else INF
        return min(t_sub, t_comp)

    def queued(self) -> np.ndarray:
        """Indices of the waiting jobs, in job order."""
        return np.flatnonzero(self.state.status == QUEUED)

    def running(self) -> np.ndarray:
        """Indices of the running jobs, in job order."""
        return np.flatnonzero(self.state.status == RUNNING)

    def queue_view(self) -> dict[str, np.ndarray]:
        """Waiting jobs' submit time, current wait, requested time, cores, GPUs, memory, pool."""
        q = self.queued()
        j = self.jobs
        return {"job": q, "submit": j.submit[q], "wait": self.now - j.submit[q], "req": j.req[q],
                "cores": j.need[q, 0], "gpus": j.need[q, 1], "mem": j.need[q, 2], "pool": j.pool[q]}

    def running_view(self) -> dict[str, np.ndarray]:
        """Running jobs' start, planned end (start + requested time), cores, GPUs, memory, pool."""
        r = self.running()
        j = self.jobs
        return {"job": r, "start": self.state.start[r], "planned_end": self.state.start[r] + j.req[r],
                "cores": j.need[r, 0], "gpus": j.need[r, 1], "mem": j.need[r, 2], "pool": j.pool[r]}

    def used(self) -> np.ndarray:
        """(pools, 3) cores, GPUs, memory held by running jobs now."""
        return self.state.busy.copy()

    def planned_used(self) -> np.ndarray:
        """(pools, 3) what the scheduler counts as held now (running jobs planned past now)."""
        release_all_due(self.jobs, self.pools, self.state, self.now)
        return self.state.used.copy()

    def take_utilisation(self) -> tuple[np.ndarray, float]:
        """Resource-seconds used per pool and resource since the last call, and the seconds that
        covers; divide by capacity x seconds for the utilisation of the slice. Resets the integral."""
        integral = self.state.util.copy()
        self.state.util[:] = 0.0
        seconds = self.now - self._util_t
        self._util_t = self.now
        return integral, seconds

    # -- outcome -------------------------------------------------------------------------------

    @property
    def start(self) -> np.ndarray:
        """Start time of every job so far (NaN: not started); a live view of the state."""
        return self.state.start

    @property
    def end(self) -> np.ndarray:
        """End time of every job so far (NaN: not ended); a live view of the state."""
        return self.state.end
