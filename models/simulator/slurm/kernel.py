"""The replay of what Slurm does, event by event (SPEC §6, §12; issue 51): the compiled loop.

Time is whole seconds, as Slurm keeps it. At one instant: the jobs whose resources come free (their
end plus the completing time) are released, the priorities are recalculated if a PriorityCalcPeriod
falls due, the jobs submitted are queued (each with its priority), then
- the main scheduler runs after a completion (at most `default_queue_depth` + 1 jobs), for the
  submissions when slurmctld's background loop takes them (`_batch_pass`: `batch_sched_delay` after
  its last pass) and, every `sched_interval`, over the whole queue: jobs in queue order start where
  they fit now on their partition's nodes; the first that does not fit closes its partition and
  takes that partition's nodes away from every later job of the pass (job_scheduler.c: "Do not schedule more jobs in this
  partition or on nodes in this partition");
- every `bf_interval`, if any job changed since the last pass began (a submission, a start, an end,
  a priority recalculation, a tail guard that fires: backfill.c's `_more_work`; a pass that moves
  nothing and sees nothing new would start nothing), the backfill scheduler: jobs in queue
  order, at most `bf_max_job_test` of them tested (and `bf_max_job_user` per user); a job starts now if
  it fits on nodes no earlier job of the pass has reserved over its time limit; else it gets a
  reservation of the nodes Slurm's will-run test picks, at its earliest start (whole nodes,
  `bf_resolution`-rounded, within `bf_window`), trying later slots as backfill.c does (`later_start`).
  Reservations live only for the pass.
The queue order: partition PriorityTier (higher first), then the job's priority (multifactor, higher
first; or a fixed rule's score, lower first, as `steer` sets it through the site factor), then submit
time, then job id (= the job's index).

A pass can change the schedule only by starting jobs, so a backfill pass stops after the last queued
job that could fit the free CPUs of its partition (what follows it only makes reservations the pass
then drops), a pass is skipped when no queued job could fit, and a job that cannot start now even on
the nodes the reservations so far leave it has its reservation made only when a later job might start
(before that job, in queue order): the same schedule, without the work.
"""

from __future__ import annotations

import math

import numpy as np

from metapilot.models.simulator.jit import jit_nrt
from metapilot.models.simulator.policies import score
from metapilot.models.simulator.slurm.bits import ALL, count, node_bits, put
from metapilot.models.simulator.slurm.node_space import space_allowed, space_init, space_overlaps, space_reserve
from metapilot.models.simulator.slurm.nodes import free_on, note_words, pick, released_change, released_state
from metapilot.models.simulator.slurm.priority import (
    FAIR_TREE,
    charge_usage,
    classic_recalc,
    effective_usage_factor,
    fairshare_factors,
    job_priority,
    usage_sums,
)
from metapilot.models.simulator.slurm.will_run_cache import cache_arrays, forget, will_run_kept

PENDING, RUNNING, DONE, FUTURE, EXCLUDED = 1, 2, 3, 0, 4

# iparams slots
I_BF_INTERVAL, I_BF_MAX_TEST, I_BF_MAX_USER, I_BF_RES, I_BF_WINDOW, I_QUEUE_DEPTH, I_SCHED_INTERVAL, I_BACKFILL, \
    I_FAIRSHARE, I_N_USERS, I_BATCH_DELAY, I_ROOT_USERS, I_ROOT_FIRST = range(13)
# fparams slots
F_COMPLETE, F_W_AGE, F_W_FS, F_W_SIZE, F_W_PART, F_W_QOS, F_MAX_AGE, F_HALF_LIFE, F_CALC, F_CALC_ORIGIN, F_FS_DAMPING = \
    range(11)
MULTIFACTOR = -1  # the order rule of a segment: multifactor priority, else a `policies` code


@jit_nrt
def _next_tick(x, iv):
    return math.ceil(x / iv) * iv


