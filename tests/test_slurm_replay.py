"""The replay of what Slurm does (issue 51) against schedules worked out by hand from Slurm's code
(backfill.c, job_scheduler.c, the multifactor plugin) and slurm.conf(5)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from metapilot.models.simulator import Capacity, simulate
from metapilot.models.simulator.slurm import SlurmConf, parse_slurm_conf, replay_slurm, simulate_slurm, slurm_schedule
from metapilot.models.simulator.slurm.bits import count, has, lowest, node_bits, put
from metapilot.models.simulator.slurm.conf import (
    conf_from_capacity,
    expand_hostlist,
    parse_qos_priorities,
    parse_time_s,
    read_slurm_conf,
    setting_lines,
    slurm_conf_settings,
)
from metapilot.models.simulator.slurm.priority import (
    CLASSIC,
    DEPTH_OBLIVIOUS,
    account_effective_usage,
    classic_recalc,
    effective_usage_factor,
    fairshare_factors,
    job_priority,
    usage_sums,
)
from metapilot.transforms.workload import Workload


def frame(rows: list[tuple], **cols) -> pl.DataFrame:
    """rows: (submit, run, limit, cpus[, partition[, user]]) in seconds; job ids 1, 2, ..."""
    data = {"job_id": [str(i + 1) for i in range(len(rows))], "submit": [float(r[0]) for r in rows],
            "run": [float(r[1]) for r in rows], "time_limit": [float(r[2]) for r in rows],
            "cpus": [int(r[3]) for r in rows], "nodes": [None] * len(rows),
            "partition": [r[4] if len(r) > 4 else None for r in rows],
            "user": [r[5] if len(r) > 5 else "u" for r in rows], "qos": [None] * len(rows)}
    data.update(cols)
    return pl.DataFrame(data, schema_overrides={"nodes": pl.Int64, "partition": pl.Utf8, "user": pl.Utf8,
                                                "qos": pl.Utf8})


def starts(jobs: pl.DataFrame, conf: SlurmConf, rule: str = "FCFS", **kw) -> list[float]:
    return replay_slurm(jobs, conf, rule=rule, **kw)["start"].to_list()


ONE_NODE_8 = SlurmConf.single(8).with_sched(bf_interval=1, sched_interval=60)


def test_reservations_are_rounded_down_to_bf_resolution():
    """Job 2 (the whole node) is reserved from 100 rounded down to 60; job 3 ends by 52 and is
    backfilled at once; job 4 would end at 83, past 60, so it waits for slots after the reservation,
    where job 2 runs until 200. Textbook EASY starts job 4 at once (it ends before 100)."""
    jobs = frame([(0, 100, 100, 4), (1, 100, 100, 8), (2, 50, 50, 2), (3, 80, 80, 2)])
    assert starts(jobs, ONE_NODE_8) == [0, 100, 2, 200]
    w = Workload.from_arrays(submit=[0, 1, 2, 3], run=[100, 100, 50, 80], req_time=[100, 100, 50, 80],
                             cores=[4, 8, 2, 2])
    assert list(simulate(w, Capacity.single(8), "FCFS", "easy").start) == [0, 100, 2, 3]



def test_a_reservation_put_aside_is_made_before_a_later_job_that_might_start():
    """The backfill puts aside the reservation of a job that cannot start now (the kernel's `aside`: made only
    if a later job of the pass might start); when one might, the reservations before it are made first, in
    queue order. Job 2 (all 8 CPUs) cannot start before job 1 ends at 100 and is reserved from 60 (rounded);
    job 3 (1 CPU for 200 s) fits the free CPUs now but would run into job 2's reservation, so it waits until
    job 2 ends; job 4 (2 CPUs, 50 s) ends before it and starts at once. Had job 2's reservation not been made
    before job 3 was tested, job 3 would have started at once."""
    jobs = frame([(0, 100, 100, 4), (1, 100, 100, 8), (2, 200, 200, 1), (3, 50, 50, 2)])
    assert starts(jobs, ONE_NODE_8) == [0, 100, 200, 3]

def test_a_reservation_holds_whole_nodes():
    """At 1 s resolution: job 2 (4 CPUs) is reserved the node from 100 to 200; job 3 (2 CPUs, 200 s)
    fits the 2 free CPUs now but would run into that reservation, so Slurm holds it until the main
    scheduler starts both at 100. EASY backfills it at once (the head still has its 4 CPUs at 100)."""
    conf = ONE_NODE_8.with_sched(bf_resolution=1)
    jobs = frame([(0, 100, 100, 6), (1, 100, 100, 4), (2, 200, 200, 2)])
    assert starts(jobs, conf) == [0, 100, 100]
    w = Workload.from_arrays(submit=[0, 1, 2], run=[100, 100, 200], req_time=[100, 100, 200], cores=[6, 4, 2])
    assert list(simulate(w, Capacity.single(8), "FCFS", "easy").start) == [0, 100, 2]


def test_a_blocked_partition_closes_its_nodes_to_the_rest_of_the_main_pass():
    """sched/builtin (no backfill): job 2 cannot start in p1, so the node is taken from the pass and
    job 3, in p2 on the same node, waits although a CPU is free; it starts when p2's turn comes with
    room, after job 2."""
    conf = parse_slurm_conf("SchedulerType=sched/builtin\nNodeName=n1 CPUs=4\n"
                            "PartitionName=p1 Nodes=n1 Default=YES\nPartitionName=p2 Nodes=n1\n")
    jobs = frame([(0, 100, 100, 3, "p1"), (1, 100, 100, 4, "p1"), (2, 10, 10, 1, "p2")])
    assert starts(jobs, conf) == [0, 100, 200]


def test_bf_max_job_test_bounds_the_jobs_a_pass_tests():
    """With one job tested per pass, only job 2 (the blocked head) is; job 3 is never backfilled and
    waits behind job 2. With two, job 3 ends by the head's reservation and starts at once."""
    jobs = frame([(0, 100, 120, 6), (1, 100, 100, 8), (2, 10, 60, 2)])
    assert starts(jobs, ONE_NODE_8.with_sched(bf_max_job_test=1, bf_resolution=1)) == [0, 100, 200]
    assert starts(jobs, ONE_NODE_8.with_sched(bf_max_job_test=2, bf_resolution=1)) == [0, 100, 2]


def test_partition_priority_tier_orders_the_queue_first():
    """Two partitions on one node; the 'high' job, submitted last, starts first when the node frees."""
    conf = parse_slurm_conf("NodeName=n1 CPUs=4\nPartitionName=low Nodes=n1 Default=YES PriorityTier=1\n"
                            "PartitionName=high Nodes=n1 PriorityTier=2\nSchedulerParameters=bf_interval=1\n")
    jobs = frame([(0, 100, 100, 4, "low"), (1, 50, 50, 4, "low"), (2, 50, 50, 4, "high")])
    assert starts(jobs, conf) == [0, 150, 100]


def test_multifactor_age_moves_only_at_the_recalculation():
    """Job 2 is submitted before job 3 but in a partition of lower PriorityJobFactor: at submission
    job 3 ranks first (partition 1000 vs 500). From the recalculation at 300 s the age of job 2
    (PriorityMaxAge 10 min, weight 2000) puts it ahead: it starts first when the node frees at 400."""
    conf = parse_slurm_conf(
        "NodeName=n1 CPUs=4\nPartitionName=a Nodes=n1 Default=YES PriorityJobFactor=1\n"
        "PartitionName=b Nodes=n1 PriorityJobFactor=2\nPriorityType=priority/multifactor\nPriorityWeightAge=2000\n"
        "PriorityWeightPartition=1000\nPriorityMaxAge=10\nPriorityCalcPeriod=5\nSchedulerParameters=bf_interval=1\n")
    jobs = frame([(0, 400, 400, 4, "a"), (1, 50, 50, 4, "a"), (200, 50, 50, 4, "b")])
    assert starts(jobs, conf, rule="multifactor") == [0, 400, 450]
    # ended before the recalculation: job 3 first
    jobs = frame([(0, 250, 250, 4, "a"), (1, 50, 50, 4, "a"), (200, 50, 50, 4, "b")])
    assert starts(jobs, conf, rule="multifactor") == [0, 300, 250]


def test_qos_priorities_order_the_queue_and_a_weight_without_them_is_said(tmp_path):
    """PriorityWeightQOS orders by each QOS's Priority, which slurmdbd keeps (given as `sacctmgr -nP show
    qos format=name,priority` prints them): job 3 (QOS high) passes job 2 (normal) though submitted
    later. Without the priorities every QOS factor is 0, the queue is submission order, and the replay
    says why; a QOS the priorities do not name is said too."""
    text = "NodeName=n1 CPUs=4\nPartitionName=a Nodes=n1 Default=YES\nPriorityType=priority/multifactor\n" \
           "PriorityWeightQOS=1000\nSchedulerParameters=bf_interval=1\n"
    conf = parse_slurm_conf(text)
    jobs = frame([(0, 100, 100, 4), (1, 50, 50, 4), (2, 50, 50, 4)], qos=["normal", "normal", "high"])
    qos = parse_qos_priorities("Name|Priority\nnormal|0\nhigh|100\n")
    assert qos == (("high", 100), ("normal", 0)) == parse_qos_priorities("normal=0,high=100")
    assert starts(jobs, conf.with_qos(qos), rule="multifactor") == [0, 150, 100]
    (tmp_path / "slurm.conf").write_text(text)
    assert starts(jobs, read_slurm_conf(tmp_path / "slurm.conf", dict(qos)), rule="multifactor") == [0, 150, 100]
    plain = slurm_schedule(jobs, conf, rule="multifactor")
    assert plain.jobs["start"].to_list() == [0, 100, 150]
    assert any("PriorityWeightQOS is 1000" in n and "--qos-priority" in n for n in plain.notes)
    odd = slurm_schedule(jobs.with_columns(pl.Series("qos", ["normal", "normal", "debug"])), conf.with_qos(qos),
                         rule="multifactor")
    assert any(n.startswith("1 job ran in a QOS") and "(debug)" in n for n in odd.notes)
    with pytest.raises(ValueError, match="sacctmgr"):
        parse_qos_priorities("normal|high")
    assert parse_qos_priorities("normal=0,high=100,normal=0") == qos  # the same twice says nothing new
    with pytest.raises(ValueError, match="normal is given twice, as 0 and 100: give each QOS once"):
        parse_qos_priorities("normal=0,high=100,normal=100")


