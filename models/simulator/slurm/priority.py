"""priority/multifactor as the replay computes it (slurm.conf(5), the multifactor plugin; issue 51).

    priority = W_age * age + W_fairshare * fairshare + W_jobsize * size + W_partition * partition + W_qos * qos

each factor in [0, 1], the sum truncated to an integer (at least 1), as Slurm stores it:
- age: time since submission (eligible time) / PriorityMaxAge, at most 1;
- fairshare: Fair Tree (Slurm's default, fair_tree.html, walked as fair_tree.c does) over the site's
  association tree: accounts (below root or below other accounts) and users in them, each with the
  site's RawShares where given (`conf.Shares`: `sshare -a -l -P`), else one (sacctmgr's default
  Fairshare=1; a log carries no share), root's own user association beside root's accounts (sacctmgr
  always makes it). At each account, root first, its children (users and sub-accounts) by their level
  fair-share S / U, highest first (S = its shares over its siblings', U = its usage over the account's;
  no usage ranks first), a user before an account of the same level: a user takes the next rank (a
  predecessor's of equal level: a tie), an account is walked in turn; factor = rank / the user
  associations (root's included). Without the tree, jobs' accounts are root's children and jobs without
  an account one account, so a log without accounts is one level of users. With
  PriorityFlags=NO_FAIR_TREE, classic fair-share over the same tree as the multifactor plugin computes it:
  F = 2^(-(UE / S) / FairShareDampeningFactor), U an association's share of all the usage (usage_norm),
  S its normalised shares (its shares over its siblings' times its parent's), and the effective usage
  UE = U for a child of root and U + (UE_parent - U) x its shares over its siblings' below
  (`_set_usage_efctv`); with DEPTH_OBLIVIOUS, that plugin's `_depth_oblivious_set_usage_efctv` instead.
  When each is computed follows Slurm 22.05's decay pass (`classic_recalc`): the accounts' UE from the
  usage before the pass, a user's when a job of theirs first needs it after the pass (mid-pass, from
  the usage charged so far, for a pending job), so a user with no usage keeps F = 1 until the pass
  after its account's first usage.
  Usage is CPU-seconds, decayed with PriorityDecayHalfLife, charged
  at each recalculation for the jobs running then (since the last one or their start): what a job runs
  between the last recalculation and its end is never charged, so a job that starts and ends between
  two is free (Slurm 22.05 as measured live: the initial priorities of 293 of 300 jobs of 29 users
  match that; charging every job to its end, 185);
- size: (nodes / cluster nodes + CPUs / cluster CPUs) / 2, or 1 minus that with PriorityFavorSmall;
- partition: the partition's PriorityJobFactor / the largest PriorityJobFactor;
- qos: the QOS's priority / the largest QOS priority (0 where the QOS priorities are not given).

Slurm computes a job's priority when it is submitted and recomputes every pending job's at each
PriorityCalcPeriod, after charging and decaying the usage: between two recalculations the age a job
is ordered by does not move. The recalculations fall every PriorityCalcPeriod from slurmctld's start
(its decay thread's first pass), not on the clock's multiples of it.
"""

from __future__ import annotations

import math

import numpy as np

from metapilot.models.simulator.jit import jit_nrt


CLASSIC, FAIR_TREE, DEPTH_OBLIVIOUS = 0, 1, 2  # the fair-share algorithm (PriorityFlags)
_DEPTH_OBLIVIOUS_F = 5.0  # the plugin's fixed f ("could be a tunable parameter")


