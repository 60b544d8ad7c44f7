"""The will-run answers the backfill keeps while nothing starts or ends (issue 51 item 5): every answer,
kept or not, is the one `will_run` gives in the same state, at any later instant; and the running jobs'
CPUs `will_run` keeps given back from one test to the next of a state (`released_state`) give the answer a
test from scratch gives, through starts and ends in between."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from metapilot.models.simulator.slurm.bits import node_bits
from metapilot.models.simulator.slurm.nodes import note_words, released_change, released_state, will_run
from metapilot.models.simulator.slurm.will_run_cache import GEN, cache_arrays, forget, will_run_kept


def _cluster(rng: np.random.Generator, n_nodes: int, cpn: int, n_running: int):
    """Running jobs on nodes of `cpn` CPUs, in the order of their planned ends, as the kernel keeps them."""
    node_cpus = np.full(n_nodes, cpn, np.int64)
    free = node_cpus.copy()
    ends = np.sort(rng.integers(10, 400, n_running)).astype(np.float64)
    alloc_ptr = np.zeros(n_running, np.int64)
    alloc_cnt = np.zeros(n_running, np.int64)
    alloc_node, alloc_cpus = [], []
    for j in range(n_running):
        alloc_ptr[j] = len(alloc_node)
        for i in rng.permutation(n_nodes)[: rng.integers(1, 4)]:
            c = min(int(free[i]), int(rng.integers(1, cpn + 1)))
            if c > 0:
                free[i] -= c
                alloc_node.append(i)
                alloc_cpus.append(c)
        alloc_cnt[j] = len(alloc_node) - alloc_ptr[j]
    pool = max(len(alloc_node), 1)
    anode = np.array(alloc_node + [0] * (pool - len(alloc_node)), np.int64)
    acpus = np.array(alloc_cpus + [0] * (pool - len(alloc_cpus)), np.int64)
    return (node_cpus, free, np.arange(n_running, dtype=np.int64), ends, alloc_ptr, alloc_cnt, anode, acpus,
            _words(alloc_ptr, alloc_cnt, anode, acpus))


def _words(alloc_ptr, alloc_cnt, anode, acpus):
    """The running jobs' nodes as bit words and the CPUs each holds, as the kernel notes them at a start."""
    n = alloc_ptr.shape[0]
    ptr, cnt, held = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    idx, bits = np.zeros(max(anode.shape[0], 1), np.int64), np.zeros(max(anode.shape[0], 1), np.uint64)
    top = 0
    for j in range(n):
        s = slice(alloc_ptr[j], alloc_ptr[j] + alloc_cnt[j])
        top = note_words(j, int(alloc_cnt[j]), anode[s].copy(), acpus[s].copy(), ptr, cnt, idx, bits, held, top)
    return ptr, cnt, idx, bits, held


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_nodes=st.sampled_from([3, 64, 70, 130]), cpn=st.sampled_from([1, 4, 16]))
def test_a_kept_answer_is_the_one_will_run_gives(seed: int, n_nodes: int, cpn: int) -> None:
    rng = np.random.default_rng(seed)
    node_cpus, free, running, ends, ptr, cnt, anode, acpus, words = _cluster(rng, n_nodes, cpn,
                                                                             int(rng.integers(0, 12)))
    n_words = (n_nodes + 63) // 64
    weight = rng.integers(1, 3, n_nodes).astype(np.int64)  # slurm.conf's node Weight
    live = np.zeros(n_words, np.uint64)
    node_bits(free > 0, live)
    kept_rel = released_state(free, live)  # kept from test to test, as the kernel keeps it
    meta, keys, starts, bits, pool = cache_arrays(n_words, n_nodes)
    shapes = [(int(rng.integers(1, 2 * cpn * 3 + 2)), int(rng.integers(0, 3)), bool(rng.random() < 0.3))
              for _ in range(4)]
    sets = [rng.random(n_nodes) < p for p in (1.0, 0.6, 0.3)]
    now = 0.0
    for _ in range(60):
        now += float(rng.integers(0, 20))
        if rng.random() < 0.1:
            forget(meta)
        if rng.random() < 0.1:  # a job starts or ends on a node: the kernel tells the kept state and forgets
            i = int(rng.integers(n_nodes))
            c = -int(rng.integers(1, free[i] + 1)) if free[i] > 0 and rng.random() < 0.5 else int(rng.integers(1, 3))
            free[i] += c
            node_bits(free > 0, live)
            released_change(kept_rel, i, c)
            forget(meta)
        cpus, min_nodes, excl = shapes[rng.integers(len(shapes))]
        allowed = np.zeros(n_words, np.uint64)
        node_bits(sets[rng.integers(len(sets))], allowed)
        want_node, want_cpus = np.zeros(n_nodes, np.int64), np.zeros(n_nodes, np.int64)
        want = will_run(cpus, min_nodes, excl, allowed, free, live, node_cpus, weight, running, running.shape[0], ends,
                        ptr, cnt, anode, acpus, *words, now, want_node, want_cpus, released_state(free, live), 0)  # anew
        free_before = free.copy()
        got_node, got_cpus = np.zeros(n_nodes, np.int64), np.zeros(n_nodes, np.int64)
        got = will_run_kept(meta, keys, starts, bits, pool, cpus, min_nodes, excl, allowed, free, live, node_cpus,
                            weight, running, running.shape[0], ends, ptr, cnt, anode, acpus, *words, now, got_node,
                            got_cpus, kept_rel)
        assert got == want
        k = max(want[1], 0)
        assert list(got_node[:k]) == list(want_node[:k]) and list(got_cpus[:k]) == list(want_cpus[:k])
        assert (free == free_before).all()


def test_forget_drops_what_was_kept() -> None:
    """An answer kept before a job started is not read after it: the same question is asked of will_run."""
    node_cpus = np.array([4], np.int64)
    free = np.array([4], np.int64)
    live = np.zeros(1, np.uint64)
    node_bits(free > 0, live)
    allowed = live.copy()
    meta, keys, starts, bits, pool = cache_arrays(1, 1)
    out_n, out_c = np.zeros(1, np.int64), np.zeros(1, np.int64)
    empty = np.zeros(1, np.int64)
    rel = released_state(free, live)

    def ask(now: float):
        return will_run_kept(meta, keys, starts, bits, pool, 3, 0, False, allowed, free, live, node_cpus, empty + 1,
                             empty, 0,
                             np.zeros(1), empty, empty, empty, empty, empty, empty, empty, np.zeros(1, np.uint64),
                             empty, now, out_n, out_c, rel)

    assert ask(5.0) == (5.0, 1)
    assert ask(9.0) == (9.0, 1)  # kept: a start now is now at any later instant
    free[0] = 1  # a job took 3 CPUs ...
    node_bits(free > 0, live)
    released_change(rel, 0, -3)
    forget(meta)  # ... and the kernel says so
    assert meta[GEN] == 1
    assert ask(9.0) == (np.inf, -1)  # nothing running ends: it never fits