def _shares(account, assoc_raw=None, acct_raw=None, root=()):
    """Normalised shares as `replay.associations` gives them: each user's over its account's users', each
    account's over root's children's (root's own users `root` included); 1 share each unless given."""
    account = np.asarray(account, np.int64)
    n_acct = int(account.max()) + 1
    assoc_raw = np.ones(len(account)) if assoc_raw is None else np.asarray(assoc_raw, np.float64)
    acct_raw = np.ones(n_acct) if acct_raw is None else np.asarray(acct_raw, np.float64)
    level = np.bincount(account, weights=assoc_raw, minlength=n_acct)
    return assoc_raw / level[account], acct_raw / (acct_raw.sum() + sum(root))


def _fair_tree(usage, account, assoc_raw=None, acct_raw=None, root=()):
    out = np.empty(len(usage))
    assoc_share, acct_share = _shares(account, assoc_raw, acct_raw, root)
    fairshare_factors(np.asarray(usage, np.float64), np.asarray(account, np.int64), assoc_share, acct_share,
                      np.full(len(acct_share), -1), sum(v > 0 for v in root), len(root), out)
    return out


def test_fair_tree_factors_of_one_account():
    assert list(_fair_tree([0.0, 10.0, 10.0, 30.0], [0] * 4)) == [1.0, 0.75, 0.75, 0.25]
    assert list(_fair_tree([0.0, 0.0, 0.0], [0] * 3)) == [1.0, 1.0, 1.0]


def test_fair_tree_counts_roots_own_user_and_ranks_it_first():
    """sacctmgr always makes root's user association (account root): a child of root with 1 share and no
    usage, so its level fair-share is infinite and it ranks first (fair_tree.c sorts a user before a tied
    account), and it counts in the ranks: measured live, `sshare` gave factors rank / 26 for 25 users with
    usage. One account of 4 users who used 0, 10, 10, 30: with root's user the ranks are 4, 3, 3, 1 of 5 (root's
    user takes 5). Before any usage every account ties with root's user (both infinite): its first user
    takes root's rank, 5 of 5, and so do the users tied with it."""
    assert list(_fair_tree([0.0, 10.0, 10.0, 30.0], [0] * 4, root=(1.0,)) * 5) == pytest.approx([4, 3, 3, 1])
    assert list(_fair_tree([0.0, 0.0, 0.0], [0] * 3, root=(1.0,)) * 4) == pytest.approx([4, 4, 4])


def test_fair_tree_weighs_the_sites_shares():
    """fair_tree.c: LF = S / U, S = the association's RawShares over its siblings' (`shares_norm`), U its
    usage over its parent's. Accounts 0 (users 0, 1) and 1 (user 2) each used 50 of 100: with equal shares
    both LF 1 (tied, their users ranked together); with account 0 holding 3 shares against 1 (S .75 / .5 = 1.5
    against .25 / .5 = .5) every user of account 0 ranks above user 2. Within account 0 users 0 and 1 used 40
    and 10: with equal shares user 1 (.5 / .2 = 2.5) ranks above user 0 (.5 / .8 = .625); with user 0 holding
    9 shares against 1 (.9 / .8 = 1.125 against .1 / .2 = .5) user 0 ranks first. Shares 0: LF 0, the lowest."""
    usage, account = [40.0, 10.0, 50.0], [0, 0, 1]
    assert list(_fair_tree(usage, account, acct_raw=[3, 1]) * 3) == pytest.approx([2, 3, 1])
    assert list(_fair_tree(usage, account, assoc_raw=[9, 1, 1], acct_raw=[3, 1]) * 3) == pytest.approx([3, 2, 1])
    assert list(_fair_tree([0.0, 10.0, 50.0], account, assoc_raw=[0, 1, 1], acct_raw=[3, 1]) * 3) == \
        pytest.approx([2, 3, 1])


def _classic(usage: list[float], account: list[int], acct_ue: list[float], algorithm: int, damping: float = 1.0,
             assoc_raw=None, acct_raw=None, root=()):
    usage_a, account_a, ue = np.array(usage), np.array(account, np.int64), np.array(acct_ue)
    now = np.zeros(len(acct_ue))
    top = np.full(len(acct_ue), -1)  # every account a child of root
    total = usage_sums(usage_a, account_a, top, now)
    assoc_share, acct_share = _shares(account, assoc_raw, acct_raw, root)
    return [effective_usage_factor(a, usage_a, account_a, total, now, assoc_share, acct_share, top, ue, algorithm,
                                   damping) for a in range(len(usage))]


def test_classic_fairshare_takes_the_effective_usage_down_the_tree():
    """priority_multifactor.c: F = 2^(-(UE / S) / FairShareDampeningFactor), UE = U for a child of root
    (an account), U + (UE_account - U) * S_user / S_siblings for a user (`_set_usage_efctv`). One account
    (UE 1) of 4 users who used 0, 10, 10, 30 of 50: U = 0, .2, .2, .6, S = 1/4; UE = .25, .4, .4, .7,
    F = 2^-1, 2^-1.6, 2^-1.6, 2^-2.8. Damping 2 halves every exponent. Two accounts (users 0, 1 in account 0,
    80 of 100; users 2, 3, 4 in account 1, 20): user 0 (U .6, S .25) UE .6 + .2 / 2 = .7; user 1 .2 + .6 / 2
    = .5; user 2 (S 1/6) 0 + .2 / 3; users 3, 4 .1 + .1 / 3. No usage anywhere: every factor 1."""
    assert _classic([0, 10, 10, 30], [0] * 4, [1.0], CLASSIC) == pytest.approx([2 ** -1, 2 ** -1.6, 2 ** -1.6, 2 ** -2.8])
    assert _classic([0, 10, 10, 30], [0] * 4, [1.0], CLASSIC, 2.0) == pytest.approx(
        [2 ** -0.5, 2 ** -0.8, 2 ** -0.8, 2 ** -1.4])
    assert _classic([60, 20, 0, 10, 10], [0, 0, 1, 1, 1], [0.8, 0.2], CLASSIC) == pytest.approx(
        [2 ** -(0.7 * 4), 2 ** -(0.5 * 4), 2 ** -(0.2 / 3 * 6), 2 ** -((0.1 + 0.1 / 3) * 6), 2 ** -((0.1 + 0.1 / 3) * 6)])
    assert _classic([0, 0, 0], [0] * 3, [0.0], CLASSIC) == [1.0, 1.0, 1.0]


def test_classic_fairshare_weighs_the_sites_shares_and_roots_user():
    """`_set_usage_efctv` with RawShares: UE = U + (UE_account - U) * shares / the siblings' shares, S = the
    account's normalised shares times the user's; root's user (1 share) is a child of root, so 3 accounts of
    1 share have S = 1/4 each (measured live: `sshare` NormShares 0.25). One account of users 0 (3 shares) and
    1 (1 share) who used 30 and 10 of 40 (account UE 1): S = .75 and .25 (no root user), UE = .75 + .25 * .75
    = .9375 and .25 + .75 * .25 = .4375, F = 2^-(.9375 / .75), 2^-(.4375 / .25). With root's user: S halves,
    so the exponents double. Shares 0: F 0 (`priority_p_calc_fs_factor`)."""
    f = _classic([30, 10], [0, 0], [1.0], CLASSIC, assoc_raw=[3, 1])
    assert f == pytest.approx([2 ** -(0.9375 / 0.75), 2 ** -(0.4375 / 0.25)])
    assert _classic([30, 10], [0, 0], [1.0], CLASSIC, assoc_raw=[3, 1], root=(1.0,)) == pytest.approx(
        [x ** 2 for x in f])
    assert _classic([30, 10], [0, 0], [1.0], CLASSIC, assoc_raw=[0, 1])[0] == 0.0


def test_classic_fairshare_takes_the_effective_usage_down_a_deeper_tree():
    """`_set_children_usage_efctv` down the tree: root holds account A (1 share) and root's user (1: A's S
    .5); A holds user u and sub-account B (1 share each: S .5 within A, .25 of the tree), B holds user v.
    u used 30, v 10 of 40. A (a child of root): UE = U = 1. B: U .25, UE = .25 + (1 - .25) * .5 = .625. v
    (alone in B, S .25): UE = .25 + (.625 - .25) * 1 = .625, F = 2^-(.625 / .25); u (S .25): UE = .75 +
    (1 - .75) * .5 = .875, F = 2^-(.875 / .25)."""
    usage, account, parent = np.array([30.0, 10.0]), np.array([0, 1]), np.array([-1, 0])
    assoc_share, acct_share = np.array([0.5, 1.0]), np.array([0.5, 0.5])
    now, ue = np.zeros(2), np.zeros(2)
    total = usage_sums(usage, account, parent, now)
    assert list(now) == [40.0, 10.0]
    account_effective_usage(now, total, acct_share, parent, CLASSIC, ue)
    assert list(ue) == pytest.approx([1.0, 0.625])
    f = [effective_usage_factor(a, usage, account, total, now, assoc_share, acct_share, parent, ue, CLASSIC, 1.0)
         for a in range(2)]
    assert f == pytest.approx([2 ** -(0.875 / 0.25), 2 ** -(0.625 / 0.25)])