@jit_nrt
def fairshare_factors(usage, account, assoc_share, acct_share, acct_parent, n_root_first, n_root, out):
    """Each association's Fair Tree factor from its decayed usage, as slurm's fair_tree.c walks the tree:
    `account[a]` is association a's account, `acct_parent[k]` account k's parent account (-1: root; parents
    come before their children), `assoc_share[a]` and `acct_share[k]` the shares over their siblings' (users
    and accounts under the same parent; S); `n_root` user associations of root's own (root's user, which
    sacctmgr always makes), of which `n_root_first` have shares and no usage. At each account (root first)
    its children get the level fair-share S / U (U = their usage over the account's; S = 0 the lowest, U = 0
    infinite) and are visited highest first, a user before an account of the same level: a user takes the
    rank, or its predecessor's where their levels are equal, and the rank goes down by one; an account is
    walked in turn, its first child tied with the sibling before the account where the account's level is
    that sibling's (fair_tree.c merges no tied accounts: `_count_tied_accounts` stops at the first
    account). factor = rank / the user associations, root's included."""
    n = usage.shape[0]
    if n == 0:
        return
    n_acct = acct_share.shape[0]
    acct_usage = np.zeros(n_acct)
    total = usage_sums(usage, account, acct_parent, acct_usage)
    # children of each account and of root (node n_acct): users (kind 0) before accounts (kind 1) of one level
    n_kids = np.zeros(n_acct + 1, np.int64)
    for a in range(n):
        n_kids[account[a]] += 1
    for k in range(n_acct):
        n_kids[acct_parent[k] if acct_parent[k] >= 0 else n_acct] += 1
    n_kids[n_acct] += n_root
    first = np.zeros(n_acct + 2, np.int64)
    for k in range(n_acct + 1):
        first[k + 1] = first[k] + n_kids[k]
    kid = np.empty(first[n_acct + 1], np.int64)  # >= 0: an association; -1 - k: account k; -1 - n_acct: root's user
    kid_level = np.empty(first[n_acct + 1])
    kid_kind = np.empty(first[n_acct + 1], np.int64)
    fill = first[:n_acct + 1].copy()
    for r in range(n_root):
        q = fill[n_acct]
        fill[n_acct] += 1
        kid[q] = -1 - n_acct
        kid_level[q] = np.inf if r < n_root_first else 0.0
        kid_kind[q] = 0
    for a in range(n):
        k = account[a]
        q = fill[k]
        fill[k] += 1
        kid[q] = a
        kid_kind[q] = 0
        if assoc_share[a] <= 0.0:
            kid_level[q] = 0.0
        elif usage[a] <= 0.0 or acct_usage[k] <= 0.0:
            kid_level[q] = np.inf
        else:
            kid_level[q] = assoc_share[a] / (usage[a] / acct_usage[k])
    for k in range(n_acct):
        p = acct_parent[k]
        above = total if p < 0 else acct_usage[p]
        node = n_acct if p < 0 else p
        q = fill[node]
        fill[node] += 1
        kid[q] = -1 - k
        kid_kind[q] = 1
        if acct_share[k] <= 0.0:
            kid_level[q] = 0.0
        elif acct_usage[k] <= 0.0 or above <= 0.0:
            kid_level[q] = np.inf
        else:
            kid_level[q] = acct_share[k] / (acct_usage[k] / above)
    for node in range(n_acct + 1):  # highest level first, a user before an account, then in index order
        lo, hi = first[node], first[node + 1]
        if hi - lo > 1:
            by_kind = np.argsort(kid_kind[lo:hi], kind="mergesort")
            order = by_kind[np.argsort(-kid_level[lo:hi][by_kind], kind="mergesort")]
            kid[lo:hi] = kid[lo:hi][order]
            kid_level[lo:hi] = kid_level[lo:hi][order]
            kid_kind[lo:hi] = kid_kind[lo:hi][order]
    denom = n + n_root
    rank = denom
    rnt = denom  # the rank a user takes when not tied with the one before
    # the walk, depth first: each frame an account (root: n_acct), its next child, whether its first is tied
    stack_node = np.empty(n_acct + 2, np.int64)
    stack_pos = np.empty(n_acct + 2, np.int64)
    stack_tied = np.zeros(n_acct + 2, np.bool_)
    depth = 0
    stack_node[0], stack_pos[0], stack_tied[0] = n_acct, first[n_acct], False
    while depth >= 0:
        node, q = stack_node[depth], stack_pos[depth]
        if q >= first[node + 1]:
            depth -= 1
            continue
        stack_pos[depth] = q + 1
        if q == first[node]:
            tied = stack_tied[depth]
        else:
            tied = kid_level[q] == kid_level[q - 1]
        c = kid[q]
        if c >= 0 or c == -1 - n_acct:  # a user
            if not tied:
                rank = rnt
            if c >= 0:
                out[c] = rank / denom
            rnt -= 1
        else:
            depth += 1
            stack_node[depth], stack_pos[depth], stack_tied[depth] = -1 - c, first[-1 - c], tied


