"""priority/multifactor as the replay computes it (slurm.conf(5), the multifactor plugin; issue 51).

    priority = W_age * age + W_fairshare * fairshare + W_jobsize * size + W_partition * partition + W_qos * qos

each factor in [0, 1], the sum truncated to an integer (at least 1), as Slurm stores it:
- age: time since submission (eligible time) / PriorityMaxAge, at most 1;
- fairshare: Fair Tree (Slurm's default, fair_tree.html) over the jobs' accounts and their users, each
  association with the site's RawShares where given (`conf.Shares`: `sshare -a -l -P`), else one
  (sacctmgr's default Fairshare=1; a log carries no share), root's own user association counted beside the
  accounts (sacctmgr always makes it): accounts ranked by their level fair-share S / U among root's children
  (S = the account's shares over its siblings', U = the account's share of the decayed usage), then,
  account by account, its users by theirs within it (S = the user's shares over the account's users', U =
  the user's share of the account's usage); no usage ranks first; users with equal values share a rank, and
  accounts with equal values have their users ranked together; factor = rank / the user associations
  (root's included). Jobs without an account are one account, so a log without accounts is one level of
  users. With PriorityFlags=NO_FAIR_TREE, classic fair-share over the same tree as the multifactor plugin
  computes it: F = 2^(-(UE / S) / FairShareDampeningFactor), U an association's share of all the usage
  (usage_norm), S its normalised shares (an account's among root's children; a user's, that times its own
  among the account's users), and the effective usage UE = U for an account (a child of root) and
  U + (UE_account - U) x the user's shares over its account's users' for a user (`_set_usage_efctv`);
  with DEPTH_OBLIVIOUS, that plugin's `_depth_oblivious_set_usage_efctv` for the users instead. When
  each is computed follows Slurm 22.05's decay pass (`classic_recalc`): the accounts' UE from the
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
def fairshare_factors(usage, account, assoc_share, acct_share, n_root_first, n_root, out):
    """Each association's Fair Tree factor from its decayed usage; `account[a]` is association a's account
    (0 .. accounts - 1, each with an association: `replay.associations`), `assoc_share[a]` its shares within
    its account and `acct_share[k]` account k's among root's children (both normalised: S); `n_root` user
    associations of root's own (root's user, which sacctmgr always makes), of which `n_root_first` have
    shares and no usage (level fair-share infinite: they rank first). Fair Tree as slurm's fair_tree.c walks
    a two-level tree (accounts under root, associations under their account): level fair-share S / U, S = 0
    the lowest, U = 0 infinite; rank starts at the number of user associations, each user visited takes the
    rank (or its tied predecessor's) and lowers it by one; an account tied with the sibling before it (root's
    users with no usage, for an account with none) starts its users tied."""
    n = usage.shape[0]
    if n == 0:
        return
    n_acct = acct_share.shape[0]
    acct_usage = np.zeros(n_acct)
    total = usage_sums(usage, account, acct_usage)
    # level fair-share S / U, no usage: infinity (the top); accounts among accounts, users within theirs
    acct_key = np.empty(n_acct)  # minus the level: sorted ascending, the highest level first
    for k in range(n_acct):
        if acct_share[k] <= 0.0:
            acct_key[k] = 0.0
        elif acct_usage[k] <= 0.0:
            acct_key[k] = -np.inf
        else:
            acct_key[k] = -acct_share[k] / (acct_usage[k] / total)
    level = np.empty(n)
    for a in range(n):
        k = account[a]
        if assoc_share[a] <= 0.0:
            level[a] = 0.0
        elif usage[a] <= 0.0:
            level[a] = np.inf
        else:
            level[a] = assoc_share[a] / (usage[a] / acct_usage[k])
    # accounts with the same level are one group: their users are ranked together
    accts = np.argsort(acct_key, kind="mergesort")
    group = np.zeros(n_acct, np.int64)
    g = 0
    for q in range(1, n_acct):
        if acct_key[accts[q]] != acct_key[accts[q - 1]]:
            g += 1
        group[accts[q]] = g
    # users by (their account's group, level highest first): two stable sorts, the minor key first
    by_level = np.argsort(-level, kind="mergesort")
    gkey = np.empty(n)
    for i in range(n):
        gkey[i] = group[account[by_level[i]]]
    order = by_level[np.argsort(gkey, kind="mergesort")]
    denom = n + n_root
    rnt = denom  # the rank a user takes when not tied with the one before
    rank = denom
    rnt -= n_root_first  # root's own users first, tied among themselves at the top rank
    for pos in range(n):
        a = order[pos]
        if pos == 0:
            tied = n_root_first > 0 and acct_key[account[a]] == -np.inf
        else:
            tied = group[account[a]] == group[account[order[pos - 1]]] and level[a] == level[order[pos - 1]]
        if not tied:
            rank = rnt
        out[a] = rank / denom
        rnt -= 1


@jit_nrt
def effective_usage_factor(a, usage, account, total, acct_now, assoc_share, acct_share, acct_ue, algorithm, damping):
    """Association a's classic (or depth-oblivious) factor F = 2^(-(UE / S) / damping) from the usage now
    (`total`: root's, `acct_now`: each account's) and its account's effective usage `acct_ue` as the last
    decay pass set it (`classic_recalc`); S = its account's share among root's children times its own within
    the account (`assoc_share`, `acct_share`: normalised), F = 0 without shares (priority_multifactor.c:
    `_set_usage_efctv`, `_depth_oblivious_set_usage_efctv`, `priority_p_calc_fs_factor`)."""
    k = account[a]
    u = usage[a] / total if total > 0.0 else 0.0  # usage_norm: of root's usage
    s_acct = acct_share[k]
    s = s_acct * assoc_share[a]
    if s <= 0.0:
        return 0.0
    if algorithm == CLASSIC:
        ue = u + (acct_ue[k] - u) * assoc_share[a]
    elif u > 0.0 and acct_ue[k] > 0.0:
        ratio_p = acct_ue[k] / s_acct
        ratio_l = (u / s) / ((acct_now[k] / total) / s_acct)  # over its siblings' usage ratio
        x = 1.0
        if math.log(ratio_p) * math.log(ratio_l) < 0.0:
            x = 1.0 / (1.0 + (_DEPTH_OBLIVIOUS_F * math.log(ratio_p)) ** 2)
        ue = ratio_p * ratio_l ** x * s
    else:
        ue = u
    return 2.0 ** (-(ue / s) / damping)


@jit_nrt
def usage_sums(usage, account, acct_now):
    """Root's usage (returned) and each account's (`acct_now`)."""
    acct_now[:] = 0.0
    total = 0.0
    for b in range(usage.shape[0]):
        total += usage[b]
        acct_now[account[b]] += usage[b]
    return total


@jit_nrt
def classic_recalc(usage, assoc, account, assoc_share, acct_share, cpus, end, charged, running, n_running, pend, n_pend, now,
                   last, half_life, algorithm, damping, acct_ue, acct_now, stale, fs):
    """A decay pass of classic (or depth-oblivious) fair-share in Slurm 22.05's order (`_decay_thread`): the
    accounts' effective usage is set first, from the usage before this pass (`_set_children_usage_efctv`;
    an account is a child of root: its share of root's usage), and every user's is marked stale; then the
    usage decays and the jobs are walked in job list order (job id): a running job is charged, and a
    pending job's priority needs its user's factor, computed then from the usage charged so far. A user
    still stale after the pass gets its factor at its next job's submission (`stale[a]`: True). Measured
    live: 190 of 200 jobs' initial priorities exactly, the others within 2%."""
    total = usage_sums(usage, account, acct_now)
    for k in range(acct_ue.shape[0]):
        acct_ue[k] = acct_now[k] / total if total > 0.0 else 0.0
    stale[:] = True
    decay_usage(usage, now, last, half_life)
    total = usage_sums(usage, account, acct_now)
    run = np.sort(running[:n_running])
    i = 0
    q = 0
    while i < n_running or q < n_pend:
        if q >= n_pend or (i < n_running and run[i] < pend[q]):
            j = run[i]
            i += 1
            c = charge_job(j, usage, assoc, cpus, end, charged, now)
            acct_now[account[assoc[j]]] += c
            total += c
        else:
            a = assoc[pend[q]]
            q += 1
            if stale[a]:
                fs[a] = effective_usage_factor(a, usage, account, total, acct_now, assoc_share, acct_share, acct_ue,
                                               algorithm, damping)
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
