"""Where a job's CPUs go (select/cons_tres with CR_Core, as the replay models it; issue 51).

A job asks for `cpus` CPUs on `min_nodes` nodes (1: exactly one, `-N 1`; 0: any number). `pick` chooses
them as cons_tres's `_eval_nodes` does: from sets of consecutive usable nodes of one node weight, one of
the lowest weight, the tightest of those that holds the job (or the largest while none does), in it the
tightest single node for a job that wants one, else the set's nodes in index order; on a partition with
`OverSubscribe=EXCLUSIVE` only idle nodes, each taken whole. It writes the choice (node, CPUs) into
`out_node`/`out_cpus` and returns how many nodes, or -1 when the job does not fit the free CPUs of the
allowed nodes.

`will_run` is Slurm's will-run test: when the job could start on the allowed nodes if the running jobs
ended at their planned ends (start + time limit), taken away in that order (`running` is kept so) in
groups of close ends as cons_tres does: the job is planned at the end of the last job of its group, up
to a minute after the first end that lets it fit (what leaves room to backfill short jobs).
"""

from __future__ import annotations

import numpy as np

from metapilot.models.simulator.jit import jit_nrt
from metapilot.models.simulator.slurm.bits import has, lowest, put

_ONE = np.uint64(1)

WILL_RUN_WINDOW = 30.0  # s: cons_tres's first will-run window (`time_window = 30`), doubled after each group


@jit_nrt
def pick(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, weight, out_node, out_cpus):
    """select/cons_tres's `_eval_nodes` (Slurm 22.05, no topology): the usable nodes (allowed, with free
    CPUs; idle ones for a whole-node job) form sets of consecutive indices, each of one `weight`
    (slurm.conf's node Weight; an empty array where every node weighs the same): the node table holds a
    node in no partition between two neighbours of different weight (`replay.node_table`), so the walks
    need no look-up per node (12% of CEA-Curie's replay); the set chosen has the lowest weight, and of
    those of that weight it is the tightest that holds the rest of the job (fewest CPUs, the first on
    ties), or, while none does, the one with the most CPUs; in it, a job still wanting one node takes the
    node that fits it most tightly, otherwise its nodes in index order, each giving what the job still
    needs (leaving a CPU for each node it still needs; a whole-node job takes every CPU); then the next set. `min_nodes`
    1 is exactly one node (`-N 1`), 0 any number. `allowed`: the nodes the job may use; `live`: the
    nodes with free CPUs, both as bit words: only nodes in both can hold a job, so only those are
    walked, in index order."""
    k = _pick_first_set(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, weight, out_node, out_cpus)
    if k != -2:
        return k
    return _pick_sets(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, weight, out_node, out_cpus)


@jit_nrt
def _chosen_over(enough, set_cpus, set_weight, best, best_enough, best_cpus, best_weight):
    """Whether a set is chosen over the best so far (`best` < 0: none yet), as `_eval_nodes` compares them:
    a lower weight; at the same weight, the first set that holds the job, then a tighter one that holds
    it; while none holds it, a larger one."""
    if best < 0 or set_weight < best_weight:
        return True
    return set_weight == best_weight and ((enough and not best_enough) or (enough and set_cpus < best_cpus)
                                          or (not enough and set_cpus > best_cpus))