@jit_nrt
def account_norm_share(k, acct_share, acct_parent):
    """Account k's shares as a share of the whole tree (`shares_norm` of classic fair-share: its shares
    over its siblings' times its parent's)."""
    s = 1.0
    while k >= 0:
        s *= acct_share[k]
        k = acct_parent[k]
    return s


@jit_nrt
def _effective_usage(u, s_within, s_norm, parent_ue, parent_norm, parent_u, algorithm):
    """The effective usage of an association below an account (priority_multifactor.c: `_set_usage_efctv`,
    or `_depth_oblivious_set_usage_efctv`): `u` its usage over root's, `s_within` its shares over its
    siblings', `s_norm` over the tree's; the parent's effective usage, shares and usage over the tree's."""
    if algorithm == CLASSIC:
        return u + (parent_ue - u) * s_within
    if u > 0.0 and parent_ue > 0.0 and parent_u > 0.0 and parent_norm > 0.0:
        ratio_p = parent_ue / parent_norm
        ratio_l = (u / s_norm) / (parent_u / parent_norm)  # over its siblings' usage ratio
        x = 1.0
        if math.log(ratio_p) * math.log(ratio_l) < 0.0:
            x = 1.0 / (1.0 + (_DEPTH_OBLIVIOUS_F * math.log(ratio_p)) ** 2)
        return ratio_p * ratio_l ** x * s_norm
    return u


@jit_nrt
def account_effective_usage(acct_now, total, acct_share, acct_parent, algorithm, acct_ue):
    """Every account's effective usage from the usage now, root's children first (their usage over root's),
    then down the tree (`_set_children_usage_efctv`)."""
    for k in range(acct_ue.shape[0]):
        u = acct_now[k] / total if total > 0.0 else 0.0
        p = acct_parent[k]
        if p < 0:
            acct_ue[k] = u
        else:
            acct_ue[k] = _effective_usage(u, acct_share[k], account_norm_share(k, acct_share, acct_parent), acct_ue[p],
                                          account_norm_share(p, acct_share, acct_parent),
                                          acct_now[p] / total if total > 0.0 else 0.0, algorithm)


@jit_nrt
def effective_usage_factor(a, usage, account, total, acct_now, assoc_share, acct_share, acct_parent, acct_ue, algorithm,
                           damping):
    """Association a's classic (or depth-oblivious) factor F = 2^(-(UE / S) / damping) from the usage now
    (`total`: root's, `acct_now`: each account's, its sub-accounts' included) and its account's effective
    usage `acct_ue` as the last decay pass set it (`classic_recalc`); S = its shares over the tree's (its
    account's `account_norm_share` times its own over its siblings'), F = 0 without shares
    (priority_multifactor.c: `_set_usage_efctv`, `_depth_oblivious_set_usage_efctv`,
    `priority_p_calc_fs_factor`)."""
    k = account[a]
    u = usage[a] / total if total > 0.0 else 0.0  # usage_norm: of root's usage
    s_acct = account_norm_share(k, acct_share, acct_parent)
    s = s_acct * assoc_share[a]
    if s <= 0.0:
        return 0.0
    ue = _effective_usage(u, assoc_share[a], s, acct_ue[k], s_acct, acct_now[k] / total if total > 0.0 else 0.0,
                          algorithm)
    return 2.0 ** (-(ue / s) / damping)


@jit_nrt
def usage_sums(usage, account, acct_parent, acct_now):
    """Root's usage (returned) and each account's (`acct_now`), its sub-accounts' included (parents come
    before their children)."""
    acct_now[:] = 0.0
    total = 0.0
    for b in range(usage.shape[0]):
        total += usage[b]
        acct_now[account[b]] += usage[b]
    for k in range(acct_now.shape[0] - 1, -1, -1):
        if acct_parent[k] >= 0:
            acct_now[acct_parent[k]] += acct_now[k]
    return total