def test_depth_oblivious_fairshare_as_the_plugin_computes_it():
    """`_depth_oblivious_set_usage_efctv`: F = 2^-R, R = ratio_p * ratio_l^k, ratio_p = the account's UE / S
    (its U, a child of root), ratio_l = (U / S) / the siblings' usage ratio, k = 1 where log(ratio_p) and
    log(ratio_l) have the same sign, else 1 / (1 + (5 log ratio_p)^2); a user with no usage keeps UE = U = 0
    (F 1). The accounts of test_classic_fairshare_takes_the_effective_usage_down_the_tree: account 0 ratio_p
    .8 / .5 = 1.6, user 0 ratio_l 2.4 / 1.6 = 1.5 (k 1), user 1 .8 / 1.6 = .5; account 1 ratio_p .4, users 3
    and 4 ratio_l .6 / .4 = 1.5."""
    k1 = 1 / (1 + (5 * math.log(1.6)) ** 2)
    k2 = 1 / (1 + (5 * math.log(0.4)) ** 2)
    assert _classic([60, 20, 0, 10, 10], [0, 0, 1, 1, 1], [0.8, 0.2], DEPTH_OBLIVIOUS) == pytest.approx(
        [2 ** -(1.6 * 1.5), 2 ** -(1.6 * 0.5 ** k1), 1.0, 2 ** -(0.4 * 1.5 ** k2), 2 ** -(0.4 * 1.5 ** k2)])


def test_a_classic_decay_pass_sets_each_factor_when_slurm_does():
    """Slurm 22.05's decay pass (`_decay_thread`, classic): the accounts' effective usage comes first, from the
    usage before the pass; then the jobs in job id order: a running job is charged, a pending job computes its
    user's factor from the usage charged so far. One account of 3 users; before the pass at 600 users 0 and 1
    used 300 each (account UE 600 / 600 = 1). Job 0 (user 0) and job 2 (user 2) run, job 1 (user 1) waits:
    job 0's 300 s are charged (total 900), then user 1's factor: U = 300 / 900, UE = 1/3 + (1 - 1/3) / 3 =
    5/9, S = 1/3, F = 2^(-5/3) (with every charge first, U = 1/4 and F = 2^-1.5); then job 2 is charged.
    Users 0 and 2 stay stale: their factors come at their next submission. A first pass (no usage before it)
    leaves the account's UE 0: a user without usage keeps F = 1 (measured live: 48 jobs' InitPrio)."""
    usage = np.array([300.0, 300.0, 0.0])
    account = np.zeros(3, np.int64)
    acct_ue, acct_now, stale, fs = np.zeros(1), np.zeros(1), np.zeros(3, np.bool_), np.ones(3)
    charged = np.array([300.0, 0.0, 300.0])
    classic_recalc(usage, np.arange(3), account, np.full(3, 1 / 3), np.ones(1), np.full(1, -1), np.ones(3, np.int64), np.full(3, 5000.0), charged,
                   np.array([2, 0]), 2, np.array([1]), 1, 600.0, 300.0, 0.0, CLASSIC, 1.0, acct_ue, acct_now, stale, fs)
    assert list(usage) == [600.0, 300.0, 300.0] and acct_ue[0] == 1.0
    assert fs[1] == pytest.approx(2 ** (-5 / 3)) and list(stale) == [True, False, True]
    usage = np.array([0.0, 0.0])
    acct_ue, stale, fs = np.zeros(1), np.zeros(2, np.bool_), np.ones(2)
    classic_recalc(usage, np.arange(2), np.zeros(2, np.int64), np.full(2, 0.5), np.ones(1), np.full(1, -1),
                   np.ones(2, np.int64), np.full(2, 5000.0),
                   np.zeros(2), np.array([0]), 1, np.array([1]), 1, 300.0, 0.0, 0.0, CLASSIC, 1.0, acct_ue, acct_now,
                   stale, fs)
    assert acct_ue[0] == 0.0 and fs[1] == 1.0 and usage[0] == 300.0


def test_fair_tree_ranks_a_light_accounts_users_above_a_heavy_accounts():
    """fair_tree.html: if sibling accounts A and B have A's level fair-share higher, all of A's users rank
    above all of B's. Associations: 0, 1 in account 0; 2, 3, 4 in account 1. Usage 0: 60, 1: 20 (account 0:
    80 of 100, LF 0.5 / 0.8 = 0.625); 2: 0, 3: 10, 4: 10 (account 1: 20, LF 0.5 / 0.2 = 2.5). Account 1 first:
    2 (no usage, LF inf) rank 5, 3 and 4 tied (LF (1/3) / 0.5) rank 4 both; then account 0: 1 (LF 0.5 / 0.25 = 2)
    rank 2, 0 (LF 0.5 / 0.75) rank 1. On one level the users' own shares would put 1 (20 of 100) beside 3 and 4."""
    out = _fair_tree([60.0, 20.0, 0.0, 10.0, 10.0], [0, 0, 1, 1, 1])
    assert list(out * 5) == pytest.approx([1, 2, 5, 4, 4])


def test_fair_tree_walks_tied_accounts_one_after_the_other():
    """fair_tree.c's tie rules as its code runs them (fair_tree.html says tied sibling accounts have their
    children merged, but `_count_tied_accounts` stops at the first account it meets, so none is merged): an
    account tied with the sibling before it is walked in turn, its first user tied with the user before.
    Accounts 0 and 1 both used 50 of 100 (LF 1); account 2 none (its user ranks first). Users: 0 (account 0,
    all of its 50), 1 and 2 (account 1, 40 and 10: LF 0.5/0.8 and 0.5/0.2), 3 (account 2). User 3 rank 4;
    account 0: user 0 rank 3; account 1, tied with account 0: user 2 (its first, 2.5) tied, rank 3; user 1
    rank 1 (one rank per user visited)."""
    out = _fair_tree([50.0, 40.0, 10.0, 0.0], [0, 1, 1, 2])
    assert list(out * 4) == pytest.approx([3, 1, 3, 4])


def test_fair_tree_walks_accounts_below_accounts():
    """A deeper tree (fair_tree.c recurses): root has accounts 0 (3 shares) and 1 (1 share); account 0
    has user 0 and sub-account 2 (users 1, 2), with 1 share each. Usage: user 0 30, users 1 and 2 10 and 0,
    user 3 (account 1) 60, of 100. At root: account 0 (40 of 100, S .75: LF 1.875) before account 1 (60,
    S .25: LF .417). In account 0: sub-account 2 (10 of 40, S .5: LF 2) before user 0 (30 of 40: LF .667).
    In account 2: user 2 (no usage, LF inf) before user 1. Ranks: user 2 4, user 1 3, user 0 2, user 3 1."""
    usage = np.array([30.0, 10.0, 0.0, 60.0])
    account = np.array([0, 2, 2, 1])
    parent = np.array([-1, -1, 0])
    assoc_share = np.array([0.5, 0.5, 0.5, 1.0])  # user 0 beside sub-account 2 in account 0; users 1, 2 in 2
    acct_share = np.array([0.75, 0.25, 0.5])
    out = np.empty(4)
    fairshare_factors(usage, account, assoc_share, acct_share, parent, 0, 0, out)
    assert list(out * 4) == pytest.approx([2, 3, 4, 1])


def test_the_replay_charges_each_account_and_ranks_its_users_under_it():
    """Two accounts on a one-CPU node, Fair Tree weight 10000, recalculation every second. Account 'big'
    (users a, b) ran 3,000 s (a's job); account 'small' (user c) 600 s. At 3,600 b has no usage of its
    own: on one level of users b ranks first and its job goes before c's later one. With accounts,
    'small' used 600 of 3,600 CPU-seconds against big's 3,000, so every user of 'small' ranks above every
    user of 'big': c's job goes first."""
    conf = parse_slurm_conf("NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 Default=YES\n"
                            "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\nPriorityCalcPeriod=1\n"
                            "SchedulerParameters=bf_interval=1\n")
    jobs = frame([(0, 3000, 3000, 1, None, "a"), (3000, 600, 600, 1, None, "c"), (3500, 60, 60, 1, None, "b"),
                  (3501, 60, 60, 1, None, "c")])
    flat = starts(jobs, conf, rule="multifactor")
    assert flat == [0, 3000, 3600, 3660]
    accounted = starts(jobs.with_columns(pl.Series("account", ["big", "small", "big", "small"])), conf, rule="multifactor")
    assert accounted == [0, 3000, 3660, 3600]


def test_fairshare_puts_the_light_user_first():
    """Two users on a one-CPU node; 'heavy' ran for an hour, so at the next recalculation 'light' ranks
    first (Fair Tree, weight 10000) although its job came later."""
    conf = parse_slurm_conf("NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 Default=YES\n"
                            "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\nPriorityCalcPeriod=1\n"
                            "SchedulerParameters=bf_interval=1\n")
    jobs = frame([(0, 3600, 3600, 1, None, "heavy"), (3590, 60, 60, 1, None, "heavy"),
                  (3595, 60, 60, 1, None, "light")])
    assert starts(jobs, conf, rule="multifactor") == [0, 3660, 3600]


def test_usage_is_charged_at_the_recalculations_to_the_jobs_running_then():
    """Slurm 22.05's decay pass charges the jobs running at it, since the last pass or their start; what a
    job runs between the last pass and its end is never charged (the live run with 29 users: 293 of 300
    initial priorities match that). Passes every 100 s from `calc_origin_s`. User a's job 1 (2 CPUs) runs
    0-90, user b's job 2 (1 CPU) 0-150; jobs 3 (b) and 4 (a) want the whole 4-CPU node from 150.
    Passes at 0, 100: job 1 ended before 100, a is charged nothing, b 100: a's job 4 first (150), b's
    at 160. Passes at 85, 185: job 1 was running at 85: a 170, b 85: b's job 3 first."""
    conf = SlurmConf.single(4).with_sched(bf_interval=1, sched_interval=1).with_priority(
        multifactor=True, weight_fairshare=1000, calc_period_s=100.0)
    jobs = frame([(0, 90, 100, 2, None, "a"), (0, 150, 200, 1, None, "b"), (120, 10, 10, 4, None, "b"),
                  (121, 10, 10, 4, None, "a")])
    assert starts(jobs, conf, rule="multifactor") == [0, 0, 160, 150]
    late = conf.with_priority(calc_origin_s=85.0)
    assert starts(jobs, late, rule="multifactor") == [0, 0, 150, 160]