@jit_nrt
def _take_from_set(first, last, rem_cpus, rem_nodes, max_nodes, exclusive, free, out_node, out_cpus, k):
    """The job's nodes from the set of consecutive nodes `first`..`last`: a job still wanting one node takes
    the node that fits it most tightly, if one does, else the nodes in index order, each giving what the job
    still needs less a CPU for each other node it still needs (a whole-node job: every CPU). Returns
    (k, rem_cpus, rem_nodes, max_nodes) after them."""
    only = -1
    if rem_nodes <= 1:
        for i in range(first, last + 1):
            if free[i] >= rem_cpus and (only < 0 or free[i] < free[only]):
                only = i
                if free[i] == rem_cpus:
                    break
    for i in range(first, last + 1):
        if (rem_nodes <= 0 and rem_cpus <= 0) or max_nodes == 0:
            break
        if only >= 0 and i != only:
            continue
        a = free[i]
        if max_nodes == 1 and a < rem_cpus:
            continue
        if not exclusive:
            need = rem_cpus - max(rem_nodes - 1, 0)
            if a > need:
                a = max(need, 1)
        out_node[k] = i
        out_cpus[k] = a
        k += 1
        rem_cpus -= a
        rem_nodes -= 1
        max_nodes -= 1
    return k, rem_cpus, rem_nodes, max_nodes


@jit_nrt
def _pick_first_set(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, weight, out_node, out_cpus):
    """`pick` where the first set chosen holds the job (nearly every call), without building the table of
    sets: one walk finds that set as `_pick_sets` would; -1: no usable node; -2: the set does not hold
    the job, so `_pick_sets` goes on to the next sets."""
    rem_nodes = max(min_nodes, 1)
    weighed = weight.shape[0] > 0
    best_first, best_last, best_cpus, best_enough, best_weight = -1, -1, 0, False, 0
    first, last, set_cpus, set_nodes = -1, -2, 0, 0
    for w in range(allowed.shape[0] + 1):  # one word past the end closes the last set
        x = allowed[w] & live[w] if w < allowed.shape[0] else _ONE
        while x != 0:
            i = (w << 6) + lowest(x) if w < allowed.shape[0] else -5
            x &= x - _ONE
            if i >= 0 and exclusive and free[i] != node_cpus[i]:
                continue
            if i != last + 1:  # the set so far ends: is it the one?
                if set_nodes > 0:
                    enough = set_cpus >= cpus and set_nodes >= rem_nodes
                    set_weight = weight[first] if weighed else 0  # a set's weight: its first node's
                    if _chosen_over(enough, set_cpus, set_weight, best_first, best_enough, best_cpus, best_weight):
                        best_first, best_last, best_cpus, best_enough = first, last, set_cpus, enough
                        best_weight = set_weight
                first, set_cpus, set_nodes = i, 0, 0
            if i < 0:
                break
            last = i
            set_cpus += free[i]
            set_nodes += 1
    if best_first < 0:
        return -1
    if not best_enough:
        return -2
    max_nodes = 1 if min_nodes == 1 else best_last - best_first + 1
    k, rem_cpus, rem_nodes, _ = _take_from_set(best_first, best_last, cpus, rem_nodes, max_nodes, exclusive, free,
                                               out_node, out_cpus, 0)
    return k if rem_nodes <= 0 and rem_cpus <= 0 else -2


@jit_nrt
def _pick_sets(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, weight, out_node, out_cpus):
    """`pick` in full: the table of sets (each a run of consecutive node indices), taken one after another
    until the job has its CPUs and nodes."""
    n_words = allowed.shape[0]
    n = 0
    for w in range(n_words):
        x = allowed[w] & live[w]
        while x != 0:
            n += 1
            x &= x - _ONE
    if n == 0:
        return -1
    set_first = np.empty(n, np.int64)  # sets of consecutive nodes: first and last node index
    set_last = np.empty(n, np.int64)
    set_cpus = np.zeros(n, np.int64)
    set_nodes = np.zeros(n, np.int64)
    weighed = weight.shape[0] > 0
    m = -1
    for w in range(n_words):
        x = allowed[w] & live[w]
        while x != 0:
            i = (w << 6) + lowest(x)
            x &= x - _ONE
            if exclusive and free[i] != node_cpus[i]:
                continue  # a whole-node job takes only idle nodes: a busy one breaks the set
            if m < 0 or i != set_last[m] + 1:
                m += 1
                set_first[m] = i
            set_last[m] = i
            set_cpus[m] += free[i]
            set_nodes[m] += 1
    m += 1
    rem_cpus = cpus
    rem_nodes = max(min_nodes, 1)
    max_nodes = 1 if min_nodes == 1 else n
    k = 0
    while max_nodes > 0:
        best = -1
        best_cpus = 0
        best_enough = False
        best_weight = 0
        for s in range(m):
            if set_nodes[s] == 0:
                continue
            enough = set_cpus[s] >= rem_cpus and set_nodes[s] >= rem_nodes
            set_weight = weight[set_first[s]] if weighed else 0
            if _chosen_over(enough, set_cpus[s], set_weight, best, best_enough, best_cpus, best_weight):
                best = s
                best_cpus = set_cpus[s]
                best_enough = enough
                best_weight = set_weight
        if best < 0:
            break
        k, rem_cpus, rem_nodes, max_nodes = _take_from_set(set_first[best], set_last[best], rem_cpus, rem_nodes,
                                                           max_nodes, exclusive, free, out_node, out_cpus, k)
        if rem_nodes <= 0 and rem_cpus <= 0:
            return k
        set_cpus[best] = 0
        set_nodes[best] = 0
    return -1


