"""Where a job's CPUs go (select/cons_tres with CR_Core, as the replay models it; issue 51).

A job asks for `cpus` CPUs on at least `min_nodes` nodes (0: any number). On a partition with
`OverSubscribe=EXCLUSIVE` it gets whole nodes: max(min_nodes, ceil(cpus / CPUs per node)) idle ones,
lowest index first. Otherwise, a job that fits on one node (and asked for at most one) goes to the
node that fits it most tightly (fewest free CPUs, lowest index on ties: best fit, as cons_tres
packs); a wider job takes nodes with the most free CPUs first until it has its CPUs and its node
count. `pick` writes the choice (node, CPUs) into `out_node`/`out_cpus` and returns how many nodes, or
-1 when the job does not fit the free CPUs of the allowed nodes.

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
def pick(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, out_node, out_cpus):
    """`allowed`: the nodes the job may use; `live`: the nodes with free CPUs (free > 0), both as bit
    words: only nodes in both can hold a job, so only those are walked, in index order."""
    n_nodes = free.shape[0]
    n_words = allowed.shape[0]
    if exclusive:
        cpn = 0
        for w in range(n_words):
            x = allowed[w]
            while x != 0:
                i = (w << 6) + lowest(x)
                x &= x - _ONE
                if node_cpus[i] > cpn:
                    cpn = node_cpus[i]
        if cpn == 0:
            return -1
        want = max(min_nodes, (cpus + cpn - 1) // cpn)
        k = 0
        got = 0
        for w in range(n_words):
            x = allowed[w] & live[w]
            while x != 0:
                i = (w << 6) + lowest(x)
                x &= x - _ONE
                if free[i] == node_cpus[i]:
                    out_node[k] = i
                    out_cpus[k] = node_cpus[i]
                    k += 1
                    got += node_cpus[i]
                    if k >= want and got >= cpus:
                        return k
        return -1
    if min_nodes <= 1:
        best = -1
        for w in range(n_words):
            x = allowed[w] & live[w]
            while x != 0:
                i = (w << 6) + lowest(x)
                x &= x - _ONE
                if free[i] >= cpus and (best < 0 or free[i] < free[best]):
                    best = i
                    if free[i] == cpus:  # no node fits tighter, and later ones have higher indices
                        break
            if best >= 0 and free[best] == cpus:
                break
        if best >= 0:
            out_node[0] = best
            out_cpus[0] = cpus
            return 1
        if min_nodes == 1:
            return -1
    # spread: most free first (a stable order on ties: the lowest index)
    total = 0
    count = 0
    top_free = 0
    for w in range(n_words):
        x = allowed[w] & live[w]
        while x != 0:
            i = (w << 6) + lowest(x)
            x &= x - _ONE
            total += free[i]
            count += 1
            if free[i] > top_free:
                top_free = free[i]
    if total < cpus or count < min_nodes or cpus < min_nodes:
        return -1
    # the candidates by free CPUs, most first, lowest index on ties: a counting sort on the free CPUs where
    # they take few values (nodes hold tens of CPUs), else a sort on the same key
    cand = np.empty(count, np.int64)
    if top_free <= 4 * count + 64:
        start = np.zeros(top_free + 2, np.int64)
        for w in range(n_words):
            x = allowed[w] & live[w]
            while x != 0:
                i = (w << 6) + lowest(x)
                x &= x - _ONE
                start[top_free - free[i] + 1] += 1
        for v in range(1, top_free + 2):
            start[v] += start[v - 1]
        for w in range(n_words):
            x = allowed[w] & live[w]
            while x != 0:
                i = (w << 6) + lowest(x)
                x &= x - _ONE
                b = top_free - free[i]
                cand[start[b]] = i
                start[b] += 1
    else:
        key = np.empty(count, np.int64)
        c = 0
        for w in range(n_words):
            x = allowed[w] & live[w]
            while x != 0:
                i = (w << 6) + lowest(x)
                x &= x - _ONE
                cand[c] = i
                key[c] = -free[i] * (n_nodes + 1) + i
                c += 1
        cand = cand[np.argsort(key)]
    left = cpus
    k = 0
    for i in cand:
        if left <= 0 and k >= min_nodes:
            break
        # leave at least one CPU for each node still needed to reach min_nodes
        still = min_nodes - k - 1
        take = min(free[i], left - still) if still > 0 else min(free[i], left)
        if take < 1:
            take = 1
        out_node[k] = i
        out_cpus[k] = take
        left -= take
        k += 1
    if left > 0:
        return -1
    return k


@jit_nrt
def will_run(cpus, min_nodes, exclusive, allowed, free, live, node_cpus, running, n_running, planned_end, alloc_ptr,
             alloc_cnt, alloc_node, alloc_cpus, now, out_node, out_cpus, live_then):
    """(start, nodes chosen) for the job on the allowed nodes (bit words; `live`: the nodes with free
    CPUs): now if it fits the free CPUs; else, as select/cons_tres's will-run test does
    (`_will_run_test` in Slurm 22.05), the running jobs on the allowed nodes are taken away in groups by
    planned end: the first group reaches `WILL_RUN_WINDOW` s past the first planned end's next
    `WILL_RUN_WINDOW`-s barrier (on the replay's clock; Slurm's is epoch seconds), each later group a
    window twice as long; the job is planned at the end of the last job of the first group after which
    it fits. (inf, -1) if it never fits them. The running jobs' CPUs are given back to `free` while it
    looks, and taken again before it returns (`live_then`: scratch words, the nodes with free CPUs then)."""
    total = 0  # free CPUs on the allowed nodes: below the job's CPUs, no choice of nodes can fit it
    for w in range(allowed.shape[0]):
        x = allowed[w] & live[w]
        while x != 0:
            total += free[(w << 6) + lowest(x)]
            x &= x - _ONE
    if total >= cpus:
        k = pick(cpus, min_nodes, exclusive, allowed, live, free, node_cpus, out_node, out_cpus)
        if k >= 0:
            return now, k
    live_then[:] = live
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
            touched = False
            for a in range(alloc_ptr[j], alloc_ptr[j] + alloc_cnt[j]):
                i = alloc_node[a]
                free[i] += alloc_cpus[a]
                if free[i] > 0:
                    put(live_then, i, True)
                if has(allowed, i):
                    touched = True
                    total += alloc_cpus[a]
            if not touched:  # Slurm skips a job on none of the allowed nodes
                continue
            if barrier < 0:
                barrier = planned_end[j] + (WILL_RUN_WINDOW - planned_end[j] % WILL_RUN_WINDOW)
            last = planned_end[j]
            if r < n_running and planned_end[running[r]] > barrier + window:
                break
        if last < 0:
            break
        if total >= cpus:
            k = pick(cpus, min_nodes, exclusive, allowed, live_then, free, node_cpus, out_node, out_cpus)
            if k >= 0:
                start = max(last, now)
                chosen = k
                break
        window *= 2
        while r < n_running and planned_end[running[r]] > barrier + window:
            window *= 2
    for q in range(r):  # the running jobs hold their CPUs again
        j = running[q]
        for a in range(alloc_ptr[j], alloc_ptr[j] + alloc_cnt[j]):
            free[alloc_node[a]] -= alloc_cpus[a]
    return start, chosen
