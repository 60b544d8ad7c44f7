"""Each pool's waiting jobs in the order of the active priority rule (SPEC §6: ties by job index).

Under a static rule the pool's segment of `State.queue` is a binary heap on (score, job index),
so the first job in queue order is at the top; under a dynamic one (WFP3, UNICEF) it is
unordered and the first job is found by a scan of scores computed at the step's time. `qpos`
gives each queued job's position either way, so no step re-sorts the whole queue.
"""

from __future__ import annotations

from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.policies import is_dynamic, score
from metapilot.models.simulator.sorting import sort_pairs
from metapilot.models.simulator.state import fits


@jit_inline
def priority(J, j, policy, now):
    """Job j's score under the rule at time now (lower first)."""
    if is_dynamic(policy):
        return score(policy, J.submit[j], J.req[j], J.need[j, 0], now)
    return J.static_key[j, policy]


@jit
def sort_by_priority(J, jobs, keys, k, policy, now):
    """Sort jobs[:k] in place into queue order: priority, then job index."""
    for i in range(k):
        keys[i] = priority(J, jobs[i], policy, now)
    sort_pairs(keys, jobs, k)


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
def q_push(J, P, st, p, j, policy):
    """Queue job j in pool p."""
    pos = st.qlen[p]
    st.qlen[p] = pos + 1
    _q_put(P, st, p, pos, j)
    if not is_dynamic(policy):
        _q_sift_up(J, P, st, p, pos, policy)


@jit
def q_remove(J, P, st, p, j, policy):
    """Take queued job j out of pool p's queue."""
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
def q_best(J, P, st, p, policy, now, fit_first, s0, s1, s2):
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
        miss = fit_first and not fits(J.need, j, s0, s1, s2)
        if best >= 0 and miss and not best_miss:
            continue
        key = priority(J, j, policy, now)
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
def q_ordered(J, P, st, p, policy, now, fit_first, s0, s1, s2):
    """Copy the pool's queue into scratch_j in priority order (see `q_best`); return its length."""
    k = st.qlen[p]
    off = P.off[p]
    m = 0  # jobs that fit (s0, s1, s2) are moved to the front when fit_first
    for i in range(k):
        j = st.queue[off + i]
        st.scratch_j[i] = j
        if fit_first and fits(J.need, j, s0, s1, s2):
            st.scratch_j[i] = st.scratch_j[m]
            st.scratch_j[m] = j
            m += 1
    sort_by_priority(J, st.scratch_j, st.scratch_s, m, policy, now)
    sort_by_priority(J, st.scratch_j[m:], st.scratch_s[m:], k - m, policy, now)
    return k
