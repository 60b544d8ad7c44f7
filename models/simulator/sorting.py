"""In-place sorts of (key, job) pairs, for the scheduling steps that must not allocate."""

from __future__ import annotations

from metapilot.models.simulator.jit import jit, jit_inline


@jit_inline
def _pair_less(keys, jobs, a, b):
    return keys[a] < keys[b] or (keys[a] == keys[b] and jobs[a] < jobs[b])


@jit_inline
def _pair_swap(keys, jobs, a, b):
    keys[a], keys[b] = keys[b], keys[a]
    jobs[a], jobs[b] = jobs[b], jobs[a]


@jit
def sort_pairs(keys, jobs, k):
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