def test_a_job_ending_in_the_passs_second_is_charged_to_it():
    """Slurm's decay pass wakes on the whole second, before anything else of that second: a job whose
    recorded end is that second was still running and is charged (the live Fair Tree runs: 294 of 300
    initial priorities matched without that, 300 of 300 with it; the 6 were one user whose 5-s job ended in
    the pass's second). The jobs of test_usage_is_charged_at_the_recalculations_to_the_jobs_running_then,
    passes at 90 and 190: job 1 ends at 90, charged 180 (a), b 90: b's job 3 first. With complete_s 0 too:
    the pass comes before the release (with 0.5 s every start that waits on an end is 0.5 s later)."""
    jobs = frame([(0, 90, 100, 2, None, "a"), (0, 150, 200, 1, None, "b"), (120, 10, 10, 4, None, "b"),
                  (121, 10, 10, 4, None, "a")])
    for complete_s in (0.0, 0.5):
        conf = SlurmConf.single(4).with_sched(bf_interval=1, sched_interval=1, complete_s=complete_s).with_priority(
            multifactor=True, weight_fairshare=1000, calc_period_s=100.0, calc_origin_s=90.0)
        assert starts(jobs, conf, rule="multifactor")[2:] == [150 + complete_s, 160 + 2 * complete_s], complete_s


def test_a_completing_job_is_not_charged_at_a_recalculation():
    """Slurm's decay pass charges RUNNING jobs only; a job that has ended but still holds its CPUs
    (COMPLETING) is not one. With 20 s of completing time, job 1 (user a, 2 CPUs) ends at 90 and frees
    its CPUs at 110: at the pass of 100 it is completing, so a is charged nothing and b 100 (job 2,
    running 0-150). The whole node comes free at 170 (job 2's end plus 20): a's job 4 goes first, ends
    at 180, and b's job 3 starts when its CPUs come free, at 200."""
    conf = SlurmConf.single(4).with_sched(bf_interval=1, sched_interval=1, complete_s=20.0).with_priority(
        multifactor=True, weight_fairshare=1000, calc_period_s=100.0)
    jobs = frame([(0, 90, 100, 2, None, "a"), (0, 150, 200, 1, None, "b"), (120, 10, 10, 4, None, "b"),
                  (121, 10, 10, 4, None, "a")])
    assert starts(jobs, conf, rule="multifactor") == [0, 0, 200, 170]


def test_job_priority_is_truncated_and_at_least_one():
    submit = np.array([0.0])
    args = (np.ones(1), np.zeros(1, np.int64), np.zeros(1), np.zeros(1), np.zeros(1))
    assert job_priority(0, 150.0, submit, *args, 1000.0, 0.0, 0.0, 0.0, 0.0, 600.0) == 250.0
    assert job_priority(0, 0.0, submit, *args, 1000.0, 0.0, 0.0, 0.0, 0.0, 600.0) == 1.0


def test_exclusive_partition_gives_whole_nodes():
    """OverSubscribe=EXCLUSIVE: each 1-CPU job takes a 4-CPU node; the third waits for one."""
    conf = parse_slurm_conf("NodeName=n[1-2] CPUs=4\nPartitionName=p Nodes=n[1-2] Default=YES OverSubscribe=EXCLUSIVE\n"
                            "SchedulerParameters=bf_interval=1\n")
    jobs = frame([(0, 100, 100, 1), (0, 100, 100, 1), (0, 100, 100, 1)])
    assert starts(jobs, conf) == [0, 0, 100]
    shared = parse_slurm_conf("NodeName=n[1-2] CPUs=4\nPartitionName=p Nodes=n[1-2] Default=YES\n")
    assert starts(jobs, shared) == [0, 0, 0]