@jit_nrt
def _batch_pass(last_sub, last_batch, delay, sched_interval):
    """When slurmctld's background loop runs the main scheduler for the last submission (controller.c): at
    its first second at least `batch_sched_delay` after the loop's last pass, unless the periodic pass over
    the whole queue (every `sched_interval`, the loop's too) comes first; inf when no submission waits."""
    if last_sub <= last_batch:
        return np.inf
    last = last_batch
    if sched_interval > 0:
        grid = math.floor(last_sub / sched_interval) * sched_interval
        if grid == last_sub:
            return np.inf  # that second's periodic pass sees it
        last = max(last, grid)
    t = max(last_sub, last + delay)
    if sched_interval > 0 and math.floor(t / sched_interval) * sched_interval > last_sub:
        return np.inf
    return t


@jit_nrt
def _heap_push(ht, hj, n, t, j):
    i = n
    ht[i] = t
    hj[i] = j
    while i > 0:
        p = (i - 1) >> 1
        if ht[p] < ht[i] or (ht[p] == ht[i] and hj[p] < hj[i]):
            break
        ht[p], ht[i] = ht[i], ht[p]
        hj[p], hj[i] = hj[i], hj[p]
        i = p
    return n + 1


@jit_nrt
def _heap_pop(ht, hj, n):
    j = hj[0]
    n -= 1
    if n > 0:
        ht[0] = ht[n]
        hj[0] = hj[n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hj[c + 1] < hj[c])):
                c += 1
            if ht[i] < ht[c] or (ht[i] == ht[c] and hj[i] <= hj[c]):
                break
            ht[c], ht[i] = ht[i], ht[c]
            hj[c], hj[i] = hj[i], hj[c]
            i = c
    return j, n


@jit_nrt
def _queue_order(pend, n_pend, now, prio, rule, submit, limit, cpus, part, part_tier, guard_s, t0):
    """The pending jobs in Slurm's queue order (see the module docstring)."""
    jobs = pend[:n_pend].copy()
    key = np.empty(n_pend)
    fcfs = False
    if guard_s > 0:
        for k in range(n_pend):
            if now - submit[jobs[k]] > guard_s:
                fcfs = True
                break
    for k in range(n_pend):
        j = jobs[k]
        if rule == MULTIFACTOR:
            key[k] = -prio[j]
        elif fcfs:
            key[k] = submit[j]
        else:
            key[k] = score(rule, submit[j] - t0, limit[j], float(cpus[j]), now - t0)
    o1 = np.argsort(key, kind="mergesort")
    jobs = jobs[o1]
    tier = np.empty(n_pend)
    for k in range(n_pend):
        tier[k] = -part_tier[part[jobs[k]]]
    o2 = np.argsort(tier, kind="mergesort")
    return jobs[o2]


