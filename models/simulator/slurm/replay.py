"""`replay_slurm`: a site's jobs replayed as its Slurm would schedule them (issue 51; the loop is in
`kernel`, the node choice in `nodes`, the backfill map in `node_space`, multifactor in `priority`).

The jobs come as a frame, one row per job: `job_id`, `submit` and `run` (seconds, one origin),
`time_limit` (seconds; null: the partition's DefaultTime, else MaxTime), `cpus`, `nodes` (the node
count asked for, -N; null: any), `partition` (null: the default partition), `user`, `qos`. A job runs for
its run time cut at its limit. A job that could never fit its partition's nodes is not replayed
(its start stays null) and counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from metapilot.ground.interrupt import stoppable
from metapilot.models.simulator.capacity import Capacity
from metapilot.models.simulator.policies import policy_code
from metapilot.models.simulator.result import SimResult
from metapilot.models.simulator.slurm.bits import node_bits
from metapilot.models.simulator.slurm.conf import Node, PriorityParams, Shares, SlurmConf, multifactor_rule
from metapilot.models.simulator.slurm.kernel import MULTIFACTOR, run_slurm
from metapilot.models.simulator.slurm.nodes import pick
from metapilot.models.simulator.slurm.priority import CLASSIC, DEPTH_OBLIVIOUS, FAIR_TREE
from metapilot.transforms.workload import EPOCH, Workload

YEAR_S = 365 * 86400.0
COLUMNS = ("job_id", "submit", "run", "time_limit", "cpus", "nodes", "partition", "user", "qos")
ACCOUNT = "account"  # optional: the job's account, for Fair Tree (a log without accounts is one account)


@dataclass(frozen=True)
class SlurmSchedule:
    """The replay: `jobs` (the input rows in submit order, with `start`, `end`, `wait` and `init_prio`, the
    multifactor priority a job got at submission: slurmctld's InitPrio), how many could never fit, and what
    the replay had to assume, in words."""

    jobs: pl.DataFrame
    never_fit: int
    notes: tuple[str, ...]
    engine_s: float


def fairshare_algorithm(pr: PriorityParams) -> int:
    """The kernel's code of the fair-share algorithm PriorityFlags names."""
    if pr.fair_tree:
        return FAIR_TREE
    return DEPTH_OBLIVIOUS if pr.depth_oblivious else CLASSIC


def _order(jobs: pl.DataFrame) -> pl.DataFrame:
    ids = jobs["job_id"].cast(pl.Utf8)
    numeric = ids.str.contains(r"^\d+$").all()
    key = ids.cast(pl.Int64) if numeric else ids
    return jobs.with_columns(key.alias("_id_key")).sort(["submit", "_id_key"]).drop("_id_key")


def _only_account(shares: Shares) -> dict[str, str]:
    """user -> account for the users the tree gives in one account only."""
    seen: dict[str, set[str]] = {}
    for a, u, _ in shares.users:
        seen.setdefault(u, set()).add(a)
    return {u: next(iter(a)) for u, a in seen.items() if len(a) == 1}


@dataclass(frozen=True)
class Associations:
    """The association tree as the kernel weighs it (`priority`): each job's association (`assoc`), each
    association's account and its shares over its siblings', each account's shares over its siblings' and
    its parent account (-1: root; parents come before their children), and root's own user associations
    with no jobs (`root_users`; `root_first`: those with shares, which Fair Tree ranks first)."""

    assoc: np.ndarray
    account: np.ndarray
    share: np.ndarray
    acct_share: np.ndarray
    acct_parent: np.ndarray
    root_users: int
    root_first: int


_ROOT = "\0root"  # the account key of root's own user association where jobs ran in it


def associations(users: np.ndarray, user: np.ndarray, accounts: pl.Series, shares: Shares = Shares()) -> Associations:
    """Each job's association (its user `users[user[j]]` in its account: what Slurm charges usage to) and the
    tree's shares. Jobs without an account share one, unless the tree gives their user in one account
    (Slurm charges a job without --account to its user's default account). The associations `shares` names
    without jobs come after the jobs' (no usage, but counted among their siblings and in Fair Tree's ranks).
    Jobs of root's own user (`shares.root`, in root's account or none) ran in root's user association, a
    child of root with its shares: it is then one of the jobs' associations, not one more."""
    acct_names = np.array(accounts.fill_null("").to_list(), dtype=object)
    home = _only_account(shares)
    if home:  # a job without an account ran in its user's (Slurm's default account: the user's one association)
        blank = np.flatnonzero(acct_names == "")
        acct_names[blank] = [home.get(users[user[j]], "") for j in blank]
    root_acct, root_user = shares.root
    is_root = (users[user] == root_user) & ((acct_names == "") | (acct_names == root_acct))
    root_users = list(shares.root_users)
    if is_root.any():
        acct_names[is_root] = _ROOT
    up = dict(shares.parents)
    listed = set(acct_names.tolist()) | {a for a, _ in shares.accounts} | {a for a, _, _ in shares.users} | set(up.values())

    def depth(a: str) -> int:
        d = 0
        while a in up:
            a, d = up[a], d + 1
        return d

    names = sorted(listed, key=lambda a: (depth(a), a))  # parents before their children
    acct_index = {a: k for k, a in enumerate(names)}
    acct = pl.Series(acct_names.tolist(), dtype=pl.Utf8).replace_strict(acct_index, return_dtype=pl.Int64).to_numpy()
    acct_parent = np.array([acct_index[up[a]] if a in up else -1 for a in names], np.int64)
    stride = len(users) + 1
    pairs, assoc = np.unique(acct * stride + user, return_inverse=True)
    keys = [(names[p // stride], users[p % stride]) for p in pairs]
    seen = set(keys)
    keys += [(a, u) for a, u, _ in shares.users if (a, u) not in seen]
    assoc_account = np.array([acct_index[a] for a, _ in keys], np.int64)
    raw_user = dict(((a, u), v) for a, u, v in shares.users)
    assoc_raw = np.array([raw_user.get(k, 1.0) for k in keys], np.float64)
    raw_acct = dict(shares.accounts)
    if is_root.any():  # root's user ran jobs: its association is the jobs', with its own shares
        raw_acct[_ROOT] = root_users.pop(0) if root_users else 1.0
    acct_raw = np.array([raw_acct.get(a, 1.0) for a in names], np.float64)
    # each parent's shares to share out: its users' and its sub-accounts' (root's: its accounts' and users')
    level = np.bincount(assoc_account, weights=assoc_raw, minlength=len(names) + 1)
    level += np.bincount(np.where(acct_parent < 0, len(names), acct_parent), weights=acct_raw, minlength=len(names) + 1)
    level[len(names)] += sum(root_users)
    assoc_share = np.divide(assoc_raw, level[assoc_account], out=np.zeros(len(keys)), where=level[assoc_account] > 0)
    acct_level = level[np.where(acct_parent < 0, len(names), acct_parent)]
    acct_share = np.divide(acct_raw, acct_level, out=np.zeros(len(names)), where=acct_level > 0)
    return Associations(assoc.astype(np.int64), assoc_account, assoc_share, acct_share, acct_parent, len(root_users),
                        sum(v > 0 for v in root_users))


def node_table(nodes: tuple[Node, ...]) -> tuple[list[str | None], np.ndarray, np.ndarray]:
    """The replay's nodes: (names, CPUs, weights) in slurm.conf's order, with a node of no CPUs and no name,
    in no partition, between two neighbours of different Weight. `_eval_nodes` ends a set of consecutive
    nodes where the weight changes; the gap ends it in the replay's walks at no cost (`nodes.pick`). The
    weights are an empty array where every node weighs the same (then no gap either)."""
    weighed = len({nd.weight for nd in nodes}) > 1
    names: list[str | None] = []
    cpus: list[int] = []
    weight: list[int] = []
    for nd in nodes:
        if weighed and weight and nd.weight != weight[-1]:
            names.append(None)
            cpus.append(0)
            weight.append(nd.weight)
        names.append(nd.name)
        cpus.append(nd.cpus)
        weight.append(nd.weight)
    return names, np.array(cpus, np.int64), np.array(weight if weighed else [], np.int64)


def slurm_schedule(jobs: pl.DataFrame, conf: SlurmConf, *, rule: str = "multifactor", guard_h: float | None = None,
                   segments: Sequence[tuple[float, str, float | None]] | None = None,
                   origin_s: float = 0.0, progress: Callable[[int, int], None] | None = None) -> SlurmSchedule:
    """Replay `jobs` on `conf`'s nodes and partitions with its scheduler settings, ordering the queue by
    multifactor priority (`rule='multifactor'`) or by a fixed rule's score (FCFS, SJF, ...: what a
    Slurm steered by `steer` follows), with the tail guard `guard_h` (hours) for a rule. `segments`
    ((start s, rule, guard h) in time order, the first from the start) change the rule over time.
    `origin_s`: the epoch second at time 0 of the jobs' clock (0: their times are epoch seconds). Slurm
    rounds its reservations to bf_resolution, and its will-run test aligns its windows, on epoch
    seconds; the replay does so on `submit + origin_s`, so that its grid falls where Slurm's did. A job's
    cores come free `conf.sched.complete_s` after its end. `progress(jobs settled, jobs)` (started, or never
    to run) is called about every 0.2 s while the replay runs, and once at its end: a whole log's replay
    takes minutes."""
    custom = [multifactor_rule(r, conf) for _, r, _ in (segments or [(0.0, rule, None)])]
    custom = [c for c in custom if c is not None and c is not conf]
    if len(custom) > 1:
        raise ValueError("one MULTIFACTOR(<weights>) a replay: its weights are the site's")
    if custom:  # MULTIFACTOR(<weights>): the conf's multifactor with those weights
        conf = custom[0]
    missing = [c for c in COLUMNS if c not in jobs.columns]
    if missing:
        raise ValueError(f"replay_slurm needs the columns {', '.join(COLUMNS)}; missing {', '.join(missing)}")
    notes: list[str] = list(conf.notes)
    ordered = _order(jobs.select(*COLUMNS, (pl.col(ACCOUNT) if ACCOUNT in jobs.columns else pl.lit(None)).cast(pl.Utf8)
                                 .alias(ACCOUNT)))
    jobs, accounts = ordered.drop(ACCOUNT), ordered[ACCOUNT]
    n = jobs.height
    node_names, node_cpus, node_weight = node_table(conf.nodes)
    node_index = {name: i for i, name in enumerate(node_names) if name is not None}
    parts = conf.partitions
    part_nodes = np.zeros((len(parts), len(node_names)), np.bool_)
    for p, part in enumerate(parts):
        for name in part.nodes:
            part_nodes[p, node_index[name]] = True
    part_index = {part.name: p for p, part in enumerate(parts)}
    default = part_index[conf.default_partition.name]
    names = jobs["partition"].cast(pl.Utf8).to_list()
    unknown = sorted({x for x in names if x is not None and x not in part_index})
    if unknown:
        notes.append(f"partitions not in slurm.conf, replayed in the default partition "
                     f"{conf.default_partition.name!r}: {', '.join(unknown)}")
    part = np.array([part_index.get(x, default) if x is not None else default for x in names], np.int64)
    max_time = np.array([pt.max_time_s for pt in parts])
    default_time = np.array([pt.default_time_s if pt.default_time_s is not None else pt.max_time_s for pt in parts])
    lim = jobs["time_limit"].cast(pl.Float64).to_numpy().copy()
    no_limit = np.isnan(lim)
    lim[no_limit] = default_time[part[no_limit]]
    lim = np.minimum(lim, max_time[part])
    lim[~np.isfinite(lim)] = YEAR_S
    run = np.minimum(np.maximum(jobs["run"].cast(pl.Float64).fill_null(0.0).to_numpy(), 0.0), lim)
    cpus = np.maximum(jobs["cpus"].cast(pl.Int64).fill_null(1).to_numpy(), 1)
    min_nodes = np.maximum(jobs["nodes"].cast(pl.Int64).fill_null(0).to_numpy(), 0)
    users, user = np.unique(np.array(jobs["user"].cast(pl.Utf8).fill_null("").to_list(), dtype=object),
                            return_inverse=True)
    pr = conf.priority
    tree = associations(users, user, accounts, pr.shares)
    total_cpus = float(node_cpus.sum())
    cpn = float(node_cpus.max())
    est_nodes = np.maximum(min_nodes, np.ceil(cpus / cpn))
    size = (est_nodes / len(conf.nodes) + cpus / total_cpus) / 2.0
    size_f = 1.0 - size if pr.favor_small else size
    job_factor = np.array([pt.priority_job_factor for pt in parts], np.float64)
    part_f = (job_factor / job_factor.max())[part] if job_factor.max() > 0 else np.zeros(n)
    qp = dict(pr.qos)
    qmax = max(qp.values(), default=0)
    qos_names = jobs["qos"].cast(pl.Utf8).to_list()
    qos_f = np.array([qp.get(q, 0) / qmax if qmax > 0 and q is not None else 0.0 for q in qos_names])
    unweighed = conf.qos_unweighed()
    unknown = sorted({q for q in qos_names if q is not None and q not in qp}) if qp and pr.weight_qos > 0 else []
    if unweighed:
        notes.append(unweighed)
    elif pr.multifactor and unknown:
        k = sum(q in unknown for q in qos_names)
        notes.append(f"{k:,} job{'s' if k != 1 else ''} ran in a QOS the priorities given do not name "
                     f"({', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}): QOS factor 0")
    segments = list(segments) if segments else [(-np.inf, rule, guard_h)]
    codes = [MULTIFACTOR if r.strip().lower().startswith("multifactor") else policy_code(r.split("+")[0])
             for _, r, _ in segments]
    if MULTIFACTOR in codes and not pr.multifactor:
        notes.append("PriorityType is not priority/multifactor: every job's priority is equal (order by submission)")
    seg_t = np.array([t for t, _, _ in segments], np.float64)
    seg_t[0] = -np.inf
    seg_guard = np.array([(g or 0.0) * 3600.0 if c != MULTIFACTOR else 0.0 for (_, _, g), c in zip(segments, codes)])
    excl = np.array([pt.exclusive for pt in parts], np.bool_)
    never = np.zeros(n, np.bool_)
    buf_n, buf_c = np.zeros(len(node_names), np.int64), np.zeros(len(node_names), np.int64)
    words = (len(node_names) + 63) // 64
    every, part_w = np.zeros(words, np.uint64), np.zeros((len(parts), words), np.uint64)
    node_bits(node_cpus > 0, every)
    for p in range(len(parts)):
        node_bits(part_nodes[p], part_w[p])
    for key in {(int(c), int(m), int(p)) for c, m, p in zip(cpus, min_nodes, part)}:
        c, m, p = key
        if pick(c, m, excl[p], part_w[p], every, node_cpus.copy(), node_cpus, node_weight, buf_n, buf_c) < 0:
            never |= (cpus == c) & (min_nodes == m) & (part == p)
    if n and never.all():  # a replay that starts nothing: every figure would be empty
        held = ", ".join(f"{pt.name}: {int(node_cpus[part_nodes[i]].sum()):,} CPUs" for i, pt in enumerate(parts))
        said = [x for x in conf.notes if x.startswith("partition ")]
        raise ValueError(f"none of the {n:,} jobs fits its partition's nodes in this slurm.conf: they ask for "
                         f"{int(cpus.min()):,} to {int(cpus.max()):,} CPUs, and its partitions hold {held}"
                         + (f" ({'; '.join(said)})" if said else "") + ": check its NodeName= and PartitionName= "
                         "lines (each partition's Nodes=) against the cluster")
    s = conf.sched
    iparams = np.array([s.bf_interval, s.bf_max_job_test, s.bf_max_job_user, s.bf_resolution, s.bf_window_min * 60,
                        s.default_queue_depth, s.sched_interval, int(s.backfill), fairshare_algorithm(pr), len(users),
                        s.batch_sched_delay, tree.root_users, tree.root_first],
                       np.int64)
    mf = pr.multifactor
    fparams = np.array([s.complete_s, pr.weight_age if mf else 0, pr.weight_fairshare if mf else 0,
                        pr.weight_job_size if mf else 0, pr.weight_partition if mf else 0, pr.weight_qos if mf else 0,
                        pr.max_age_s, pr.decay_half_life_s, pr.calc_period_s, pr.calc_origin_s, pr.fs_dampening],
                       np.float64)
    submit = jobs["submit"].cast(pl.Float64).to_numpy() + float(origin_s)  # on Slurm's clock (epoch seconds)
    seg_t[1:] += float(origin_s)
    start = np.empty(n)
    end = np.empty(n)
    init_prio = np.empty(n)
    args = (submit, run, lim, cpus, min_nodes, part, user.astype(np.int64), tree.assoc, tree.account, tree.share,
            tree.acct_share, tree.acct_parent, size_f, part_f, qos_f,
            never, node_cpus, node_weight, part_nodes, np.array([pt.priority_tier for pt in parts], np.int64), excl,
            seg_t, np.array(codes, np.int64), seg_guard, iparams, fparams, start, end, init_prio)
    t_call = time.perf_counter()
    stop = np.zeros(2, np.int64)  # [0]: set on Ctrl-C; [1]: the jobs settled so far, kept by the loop
    tick = None if progress is None else (lambda: progress(int(stop[1]), n))
    stoppable(lambda s: run_slurm(*args, s), stop, tick)  # Ctrl-C stops a replay of hours
    engine_s = time.perf_counter() - t_call
    if progress is not None:
        progress(n, n)
    start -= float(origin_s)
    end -= float(origin_s)
    if never.any():
        notes.append(f"{int(never.sum())} jobs can never fit their partition's nodes: not replayed")
    out = jobs.with_columns(pl.Series("start", start).fill_nan(None), pl.Series("end", end).fill_nan(None),
                            pl.Series("init_prio", init_prio).fill_nan(None)) \
        .with_columns((pl.col("start") - pl.col("submit")).alias("wait"))
    return SlurmSchedule(out, int(never.sum()), tuple(notes), engine_s)


def replay_slurm(jobs: pl.DataFrame, conf: SlurmConf, *, rule: str = "multifactor", guard_h: float | None = None,
                 segments: Sequence[tuple[float, str, float | None]] | None = None,
                 origin_s: float = 0.0) -> pl.DataFrame:
    """The replayed jobs (`slurm_schedule(...).jobs`): the input rows with `start`, `end` and `wait`."""
    return slurm_schedule(jobs, conf, rule=rule, guard_h=guard_h, segments=segments, origin_s=origin_s).jobs


def workload_frame(w: Workload) -> pl.DataFrame:
    """A normalised workload as `slurm_schedule`'s jobs (its order is already Slurm's: submit, then id)."""
    n = len(w)

    def col(a, default):
        return [default] * n if a is None else list(a)

    nodes = None if w.nodes is None else [None if np.isnan(x) else int(x) for x in w.nodes]
    return pl.DataFrame({
        "job_id": w.job_ids.astype(str), "submit": w.submit, "run": w.run, "time_limit": w.req_time,
        "cpus": np.maximum(np.ceil(w.cores), 1).astype(np.int64), "nodes": nodes if nodes is not None else [None] * n,
        "partition": w.partition_names(), "user": col(w.users, None), "qos": col(w.qos, None),
        ACCOUNT: col(w.accounts, None),
    }, schema_overrides={"nodes": pl.Int64, "partition": pl.Utf8, "user": pl.Utf8, "qos": pl.Utf8, ACCOUNT: pl.Utf8})


def conf_capacity(conf: SlurmConf) -> Capacity:
    """The conf's partitions as engine pools (their nodes' CPUs, GPUs and memory), for the metrics."""
    by_name = {nd.name: nd for nd in conf.nodes}
    return Capacity(tuple(p.name for p in conf.partitions),
                    np.array([sum(by_name[x].cpus for x in p.nodes) for p in conf.partitions], np.float64),
                    np.array([sum(by_name[x].gpus for x in p.nodes) for p in conf.partitions], np.float64),
                    np.array([sum(by_name[x].mem_mib for x in p.nodes) for p in conf.partitions], np.float64))


def simulate_slurm(w: Workload, conf: SlurmConf, rule: str = "multifactor", *, guard_h: float | None = None,
                   segments: Sequence[tuple[float, str, float | None]] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> SimResult:
    """`simulate`'s result for the `slurm` backfilling mode: the workload replayed by `slurm_schedule`, on
    Slurm's clock (its time 0 is `w.window_start`)."""
    t0 = time.perf_counter()
    sched = slurm_schedule(workload_frame(w), conf, rule=rule, guard_h=guard_h, segments=segments,
                           origin_s=(w.window_start - EPOCH).total_seconds(), progress=progress)
    ids = sched.jobs["job_id"].to_list()
    if ids != list(w.job_ids.astype(str)):  # the same order by construction; a mismatch is a bug, not data
        raise AssertionError("slurm replay reordered the workload")
    start = sched.jobs["start"].fill_null(float("nan")).to_numpy()
    end = sched.jobs["end"].fill_null(float("nan")).to_numpy()
    cap = conf_capacity(conf)
    names = {p.name: i for i, p in enumerate(conf.partitions)}
    default = names[conf.default_partition.name]
    pool = np.array([names.get(p, default) if p is not None else default for p in w.partition_names()], np.int64)
    cannot = np.flatnonzero(np.isnan(start))
    pool[cannot] = -1
    counters = dict(w.report.as_dict()) if w.report is not None else {}
    counters["cannot_fit"] = int(cannot.size)
    return SimResult(workload=w, capacity=cap, policy=rule.upper(), backfill="slurm", start=start, end=end, pool=pool,
                     cannot_fit=cannot, wall_s=time.perf_counter() - t0, events=len(w), counters=counters,
                     engine_s=sched.engine_s, notes=sched.notes)