ALL_CPUS = 1 << 62  # `free_on`'s `enough` for a count of every free CPU


@jit_nrt
def free_on(allowed, live, free, enough):
    """The free CPUs on the allowed nodes (bit words; `live`: the nodes with free CPUs), counted only until
    they reach `enough` (whether a job's CPUs fit needs no more)."""
    total = 0
    for w in range(allowed.shape[0]):
        x = allowed[w] & live[w]
        while x != 0:
            total += free[(w << 6) + lowest(x)]
            if total >= enough:
                return total
            x &= x - _ONE
    return total


@jit_nrt
def released_state(free, live):
    """The running jobs given back, kept between will-run tests of one state (`will_run`): (free CPUs with
    the first `cur[0]` running jobs' CPUs given back, the nodes with free CPUs then, cur = [jobs given back,
    the state's number, nodes changed], the nodes changed, whether each is)."""
    return (free.copy(), live.copy(), np.zeros(3, np.int64), np.zeros(free.shape[0], np.int64),
            np.zeros(free.shape[0], np.bool_))


@jit_nrt
def released_change(rel, i, c):
    """A start (c < 0) or an end (c > 0) changed node i's free CPUs: the same change to the released state."""
    rfree, rlive = rel[0], rel[1]
    rfree[i] += c
    put(rlive, i, rfree[i] > 0)


@jit_nrt
def _give_back_to(rel, r, gen, free, running, alloc_ptr, alloc_cnt, alloc_node, alloc_cpus):
    """The released state with exactly the first r running jobs' CPUs given back (of state `gen`)."""
    rfree, rlive, cur, dirty, mark = rel
    if cur[1] != gen:  # another state: back to the free CPUs as they are
        for k in range(cur[2]):
            i = dirty[k]
            rfree[i] = free[i]
            put(rlive, i, free[i] > 0)
            mark[i] = False
        cur[0] = 0
        cur[1] = gen
        cur[2] = 0
    q = cur[0]
    while q < r:
        j = running[q]
        q += 1
        for a in range(alloc_ptr[j], alloc_ptr[j] + alloc_cnt[j]):
            i = alloc_node[a]
            rfree[i] += alloc_cpus[a]
            put(rlive, i, rfree[i] > 0)
            if not mark[i]:
                mark[i] = True
                dirty[cur[2]] = i
                cur[2] += 1
    while q > r:
        q -= 1
        j = running[q]
        for a in range(alloc_ptr[j], alloc_ptr[j] + alloc_cnt[j]):
            i = alloc_node[a]
            rfree[i] -= alloc_cpus[a]
            put(rlive, i, rfree[i] > 0)
    cur[0] = q