@jit_nrt
def run_slurm(submit, run, limit, cpus, min_nodes, part, user, assoc, assoc_account, assoc_share, acct_share,
              acct_parent, size_f, part_f, qos_f, excluded, node_cpus, node_weight, part_nodes, part_tier, part_excl,
              seg_t, seg_rule, seg_guard, iparams, fparams, out_start, out_end, out_prio, stop):
    """Replay the jobs (in submit order, ties by job id); writes each job's start and end (NaN: not run) and
    its multifactor priority at submission (`out_prio`, slurmctld's InitPrio; NaN under a fixed rule).
    `user[j]` is the job's user (bf_max_job_user), `assoc[j]` its association (its user in its account:
    usage and fair-share), `assoc_account[a]` association a's account, `assoc_share[a]` its shares and
    `acct_share[k]` account k's over their siblings', `acct_parent[k]` account k's parent (-1: root; parents
    before their children: `priority`).
    The queue's order rule goes by segments of time: from `seg_t[k]` on, `seg_rule[k]` (MULTIFACTOR or
    a rule's code) with the tail guard `seg_guard[k]` seconds (0: none). Returns 0, or 1 when it
    stopped early because `stop[0]` was set (by another thread: Ctrl-C); `stop[1]` is kept at the
    jobs settled so far (started, or never to run: `excluded`), for the thread that shows progress."""
    n = submit.shape[0]
    n_nodes = node_cpus.shape[0]
    n_parts = part_nodes.shape[0]
    bf_interval = iparams[I_BF_INTERVAL]
    bf_max_test = iparams[I_BF_MAX_TEST]
    bf_max_user = iparams[I_BF_MAX_USER]
    res = float(iparams[I_BF_RES])
    window = float(iparams[I_BF_WINDOW])
    queue_depth = iparams[I_QUEUE_DEPTH]
    sched_interval = iparams[I_SCHED_INTERVAL]
    backfill_on = iparams[I_BACKFILL] != 0
    fairshare = iparams[I_FAIRSHARE]  # priority.FAIR_TREE, CLASSIC or DEPTH_OBLIVIOUS
    n_users = iparams[I_N_USERS]
    batch_delay = float(iparams[I_BATCH_DELAY])
    n_root, n_root_first = iparams[I_ROOT_USERS], iparams[I_ROOT_FIRST]  # root's own user associations
    complete_s = fparams[F_COMPLETE]
    w_age, w_fs, w_size = fparams[F_W_AGE], fparams[F_W_FS], fparams[F_W_SIZE]
    w_part, w_qos, max_age = fparams[F_W_PART], fparams[F_W_QOS], fparams[F_MAX_AGE]
    half_life, calc_period, calc_origin = fparams[F_HALF_LIFE], fparams[F_CALC], fparams[F_CALC_ORIGIN]
    fs_damping = fparams[F_FS_DAMPING]
    multifactor = False
    dynamic = False  # an order that moves with time alone: WFP3, UNICEF (a tail guard moves it only when it fires)
    for k in range(seg_rule.shape[0]):
        if seg_rule[k] == MULTIFACTOR:
            multifactor = True
        elif seg_rule[k] == 4 or seg_rule[k] == 5:
            dynamic = True
    seg = 0
    rule = seg_rule[0]
    guard_s = seg_guard[0]
    # a recalculation matters only where age or fair-share weigh
    recalc = multifactor and calc_period > 0 and (w_age > 0 or w_fs > 0)

    status = np.zeros(n, np.int8)
    settled = 0  # jobs started, or never to run
    for j in range(n):
        out_start[j] = np.nan
        out_end[j] = np.nan
        out_prio[j] = np.nan
        if excluded[j]:
            status[j] = EXCLUDED
            settled += 1
    free = node_cpus.copy()
    part_free = np.zeros(n_parts, np.int64)
    for p in range(n_parts):
        for i in range(n_nodes):
            if part_nodes[p, i]:
                part_free[p] += node_cpus[i]
    prio = np.zeros(n)
    planned_end = np.zeros(n)
    charged = np.zeros(n)
    usage = np.zeros(assoc_account.shape[0])
    fs = np.ones(max(assoc_account.shape[0], 1))
    # classic fair-share: each account's effective usage as the last decay pass set it, its usage now; the
    # associations whose factor is not computed since that pass (`classic_recalc`)
    n_acct = max(acct_share.shape[0], 1)
    acct_ue = np.zeros(n_acct)
    acct_now = np.zeros(n_acct)
    stale = np.zeros(max(assoc_account.shape[0], 1), np.bool_)
    # allocations: a bump pool, compacted when full
    pool_size = 4 * n_nodes + 1024
    for p in range(n_parts):
        tot = 0
        for i in range(n_nodes):
            if part_nodes[p, i]:
                tot += node_cpus[i]
        pool_size = max(pool_size, 2 * tot + 1024)
    alloc_node = np.zeros(pool_size, np.int64)
    alloc_cpus = np.zeros(pool_size, np.int64)
    alloc_ptr = np.zeros(n, np.int64)
    alloc_cnt = np.zeros(n, np.int64)
    top = 0
    # the same jobs' nodes as bit words (`nodes.note_words`: no more entries than allocations) and the CPUs held
    word_idx = np.zeros(pool_size, np.int64)
    word_bits = np.zeros(pool_size, np.uint64)
    word_ptr = np.zeros(n, np.int64)
    word_cnt = np.zeros(n, np.int64)
    held = np.zeros(n, np.int64)
    top_w = 0
    pick_node = np.zeros(n_nodes, np.int64)
    pick_cpus = np.zeros(n_nodes, np.int64)
    running = np.zeros(n, np.int64)
    n_running = 0
    pend = np.zeros(n, np.int64)
    n_pend = 0
    heap_t = np.zeros(n)
    heap_j = np.zeros(n, np.int64)
    n_heap = 0
    # the backfill pass's map
    max_slots = 2 * bf_max_test + 2 * n_nodes + 8  # two slots a reservation: one per tested job, one per whole-node start
    s_begin = np.zeros(max_slots)
    s_end = np.zeros(max_slots)
    s_next = np.zeros(max_slots, np.int64)
    n_words = max(1, (n_nodes + 63) // 64)  # sets of nodes are bit words (`bits`)
    s_avail = np.zeros((max_slots, n_words), np.uint64)
    allowed = np.zeros(n_words, np.uint64)  # the nodes a job may use
    part_bits = np.zeros((n_parts, n_words), np.uint64)
    for p in range(n_parts):
        node_bits(part_nodes[p], part_bits[p])
    live = np.zeros(n_words, np.uint64)  # the nodes with free CPUs
    node_bits(free > 0, live)
    tried = np.zeros(n_words, np.uint64)  # the allowed nodes of a job's last will-run test
    kept_meta, kept_keys, kept_starts, kept_bits, kept_pool = cache_arrays(n_words, n_nodes)  # will-run answers
    rel = released_state(free, live)  # the running jobs given back between will-run tests of one state
    avail_main = np.zeros(n_words, np.uint64)
    users_tested = np.zeros(max(n_users, 1), np.int64)
    aside = np.zeros(max(bf_max_test, 1), np.int64)  # a backfill pass's jobs whose reservations wait

    t0 = submit[0] if n > 0 else 0.0
    i_sub = 0
    next_bf = _next_tick(t0, bf_interval) if bf_interval > 0 else np.inf
    next_sched = _next_tick(t0, sched_interval) if sched_interval > 0 else np.inf
    # the decay passes fall every PriorityCalcPeriod from slurmctld's start (`calc_origin`)
    next_calc = calc_origin + _next_tick(t0 - calc_origin, calc_period) if recalc else np.inf
    last_calc = t0
    bf_dirty = False
    sched_dirty = False
    last_sub = -np.inf  # the last submission, and the background loop's last batch pass
    last_batch = -np.inf
    blocked = False
    clock = t0
    steps = 0
    while True:
        steps += 1
        if steps & 63 == 0:
            if stop[0] != 0:
                return 1
            stop[1] = settled
        while i_sub < n and status[i_sub] == EXCLUDED:
            i_sub += 1
        t_sub = submit[i_sub] if i_sub < n else np.inf
        t_rel = heap_t[0] if n_heap > 0 else np.inf
        if next_bf < clock:
            next_bf = _next_tick(clock, bf_interval)
        if next_sched < clock:
            next_sched = _next_tick(clock, sched_interval)
        if next_calc < clock:
            next_calc = calc_origin + _next_tick(clock - calc_origin, calc_period)
        # no pass is due while no queued job fits its partition's free CPUs (`blocked`): until an event
        t_bf = next_bf if (backfill_on and n_pend > 0 and (bf_dirty or dynamic) and not blocked) else np.inf
        t_sched = next_sched if (n_pend > 0 and (sched_dirty or dynamic) and not blocked) else np.inf
        t_calc = next_calc if (recalc and (n_pend > 0 or n_running > 0)) else np.inf
        t_batch = _batch_pass(last_sub, last_batch, batch_delay, sched_interval)
        # the tail guard fires when the oldest queued job's wait passes it: the order changes then
        t_guard = np.inf
        if guard_s > 0 and n_pend > 0 and submit[pend[0]] + guard_s >= clock:
            t_guard = math.floor(submit[pend[0]] + guard_s) + 1.0  # the first second its wait is past the guard
        t = min(min(min(t_sub, t_rel), min(t_bf, t_sched)), min(min(t_calc, t_guard), t_batch))
        if t == np.inf:
            break
        clock = t
        if t == t_guard:
            bf_dirty = True
            sched_dirty = True
        while seg + 1 < seg_t.shape[0] and seg_t[seg + 1] <= t:  # the order rule of this time
            seg += 1
            rule = seg_rule[seg]
            guard_s = seg_guard[seg]
            bf_dirty = True
            sched_dirty = True
        event = False
        # 1. the priority recalculation: the jobs running now are charged since the last pass (or their
        # start); what a job ran between the last pass and its end is never charged (`charge_usage`). It
        # comes first: Slurm's decay pass wakes on the whole second, before anything else of that second, so a
        # job whose end falls in it was still running (measured live: every initial priority of the Fair Tree
        # runs then matches, 300 of 300 twice and 200 of 200)
        if t == next_calc:
            if fairshare == FAIR_TREE:
                charge_usage(usage, assoc, cpus, out_end, charged, running, n_running, t, last_calc, half_life)
                fairshare_factors(usage, assoc_account, assoc_share, acct_share, acct_parent, n_root_first, n_root, fs)
            else:  # classic: the pass's own order sets each factor (`classic_recalc`)
                classic_recalc(usage, assoc, assoc_account, assoc_share, acct_share, acct_parent, cpus, out_end,
                               charged, running, n_running, pend, n_pend, t, last_calc, half_life, fairshare,
                               fs_damping, acct_ue, acct_now, stale, fs)
            for k in range(n_pend):
                prio[pend[k]] = job_priority(pend[k], t, submit, fs, assoc, size_f, part_f, qos_f, w_age, w_fs,
                                             w_size, w_part, w_qos, max_age)
            last_calc = t
            next_calc = t + calc_period
            bf_dirty = True
            sched_dirty = True
        # 2. resources come free
        while n_heap > 0 and heap_t[0] <= t:
            j, n_heap = _heap_pop(heap_t, heap_j, n_heap)
            for a in range(alloc_ptr[j], alloc_ptr[j] + alloc_cnt[j]):
                free[alloc_node[a]] += alloc_cpus[a]
                put(live, alloc_node[a], free[alloc_node[a]] > 0)
                released_change(rel, alloc_node[a], alloc_cpus[a])
                for p in range(n_parts):
                    if part_nodes[p, alloc_node[a]]:
                        part_free[p] += alloc_cpus[a]
            alloc_cnt[j] = 0
            status[j] = DONE
            n_running = _run_remove(running, n_running, j)
            forget(kept_meta)
            event = True
        # 3. submissions
        while i_sub < n and submit[i_sub] <= t:
            j = i_sub
            i_sub += 1
            if status[j] == EXCLUDED:
                continue
            status[j] = PENDING
            pend[n_pend] = j
            n_pend += 1
            if multifactor:
                if stale[assoc[j]]:  # classic: a user's factor is computed when a job first needs it after a pass
                    total = usage_sums(usage, assoc_account, acct_parent, acct_now)
                    fs[assoc[j]] = effective_usage_factor(assoc[j], usage, assoc_account, total, acct_now,
                                                          assoc_share, acct_share, acct_parent, acct_ue, fairshare,
                                                          fs_damping)
                    stale[assoc[j]] = False
                prio[j] = job_priority(j, t, submit, fs, assoc, size_f, part_f, qos_f, w_age, w_fs, w_size, w_part,
                                       w_qos, max_age)
                out_prio[j] = prio[j]
            last_sub = t
        if event or last_sub == t:
            bf_dirty = True
            sched_dirty = True
        if bf_dirty or sched_dirty:
            blocked = not _any_fits(pend, n_pend, cpus, part, part_free)
        passes = 0
        if event and n_pend > 0:  # a completion calls the main scheduler at once
            passes = 1
        if _batch_pass(last_sub, last_batch, batch_delay, sched_interval) == t:  # the submissions' deferred pass
            last_batch = t
            if n_pend > 0:
                passes = 1
        if t == next_sched:
            next_sched = t + sched_interval
            if n_pend > 0 and (sched_dirty or dynamic):
                passes = 2
        # 4. the main scheduler (a pass where no queued job fits its partition's free CPUs starts nothing)
        if passes > 0 and not blocked:
            depth = queue_depth if passes == 1 else -1
            if depth < 0:  # only a pass over the whole queue settles what the periodic one would do
                sched_dirty = False
            order = _queue_order(pend, n_pend, t, prio, rule, submit, limit, cpus, part, part_tier, guard_s, t0)
            avail_main[:] = ALL
            failed = np.zeros(n_parts, np.bool_)
            tested = 0
            for j in order:
                p = part[j]
                if failed[p]:
                    continue
                if depth >= 0 and tested > depth:
                    break
                tested += 1
                for w in range(n_words):
                    allowed[w] = part_bits[p, w] & avail_main[w]
                k = -1  # fewer free CPUs in its partition than it asks: no need to look at the nodes
                if cpus[j] <= part_free[p]:
                    k = pick(cpus[j], min_nodes[j], part_excl[p], allowed, live, free, node_cpus, node_weight,
                             pick_node, pick_cpus)
                if k < 0:
                    failed[p] = True
                    for w in range(n_words):
                        avail_main[w] &= ~part_bits[p, w]
                    continue
                # start j
                if top + k > pool_size:
                    top = _compact(alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, running, n_running)
                if top_w + k > pool_size:
                    top_w = _compact(word_ptr, word_cnt, word_idx, word_bits, running, n_running)
                top_w = note_words(j, k, pick_node, pick_cpus, word_ptr, word_cnt, word_idx, word_bits, held, top_w)
                top = _start(j, t, k, pick_node, pick_cpus, alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, top,
                             free, live, part_free, part_nodes, status, out_start, out_end, run, limit, planned_end,
                             charged, rel)
                n_running = _run_insert(running, n_running, planned_end, j)
                settled += 1
                n_heap = _heap_push(heap_t, heap_j, n_heap, out_end[j] + complete_s, j)
                forget(kept_meta)
                bf_dirty = True
            n_pend = _drop_started(pend, n_pend, status)
        # 5. the backfill scheduler
        if backfill_on and t == next_bf:
            next_bf = t + bf_interval
            if n_pend > 0 and (bf_dirty or dynamic) and not blocked:
                bf_dirty = False
                order = _queue_order(pend, n_pend, t, prio, rule, submit, limit, cpus, part, part_tier, guard_s, t0)
                last = -1
                for pos in range(order.shape[0]):
                    j = order[pos]
                    if cpus[j] <= part_free[part[j]]:
                        last = pos
                if last >= 0:
                    n_slots = space_init(s_begin, s_end, s_next, s_avail, math.floor(t / res) * res,
                                         math.floor((t + window) / res) * res)
                    users_tested[:] = 0
                    tested = 0
                    # A reservation matters only to a later job of the pass that could start now: where the pass
                    # cannot reach bf_max_test (nor the map's size), a job that cannot start now even on the nodes
                    # the reservations so far leave it is put aside, and its reservation made only when a later
                    # job might start (in queue order, before it: what it would have been), else never. (Not while
                    # a job is past its planned end, still completing: the will-run test starts a job now on its
                    # CPUs, which are not free.)
                    lazy = last + 1 <= bf_max_test and (n_running == 0 or planned_end[running[0]] > t)
                    n_aside = 0  # aside[:n_aside]: put aside; aside[i_aside:n_made] being made now
                    i_aside = 0
                    n_made = 0
                    then = -1  # the job that might start, tested once the reservations before it are made
                    pos = 0
                    while True:
                        if i_aside < n_made:
                            j = aside[i_aside]
                            i_aside += 1
                        elif then >= 0:
                            j = then
                            then = -1
                            n_aside = 0
                            i_aside = 0
                            n_made = 0
                        else:
                            if pos > last:
                                break
                            j = order[pos]
                            pos += 1
                            if status[j] != PENDING:
                                continue
                            if bf_max_user > 0:
                                if users_tested[user[j]] >= bf_max_user:
                                    continue
                                users_tested[user[j]] += 1
                            if tested >= bf_max_test:
                                break
                            if n_slots + 4 > max_slots:
                                break  # Slurm: "table size limit reached"
                            if lazy:
                                space_allowed(s_begin, s_end, s_next, s_avail, part_bits[part[j]], t, t + limit[j],
                                              allowed, 0)
                                if (count(allowed) < max(min_nodes[j], 1)
                                        or free_on(allowed, live, free, cpus[j]) < cpus[j]):
                                    aside[n_aside] = j  # no start now: its reservation waits
                                    n_aside += 1
                                    continue
                                if n_aside > 0:  # it might start: the reservations before it first
                                    n_made = n_aside
                                    then = j
                                    continue
                        p = part[j]
                        lim = limit[j]
                        start_res = t
                        counted = False
                        tries = 0
                        cursor = 0  # the map's first slot that counts for this job's tries (space_allowed)
                        have_tried = False  # a will-run test on `tried` gave (ts_tried, k_tried), still in pick_*
                        ts_tried, k_tried = 0.0, -1
                        while tries < 1000:
                            tries += 1
                            finish = start_res + lim
                            later, cursor = space_allowed(s_begin, s_end, s_next, s_avail, part_bits[p], start_res,
                                                          finish, allowed, cursor)
                            if count(allowed) < max(min_nodes[j], 1):
                                if later > 0:
                                    start_res = later
                                    continue
                                break
                            if not counted:
                                counted = True
                                tested += 1
                            if have_tried and _same_words(allowed, tried):  # a later try on the same nodes:
                                ts, k = ts_tried, k_tried  # the same answer, still in pick_*
                            else:  # the answer to this shape on these nodes since the last start or end, or a test
                                ts, k = will_run_kept(kept_meta, kept_keys, kept_starts, kept_bits, kept_pool, cpus[j],
                                                      min_nodes[j], part_excl[p], allowed, free, live, node_cpus,
                                                      node_weight, running, n_running, planned_end, alloc_ptr,
                                                      alloc_cnt, alloc_node, alloc_cpus, word_ptr, word_cnt, word_idx,
                                                      word_bits, held, t, pick_node, pick_cpus, rel)
                                tried[:] = allowed
                                have_tried = True
                                ts_tried, k_tried = ts, k
                            if k < 0:
                                if later > 0:
                                    start_res = later
                                    continue
                                break
                            if ts < start_res:
                                ts = start_res
                            if ts <= t:
                                if top + k > pool_size:
                                    top = _compact(alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, running, n_running)
                                if top_w + k > pool_size:
                                    top_w = _compact(word_ptr, word_cnt, word_idx, word_bits, running, n_running)
                                top_w = note_words(j, k, pick_node, pick_cpus, word_ptr, word_cnt, word_idx, word_bits,
                                                   held, top_w)
                                top = _start(j, t, k, pick_node, pick_cpus, alloc_ptr, alloc_cnt, alloc_node,
                                             alloc_cpus, top, free, live, part_free, part_nodes, status, out_start,
                                             out_end, run, limit, planned_end, charged, rel)
                                n_running = _run_insert(running, n_running, planned_end, j)
                                settled += 1
                                n_heap = _heap_push(heap_t, heap_j, n_heap, out_end[j] + complete_s, j)
                                forget(kept_meta)
                                # a start is a job update: Slurm's next pass runs (`_more_work`)
                                sched_dirty = True
                                bf_dirty = True
                                if part_excl[p]:
                                    n_slots = space_reserve(s_begin, s_end, s_next, s_avail, n_slots, pick_node, k,
                                                            0.0, math.floor(planned_end[j] / res) * res, res)
                                break
                            if later > 0 and ts > later:
                                start_res = later
                                continue
                            s_r = math.floor(ts / res) * res
                            e_r = math.floor((ts + lim) / res) * res
                            if ts > t + window:
                                break
                            if space_overlaps(s_begin, s_end, s_next, s_avail, pick_node, k, s_r, e_r):
                                start_res = ts
                                continue
                            n_slots = space_reserve(s_begin, s_end, s_next, s_avail, n_slots, pick_node, k, s_r, e_r,
                                                    res)
                            break
                    n_pend = _drop_started(pend, n_pend, status)
    return 0


@jit_nrt
def _start(j, t, k, pick_node, pick_cpus, alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, top, free, live, part_free,
           part_nodes, status, out_start, out_end, run, limit, planned_end, charged, rel):
    alloc_ptr[j] = top
    alloc_cnt[j] = k
    for a in range(k):
        i = pick_node[a]
        c = pick_cpus[a]
        alloc_node[top + a] = i
        alloc_cpus[top + a] = c
        free[i] -= c
        put(live, i, free[i] > 0)
        released_change(rel, i, -c)
        for p in range(part_nodes.shape[0]):
            if part_nodes[p, i]:
                part_free[p] -= c
    status[j] = RUNNING
    out_start[j] = t
    out_end[j] = t + min(run[j], limit[j])
    planned_end[j] = t + limit[j]
    charged[j] = t
    return top + k


@jit_nrt
def _compact(alloc_ptr, alloc_cnt, alloc_node, alloc_cpus, running, n_running):
    """Move the running jobs' allocations (or their nodes' words) to the front of the pool; returns the new top."""
    order = np.argsort(alloc_ptr[running[:n_running]])
    top = 0
    for o in order:
        j = running[o]
        src = alloc_ptr[j]
        for a in range(alloc_cnt[j]):
            alloc_node[top + a] = alloc_node[src + a]
            alloc_cpus[top + a] = alloc_cpus[src + a]
        alloc_ptr[j] = top
        top += alloc_cnt[j]
    return top


@jit_nrt
def _run_insert(running, n_running, planned_end, j):
    """Keep the running jobs in the order of their planned ends (ties: the lower job id first, Slurm's
    job list order), as the will-run test releases them."""
    k = n_running
    while k > 0 and (planned_end[running[k - 1]] > planned_end[j]
                     or (planned_end[running[k - 1]] == planned_end[j] and running[k - 1] > j)):
        running[k] = running[k - 1]
        k -= 1
    running[k] = j
    return n_running + 1


@jit_nrt
def _run_remove(running, n_running, j):
    for r in range(n_running):
        if running[r] == j:
            for q in range(r, n_running - 1):
                running[q] = running[q + 1]
            return n_running - 1
    return n_running


@jit_nrt
def _same_words(a, b):  # not np.array_equal: compiled, it builds a temporary array, and this runs every try
    for w in range(a.shape[0]):
        if a[w] != b[w]:
            return False
    return True


@jit_nrt
def _any_fits(pend, n_pend, cpus, part, part_free):
    for k in range(n_pend):
        if cpus[pend[k]] <= part_free[part[pend[k]]]:
            return True
    return False


@jit_nrt
def _drop_started(pend, n_pend, status):
    k = 0
    for i in range(n_pend):
        if status[pend[i]] == PENDING:
            pend[k] = pend[i]
            k += 1
    return k
