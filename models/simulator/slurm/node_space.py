"""The backfill pass's map of reserved nodes over time (Slurm's `node_space` in backfill.c; issue 51).

A linked list of time slots, each with the nodes still available in it. A pass starts with one slot
from now (rounded down to `bf_resolution`) to the end of `bf_window`, every node available; each job
the pass cannot start now takes its chosen nodes, whole, out of the slots its reservation covers, and
a job the pass starts on whole nodes (an exclusive partition) does the same until its planned end.
Later jobs in the pass may use only nodes available in every slot their run would touch.

A slot's nodes are bit words (`avail[slot, i >> 6]`, bit `i & 63` for node i; (nodes + 63) // 64 words
a slot; `bits`), so a slot is narrowed, copied and compared 64 nodes at a time.
"""

from __future__ import annotations

import numpy as np

from metapilot.models.simulator.jit import jit_nrt
from metapilot.models.simulator.slurm.bits import ALL


@jit_nrt
def space_init(begin, end, nxt, avail, t0, t_end):
    """One slot [t0, t_end) with every node available; returns the slot count."""
    begin[0] = t0
    end[0] = t_end
    nxt[0] = 0
    avail[0, :] = ALL
    return 1


@jit_nrt
def space_allowed(begin, end, nxt, avail, allowed, start, finish, bits, first):
    """`bits` = the allowed nodes (`allowed`) available in every slot overlapping [start, finish] (Slurm
    tests `begin_time <= end_time`: a slot starting exactly at the job's end counts). Returns (the end of
    the first slot ending after `start` whose successor frees a node it holds, Slurm's `later_start`:
    where to try again, else 0; the first slot ending after `start`). The walk begins at slot `first`
    (0: the map's start): a job's later tries start no earlier than its first, and the map does not
    change between them, so each try begins where the one before found the first slot that counts."""
    n_words = bits.shape[0]
    bits[:] = allowed
    later = 0.0
    found = -1
    j = first
    while True:
        k = nxt[j]
        if end[j] > start:
            if found < 0:
                found = j
            if k != 0 and later == 0.0:
                for w in range(n_words):
                    if allowed[w] & avail[k, w] & ~(bits[w] & avail[j, w]) != 0:
                        later = end[j]
                        break
            if begin[j] <= finish:
                for w in range(n_words):
                    bits[w] &= avail[j, w]
            else:
                break
        j = k
        if j == 0:
            break
    return later, (found if found >= 0 else first)


@jit_nrt
def space_overlaps(begin, end, nxt, avail, nodes, n_nodes, start, finish):
    """Whether the nodes chosen for a job would use a node reserved in [start, finish)."""
    j = 0
    while True:
        if end[j] > start and begin[j] < finish:
            for a in range(n_nodes):
                i = nodes[a]
                if (avail[j, i >> 6] >> np.uint64(i & 63)) & np.uint64(1) == 0:
                    return True
        j = nxt[j]
        if j == 0:
            return False


@jit_nrt
def _split(begin, end, nxt, avail, n_slots, j, t):
    """Cut slot j at t: a new slot [t, its end) with its nodes follows it; returns the new slot count."""
    i = n_slots
    begin[i] = t
    end[i] = end[j]
    end[j] = t
    avail[i, :] = avail[j, :]
    nxt[i] = nxt[j]
    nxt[j] = i
    return n_slots + 1


@jit_nrt
def space_reserve(begin, end, nxt, avail, n_slots, nodes, n_nodes, start, finish, resolution):
    """Take `nodes` out of [start, finish) (Slurm's `_add_reservation`); returns the new slot count."""
    start = max(start, begin[0])
    if finish < start + resolution:
        finish = start + resolution
    placed = False
    j = 0
    one_before = 0
    while True:
        if end[j] > start:
            n_slots = _split(begin, end, nxt, avail, n_slots, j, start)
            placed = True
            break
        if end[j] == start:
            placed = True
            break
        one_before = j
        j = nxt[j]
        if j == 0:
            break
    one_after = -1
    while placed:
        j = nxt[j]
        if j == 0:
            break
        if finish < end[j]:
            n_slots = _split(begin, end, nxt, avail, n_slots, j, finish)
        for a in range(n_nodes):
            x = nodes[a]
            avail[j, x >> 6] &= ~(np.uint64(1) << np.uint64(x & 63))
        if finish == end[j]:
            if nxt[j] != 0:
                one_after = nxt[j]
            break
    # drop one record whose nodes equal its successor's (as Slurm does, to keep the map short)
    i = one_before
    while i != one_after:
        j = nxt[i]
        if j == 0:
            break
        if not np.array_equal(avail[i], avail[j]):
            i = j
            continue
        end[i] = end[j]
        nxt[i] = nxt[j]
        break
    return n_slots