def choose(free: list[int], cpus: int, min_nodes: int = 0, node_cpus: int = 8, exclusive: bool = False,
           allowed: list[int] | None = None, weight: list[int] | None = None) -> list[tuple[int, int]]:
    """`pick` on nodes 1..n with these free CPUs (and node weights, 1 each unless given): [(node, CPUs)],
    1-based, or [] when the job does not fit."""
    from metapilot.models.simulator.slurm.conf import Node
    from metapilot.models.simulator.slurm.nodes import pick
    from metapilot.models.simulator.slurm.replay import node_table

    n = len(free)
    names, caps, weights = node_table(tuple(Node(f"n{i + 1}", node_cpus, weight=w)
                                            for i, w in enumerate(weight or [1] * n)))
    number = [int(x[1:]) if x else 0 for x in names]  # the table's gaps between weights have none
    free_a = np.array([free[i - 1] if i else 0 for i in number], np.int64)
    words = max(1, (len(names) + 63) // 64)
    allow, live = np.zeros(words, np.uint64), np.zeros(words, np.uint64)
    node_bits(np.array([i > 0 and (not allowed or i in allowed) for i in number], np.bool_), allow)
    node_bits(free_a > 0, live)
    out_n, out_c = np.zeros(len(names), np.int64), np.zeros(len(names), np.int64)
    k = pick(cpus, min_nodes, exclusive, allow, live, free_a, caps, weights, out_n, out_c)
    return [(number[out_n[q]], int(out_c[q])) for q in range(k)] if k >= 0 else []


def test_a_one_node_job_goes_to_the_tightest_set_of_consecutive_nodes():
    """cons_tres's `_eval_nodes`: nodes 1-2 (6 + 4 free) and node 4 (5 free) are two sets of consecutive
    nodes; a 4-CPU job takes the tightest set that holds it, {4}, not node 2, the tightest node."""
    assert choose([6, 4, 0, 5], 4) == [(4, 4)]
    assert choose([6, 4, 0, 5], 4, min_nodes=1) == [(4, 4)]
    assert choose([6, 4, 0, 3], 4) == [(2, 4)]  # {4} is too small: in {1, 2}, node 2 fits tightest


def test_a_wider_job_takes_its_sets_nodes_in_index_order():
    """10 CPUs: {1, 2} (12 free) holds the job and {4} (8) does not, so nodes 1 and 2 in index order, not
    node 4 first (the most free); with no set that holds it, the largest set first, then the next."""
    assert choose([6, 6, 0, 8], 10) == [(1, 6), (2, 4)]
    assert choose([5, 0, 7, 0, 4], 14) == [(3, 7), (1, 5), (5, 2)]
    assert choose([5, 0, 7, 0, 4], 17) == []
    assert choose([6, 6, 0, 8], 10, min_nodes=1) == []  # -N 1: no node has 10 CPUs free


def test_a_job_on_several_nodes_leaves_a_cpu_for_each_node_it_still_needs():
    assert choose([8, 8, 8], 4, min_nodes=3) == [(1, 2), (2, 1), (3, 1)]


def test_a_whole_node_job_takes_the_tightest_run_of_idle_nodes():
    """OverSubscribe=EXCLUSIVE: node 2 is busy, so the idle nodes are {1} and {3, 4}; a job of two nodes
    takes {3, 4}, a job of one takes node 1 (the first of the tightest sets: one node each way)."""
    assert choose([8, 3, 8, 8], 16, exclusive=True) == [(3, 8), (4, 8)]
    assert choose([8, 3, 8, 8], 1, exclusive=True) == [(1, 8)]
    assert choose([8, 3, 8, 8], 17, exclusive=True) == [(3, 8), (4, 8), (1, 8)]


def test_nodes_a_job_may_not_use_break_the_sets():
    """Node 2 reserved in the backfill map (not allowed): nodes 1 and 3 are two sets of one node."""
    assert choose([4, 8, 4], 6, allowed=[1, 3]) == [(1, 4), (3, 2)]
    assert choose([4, 8, 4], 6) == [(2, 6)]  # one set: node 2 holds it alone


def test_the_lowest_node_weight_is_allocated_first():
    """slurm.conf's Weight (`_eval_nodes`): a change of weight ends a set of consecutive nodes, and the
    set of the lowest weight is chosen before any other, even one that fits more tightly, or one that
    holds the whole job while it does not; then the next lowest."""
    assert choose([8, 8, 4, 4], 4) == [(3, 4)]  # equal weights: the tightest set, {3, 4}... its node 3
    assert choose([8, 8, 4, 4], 4, weight=[1, 1, 5, 5]) == [(1, 4)]  # {1, 2} weighs less
    assert choose([8, 8, 4, 4], 20, weight=[5, 5, 1, 1]) == [(3, 4), (4, 4), (1, 8), (2, 4)]
    assert choose([8, 8, 8], 8, weight=[2, 1, 2]) == [(2, 8)]  # the light node between two sets of its own
    assert choose([8, 8, 8], 16, weight=[2, 1, 2]) == [(2, 8), (1, 8)]


def test_a_replay_follows_the_node_weights_of_slurm_conf():
    """n1 (4 CPUs) weighs 10, n2 (8 CPUs) 1: a 4-CPU job goes to n2, the lighter node, so a one-node job of
    8 CPUs waits for it; at equal weights the first job takes n1, the tightest, and the second starts at
    once. The node table has a gap between the two weights, and the job-size factor counts 2 nodes."""
    from metapilot.models.simulator.slurm.replay import node_table

    text = "NodeName=n1 CPUs=4 Weight=10\nNodeName=n2 CPUs=8 Weight=1\nPartitionName=a Nodes=ALL Default=YES\n"
    jobs = frame([(0, 100, 100, 4), (1, 10, 10, 8)], nodes=[0, 1])
    weighed = parse_slurm_conf(text).with_sched(bf_interval=1)
    alike = parse_slurm_conf(text.replace("Weight=10", "Weight=1")).with_sched(bf_interval=1)
    assert starts(jobs, weighed) == [0, 100] and starts(jobs, alike) == [0, 1]
    names, cpus, weight = node_table(weighed.nodes)
    assert names == ["n1", None, "n2"] and cpus.tolist() == [4, 0, 8] and weight.tolist() == [10, 1, 1]
    names, cpus, weight = node_table(alike.nodes)
    assert names == ["n1", "n2"] and weight.shape == (0,)


def test_the_first_set_shortcut_chooses_what_the_full_table_of_sets_does():
    """`pick` tries the first set chosen without building the table of sets (`_pick_first_set`), and falls back to
    the whole table (`_pick_sets`) when that set does not hold the job: the same nodes and CPUs either way."""
    from metapilot.models.simulator.slurm.nodes import _pick_sets, pick

    rng = np.random.default_rng(7)
    for _ in range(3000):
        n = int(rng.integers(1, 140))
        caps = rng.choice([1, 4, 8, 16], n) if rng.random() < 0.3 else np.full(n, int(rng.choice([1, 8, 25])))
        free = np.where(rng.random(n) < 0.3, 0, rng.integers(0, caps + 1)).astype(np.int64)
        free = np.minimum(free, caps).astype(np.int64)
        words = (n + 63) // 64
        allow, live = np.zeros(words, np.uint64), np.zeros(words, np.uint64)
        usable = rng.random(n) < 0.85
        weight = np.zeros(0, np.int64)  # every node alike
        if rng.random() < 0.3:  # weights, with a node no job may use where they change (`replay.node_table`)
            weight = rng.integers(1, 4, n).astype(np.int64)
            usable[1:] &= weight[1:] == weight[:-1]
        node_bits(usable, allow)
        node_bits(free > 0, live)
        cpus = int(rng.integers(1, max(2, int(caps.sum()) // 2)))
        min_nodes = int(rng.choice([0, 0, 1, 2, 3]))
        excl = bool(rng.random() < 0.25)
        a_n, a_c, b_n, b_c = (np.full(n, -1, np.int64) for _ in range(4))
        ka = pick(cpus, min_nodes, excl, allow, live, free, caps.astype(np.int64), weight, a_n, a_c)
        kb = _pick_sets(cpus, min_nodes, excl, allow, live, free, caps.astype(np.int64), weight, b_n, b_c)
        assert ka == kb
        if ka > 0:
            assert list(a_n[:ka]) == list(b_n[:kb]) and list(a_c[:ka]) == list(b_c[:kb])


def test_a_job_that_never_fits_is_left_out_and_counted():
    from metapilot.models.simulator.slurm import slurm_schedule

    s = slurm_schedule(frame([(0, 10, 10, 4), (1, 10, 10, 16)]), ONE_NODE_8)
    assert s.jobs["start"].to_list() == [0, None] and s.never_fit == 1


def test_completing_time_holds_the_cpus():
    jobs = frame([(0, 100, 100, 8), (1, 10, 10, 8)])
    assert starts(jobs, ONE_NODE_8) == [0, 100]
    assert starts(jobs, ONE_NODE_8.with_sched(complete_s=2)) == [0, 102]


def test_rules_order_the_queue_as_steer_sets_it():
    """SJF: the shorter limit first once the node frees."""
    jobs = frame([(0, 100, 100, 8), (1, 50, 300, 8), (2, 50, 60, 8)])
    assert starts(jobs, ONE_NODE_8, rule="SJF") == [0, 150, 100]
    assert starts(jobs, ONE_NODE_8, rule="FCFS") == [0, 100, 150]


def test_simulate_slurm_is_a_simresult_on_the_workload():
    w = Workload.from_arrays(submit=[0, 1, 2], run=[100, 100, 200], req_time=[100, 100, 200], cores=[6, 4, 2])
    conf = conf_from_capacity([{"partition": None, "nodes": 1, "cores": 8, "gpus": 0, "mem_mib": None}])
    r = simulate_slurm(w, conf.with_sched(bf_interval=1, bf_resolution=1), "multifactor")
    assert list(r.start) == [0, 100, 100] and r.backfill == "slurm"
    assert r.metrics()["jobs"][0] == 3


def test_capacity_without_a_node_count_is_one_node_and_says_so():
    conf = conf_from_capacity([{"partition": "*", "nodes": None, "cores": 64}])
    assert [n.cpus for n in conf.nodes] == [64] and "node count unknown" in conf.notes[0]
    conf = conf_from_capacity([{"partition": "*", "nodes": 16, "cores": 64}])
    assert [n.cpus for n in conf.nodes] == [4] * 16


def test_slurm_conf_parsing():
    text = """# site
ClusterName=mini
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2,sched_min_interval=100000,bf_window=1440,bf_max_job_test=50
PriorityType=priority/multifactor
PriorityDecayHalfLife=7-0
PriorityMaxAge=1-0
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityFlags=NO_FAIR_TREE
NodeName=DEFAULT RealMemory=64000
NodeName=cn[01-03] Sockets=2 CoresPerSocket=8 ThreadsPerCore=1 Gres=gpu:a100:4
NodeName=big CPUs=128
PartitionName=debug Nodes=cn[01-02] Default=YES MaxTime=30 PriorityTier=1
PartitionName=high Nodes=ALL MaxTime=INFINITE PriorityTier=2 PriorityJobFactor=10 OverSubscribe=EXCLUSIVE
"""
    c = parse_slurm_conf(text)
    assert c.cluster == "mini"
    assert [(n.name, n.cpus, n.gpus, n.mem_mib) for n in c.nodes][:1] == [("cn01", 16, 4, 64000.0)]
    assert [n.name for n in c.nodes] == ["cn01", "cn02", "cn03", "big"]
    debug, high = c.partitions
    assert debug.default and debug.nodes == ("cn01", "cn02") and debug.max_time_s == 1800
    assert high.nodes == ("cn01", "cn02", "cn03", "big") and high.exclusive and high.priority_job_factor == 10
    assert (c.sched.bf_interval, c.sched.sched_interval, c.sched.bf_max_job_test, c.sched.bf_window_min) == (1, 2, 50, 1440)
    assert c.sched.bf_resolution == 60 and c.sched.default_queue_depth == 100  # Slurm's defaults
    p = c.priority
    assert p.multifactor and not p.fair_tree and p.max_age_s == 86400 and p.weight_fairshare == 10000
    assert p.calc_period_s == 300 and not p.depth_oblivious and p.fs_dampening == 1.0
    p = parse_slurm_conf(text.replace("NO_FAIR_TREE", "DEPTH_OBLIVIOUS") + "FairShareDampeningFactor=3\n").priority
    assert not p.fair_tree and p.depth_oblivious and p.fs_dampening == 3.0
    with pytest.raises(ValueError, match="1 to 9999"):
        parse_slurm_conf(text + "FairShareDampeningFactor=0\n")


def test_hostlists_and_time_strings():
    assert expand_hostlist("cn[01-03,7],gpu1") == ["cn01", "cn02", "cn03", "cn7", "gpu1"]
    assert parse_time_s("30") == 1800 and parse_time_s("1:30") == 90 and parse_time_s("1-2") == 93600
    assert parse_time_s("2-0:30:00") == 2 * 86400 + 1800 and parse_time_s("UNLIMITED") == float("inf")


# host lists as Slurm 22.05's `scontrol show hostnames` expands them (recorded; checked live below)
SLURM_HOSTNAMES = {
    "rack[1-2]-n[01-03]": "rack1-n01 rack1-n02 rack1-n03 rack2-n01 rack2-n02 rack2-n03",
    "n[1-2]ib[3-4]": "n1ib3 n1ib4 n2ib3 n2ib4",
    "a[1-2]b[3-4]c[5-6]": "a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 a2b4c6",
    "y[1-3]z[7]": "y1z7 y2z7 y3z7",
    "a[1-2],b[5,7-8]": "a1 a2 b5 b7 b8",
    "x[8-011]": "x8 x9 x10 x11",
    "x[098-101]": "x098 x099 x100 x101",
    "x[00-2]": "x00 x01 x02",
}


def test_hostlists_of_several_bracket_groups_expand_as_slurms():
    """`r[1-2]n[01-36]` is a common node naming; read with one bracket group per name it gave 38 nodes
    named `r1n`, `r2n`, `01`, ... instead of 72, and the replay's cluster was the wrong size."""
    for text, names in SLURM_HOSTNAMES.items():
        assert expand_hostlist(text) == names.split(), text


def scontrol_hostnames(tmp_path, text: str, conf_body: str = "NodeName=localhost CPUs=1\nPartitionName=p Nodes=ALL\n"):
    """The installed Slurm's `scontrol show hostnames TEXT` with a throwaway slurm.conf (it expands host lists
    without a controller, but reads the conf first, as slurmctld does); None where Slurm is not installed."""
    import shutil
    import subprocess

    if shutil.which("scontrol") is None:
        return None
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\n" + conf_body)
    return subprocess.run(["scontrol", "show", "hostnames", text], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin:/usr/sbin", "SLURM_CONF": str(conf)})


def test_hostlists_match_the_installed_slurms_scontrol(tmp_path):
    if scontrol_hostnames(tmp_path, "a") is None:
        pytest.skip("scontrol not installed (apt-get install slurm-wlm)")
    for text in [*SLURM_HOSTNAMES, "cn[01-03,7],gpu1", "r[1-4]n[01-36]"]:
        res = scontrol_hostnames(tmp_path, text)
        assert res.returncode == 0, res.stderr
        assert expand_hostlist(text) == res.stdout.split(), text


# host lists `scontrol show hostnames` refuses ("Invalid hostlist"; recorded, checked live below)
SLURM_INVALID_HOSTLISTS = ("n[3-1]", "n[a-c]", "n[]", "n[1,,3]", "n[1-2]]")


def test_an_invalid_host_list_is_an_error_naming_it(tmp_path):
    """A range backwards, not numbers or empty, or a bracket not closed: slurmctld does not start on such a
    line; the replay read `n[3-1]` as no nodes and `n[1-4` as nodes `n` and `1-4`, and replayed an empty
    cluster without a word."""
    for text in (*SLURM_INVALID_HOSTLISTS, "n[1-4", "a[1-2],b[3"):
        with pytest.raises(ValueError, match="invalid host list"):
            expand_hostlist(text)
        with pytest.raises(ValueError, match="invalid host list"):
            parse_slurm_conf(f"NodeName={text} CPUs=4\nPartitionName=p Nodes=ALL\n")
    for text in SLURM_INVALID_HOSTLISTS:
        res = scontrol_hostnames(tmp_path, text)
        assert res is None or "Invalid hostlist" in res.stdout + res.stderr, text


def test_a_value_that_is_not_a_number_is_an_error_naming_it_and_its_line():
    """`int()`'s own words ("invalid literal for int() with base 10: 'abc'") said neither the setting nor
    the line; slurmctld refuses such a line, and so does the read, naming both."""
    nodes = "NodeName=n[1-4] CPUs=4\nPartitionName=p Nodes=ALL\n"
    for text, words in (("NodeName=n[1-4] CPUs=abc\n", "cpus=abc is not a whole number (in `NodeName=n[1-4] CPUs=abc`)"),
                        ("NodeName=n1 CPUs=4 RealMemory=lots\n", "realmemory=lots is not a number"),
                        ("NodeName=n1 CPUs=4 Weight=x\n", "weight=x is not a whole number"),
                        ("NodeName=n1 Sockets=two CoresPerSocket=4\n", "sockets=two"),
                        (nodes + "PartitionName=q Nodes=ALL MaxTime=abc\n", "maxtime=abc is not a Slurm time"),
                        (nodes + "PartitionName=q Nodes=ALL PriorityTier=hi\n", "prioritytier=hi is not a whole number"),
                        (nodes + "PriorityWeightAge=abc\n", "priorityweightage=abc is not a whole number"),
                        (nodes + "PriorityMaxAge=7days\n", "prioritymaxage=7days is not a Slurm time")):
        with pytest.raises(ValueError) as e:
            parse_slurm_conf(text)
        assert words in str(e.value) and "int()" not in str(e.value), (text, str(e.value))
    # backfill.c takes its default for a SchedulerParameters number it cannot read ("Invalid SchedulerParameters")
    c = parse_slurm_conf(nodes + "SchedulerParameters=bf_interval=abc,bf_window=x,bf_continue\n")
    assert c.sched.bf_interval == 30 and c.sched.bf_window_min == 1440
    assert any("bf_interval=abc is not a whole number: Slurm's default taken" in n for n in c.notes), c.notes
    assert any("bf_continue read past" in n for n in c.notes)


def test_a_conf_on_which_no_job_fits_is_refused_saying_why():
    """A partition without Nodes= has no nodes (slurmctld: Nodes=(null)); a replay of jobs all in it started
    nothing and `simulate` exited 0 with every figure empty. It is an error naming the partitions."""
    conf = parse_slurm_conf("NodeName=n[1-4] CPUs=4\nPartitionName=p Default=YES\nPartitionName=q Nodes=n1\n")
    with pytest.raises(ValueError, match=r"none of the 2 jobs fits .* p: 0 CPUs, q: 4 CPUs .*partition p has no nodes"):
        starts(frame([(0, 100, 100, 1), (1, 100, 100, 2)]), conf)
    fits = parse_slurm_conf("NodeName=n[1-4] CPUs=4\nPartitionName=p Nodes=n1 Default=YES\n")
    assert starts(frame([(0, 100, 100, 1), (1, 100, 100, 8)]), fits)[0] == 0  # one job fits: replayed, the other said


def test_nodesets_features_and_partition_node_lists():
    """NodeSet= (by Nodes= and by Feature=) in a partition's Nodes=, names given twice, quoted values,
    and names slurm.conf does not define (refused, as slurmctld refuses them: checked live, "fatal: Invalid
    node names in partition")."""
    c = parse_slurm_conf(
        "NodeName=cpu[1-4] CPUs=8 Features=cpu\n"
        'NodeName=gpu[1-2] CPUs=16 Feature="gpu,a100" Gres=gpu:4\n'
        "NodeName=r[1-2]n[1-2] CPUs=4\n"
        "NodeSet=gpus Feature=gpu\n"
        "NodeSet=cpus Nodes=cpu[1-4]\n"
        "PartitionName=batch Nodes=cpus Default=YES\n"
        "PartitionName=gpu Nodes=gpus,cpu1,cpu[1-2]\n"
        "PartitionName=rack Nodes=r[1-2]n[1-2]\n")
    parts = {p.name: p.nodes for p in c.partitions}
    assert parts == {"batch": ("cpu1", "cpu2", "cpu3", "cpu4"), "gpu": ("cpu1", "cpu2", "gpu1", "gpu2"),
                     "rack": ("r1n1", "r1n2", "r2n1", "r2n2")}
    assert [(n.name, n.cpus, n.gpus) for n in c.nodes][4:7] == [("gpu1", 16, 4), ("gpu2", 16, 4), ("r1n1", 4, 0)]
    # no Nodes=: no nodes, as slurmctld has it (`scontrol show partition`: Nodes=(null)); a DEFAULT line's count
    bare = parse_slurm_conf("NodeName=n[1-2] CPUs=4\nPartitionName=empty\nPartitionName=DEFAULT Nodes=ALL\n"
                            "PartitionName=later\n")
    assert [(p.name, p.nodes) for p in bare.partitions] == [("empty", ()), ("later", ("n1", "n2"))]
    assert any("partition empty has no nodes" in n for n in bare.notes)
    with pytest.raises(ValueError, match="partition empty is named on two PartitionName= lines"):  # slurmctld: fatal
        parse_slurm_conf("NodeName=n1 CPUs=4\nPartitionName=empty\nPartitionName=empty Nodes=n1\n")
    with pytest.raises(ValueError, match="node n2 is defined on two NodeName= lines"):  # slurmctld: fatal (checked)
        parse_slurm_conf("NodeName=n[1-2] CPUs=4\nNodeName=n2 CPUs=8\nPartitionName=p Nodes=ALL\n")
    with pytest.raises(ValueError, match=r"partition rack names nodes .*: ghost1, ghost2, ghost3, ghost4, ghost5 \.\.\.;"):
        parse_slurm_conf("NodeName=r[1-2]n[1-2] CPUs=4\nPartitionName=rack Nodes=r[1-2]n[1-2],ghost[1-7]\n")
    boards = parse_slurm_conf("NodeName=b1 Boards=2 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2\n"
                              "NodeName=s1 Sockets=2 CoresPerSocket=8\n")
    assert [n.cpus for n in boards.nodes] == [64, 16]
    weighed = parse_slurm_conf("NodeName=DEFAULT Weight=10\nNodeName=c[1-2] CPUs=4\nNodeName=g1 CPUs=4 Weight=50\n")
    assert [n.weight for n in weighed.nodes] == [10, 10, 50] and [n.weight for n in boards.nodes] == [1, 1]


def test_select_linear_gives_whole_nodes_and_what_is_read_past_is_said():
    """select/linear allocates whole nodes (as OverSubscribe=EXCLUSIVE does); Slurm 22.05's default when
    slurm.conf names no SelectType, which the replay does not assume but says; LLN, topology and
    oversubscription are read past, and said."""
    nodes = "NodeName=n[1-2] CPUs=4\nPartitionName=a Nodes=ALL Default=YES\n"
    linear = parse_slurm_conf("SelectType=select/linear\n" + nodes)
    assert linear.partitions[0].exclusive and any("select/linear" in n for n in linear.notes)
    jobs = frame([(0, 100, 100, 1), (1, 100, 100, 1), (2, 100, 100, 1)])
    assert starts(jobs, linear.with_sched(bf_interval=1)) == [0, 1, 100]  # a node each, whatever the CPUs
    tres = parse_slurm_conf("SelectType=select/cons_tres\n" + nodes)
    assert not tres.partitions[0].exclusive and not tres.notes
    assert starts(jobs, tres.with_sched(bf_interval=1)) == [0, 1, 2]
    silent = parse_slurm_conf(nodes)
    assert not silent.partitions[0].exclusive and any("default is select/linear" in n for n in silent.notes)
    prio = parse_slurm_conf("SelectType=select/cons_tres\nPriorityType=priority/multifactor\n"
                            "PriorityFlags=CALCULATE_RUNNING,SMALL_RELATIVE_TO_TIME,NO_FAIR_TREE,MAX_TRES\n"
                            "PriorityWeightTRES=CPU=1000,Mem=2000\nPriorityUsageResetPeriod=MONTHLY\n" + nodes)
    assert prio.notes == ("PriorityFlags MAX_TRES,SMALL_RELATIVE_TO_TIME read past: priorities are computed without them",
                          "PriorityWeightTRES read past: no TRES factor in the replay's priorities",
                          "PriorityUsageResetPeriod=MONTHLY read past: usage only decays (PriorityDecayHalfLife)")
    odd = parse_slurm_conf("SelectType=select/cons_tres\nSelectTypeParameters=CR_Core,CR_LLN\n"
                           "TopologyPlugin=topology/tree\n" + nodes.replace("Default=YES", "OverSubscribe=FORCE:4"))
    assert [n.split()[0] for n in odd.notes] == ["SelectTypeParameters", "TopologyPlugin=topology/tree",
                                                 "OverSubscribe=YES/FORCE"]


def test_a_line_ending_in_a_backslash_continues_on_the_next(tmp_path):
    """slurmctld 22.05 (checked live, `scontrol show partition`): `PartitionName=cont Nodes=ALL \\` then
    `MaxTime=30 PriorityTier=7` is one line (MaxTime 00:30:00, tier 7); a backslash inside a comment continues
    nothing. The replay read the second line as a setting named MaxTime, and the partition kept no limit."""
    text = ("NodeName=n[1-2] \\\n  CPUs=4\nPartitionName=cont Nodes=ALL \\\n  MaxTime=30 PriorityTier=7\n"
            "PartitionName=hash Nodes=ALL MaxTime=20 # a comment \\\nPartitionName=after Nodes=ALL\n"
            "SchedulerParameters=bf_interval=5,\\\nbf_window=60\n")
    (tmp_path / "slurm.conf").write_text(text)
    for c in (parse_slurm_conf(text), read_slurm_conf(tmp_path / "slurm.conf")):
        parts = {p.name: (p.max_time_s, p.priority_tier) for p in c.partitions}
        assert parts == {"cont": (1800.0, 7), "hash": (1200.0, 1), "after": (float("inf"), 1)}
        assert [n.cpus for n in c.nodes] == [4, 4] and (c.sched.bf_interval, c.sched.bf_window_min) == (5, 60)
        assert "maxtime" not in slurm_conf_settings(setting_lines(text.splitlines()))
    ok = scontrol_hostnames(tmp_path, "a", text)  # Slurm's own parser: joined as they stand, no space between
    spaced = scontrol_hostnames(tmp_path, "a", text.replace(",\\\n", ", "))
    assert ok is None or (ok.returncode == 0 and "Parse error" in spaced.stderr), (ok.stderr, spaced.stderr)


def test_a_plain_line_holds_one_setting_as_slurmctld_reads_it(tmp_path):
    """`PriorityWeightQOS=777 PriorityMaxAge=2-0` on one line: slurmctld, scontrol and sacctmgr 22.05 stop
    with "Parse error in file ... line N" (checked); the read took "777 PriorityMaxAge=2-0" as the weight's
    value. Node, partition and down-node lines hold several pairs, and values may hold `=`."""
    nodes = "NodeName=n[1-2] CPUs=4\nPartitionName=p Nodes=ALL Default=YES\nDownNodes=n2 State=DOWN Reason=x\n"
    c = parse_slurm_conf(nodes + 'SchedulerParameters=bf_interval=5,bf_window=60\nLicenses="a=1 b=2"\n')
    assert c.sched.bf_interval == 5 and len(c.nodes) == 2
    bad = nodes + "PriorityWeightQOS=777 PriorityMaxAge=2-0\n"
    with pytest.raises(ValueError, match="holds 2 settings; slurmctld reads one a line"):
        parse_slurm_conf(bad)
    res = scontrol_hostnames(tmp_path, "a", bad)
    assert res is None or (res.returncode != 0 and "Parse error in file" in res.stderr), res.stderr


def test_include_files_as_slurmctld_reads_them(tmp_path):
    """`Include` (slurm.conf(5), INCLUDE MODIFIERS): a relative name from slurm.conf's folder, also in a
    nested include; `%c` is ClusterName; a file that is not there stops the read, as it stops slurmctld
    ("Include" failed ... fatal), where it was skipped and the replay ran without its nodes."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nodes-big.conf").write_text("NodeName=r[1-2]n[1-2] CPUs=4\nInclude parts.conf\n")
    (tmp_path / "parts.conf").write_text("PartitionName=wrong Nodes=ALL\n")  # beside the include: not read
    (tmp_path / "etc" / "parts.conf").write_text("PartitionName=batch Nodes=ALL Default=YES\n")
    conf = tmp_path / "etc" / "slurm.conf"
    conf.write_text("ClusterName=big\nInclude nodes-%c.conf\n")
    c = read_slurm_conf(conf)
    assert c.cluster == "big" and len(c.nodes) == 4 and [p.name for p in c.partitions] == ["batch"]
    conf.write_text("ClusterName=small\nInclude nodes-%c.conf\n")
    with pytest.raises(ValueError, match=r"Include nodes-%c.conf: .*nodes-small.conf is not there"):
        read_slurm_conf(conf)
    conf.write_text("Include nodes-%c.conf\nClusterName=big\n")
    with pytest.raises(ValueError, match="no ClusterName= comes before it"):
        read_slurm_conf(conf)
    conf.write_text("ClusterName=big\nInclude .\n")  # a folder: slurmctld cannot read it as a file either
    with pytest.raises(ValueError, match=r"Include \.: .* is a folder"):
        read_slurm_conf(conf)


def test_a_conf_without_nodes_is_refused():
    with pytest.raises(ValueError, match="names no nodes"):
        parse_slurm_conf("ClusterName=x\n")


def test_segments_change_the_order_rule_over_time():
    """FCFS until 150, then SJF: the node frees at 100 (FCFS: job 2) and at 200 (SJF: job 4 before 3)."""
    jobs = frame([(0, 100, 100, 8), (1, 100, 100, 8), (2, 50, 300, 8), (3, 50, 60, 8)])
    assert starts(jobs, ONE_NODE_8, segments=[(0.0, "FCFS", None), (150.0, "SJF", None)]) == [0, 100, 250, 200]
    assert starts(jobs, ONE_NODE_8, segments=[(0.0, "FCFS", None)]) == [0, 100, 200, 250]


def test_the_tail_guard_orders_oldest_first_once_it_fires():
    """SJF with a 0.05 h (180 s) guard: at 200 s the long job 2 has waited past it, so when the node
    frees at 300 it goes first although job 3 is shorter; without the guard SJF takes job 3."""
    jobs = frame([(0, 300, 300, 8), (1, 100, 1000, 8), (250, 50, 60, 8)])
    assert starts(jobs, ONE_NODE_8, rule="SJF") == [0, 350, 300]
    assert starts(jobs, ONE_NODE_8, rule="SJF", guard_h=0.05) == [0, 300, 400]


def test_multifactor_with_its_weights_as_a_rule():
    """MULTIFACTOR(<weights>) replays like the slurm.conf that sets them (the age test's schedule)."""
    conf = parse_slurm_conf("NodeName=n1 CPUs=4\nPartitionName=a Nodes=n1 Default=YES PriorityJobFactor=1\n"
                            "PartitionName=b Nodes=n1 PriorityJobFactor=2\nSchedulerParameters=bf_interval=1\n")
    jobs = frame([(0, 400, 400, 4, "a"), (1, 50, 50, 4, "a"), (200, 50, 50, 4, "b")])
    rule = "MULTIFACTOR(age=2000,partition=1000,maxage=10,calc=5)"
    assert starts(jobs, conf, rule=rule) == [0, 400, 450]
    assert starts(jobs, conf, rule="multifactor") == [0, 400, 450]  # priority/basic: submission order
    with pytest.raises(ValueError, match="unknown setting 'speed'"):
        starts(jobs, conf, rule="MULTIFACTOR(speed=1)")


def test_simulate_cli_replays_slurm_and_refuses_what_it_cannot(tmp_path):
    from typer.testing import CliRunner

    from metapilot.cli import app
    from conftest import SHARED_DATA

    swf = SHARED_DATA / "swf" / "HPC2N-subset-3170jobs.swf"
    if not swf.exists():
        pytest.skip("../shared/data is not beside the repository")
    db = str(tmp_path / "w.duckdb")
    assert CliRunner().invoke(app, ["ingest", str(swf), "--db", db]).exit_code == 0
    conf = tmp_path / "slurm.conf"
    conf.write_text("NodeName=n[001-120] CPUs=2\nPartitionName=batch Nodes=n[001-120] Default=YES\n"
                    "PriorityType=priority/multifactor\nPriorityWeightAge=1000\n")
    out = tmp_path / "jobs.csv"
    r = CliRunner().invoke(app, ["simulate", "--cluster", "HPC2N-subset-3170jobs", "--policy", "multifactor",
                                 "--backfill", "slurm", "--slurm-conf", str(conf), "--jobs-out", str(out), "--db", db])
    assert r.exit_code == 0, r.output
    assert "MULTIFACTOR" in r.output and "slurm" in r.output
    rows = pl.read_csv(out)
    assert rows.height > 3000 and {"job_id", "wait"} <= set(rows.columns) and rows["wait"].min() >= 0
    r = CliRunner().invoke(app, ["simulate", "--cluster", "HPC2N-subset-3170jobs", "--policy",
                                 "MULTIFACTOR(age=1000,fairshare=5000)", "--backfill", "slurm", "--db", db])
    assert r.exit_code == 0, r.output
    qos = tmp_path / "qos.txt"
    qos.write_text("normal|0\nhigh|100\n")  # as `sacctmgr -nP show qos format=name,priority` prints them
    for given in ([], ["--qos-priority", str(qos)]):  # without the QOS priorities the replay says what it assumed
        r = CliRunner().invoke(app, ["simulate", "--cluster", "HPC2N-subset-3170jobs", "--policy",
                                     "MULTIFACTOR(qos=1000)", "--backfill", "slurm", *given, "--db", db])
        assert r.exit_code == 0 and ("PriorityWeightQOS is 1000" in r.output) == (not given), r.output
    waits = {}
    for cs in ("0", "30"):  # cores held 30 s after every end: every later start moves
        r = CliRunner().invoke(app, ["simulate", "--cluster", "HPC2N-subset-3170jobs", "--backfill", "slurm",
                                     "--slurm-conf", str(conf), "--complete-s", cs, "--jobs-out", str(out), "--db", db])
        assert r.exit_code == 0, r.output
        waits[cs] = pl.read_csv(out)["wait"].mean()
    assert waits["30"] > waits["0"], waits
    for args, words in ((["--policy", "multifactor"], "replay it with --backfill slurm"),
                        (["--slurm-conf", str(conf)], "add --backfill slurm"),
                        (["--backfill", "slurm", "--slurm-conf", str(tmp_path / "none.conf")], "no slurm.conf at"),
                        (["--backfill", "slurm", "--policy", "MULTIFACTOR(speed=1)"], "unknown setting"),
                        (["--qos-priority", "normal=0"], "add --backfill slurm"),
                        (["--backfill", "slurm", "--qos-priority", "normal"], "--qos-priority"),
                        (["--complete-s", "1"], "add --backfill slurm"),
                        (["--backfill", "slurm", "--complete-s", "nan"], "0 or more")):
        r = CliRunner().invoke(app, ["simulate", "--cluster", "HPC2N-subset-3170jobs", *args, "--db", db])
        assert r.exit_code == 2 and words in r.output, (args, r.output)


def test_will_run_takes_running_jobs_away_in_groups_by_planned_end():
    """select/cons_tres's will-run test (issue 51, on the real Slurm: a reservation "to start at" the end of
    a later job than the first whose end lets the job fit): running jobs leave in groups by planned end,
    the first up to 30 s past the next 30-s barrier after the first end (on the replay's clock, Slurm's
    epoch seconds), and the job is planned at the end of the last job of the group after which it fits.
    Job 3 (6 CPUs) fits once job 1 ends at 100, but job 1's group reaches to 150 and takes job 2 (ends
    140) with it: job 3 is reserved from 140, so job 4 (1 CPU, ends 132) backfills at once, and job 3
    starts when job 4 ends. Shifted by 19 s, job 1 ends at 119, just before the barrier at 120: its group
    ends at 150, without job 2 (159); job 3 is reserved from 119 and job 4 (ends 151) waits."""
    conf = ONE_NODE_8.with_sched(bf_resolution=1)
    jobs = frame([(0, 100, 100, 5), (0, 140, 140, 2), (1, 50, 50, 6), (2, 130, 130, 1)])
    assert starts(jobs, conf) == [0, 0, 132, 2]
    jobs = frame([(19, 100, 100, 5), (19, 140, 140, 2), (20, 50, 50, 6), (21, 130, 130, 1)])
    assert starts(jobs, conf) == [19, 19, 119, 159]


def test_reservations_are_rounded_on_slurms_epoch_clock():
    """Slurm rounds a reservation to bf_resolution on epoch seconds. The jobs of
    test_reservations_are_rounded_down_to_bf_resolution, their time 0 at epoch second 30: job 2's
    reservation from 100 (epoch 130) is rounded down to epoch 120, time 90; job 4 now ends at 83 (epoch
    113), before it, and is backfilled at once. Times 0-based with origin 0 or epoch-based are the same."""
    jobs = frame([(0, 100, 100, 4), (1, 100, 100, 8), (2, 50, 50, 2), (3, 80, 80, 2)])
    assert starts(jobs, ONE_NODE_8, origin_s=30) == [0, 100, 2, 3]
    assert starts(jobs.with_columns(pl.col("submit") + 30), ONE_NODE_8) == [30, 130, 32, 33]
    assert starts(jobs, ONE_NODE_8) == [0, 100, 2, 200]


def test_simulate_slurm_replays_on_the_workloads_epoch_clock():
    """A workload's time 0 is its window start: 30 s past an epoch minute, job 4 is backfilled as in
    test_reservations_are_rounded_on_slurms_epoch_clock."""
    from datetime import timedelta

    from metapilot.transforms.workload import EPOCH

    def w(origin):
        return Workload.from_arrays(submit=[0, 1, 2, 3], run=[100, 100, 50, 80], req_time=[100, 100, 50, 80],
                                    cores=[4, 8, 2, 2], window_start=EPOCH + timedelta(seconds=origin))
    assert list(simulate_slurm(w(1_800_000_030), ONE_NODE_8, "FCFS").start) == [0, 100, 2, 3]
    assert list(simulate_slurm(w(1_800_000_000), ONE_NODE_8, "FCFS").start) == [0, 100, 2, 200]


def test_node_sets_as_bit_words_hold_what_the_bool_arrays_hold():
    """The node choice walks sets of nodes as bit words (bits.py): each node in the set once, in index
    order, and counts and membership as a bool array says, across word edges (63, 64, 127, ...)."""
    rng = np.random.default_rng(7)
    for n in (1, 63, 64, 65, 130, 5544):
        nodes = rng.random(n) < 0.3
        nodes[[0, n - 1]] = True
        words = np.zeros((n + 63) // 64, np.uint64)
        node_bits(nodes, words)
        walked = []
        for w, x in enumerate(words):
            while x:
                walked.append(w * 64 + int(lowest(np.uint64(x))))
                x = np.uint64(x) & np.uint64(x - np.uint64(1))
        assert walked == list(np.flatnonzero(nodes))
        assert count(words) == nodes.sum()
        assert [has(words, i) for i in range(n)] == list(nodes)
        put(words, n - 1, False)
        put(words, 0, False)
        assert count(words) == nodes.sum() - len({0, n - 1}) and not has(words, 0) and not has(words, n - 1)


def test_ctrl_c_stops_a_long_replay_at_once():
    """A replay can take hours (an overloaded queue: every backfill pass tests bf_max_job_test jobs); the
    compiled loop cannot see Ctrl-C, and while it held the main thread no signal handler ran either. It
    runs without the GIL in a thread of its own (`ground.interrupt.stoppable`): the main thread takes the
    KeyboardInterrupt at once and the loop stops within a few thousand events. These 1,500 jobs on 64
    one-CPU nodes take over half a minute to replay whole."""
    import os
    import signal
    import threading
    import time

    rng = np.random.default_rng(1)
    n = 1500
    jobs = frame([(float(i), float(r), float(r), int(c))
                  for i, r, c in zip(range(n), rng.integers(100, 2000, n), rng.integers(1, 33, n))])
    conf = SlurmConf.single(1, 64)
    replay_slurm(jobs.head(50), conf)  # compiled (or loaded) before the clock starts
    inside, sent = threading.Event(), threading.Event()

    def ctrl_c() -> None:  # a real SIGINT, as a terminal sends it: it also wakes a main thread blocked in C
        if inside.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, ctrl_c)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever an earlier test left
    t0 = time.perf_counter()
    inside.set()
    timer.start()
    try:
        try:
            replay_slurm(jobs, conf)
        except KeyboardInterrupt:
            pass
        else:
            pytest.fail(f"the replay ran whole ({time.perf_counter() - t0:.1f} s); SIGINT sent: {sent.is_set()}")
    finally:
        inside.clear()
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - t0 < 3.0
    for _ in range(50):  # the loop left (its thread ends a moment after it says so), not left burning a core
        if not any(t.name == "stoppable" for t in threading.enumerate()):
            break
        time.sleep(0.01)
    assert not any(t.name == "stoppable" for t in threading.enumerate())


def test_a_submission_waits_for_the_background_loops_pass_and_a_completion_does_not():
    """sched/builtin, sched_interval 60, batch_sched_delay 3 (Slurm's default), a node of 4 CPUs.
    A submission only asks slurmctld's background loop for a pass: it runs at the first second at
    least 3 s after the loop's last pass (controller.c), or the periodic pass over the whole queue
    comes first. Job 1 (0 s) starts at the periodic pass of second 0; job 2 (1 s) at the loop's pass
    at 3 (0 + 3); job 3 (5 s) at 6 (3 + 3); job 4 (30 s) at once, at 30. A completion calls the main
    scheduler at once: job 5 (31 s) would wait for 33, but job 1 ends at 32 and frees the CPU job 5
    needs (the node's 4 CPUs are held by jobs 1-4): it starts at 32. Job 6 (61 s) has the periodic
    pass at 60 behind it but the loop's last pass (60) is 1 s back: it starts at 63."""
    conf = parse_slurm_conf("SchedulerType=sched/builtin\nNodeName=n1 CPUs=4\nPartitionName=p Nodes=n1 Default=YES\n")
    assert conf.sched.batch_sched_delay == 3 and conf.sched.sched_interval == 60
    jobs = frame([(0, 32, 100, 1), (1, 100, 100, 1), (5, 100, 100, 1), (30, 100, 100, 1), (31, 10, 10, 1),
                  (61, 10, 10, 1)])
    assert starts(jobs, conf) == [0, 3, 6, 30, 32, 63]
    assert parse_slurm_conf("SchedulerParameters=batch_sched_delay=0\nNodeName=n1 CPUs=4\n").sched.batch_sched_delay == 0
    assert starts(jobs, conf.with_sched(batch_sched_delay=0)) == [0, 1, 5, 30, 32, 61]


def test_a_long_replay_reports_its_progress_and_a_progress_call_that_raises_stops_it():
    """A whole log's Slurm replay takes minutes (SPEC §10: long steps show progress): `progress` hears the
    jobs settled so far (started, or never to run) about every 0.2 s, rising, and once more at the end with
    every job; what it
    raises (the caller giving up) stops the loop as Ctrl-C does. The 1,500-job overloaded queue of the
    test above takes over half a minute whole."""
    import threading

    rng = np.random.default_rng(1)
    n = 1500
    jobs = frame([(float(i), float(r), float(r), int(c))
                  for i, r, c in zip(range(n), rng.integers(100, 2000, n), rng.integers(1, 33, n))])
    conf = SlurmConf.single(1, 64)
    heard: list[tuple[int, int]] = []

    class GiveUp(Exception):
        pass

    def progress(done: int, total: int) -> None:
        heard.append((done, total))
        if len(heard) == 4:
            raise GiveUp

    with pytest.raises(GiveUp):
        slurm_schedule(jobs, conf, progress=progress)
    assert len(heard) == 4 and all(total == n for _, total in heard)
    done = [d for d, _ in heard]
    assert done == sorted(done) and 0 < done[-1] < n  # the loop's count, read while it runs
    for _ in range(50):  # the loop left (its thread ends a moment after it says so)
        if not any(t.name == "stoppable" for t in threading.enumerate()):
            break
        time.sleep(0.01)
    assert not any(t.name == "stoppable" for t in threading.enumerate())

    small: list[tuple[int, int]] = []
    out = slurm_schedule(jobs.head(40), conf, progress=lambda d, t: small.append((d, t)))
    assert small[-1] == (40, 40) and out.jobs.height == 40