@jit_nrt
def note_words(j, k, nodes, cpus, word_ptr, word_cnt, word_idx, word_bits, held, top):
    """Keep job j's nodes (`nodes[:k]`, with `cpus[:k]` CPUs) as the bit words that hold them (index, bits)
    from `top` in the pool, and the CPUs it holds: the will-run test asks of each running job whether it
    holds any allowed node, or only allowed nodes, a word at a time. Returns the pool's new top."""
    word_ptr[j] = top
    n = 0
    c = 0
    for a in range(k):
        w = nodes[a] >> 6
        bit = _ONE << np.uint64(nodes[a] & 63)
        c += cpus[a]
        found = False
        for e in range(top, top + n):
            if word_idx[e] == w:
                word_bits[e] |= bit
                found = True
                break
        if not found:
            word_idx[top + n] = w
            word_bits[top + n] = bit
            n += 1
    word_cnt[j] = n
    held[j] = c
    return top + n


@jit_nrt
def will_run(cpus, min_nodes, exclusive, allowed, free, live, node_cpus, weight, running, n_running, planned_end,
             alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, word_ptr, word_cnt, word_idx, word_bits, held, now, out_node,
             out_cpus, rel, gen):
    """(start, nodes chosen) for the job on the allowed nodes (bit words; `live`: the nodes with free
    CPUs): now if it fits the free CPUs; else, as select/cons_tres's will-run test does
    (`_will_run_test` in Slurm 22.05), the running jobs on the allowed nodes are taken away in groups by
    planned end: the first group reaches `WILL_RUN_WINDOW` s past the first planned end's next
    `WILL_RUN_WINDOW`-s barrier (on the replay's clock; Slurm's is epoch seconds), each later group a
    window twice as long; the job is planned at the end of the last job of the first group after which
    it fits. (inf, -1) if it never fits them. The CPUs given back are kept in `rel` (`released_state`)
    for the next test of the same state `gen`, which gives back or takes again only the difference."""
    total = free_on(allowed, live, free, ALL_CPUS)  # below the job's CPUs, no choice of nodes can fit it
    if total >= cpus:
        k = pick(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, weight, out_node, out_cpus)
        if k >= 0:
            return now, k
    start = np.inf
    chosen = -1
    window = WILL_RUN_WINDOW
    barrier = -1.0  # the first planned end's next barrier: a group reaches `window` past it
    r = 0
    while r < n_running:  # `running` is in the order of the planned ends (kernel._run_insert)
        last = -1.0  # the planned end of the last job this group took away
        while r < n_running:
            j = running[r]
            r += 1
            touched = False  # on an allowed node
            inside = True  # on allowed nodes only
            for e in range(word_ptr[j], word_ptr[j] + word_cnt[j]):
                a = allowed[word_idx[e]]
                if word_bits[e] & a != 0:
                    touched = True
                if word_bits[e] & ~a != 0:
                    inside = False
            if not touched:  # Slurm skips a job on none of the allowed nodes
                continue
            if inside:
                total += held[j]
            else:
                for a in range(alloc_ptr[j], alloc_ptr[j] + alloc_cnt[j]):
                    if has(allowed, alloc_node[a]):
                        total += alloc_cpus[a]
            if barrier < 0:
                barrier = planned_end[j] + (WILL_RUN_WINDOW - planned_end[j] % WILL_RUN_WINDOW)
            last = planned_end[j]
            if r < n_running and planned_end[running[r]] > barrier + window:
                break
        if last < 0:
            break
        if total >= cpus:
            _give_back_to(rel, r, gen, free, running, alloc_ptr, alloc_cnt, alloc_node, alloc_cpus)
            k = pick(cpus, min_nodes, exclusive, allowed, rel[1], rel[0], node_cpus, weight, out_node, out_cpus)
            if k >= 0:
                start = max(last, now)
                chosen = k
                break
        window *= 2
        while r < n_running and planned_end[running[r]] > barrier + window:
            window *= 2
    return start, chosen
