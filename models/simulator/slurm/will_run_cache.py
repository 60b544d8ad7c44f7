"""Will-run answers kept while nothing starts or ends (issue 51 item 5).

`nodes.will_run` reads the job's shape (CPUs, least nodes, whole nodes or not), the nodes it may use, and
what runs where (free CPUs, the running jobs, their planned ends); nothing else. Until a job starts or ends,
the same question has the same answer: the nodes chosen, and a start `max(last, now)` where `last` does not
depend on `now`, so `max(kept start, now)` is the answer at any later instant of the same state. The
backfill passes ask the same question again and again: the jobs of one shape before reservations tell
them apart, a job's later tries on the same nodes, and the whole queue again in a pass after a submission
or a priority recalculation, where nothing ran differently. The kernel calls `forget` at every start and
every release; an answer is kept under the number `forget` last gave (`meta[GEN]`) and read only under it.

The table is direct-mapped (one answer a slot, a newer one overwrites): a missed answer is recomputed,
never wrong. The nodes chosen go to a pool that `forget` empties; when it is full it is emptied too.
"""

from __future__ import annotations

import numpy as np

from metapilot.models.simulator.jit import jit_nrt
from metapilot.models.simulator.slurm.nodes import will_run

SLOTS = 4096  # answers kept (a power of two)
GEN, TOP = 0, 1  # meta: the state's number, the pool's first free place
K_GEN, K_CPUS, K_MIN, K_EXCL, K_NODES, K_PTR = range(6)  # keys[slot]: the answer's state, shape, where its nodes are

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@jit_nrt
def cache_arrays(n_words, n_nodes):
    """(meta, keys, starts, bits, pool): an empty table for sets of nodes of `n_words` bit words."""
    keys = np.zeros((SLOTS, 6), np.int64)
    keys[:, K_GEN] = -1
    return (np.zeros(2, np.int64), keys, np.zeros(SLOTS), np.zeros((SLOTS, n_words), np.uint64),
            np.zeros((2, 16 * n_nodes + 4096), np.int64))


@jit_nrt
def forget(meta):
    """A job started or ended: every kept answer is stale."""
    meta[GEN] += 1
    meta[TOP] = 0


@jit_nrt
def _mix(h, x):
    """splitmix64's finaliser over h ^ x: every bit of x moves the slot."""
    z = h ^ x
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@jit_nrt
def _slot(cpus, min_nodes, exclusive, allowed):
    h = _mix(np.uint64(cpus), np.uint64(min_nodes) << np.uint64(1) | np.uint64(1 if exclusive else 0))
    for w in range(allowed.shape[0]):
        h = _mix(h, allowed[w])
    return np.int64(h & np.uint64(SLOTS - 1))


@jit_nrt
def will_run_kept(meta, keys, starts, bits, pool, cpus, min_nodes, exclusive, allowed, free, live, node_cpus, weight,
                  running, n_running, planned_end, alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, word_ptr, word_cnt,
                  word_idx, word_bits, held, now, out_node, out_cpus, rel):
    """`will_run`'s (start, nodes chosen), the nodes in `out_node`/`out_cpus`: kept, or computed and kept."""
    s = _slot(cpus, min_nodes, exclusive, allowed)
    gen = meta[GEN]
    if (keys[s, K_GEN] == gen and keys[s, K_CPUS] == cpus and keys[s, K_MIN] == min_nodes
            and keys[s, K_EXCL] == (1 if exclusive else 0)):
        same = True
        for w in range(allowed.shape[0]):
            if bits[s, w] != allowed[w]:
                same = False
                break
        if same:
            k = keys[s, K_NODES]
            p = keys[s, K_PTR]
            for a in range(k):
                out_node[a] = pool[0, p + a]
                out_cpus[a] = pool[1, p + a]
            return max(starts[s], now), k
    start, k = will_run(cpus, min_nodes, exclusive, allowed, free, live, node_cpus, weight, running, n_running,
                        planned_end, alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, word_ptr, word_cnt, word_idx,
                        word_bits, held, now, out_node, out_cpus, rel, gen)
    n = max(k, 0)
    if meta[TOP] + n > pool.shape[1]:
        forget(meta)  # the pool is full: start it again (the answers in it are dropped with it)
        gen = meta[GEN]
        if n > pool.shape[1]:
            return start, k
    p = meta[TOP]
    for a in range(n):
        pool[0, p + a] = out_node[a]
        pool[1, p + a] = out_cpus[a]
    meta[TOP] = p + n
    keys[s, K_GEN] = gen
    keys[s, K_CPUS] = cpus
    keys[s, K_MIN] = min_nodes
    keys[s, K_EXCL] = 1 if exclusive else 0
    keys[s, K_NODES] = k
    keys[s, K_PTR] = p
    starts[s] = start
    bits[s, :] = allowed
    return start, k
