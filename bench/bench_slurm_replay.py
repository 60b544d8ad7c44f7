"""Replaying what Slurm does against the as-run history, on every log we have (issue 51, items 0 and 5).

For each SWF log in ../shared/data/swf/ and each bundled sacct sample with waits (samples/logs/slurm/), the
same normalised jobs are replayed three ways and set next to what the cluster lived (the logged waits):
- before: the textbook engine's replay of the current rule, FCFS+EASY on one pool of cores
  (`simulate(workload, Capacity.single(MaxProcs), "FCFS", "easy")`; for a sacct log, the pool is the peak
  concurrent allocation, as `metapilot ingest` infers it);
- after: the Slurm replay (`simulate_slurm`) on nodes: the node count and CPUs per node from the log's header
  (MaxNodes/MaxProcs and its notes) or, for sacct, from the node lists (each node's CPUs = the most CPUs a job
  held on it), Slurm's default scheduler parameters (bf_interval=30, bf_max_job_test=500, bf_window=1 day,
  bf_resolution=60, sched_interval=60, default_queue_depth=100), priority/multifactor with Slurm's default
  weights (all 0: every job's priority is equal, the queue is submission order), and the rule FCFS.
Figures over the jobs every replay ran and the log gives a start for: mean wait, mean bounded slowdown
(`max(1, (wait + run) / max(run, 10))`, models/simulator/metrics.py), the share of jobs that waited more than
60 s, Kendall's tau-a of start order against the as-run start order (computed in O(n log n) from scipy's
tau-b; the same number as `metapilot.models.steering.rank.kendall_tau`, checked on a sample), and the
Wasserstein-1 distance between the replayed and logged wait distributions (`models.simulator.fidelity`).

Speed (item 5): the Slurm replay's engine time (`slurm_schedule(...).engine_s`) and wall against the textbook
EASY replay's (`simulate(...).engine_s`) of the same workload, best of `--repeat`, on KTH-SP2 and CEA-Curie
(target: within 2x). `--profile` times variants of the Slurm replay on KTH-SP2 (backfill off, fewer jobs
tested, no periodic main pass, ...) to show where the time goes.

    .venv/bin/python bench/bench_slurm_replay.py                      # every log, speed, docs/benchmarks.md
    .venv/bin/python bench/bench_slurm_replay.py --logs kth,hpc2n --no-write
    .venv/bin/python bench/bench_slurm_replay.py --max-jobs curie=100000 --save r.json   # then --load r.json
    .venv/bin/python bench/bench_slurm_replay.py --profile --no-write
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from metapilot.models.simulator import Capacity, simulate  # noqa: E402
from metapilot.models.simulator.fidelity import fidelity  # noqa: E402
from metapilot.models.simulator.metrics import BSLD_BOUND  # noqa: E402
from metapilot.models.simulator.slurm import Node, Partition, PriorityParams, SlurmConf, slurm_schedule  # noqa: E402
from metapilot.models.simulator.slurm.conf import conf_from_capacity, expand_hostlist  # noqa: E402
from metapilot.models.simulator.slurm.replay import simulate_slurm, workload_frame  # noqa: E402
from metapilot.transforms.parsers import ParseOptions, parse_jobs  # noqa: E402
from metapilot.transforms.swf import parse_swf_header  # noqa: E402
from metapilot.transforms.workload import Workload, normalise  # noqa: E402

from bench.common import CLI, machine, timed, write_section  # noqa: E402

SWF = REPO.parent / "shared" / "data" / "swf"
SAMPLES = REPO / "samples" / "logs" / "slurm"
HEADING = "Replaying what Slurm does: nodes, and the as-run history (issue 51)"
WAITED_S = 60.0
# priority/multifactor with Slurm's default weights (all 0): every job's priority is equal (submission order)
DEFAULT_PRIORITY = PriorityParams(multifactor=True)


@dataclass
class Log:
    key: str
    name: str
    path: Path
    fmt: str | None  # None: detected
    cap: int | None = None  # replay the first N jobs only (None: the whole log)


LOGS = (
    Log("kth", "KTH-SP2", SWF / "KTH-SP2-1996-2.1-cln.swf.gz", "swf"),
    Log("curie", "CEA-Curie", SWF / "CEA-Curie-2011-2.1-cln.swf.gz", "swf"),
    Log("hpc2n", "HPC2N subset", SWF / "HPC2N-subset-3170jobs.swf", "swf"),
    Log("nasa", "NASA-iPSC", SWF / "NASA-iPSC-1993-3.1-cln.swf.gz", "swf"),
    Log("ricc", "RICC-2010-2", SWF / "RICC-2010-2.swf.gz", "swf"),
    Log("lcg", "LCG-2005-1", SWF / "LCG-2005-1.swf.gz", "swf"),
    Log("lublin", "Lublin-256", SWF / "lublin_256.synthetic-model.swf.gz", "swf"),
    Log("pozidriv", "pozidriv (sacct sample)", SAMPLES / "pozidriv.log.gz", None),
    Log("hpccost", "hpc-cost-simulator (sacct sample)", SAMPLES / "hpc-cost-simulator-sacct-output-v2.txt", None),
)
DEFAULT_CAPS: dict[str, int] = {}
# CEA-Curie's header notes: 5040 thin nodes (80640 cores) + 360 fat (11520) + 144 hybrid (1152)
CURIE_NODES = (("thin", 5040, 16), ("fat", 360, 32), ("hybrid", 144, 8))


# --- the cluster each replay sees ----------------------------------------------------------------------------

def swf_header(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    head = []
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            if not line.startswith(";"):
                break
            head.append(line)
    return parse_swf_header(head)


def uniform(cpus: int, nodes: int, *, exclusive: bool = False) -> SlurmConf:
    names = tuple(f"n{i}" for i in range(nodes))
    return SlurmConf(nodes=tuple(Node(n, int(cpus)) for n in names),
                     partitions=(Partition("main", names, default=True, exclusive=exclusive),),
                     priority=DEFAULT_PRIORITY)


def multiple_share(w: Workload, cpn: int) -> float:
    """Share of the jobs whose core count is a multiple of the node size (whole nodes asked)."""
    return float(np.mean(np.ceil(w.cores).astype(np.int64) % cpn == 0)) if len(w) else float("nan")


def swf_clusters(log: Log, w: Workload) -> tuple[Capacity, str, list[tuple[str, SlurmConf, str]]]:
    """(pooled capacity, where it comes from, [(variant, Slurm conf, where its nodes come from)])."""
    h = swf_header(log.path)
    procs, nodes = h.max_procs, h.max_nodes
    pool = Capacity.single(procs or nodes)
    pool_note = f"MaxProcs {procs:,}" if procs else f"MaxNodes {nodes:,} (no MaxProcs: 1 core a node)"
    if log.key == "curie":
        node_list = tuple(Node(f"{kind}{i}", cpn) for kind, count, cpn in CURIE_NODES for i in range(count))
        conf = SlurmConf(nodes=node_list, partitions=(Partition("all", tuple(n.name for n in node_list),
                                                                default=True),), priority=DEFAULT_PRIORITY)
        return pool, pool_note, [("nodes", conf, (
            "header: MaxNodes 5,544, MaxProcs 93,312; its notes: 5,040 thin nodes of 16 cores, 360 fat of 32, 144 "
            "hybrid of 8. The log's 17 partitions are not mapped to node kinds: one partition over every node. "
            f"Cores per node shared, not whole nodes ({multiple_share(w, 16):.0%} of the jobs ask a multiple of 16)"))]
    if log.key == "lcg":
        # grid sites, every job one core, no MaxNodes: one node holding every core (conf_from_capacity's rule)
        conf = conf_from_capacity([{"partition": "*", "nodes": None, "cores": procs}])
        return pool, pool_note, [("nodes", conf, (
            f"header: MaxProcs {procs:,}, no MaxNodes (170 grid sites, each its own cluster, sizes not given): node "
            "count unknown, one node of every core (conf_from_capacity's rule); every job asks one core, so nodes "
            "would not change what fits"))]
    if procs and nodes and procs % nodes == 0:
        cpn = procs // nodes
        note = f"header: MaxNodes {nodes:,}, MaxProcs {procs:,}: {nodes:,} nodes of {cpn} core{'s' if cpn > 1 else ''}"
        if cpn > 1:
            note += (f"; cores shared, not whole nodes ({multiple_share(w, cpn):.0%} of the jobs ask a multiple of "
                     f"{cpn})")
        variants = [("nodes", uniform(cpn, nodes), note)]
        if log.key == "hpc2n":
            share = multiple_share(w, 2)
            variants.append(("120 x 2, whole nodes", uniform(2, nodes // 2, exclusive=True), (
                f"inferred from the log, not the header: {share:.0%} of the jobs ask an even number of cores, as on "
                "nodes of 2 CPUs given whole (the header's 240 nodes x 1)")))
        return pool, pool_note, variants
    if nodes and not procs:
        return pool, pool_note, [("nodes", uniform(1, nodes),
                                  f"header: MaxNodes {nodes:,}, no MaxProcs: {nodes:,} nodes of 1 core")]
    raise ValueError(f"{log.name}: the header gives neither MaxNodes with MaxProcs nor MaxNodes alone")


def peak_allocation(jobs: pl.DataFrame) -> int:
    """The most CPUs the log's jobs held at once (what `metapilot ingest` infers without a header)."""
    ran = jobs.filter(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null()) \
        .with_columns(pl.max_horizontal("alloc_cpus", "req_cpus").fill_null(0).alias("c"))
    t = np.concatenate([ran["start_time"].dt.epoch("s").to_numpy(), ran["end_time"].dt.epoch("s").to_numpy()])
    d = np.concatenate([ran["c"].to_numpy(), -ran["c"].to_numpy()])
    o = np.lexsort((d, t))  # at equal times, ends (negative) first
    return int(np.cumsum(d[o]).max())