@jit_nrt
def classic_recalc(usage, assoc, account, assoc_share, acct_share, acct_parent, cpus, end, charged, running, n_running,
                   pend, n_pend, now, last, half_life, algorithm, damping, acct_ue, acct_now, stale, fs):
    """A decay pass of classic (or depth-oblivious) fair-share in Slurm 22.05's order (`_decay_thread`): the
    accounts' effective usage is set first, from the usage before this pass (`_set_children_usage_efctv`,
    `account_effective_usage`), and every user's is marked stale; then the usage decays and the jobs are
    walked in job list order (job id): a running job is charged, and a pending job's priority needs its
    user's factor, computed then from the usage charged so far. A user still stale after the pass gets its
    factor at its next job's submission (`stale[a]`: True). Measured live: 190 of 200 jobs' initial
    priorities exactly, the others within 2%."""
    total = usage_sums(usage, account, acct_parent, acct_now)
    account_effective_usage(acct_now, total, acct_share, acct_parent, algorithm, acct_ue)
    stale[:] = True
    decay_usage(usage, now, last, half_life)
    total = usage_sums(usage, account, acct_parent, acct_now)
    run = np.sort(running[:n_running])
    i = 0
    q = 0
    while i < n_running or q < n_pend:
        if q >= n_pend or (i < n_running and run[i] < pend[q]):
            j = run[i]
            i += 1
            c = charge_job(j, usage, assoc, cpus, end, charged, now)
            k = account[assoc[j]]
            while k >= 0:  # the account and those above it
                acct_now[k] += c
                k = acct_parent[k]
            total += c
        else:
            a = assoc[pend[q]]
            q += 1
            if stale[a]:
                fs[a] = effective_usage_factor(a, usage, account, total, acct_now, assoc_share, acct_share, acct_parent,
                                               acct_ue, algorithm, damping)
                stale[a] = False


@jit_nrt
def job_priority(j, now, submit, fs_of_assoc, assoc, size_f, part_f, qos_f, w_age, w_fs, w_size, w_part, w_qos,
                 max_age):
    age = (now - submit[j]) / max_age if max_age > 0 else 1.0
    if age > 1.0:
        age = 1.0
    if age < 0.0:
        age = 0.0
    p = w_age * age + w_fs * fs_of_assoc[assoc[j]] + w_size * size_f[j] + w_part * part_f[j] + w_qos * qos_f[j]
    p = math.floor(p)
    return p if p >= 1.0 else 1.0


@jit_nrt
def decay_usage(usage, now, last, half_life):
    """Decay the usage by the time since the last recalculation (PriorityDecayHalfLife)."""
    if half_life > 0 and now > last:
        f = 2.0 ** (-(now - last) / half_life)
        for u in range(usage.shape[0]):
            usage[u] *= f


@jit_nrt
def charge_job(j, usage, assoc, cpus, end, charged, now):
    """Charge job j (holding CPUs) its CPU-seconds since it was last charged; returns the charge. A job
    that has ended and still holds its CPUs (COMPLETING, `complete_s` > 0) is not RUNNING, and Slurm's
    decay pass charges only running jobs: its last stretch is never charged, as for a job that ended
    between two passes. A job whose end falls in the pass's own second ended after it (the pass wakes on
    the whole second): it is charged."""
    if end[j] < now or now <= charged[j]:
        return 0.0
    c = cpus[j] * (now - charged[j])
    usage[assoc[j]] += c
    charged[j] = now
    return c


@jit_nrt
def charge_usage(usage, assoc, cpus, end, charged, jobs, n_jobs, now, last, half_life):
    """Fair Tree's decay pass (`fair_tree_decay`): decay the usage, then charge each of `jobs` (those
    holding CPUs), all before any factor is computed."""
    decay_usage(usage, now, last, half_life)
    for k in range(n_jobs):
        charge_job(jobs[k], usage, assoc, cpus, end, charged, now)
