"""priority/multifactor as the replay computes it (slurm.conf(5), the multifactor plugin; issue 51).

    priority = W_age * age + W_fairshare * fairshare + W_jobsize * size + W_partition * partition + W_qos * qos

each factor in [0, 1], the sum truncated to an integer (at least 1), as Slurm stores it:
- age: time since submission (eligible time) / PriorityMaxAge, at most 1;
- fairshare: Fair Tree (Slurm's default) over one level of users with equal shares: users ranked by
  their level fair-share S / U (S = 1 / users, U = the user's share of the decayed usage; no usage
  ranks first, equal values share a rank), factor = rank / users; with PriorityFlags=NO_FAIR_TREE,
  classic fair-share 2^(-U / S). Usage is CPU-seconds, decayed with PriorityDecayHalfLife, charged
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


@jit_nrt
def fairshare_factors(usage, fair_tree, out):
    n = usage.shape[0]
    if n == 0:
        return
    total = 0.0
    for u in range(n):
        total += usage[u]
    share = 1.0 / n
    if not fair_tree:
        for u in range(n):
            out[u] = 1.0 if total <= 0.0 else 2.0 ** (-(usage[u] / total) / share)
        return
    level = np.empty(n)
    for u in range(n):
        level[u] = np.inf if usage[u] <= 0.0 or total <= 0.0 else share / (usage[u] / total)
    order = np.argsort(-level, kind="mergesort")
    rank = n
    prev = np.nan
    group_rank = n
    for pos in range(n):
        u = order[pos]
        if pos == 0 or level[u] != prev:
            group_rank = rank
            prev = level[u]
        out[u] = group_rank / n
        rank -= 1


@jit_nrt
def job_priority(j, now, submit, fs_of_user, user, size_f, part_f, qos_f, w_age, w_fs, w_size, w_part, w_qos,
                 max_age):
    age = (now - submit[j]) / max_age if max_age > 0 else 1.0
    if age > 1.0:
        age = 1.0
    if age < 0.0:
        age = 0.0
    p = w_age * age + w_fs * fs_of_user[user[j]] + w_size * size_f[j] + w_part * part_f[j] + w_qos * qos_f[j]
    p = math.floor(p)
    return p if p >= 1.0 else 1.0


@jit_nrt
def charge_usage(usage, user, cpus, start, end, charged, jobs, n_jobs, now, last, half_life):
    """Decay the usage by the time since the last recalculation, then charge each of `jobs` (those
    holding CPUs) its CPU-seconds since it was last charged. A job that has ended and still holds its
    CPUs (COMPLETING, `complete_s` > 0) is not RUNNING, and Slurm's decay pass charges only running jobs:
    its last stretch is never charged, as for a job that ended between two passes."""
    if half_life > 0 and now > last:
        f = 2.0 ** (-(now - last) / half_life)
        for u in range(usage.shape[0]):
            usage[u] *= f
    for k in range(n_jobs):
        j = jobs[k]
        if end[j] <= now:
            continue
        if now > charged[j]:
            usage[user[j]] += cpus[j] * (now - charged[j])
            charged[j] = now