def sacct_clusters(log: Log, jobs: pl.DataFrame) -> tuple[Capacity, str, list[tuple[str, SlurmConf, str]]]:
    peak = peak_allocation(jobs)
    pool = Capacity.single(peak)
    pool_note = f"peak concurrent allocation {peak:,} cores (as `metapilot ingest` infers it)"
    listed = jobs.filter(pl.col("node_list").is_not_null() & (pl.col("node_list") != "None assigned"))
    if listed.height < jobs.height // 2:
        conf = conf_from_capacity([{"partition": "*", "nodes": None, "cores": peak}])
        conf = SlurmConf(nodes=conf.nodes, partitions=conf.partitions, priority=DEFAULT_PRIORITY)
        return pool, pool_note, [("nodes", conf, (
            f"no node lists in the log ({listed.height} of {jobs.height} jobs name nodes): node count unknown, one "
            f"node of the peak {peak:,} cores"))]
    cpus_of: dict[str, int] = {}
    parts_of: dict[str, set] = {}
    for nl, part, c, n in listed.select("node_list", pl.col("partition").fill_null("default"),
                                        pl.max_horizontal("alloc_cpus", "req_cpus").fill_null(1),
                                        pl.coalesce("alloc_nodes", "req_nodes").fill_null(1)).iter_rows():
        hosts = expand_hostlist(nl)
        per = math.ceil(c / max(len(hosts), n, 1))
        for hst in hosts:
            cpus_of[hst] = max(cpus_of.get(hst, 0), per)
            parts_of.setdefault(part, set()).add(hst)
    names = sorted(cpus_of)
    node_objs = tuple(Node(nm, cpus_of[nm]) for nm in names)
    parts = tuple(Partition(p, tuple(sorted(hs)), default=False) for p, hs in sorted(parts_of.items()))
    biggest = max(range(len(parts)), key=lambda k: len(parts[k].nodes))
    parts = tuple(Partition(p.name, p.nodes, default=(k == biggest)) for k, p in enumerate(parts))
    conf = SlurmConf(nodes=node_objs, partitions=parts, priority=DEFAULT_PRIORITY)
    shared = sum(1 for nm in names if sum(nm in p.nodes for p in parts) > 1)
    sizes = sorted({nd.cpus for nd in node_objs})
    return pool, pool_note, [("nodes", conf, (
        f"node lists: {len(names):,} nodes in {len(parts)} partitions ({shared} nodes in more than one), each node's "
        f"CPUs the most a job held on it ({', '.join(map(str, sizes[:6]))}{'...' if len(sizes) > 6 else ''}; "
        f"{sum(sizes_c for sizes_c in (nd.cpus for nd in node_objs)):,} in all); jobs without a partition in the "
        f"largest ({parts[biggest].name})"))]


# --- figures ------------------------------------------------------------------------------------------------

def tau_a(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-a (what `rank.kendall_tau` computes), in O(n log n): scipy's tau-b rescaled by the ties."""
    from scipy import stats

    n = len(a)
    if n < 2:
        return float("nan")
    n0 = n * (n - 1) / 2

    def ties(x):
        _, c = np.unique(x, return_counts=True)
        return float((c * (c - 1) / 2).sum())

    tb = stats.kendalltau(a, b).statistic
    if not np.isfinite(tb):
        return 0.0
    return float(tb * math.sqrt((n0 - ties(a)) * (n0 - ties(b))) / n0)


def figures(wait: np.ndarray, run: np.ndarray, start: np.ndarray, asrun_start: np.ndarray | None) -> dict:
    bsld = np.maximum(1.0, (wait + run) / np.maximum(run, BSLD_BOUND))
    return {"mean_wait": float(wait.mean()), "p95_wait": float(np.quantile(wait, 0.95)), "max_wait": float(wait.max()),
            "bsld": float(bsld.mean()), "waited": float(np.mean(wait > WAITED_S)),
            "tau": tau_a(start, asrun_start) if asrun_start is not None else None}


def asrun_waits(jobs: pl.DataFrame, ids: np.ndarray) -> np.ndarray:
    """The logged wait of each job id (NaN where the log gives no start)."""
    real = jobs.filter(pl.col("start_time").is_not_null()).select(
        pl.col("job_id").cast(pl.Utf8),
        (pl.col("start_time") - pl.col("submit_time")).dt.total_seconds().cast(pl.Float64).alias("w"),
    ).unique("job_id", keep="last")
    lookup = dict(zip(real["job_id"].to_list(), real["w"].to_list()))
    return np.array([lookup.get(i, np.nan) for i in ids.astype(str)], np.float64)


def run_log(log: Log, cap: int | None, repeat: int, rules: tuple[str, ...], log_print=print) -> dict:
    t0 = time.perf_counter()
    jobs = parse_jobs(log.path, ParseOptions(fmt=log.fmt) if log.fmt else ParseOptions())
    w_all = normalise(jobs)
    w = w_all.head(cap) if cap and cap < len(w_all) else w_all
    if log.fmt == "swf":
        pool, pool_note, variants = swf_clusters(log, w)
    else:
        pool, pool_note, variants = sacct_clusters(log, jobs)
    read_s = time.perf_counter() - t0
    log_print(f"{log.name}: {len(w):,} of {len(w_all):,} jobs ({jobs.height:,} in the log), read {read_s:.1f} s")
    ids = w.job_ids
    logged = asrun_waits(jobs, ids)
    replays: list[dict] = []
    best = None
    for _ in range(repeat):
        r = simulate(w, pool, "FCFS", "easy")
        if best is None or r.engine_s < best.engine_s:
            best = r
    replays.append({"replay": "before: FCFS+EASY, one pool", "result": best, "engine_s": best.engine_s,
                    "wall_s": best.wall_s, "cluster": pool_note})
    log_print(f"  EASY pooled: {best.engine_s:.3f} s, mean wait {np.nanmean(best.wait):,.1f}")
    for variant, conf, note in variants:
        for rule in rules:
            res = None
            for _ in range(repeat):
                c0 = time.perf_counter()
                r = simulate_slurm(w, conf, rule)
                wall = time.perf_counter() - c0
                if res is None or r.engine_s < res[0].engine_s:
                    res = (r, wall)
            r, wall = res
            label = f"after: Slurm, {variant}, {'multifactor (default weights)' if rule == 'multifactor' else rule}"
            cell = note
            prev = replays[-1]
            if prev.get("variant") == variant:  # the same nodes under another rule: say whether anything changed
                same = np.array_equal(prev["result"].start, r.start, equal_nan=True)
                cell = ("the same nodes; **the same schedule, job for job**" if same else
                        f"the same nodes; {int(np.sum(prev['result'].start != r.start))} jobs start elsewhere")
            replays.append({"replay": label, "result": r, "engine_s": r.engine_s, "wall_s": wall, "cluster": cell,
                            "variant": variant})
            log_print(f"  {label}: {r.engine_s:.3f} s engine, {wall:.3f} s wall, mean wait {np.nanmean(r.wait):,.1f}"
                      f", notes: {'; '.join(r.notes)}")
    ran = np.ones(len(w), np.bool_)
    for rp in replays:
        ran &= ~np.isnan(rp["result"].start)
    has_log = ~np.isnan(logged)
    both = ran & has_log
    out = {"key": log.key, "log": log.name, "jobs_in_log": jobs.height, "jobs_normalised": len(w_all),
           "jobs_replayed": len(w), "capped": bool(cap and cap < len(w_all)), "read_s": read_s,
           "never_fit": {rp["replay"]: int(np.isnan(rp["result"].start).sum()) for rp in replays},
           "compared": int(both.sum()) if has_log.any() else int(ran.sum()), "has_asrun": bool(has_log.any()),
           "span_days": float((w.submit[-1] - w.submit[0]) / 86400) if len(w) else 0.0, "rows": []}
    mask = both if has_log.any() else ran
    run = w.run[mask]
    asrun_start = (w.submit + logged)[mask] if has_log.any() else None
    if has_log.any():
        out["rows"].append({"replay": "as run (the log)", **figures(logged[mask], run, asrun_start, None),
                            "w1": None, "engine_s": None, "wall_s": None, "cluster": ""})
    for rp in replays:
        r = rp["result"]
        wait = r.wait[mask]
        row = {"replay": rp["replay"], **figures(wait, run, r.start[mask], asrun_start), "engine_s": rp["engine_s"],
               "wall_s": rp["wall_s"], "cluster": rp["cluster"], "w1": None}
        if has_log.any():
            fid = fidelity(r, jobs)
            row["w1"] = float(fid["wasserstein_s"][0])
        out["rows"].append(row)
    if has_log.any():  # the O(n log n) tau against the project's O(n^2) one, on a sample
        from metapilot.models.steering.rank import kendall_tau

        k = min(2000, int(mask.sum()))
        r = replays[-1]["result"]
        a, b = r.start[mask][:k], asrun_start[:k]
        out["tau_check"] = [tau_a(a, b), kendall_tau(a, b)]
    return out


# --- speed and where the time goes ----------------------------------------------------------------------------

def speed_rows(results: list[dict]) -> list[dict]:
    rows = []
    for res in results:
        if res["key"] not in ("kth", "curie"):
            continue
        easy = next(r for r in res["rows"] if r["replay"].startswith("before"))
        for r in res["rows"]:
            if r["replay"].startswith("after") and "nodes" in r["replay"]:
                rows.append({"log": res["log"], "jobs": res["jobs_replayed"], "capped": res["capped"],
                             "replay": r["replay"], "slurm_engine_s": r["engine_s"], "slurm_wall_s": r["wall_s"],
                             "easy_engine_s": easy["engine_s"], "easy_wall_s": easy["wall_s"],
                             "ratio": r["engine_s"] / easy["engine_s"]})
    return rows


def profile(repeat: int, log_print=print) -> list[dict]:
    """The Slurm replay of KTH-SP2 (and a CEA-Curie prefix) with one part of the work changed at a time."""
    out = []
    kth = normalise(parse_jobs(SWF / "KTH-SP2-1996-2.1-cln.swf.gz", ParseOptions(fmt="swf")))
    curie_log = LOGS[1]
    curie = normalise(parse_jobs(curie_log.path, ParseOptions(fmt="swf"))).head(20_000)
    _, _, [(_, curie_conf, _)] = swf_clusters(curie_log, curie)
    for name, w, conf in (("KTH-SP2", kth, uniform(1, 100)), ("CEA-Curie first 20,000", curie, curie_conf)):
        frame = workload_frame(w)
        base = None
        variants = [
            ("Slurm's defaults", conf, {}),
            ("backfill off (sched/builtin: main passes only)", conf.with_sched(backfill=False), {}),
            ("bf_interval 300 s (a tenth of the backfill passes)", conf.with_sched(bf_interval=300), {}),
            ("bf_max_job_test 50", conf.with_sched(bf_max_job_test=50), {}),
            ("bf_max_job_test 10", conf.with_sched(bf_max_job_test=10), {}),
            ("bf_window 1 h (shorter map)", conf.with_sched(bf_window_min=60), {}),
            ("sched_interval 1 day (event passes only)", conf.with_sched(sched_interval=86400), {}),
            ("default_queue_depth 10", conf.with_sched(default_queue_depth=10), {}),
            ("rule FCFS (score sort, not priority)", conf, {"rule": "FCFS"}),
        ]
        for label, c, kw in variants:
            best = float("inf")
            sched = None
            for _ in range(repeat):
                sched = slurm_schedule(frame, c, **({"rule": "multifactor"} | kw))
                best = min(best, sched.engine_s)
            if base is None:
                base = (best, sched.jobs["start"].to_numpy())
            same = bool(np.array_equal(sched.jobs["start"].to_numpy(), base[1], equal_nan=True))
            row = {"log": name, "variant": label, "engine_s": best, "share": best / base[0],
                   "mean_wait": float(sched.jobs["wait"].mean()), "same_schedule": same}
            log_print(f"  {name}: {label}: {best:.3f} s ({best / base[0]:.2f}x), mean wait {row['mean_wait']:,.1f}")
            out.append(row)
        t_easy = min(simulate(w, Capacity.single(int(sum(n.cpus for n in conf.nodes))), "FCFS", "easy").engine_s
                     for _ in range(repeat))
        out.append({"log": name, "variant": "textbook EASY, pooled", "engine_s": t_easy, "share": t_easy / base[0],
                    "mean_wait": None, "same_schedule": None})
    return out


def curie_slurm_conf() -> str:
    """The slurm.conf a site would give `simulate --slurm-conf` for the nodes `swf_clusters` replays CEA-Curie on
    (the same nodes in the same order, one partition, multifactor with Slurm's default weights)."""
    return "\n".join(["ClusterName=curie", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
                      "PriorityType=priority/multifactor",
                      *(f"NodeName={kind}[0-{count - 1}] CPUs={cpn}" for kind, count, cpn in CURIE_NODES),
                      "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE"]) + "\n"


def window_end(log: Log, cap: int | None) -> str | None:
    """`--to` for the first `cap` jobs the replay keeps (by submit time; None: the whole log)."""
    if not cap:
        return None
    jobs = parse_jobs(log.path, ParseOptions(fmt=log.fmt) if log.fmt else ParseOptions())
    w = normalise(jobs)
    if cap >= len(w):
        return None
    first_out = jobs.filter(pl.col("job_id") == w.job_ids[cap])["submit_time"][0]
    return first_out.strftime("%Y-%m-%dT%H:%M:%S")


def command_speed(caps: dict[str, int], repeat: int, log_print=print) -> list[dict]:
    """Item 5 as a user meets it: `metapilot simulate` of the log's jobs in a new process (start-up, imports, the
    warehouse's read, the replay, the stored run), EASY against the Slurm replay on the same nodes as the engine
    rows (KTH-SP2: 100 one-CPU nodes, the warehouse's capacity; CEA-Curie: its header's 5,544 nodes, given as a
    slurm.conf). Median of `repeat` runs after an untimed one."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "w.duckdb")
        conf = Path(tmp) / "curie.slurm.conf"
        conf.write_text(curie_slurm_conf())
        for key in ("kth", "curie"):
            log = next(lg for lg in LOGS if lg.key == key)
            subprocess.run([CLI, "ingest", str(log.path), "--cluster", log.name, "--db", db], check=True,
                           capture_output=True, cwd=REPO)
            base = ["simulate", "--cluster", log.name, "--db", db]
            to = window_end(log, caps.get(key))
            if to:
                base += ["--to", to]
            slurm = base + ["--policy", "multifactor", "--backfill", "slurm"]
            if key == "curie":
                slurm += ["--slurm-conf", str(conf)]
            easy = base + ["--policy", "FCFS", "--backfill", "easy"]
            out = subprocess.run([CLI, *slurm], capture_output=True, text=True, cwd=REPO, check=True).stdout
            m = re.search(r"replayed ([\d,]+)", out)
            t_easy, t_slurm = timed(easy, repeat), timed(slurm, repeat)
            row = {"log": log.name, "jobs": int(m.group(1).replace(",", "")) if m else None, "to": to,
                   "command": "metapilot " + " ".join(a if a not in (db, str(conf)) else
                                                      ("W.duckdb" if a == db else "curie.slurm.conf") for a in slurm),
                   "easy_s": float(np.median(t_easy)), "slurm_s": float(np.median(t_slurm)),
                   "easy_runs": t_easy, "slurm_runs": t_slurm}
            row["ratio"] = row["slurm_s"] / row["easy_s"]
            log_print(f"  {log.name} as a command: EASY {row['easy_s']:.2f} s, Slurm {row['slurm_s']:.2f} s "
                      f"({row['ratio']:.1f}x; runs {', '.join(f'{t:.2f}' for t in t_slurm)})")
            rows.append(row)
    return rows


# --- the document ---------------------------------------------------------------------------------------------

def fmt(x, digits: int = 0) -> str:
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:,.{digits}f}"


def render(results: list[dict], speed: list[dict], prof: list[dict], meta: dict, counts: list[dict] = (),
           commands: list[dict] = ()) -> str:
    lines = [f"## {HEADING}", ""]
    lines += [
        "Every log we have, replayed three ways and set next to what the cluster lived (the logged waits): **before**, "
        "the textbook engine's replay of the current rule (FCFS+EASY on one pool of cores, `simulate(...)`); "
        "**after**, the Slurm replay on nodes (`simulate_slurm(workload, conf, rule)`, models/simulator/slurm/) with "
        "Slurm 22.05's default scheduler parameters (bf_interval=30, bf_max_job_test=500, bf_window=1 day, "
        "bf_resolution=60, sched_interval=60, default_queue_depth=100, no completing time), priority/multifactor "
        "with Slurm's default weights (all 0: equal priorities, the queue in submission order), and the rule FCFS. "
        "Figures over the jobs every replay ran and the log gives a start for: mean wait, mean bounded slowdown "
        "(`max(1, (wait + run) / max(run, 10))`), the share of jobs that waited more than 60 s, Kendall's tau-a of "
        "the start order against the as-run start order (`rank.kendall_tau`'s definition, computed in O(n log n)), "
        "and the Wasserstein-1 distance between the replayed and the logged waits (`fidelity`).",
        "",
        f"Command: `{meta['command']}`. Machine: {meta['machine']}; {meta['load']}. {meta['date']}.",
        "",
        "| log | jobs compared | cluster replayed | replay | mean wait (s) | vs as run | bsld | waited > 60 s | "
        "Kendall tau | W1 (s) | engine (s) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in results:
        asrun = next((r for r in res["rows"] if r["replay"].startswith("as run")), None)
        jobs = f"{res['compared']:,}"
        if res["capped"]:
            jobs += f" (first {res['jobs_replayed']:,} of {res['jobs_normalised']:,})"
        for k, r in enumerate(res["rows"]):
            vs = "–"
            if asrun is not None and r is not asrun and asrun["mean_wait"] > 0:
                vs = f"{(r['mean_wait'] - asrun['mean_wait']) / asrun['mean_wait']:+.0%}"
            name = res["log"] if k == 0 else ""
            cluster = r["cluster"] or ""
            if not res["has_asrun"] and k == 0:
                cluster = "**the log gives no waits: no as-run history to compare**; " + cluster
            lines.append(f"| {name} | {jobs if k == 0 else ''} | {cluster} | {r['replay']} | {fmt(r['mean_wait'])} | "
                         f"{vs} | {fmt(r['bsld'], 2)} | {r['waited']:.1%} | {fmt(r['tau'], 3)} | {fmt(r['w1'])} | "
                         f"{fmt(r['engine_s'], 3)} |")
    lines.append("")
    lines += closer_table(results)
    if speed:
        lines += ["**Speed** (item 5): the engine's time of one replay (best of "
                  f"{meta['repeat']} on KTH-SP2, one run on CEA-Curie; `slurm_schedule(...).engine_s` inside "
                  "`simulate_slurm`, `simulate(...).engine_s`;"
                  " wall: the whole call, the frame and the result included); target: the Slurm replay within 2x "
                  "of EASY's.", "",
                  "| log | jobs | replay | Slurm engine (s) | Slurm wall (s) | EASY engine (s) | EASY wall (s) | "
                  "ratio | within 2x |",
                  "|---|---:|---|---:|---:|---:|---:|---:|:-:|"]
        for s in speed:
            lines.append(f"| {s['log']} | {s['jobs']:,}{' (capped)' if s['capped'] else ''} | {s['replay']} | "
                         f"{s['slurm_engine_s']:.3f} | {s['slurm_wall_s']:.3f} | {s['easy_engine_s']:.4f} | "
                         f"{s['easy_wall_s']:.4f} | {s['ratio']:,.0f}x | {'yes' if s['ratio'] <= 2 else 'no'} |")
        lines.append("")
    if commands:
        lines += ["**The command a user runs** (`--commands`): `metapilot simulate` in a new process (start-up, "
                  "imports, the warehouse's read, the replay, the stored run), median of "
                  f"{len(commands[0]['slurm_runs'])} runs after an untimed one, into a warehouse of the two logs "
                  "(`metapilot ingest`); EASY: the same command with `--policy FCFS --backfill easy`.", "",
                  "| log | jobs | Slurm replay (command) | Slurm (s) | EASY (s) | ratio | within 2x |",
                  "|---|---:|---|---:|---:|---:|:-:|"]
        for c in commands:
            lines.append(f"| {c['log']} | {fmt(c['jobs'])} | `{c['command']}` | {c['slurm_s']:.2f} | "
                         f"{c['easy_s']:.2f} | {c['ratio']:.1f}x | {'yes' if c['ratio'] <= 2 else 'no'} |")
        lines.append("")
    if prof:
        lines += ["**Where the time goes** (`--profile`: the Slurm replay with one part of the work changed at a "
                  "time; engine seconds, best of the runs; `slurm_schedule` on the jobs' own clock, without the epoch "
                  "origin `simulate_slurm` gives it, so Slurm's minute grid falls elsewhere and the waits differ a "
                  "little from the table above):", "",
                  "| log | variant | engine (s) | x Slurm's defaults | mean wait (s) | same schedule |",
                  "|---|---|---:|---:|---:|:-:|"]
        for p in prof:
            same = "–" if p["same_schedule"] is None else ("yes" if p["same_schedule"] else "no")
            lines.append(f"| {p['log']} | {p['variant']} | {p['engine_s']:.3f} | {p['share']:.2f} | "
                         f"{fmt(p['mean_wait'])} | {same} |")
        lines.append("")
    for case in counts:
        lines += [f"**Counts and doubling experiments**, {case['case']} (`.venv/bin/python "
                  "bench/profile_slurm_replay.py --curie 20000 --repeat 2 --save FILE`: a copy of the "
                  "kernel with counters, and copies doing one part twice; every copy gives the same schedule, job for "
                  f"job; the copy alone {case['copy_s']:.3f} s):", "",
                  "| what | count |", "|---|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in case["counters"].items()]
        lines += ["", "| part done twice | extra time (s) | share of the replay |", "|---|---:|---:|"]
        lines += [f"| {k} | {v:+.3f} | {v / case['copy_s']:.0%} |" for k, v in case["doubled"].items()]
        lines.append("")
    for extra in meta.get("notes", []):
        lines += [extra, ""]
    lines += [FINDINGS.strip(), ""]
    return "\n".join(lines)


FINDINGS = """
**What the figures show** (the run above). The Slurm replay on nodes comes closer to the logged mean wait than the
pooled textbook replay on KTH-SP2 (-55% -> -49%), RICC's first 20,000 jobs (-64% -> -47%) and the pozidriv sacct
sample (-67% -> -46%), barely on CEA-Curie's first 50,000 jobs (-90% -> -89%), and not on the HPC2N subset (-80%
both; 3,531 -> 3,498 s, or 3,727 s with 120 nodes of 2 CPUs given whole); the hpc-cost sample is the same schedule.
The distance between the wait distributions (W1) falls on KTH-SP2, CEA-Curie and pozidriv. Bounded slowdown and the
share of jobs that waited over a minute come closer on KTH-SP2, CEA-Curie and HPC2N (on pozidriv the bsld does, the
share does not: 34% -> 30% against 74%); on RICC they move away (bsld 72 -> 160 against 8.4 as run): there the long
jobs did the waiting (a mean wait of 27,138 s with a bsld of 8.4) and a replay in submission order makes the short
ones wait too. Every replay is still 46-94% short of the logged mean wait. Why, log by log:
- where a node is one core (KTH-SP2, the HPC2N header, NASA-iPSC, Lublin-256) nodes change nothing that fits: what
  moves the waits is Slurm's passes (a job starts at a pass, not at the event) and its backfill, which reserves for
  every job it tests (up to 500), not only for the head as EASY does;
- HPC2N's file is a 3,170-job subset of a 527,371-job log: the load of the jobs it leaves out is not there to wait
  behind, whatever the nodes;
- CEA-Curie's 17 partitions are not tied to node kinds in its header, so every job may use every node of 16, 32 or
  8 cores, and most jobs fit somewhere; the site's multifactor weights (fair-share, age, QOS) are not in the log:
  with Slurm's default weights (all 0) the queue is submission order, and the FCFS rows give the same schedule job
  for job, as they should;
- waits that no replay of the queue produces: nodes down or drained, maintenance reservations, held jobs and
  dependencies, per-user or per-account limits; on the hpc-cost sample (374 one-core jobs that never fill their 83
  cores) the jobs waited 156 s on average as run and 9 s in every replay: that is start latency, not queueing.
Kendall's tau of the start order is 0.92-0.998 on every log and hardly moves between replays: over months, start
order is mostly submission order, so it does not tell the replays apart (the live benchmark's short slices do).

**Speed.** The Slurm replay tests the queued jobs at every backfill pass (every 30 s after a change) and gives each
one it cannot start a reservation on the node map, where EASY looks at the queue once per event with a pooled
profile: on KTH-SP2, 27,220 backfill passes tested 416,940 jobs with 1,432,367 will-run tests and 1,602,296 walks
of the node map (the counts below). After this session's changes (the running jobs kept in the order of
their ends, the will-run test calling the node choice only where the free CPUs could hold the job, a counting sort
in the node choice, the map's nodes as bit words; schedules identical job for job) the replay is 81x EASY's time on
KTH-SP2 (1.21 s against 0.015 s; it was 2.0 s, 136x, at the start of the session) and CEA-Curie's first 50,000 jobs
take 58 s (219 s at the start of the session, with the kernel of then). The doubling experiments below say where the time is now: `will_run` 58% (KTH-SP2) and 73%
(CEA-Curie), the node map 31% and 14% (`space_allowed` 18% / 11%, `space_reserve` 13% / 3%), sorting the queue
(`_queue_order`) 3% / 1%, the main passes' node choice 1% / 8%. Backfill off leaves 59% (KTH-SP2) and 12% (CEA-Curie) of
the time, but it is another schedule: without backfill KTH-SP2's queue grows thousands long for the main passes.

**What is left.** The 2x target is not met and cannot be met by tuning this design: even at 0.1 us a will-run test,
KTH-SP2's million tests alone take several times EASY's whole replay. Getting there needs work not repeated pass
after pass: the reservations of the jobs whose nodes and running jobs did not change since the last pass kept rather
than recomputed (Slurm itself recomputes them, so this must be proved to give the same schedule), and the node
choice and will-run test reading the partition's free CPUs from counts kept as jobs start and end instead of a pass
over every node. The whole CEA-Curie and RICC logs are not replayed (caps above: the time still grows faster than
the jobs); Curie's partitions on their node kinds need the site's slurm.conf; the pozidriv nodes' CPUs are a lower
bound (the most a job held).
"""

SHOWN = {"mean_wait": 0, "bsld": 2, "waited": 3, "tau": 3, "w1": 0}
CLOSER = (("mean wait", "mean_wait"), ("bsld", "bsld"), ("waited > 60 s", "waited"), ("Kendall tau", "tau"),
          ("W1", "w1"))


def closer_table(results: list[dict]) -> list[str]:
    """Per log with as-run waits: is the Slurm replay on nodes (multifactor) closer to the log than the pooled one?"""
    out = ["**Closer to what the cluster lived than the pooled replay?** (the first Slurm replay on nodes, "
           "multifactor, against the pooled FCFS+EASY; distance to the log's figure, |replay - as run|; Kendall tau "
           "and W1 (lower W1 is closer) against the log already)", "",
           "| log | " + " | ".join(name for name, _ in CLOSER) + " |", "|---|" + ":-:|" * len(CLOSER)]
    for res in results:
        rows = res["rows"]
        asrun = next((r for r in rows if r["replay"].startswith("as run")), None)
        if asrun is None:
            continue
        before = next(r for r in rows if r["replay"].startswith("before"))
        after = next(r for r in rows if r["replay"].startswith("after"))
        cells = []
        for _, key in CLOSER:
            if key == "tau":
                a, b = 1 - after[key], 1 - before[key]
            elif key == "w1":
                a, b = after[key], before[key]
            else:
                a, b = abs(after[key] - asrun[key]), abs(before[key] - asrun[key])
            digits = SHOWN[key]  # as the table shows them: closer only where the shown figures differ
            a, b = round(a, digits), round(b, digits)
            cells.append("equal" if a == b else ("**yes**" if a < b else "no"))
        out.append(f"| {res['log']} | " + " | ".join(cells) + " |")
    return out + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", default=",".join(lg.key for lg in LOGS), help="comma-separated keys: "
                    + ", ".join(lg.key for lg in LOGS))
    ap.add_argument("--max-jobs", default="", help="caps, e.g. ricc=100000,lcg=50000 (first N jobs by submit time)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each replay (best kept) on KTH-SP2 and small logs")
    ap.add_argument("--rules", default="multifactor,FCFS")
    ap.add_argument("--profile", action="store_true", help="also time variants of the Slurm replay (where the time goes)")
    ap.add_argument("--save", help="keep the results (JSON) here")
    ap.add_argument("--load", help="render saved results (comma-separated files) instead of running")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--counts", default="", help="profile_slurm_replay.py --save files to render (comma-separated)")
    ap.add_argument("--notes", help="a markdown file of findings to render under the tables")
    ap.add_argument("--commands", action="store_true",
                    help="also time `metapilot simulate` as a user runs it (new processes), EASY against Slurm")
    args = ap.parse_args()
    caps = dict(DEFAULT_CAPS)
    for item in filter(None, args.max_jobs.split(",")):
        k, _, v = item.partition("=")
        caps[k] = int(v)
    started = datetime.now(UTC)
    if args.load:
        # later files replace earlier ones' results for the same log (a rerun of some logs, e.g. the speed runs)
        doc = {"results": [], "speed": [], "profile": [], "meta": {}}
        by_key: dict[str, dict] = {}
        for f in args.load.split(","):
            part = json.loads(Path(f).read_text())
            for res in part["results"]:
                by_key[res["key"]] = res
            doc["profile"] = part["profile"] or doc["profile"]
            doc["commands"] = part.get("commands") or doc.get("commands", [])
            doc["meta"] = doc["meta"] or part["meta"]
        doc["results"] = [by_key[lg.key] for lg in LOGS if lg.key in by_key]
        doc["meta"]["command"] += "` (saved with `--save`), rendered with `" + " ".join(
            [".venv/bin/python", "bench/bench_slurm_replay.py", *sys.argv[1:]])
        doc["speed"] = speed_rows(doc["results"])
    else:
        from metapilot.models.simulator import warm_up

        warm_up()
        slurm_schedule(workload_frame(Workload.from_arrays([0.0, 1.0], [5.0, 5.0], cores=[1, 1])), uniform(1, 1))
        results = []
        keys = args.logs.split(",")
        for log in LOGS:
            if log.key not in keys:
                continue
            small = log.key in ("kth", "hpc2n", "nasa", "lublin", "hpccost", "pozidriv")
            res = run_log(log, caps.get(log.key), args.repeat if small else 1, tuple(args.rules.split(",")))
            results.append(res)
        prof = profile(args.repeat) if args.profile else []
        commands = command_speed(caps, max(args.repeat, 3)) if args.commands else []
        load = os.getloadavg()
        doc = {"results": results, "speed": speed_rows(results), "profile": prof, "commands": commands, "meta": {
            "command": " ".join([".venv/bin/python", "bench/bench_slurm_replay.py", *sys.argv[1:]]),
            "machine": machine(), "repeat": args.repeat,
            "load": f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) at the end",
            "date": f"{started:%Y-%m-%d %H:%M}-{datetime.now(UTC):%H:%M} UTC"}}
    if args.save:
        Path(args.save).write_text(json.dumps(doc, default=str, indent=1))
    if args.notes:
        doc["meta"]["notes"] = [Path(args.notes).read_text().strip()]
    counts = [c for f in filter(None, args.counts.split(",")) for c in json.loads(Path(f).read_text())]
    text = render(doc["results"], doc["speed"], doc["profile"], doc["meta"], counts, doc.get("commands", []))
    print(text)
    if not args.no_write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
