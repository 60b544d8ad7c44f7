"""Pending jobs -> the site factor each should carry (SPEC §12): pure frames, no Slurm.

Which jobs: only those pending for Priority or Resources, or with no reason yet (never running,
held, limit-blocked or dependency-waiting ones), and an array as a whole (its pending record's id, which scontrol applies
to every task) or a split task by its own id; never a task of an array that is partly running or
split, through the array's id. Jobs in a reservation keep their place (not ranked).

Where: within each group Slurm itself compares (partition and its PriorityTier): a job is only
ever moved among jobs of its own group, so a higher tier stays ahead and no job changes group.

How: the group's jobs in the objective's queue order (`models.simulator.objectives.queue_order`,
the engine's own rule and tie-breaks); the site factor counts positions from the bottom of the
group, `step x (n - 1 - rank)`, so the last job carries 0 (untouched), a job starting takes its
factor with it and leaves the others' as they were, and only jobs whose position moved change.
The factor adds to the multifactor priority: with `step` above the spread of the other factors
the rule decides the order, with a smaller one it blends with age, fair-share and QOS.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from metapilot.models.simulator.objectives import queue_order

# "None": Slurm clears a pending job's reason while a scheduling pass evaluates it (measured on 22.05:
# every pending job showed None for a moment); leaving such jobs out made the loop reset their factor
# to 0 and set it again the next cycle. Held, dependent and limit-blocked jobs always carry their reason.
STEERABLE_REASONS = ("Priority", "Resources", "None")
SITE_FACTOR_MAX = 2_147_483_645  # scontrol's bound


def targets(jobs: pl.DataFrame, preempting_qos: frozenset[str] = frozenset()) -> pl.DataFrame:
    """Each squeue record with `target` (the id scontrol is given, or null) and `skip` (why not)."""
    arrays_elsewhere = (jobs.filter(pl.col("array_job_id").is_not_null()
                                    & ((pl.col("state") != "PENDING") | pl.col("array_task_id").is_not_null()))
                        ["array_job_id"].unique().to_list())
    split = pl.col("array_task_id").is_not_null()
    unsplit = pl.col("array_task_string").is_not_null() & pl.col("array_task_id").is_null()
    skip = (pl.when(pl.col("state") != "PENDING").then(pl.lit("not pending"))
            .when(~pl.col("reason").is_in(STEERABLE_REASONS)).then(pl.concat_str(pl.lit("pending for "), pl.col("reason")))
            .when(pl.col("reservation").is_not_null()).then(pl.lit("in a reservation: keeps its place"))
            .when(pl.col("qos").is_in(list(preempting_qos))).then(pl.lit("can preempt: keeps its place"))
            .when(unsplit & pl.col("array_job_id").is_in(arrays_elsewhere))
            .then(pl.lit("array partly split or running: not through the array's id"))
            .otherwise(pl.lit(None, dtype=pl.Utf8)))
    target = (pl.when(skip.is_not_null()).then(pl.lit(None, dtype=pl.Utf8))
              .when(split).then(pl.concat_str(pl.col("array_job_id"), pl.lit("_"), pl.col("array_task_id")))
              .when(unsplit).then(pl.col("array_job_id"))
              .otherwise(pl.col("job_id")))
    return jobs.with_columns(skip.alias("skip"), target.alias("target"))


def group_keys(jobs: pl.DataFrame, tiers: dict[str, int]) -> pl.Series:
    """'partition|tier N' per job (a job in several partitions is its own group: Slurm compares it
    in each; it is ranked only with jobs asking for the same list)."""
    tier = jobs["partition"].map_elements(lambda p: max((tiers.get(x, 1) for x in p.split(",")), default=1),
                                          return_dtype=pl.Int64)
    return pl.concat_str([jobs["partition"], pl.lit("|tier "), tier.cast(pl.Utf8)]).alias("group_key")


def desired_factors(jobs: pl.DataFrame, objective: str, now_s: float, step: int,
                    tiers: dict[str, int]) -> pl.DataFrame:
    """The steerable jobs (`targets` done, `skip` null) ranked within their groups:
    target, group_key, rank (0 = first), site_factor."""
    cand = jobs.filter(pl.col("target").is_not_null())
    if cand.is_empty():
        return pl.DataFrame(schema={"target": pl.Utf8, "group_key": pl.Utf8, "rank": pl.Int32, "site_factor": pl.Int64})
    cand = cand.with_columns(group_keys(cand, tiers))
    out = []
    for (key,), g in cand.group_by(["group_key"], maintain_order=True):
        submit = g["submit_s"].fill_null(now_s).to_numpy().astype(np.float64)
        req = g["time_limit_s"].fill_null(365 * 86400).to_numpy().astype(np.float64)
        cores = g["cpus"].fill_null(1).to_numpy().astype(np.float64)
        seq = np.array([float(t.split("_")[0]) + (float(t.split("_")[1]) / 1e7 if "_" in t else 0.0)
                        for t in g["target"].to_list()])
        order = queue_order(objective, submit_s=submit, req_time_s=req, cores=cores, job_seq=seq,
                            now_s=float(now_s), origin_s=float(submit.min()) - 1.0)
        n = len(order)
        rank = np.empty(n, dtype=np.int32)
        rank[order] = np.arange(n, dtype=np.int32)
        s = min(int(step), SITE_FACTOR_MAX // max(n - 1, 1))
        out.append(pl.DataFrame({"target": g["target"], "group_key": key, "rank": rank,
                                 "site_factor": (n - 1 - rank).astype(np.int64) * s}))
    return pl.concat(out)


def protect(desired: pl.DataFrame, ranked: pl.DataFrame, job_ids: set[str], step: int) -> pl.DataFrame:
    """Jobs past the live tail guard's limit (`job_ids`, as squeue names them) put ahead of their
    group: one step above its largest factor, so steering never holds them back further (Slurm's
    own factors order them among themselves)."""
    if not job_ids or desired.is_empty():
        return desired
    mine = set(ranked.filter(pl.col("job_id").is_in(list(job_ids)) & pl.col("target").is_not_null())["target"].to_list())
    if not mine:
        return desired
    top = desired.group_by("group_key").agg(pl.col("site_factor").max().alias("top"))
    return (desired.join(top, on="group_key", how="left")
            .with_columns(pl.when(pl.col("target").is_in(list(mine)))
                          .then(pl.min_horizontal(pl.col("top") + int(step), pl.lit(SITE_FACTOR_MAX)))
                          .otherwise(pl.col("site_factor")).alias("site_factor"),
                          pl.when(pl.col("target").is_in(list(mine))).then(pl.lit(0, dtype=pl.Int32))
                          .otherwise(pl.col("rank")).alias("rank"))
            .drop("top"))


def changes(desired: pl.DataFrame, current: pl.DataFrame, still_pending: set[str], max_changes: int) -> tuple[pl.DataFrame, list[str]]:
    """(jobs to set: target, site_factor, rank, group_key; ids to forget).

    `current`: what the loop set before (job_id, site_factor). A job set before and no longer
    steerable but still pending (held since, say) goes back to 0; one gone or running is only
    forgotten (its factor no longer matters). At most `max_changes`, the front of each group first."""
    cur = current.select(pl.col("job_id").alias("target"), pl.col("site_factor").alias("current"))
    want = desired.join(cur, on="target", how="left").with_columns(pl.col("current").fill_null(0))
    moved = want.filter(pl.col("site_factor") != pl.col("current"))
    gone = cur.filter(~pl.col("target").is_in(desired["target"].to_list()))
    back = gone.filter(pl.col("target").is_in(list(still_pending)) & (pl.col("current") != 0))
    forget = gone.filter(~pl.col("target").is_in(list(still_pending)))["target"].to_list()
    reset = back.select("target", pl.lit(0, dtype=pl.Int64).alias("site_factor"), pl.lit(None, dtype=pl.Int32).alias("rank"),
                        pl.lit(None, dtype=pl.Utf8).alias("group_key"))
    todo = pl.concat([reset, moved.select("target", "site_factor", "rank", "group_key").sort("rank")])
    return todo.head(max(0, int(max_changes))), forget


def batches(todo: pl.DataFrame, per_line: int = 100) -> list[tuple[int, list[str]]]:
    """(value, job ids) per scontrol line: jobs sharing a value in one `update job=a,b,c` line."""
    by_value: dict[int, list[str]] = {}
    for value, jid in zip(todo["site_factor"].to_list(), todo["target"].to_list()):
        by_value.setdefault(int(value), []).append(jid)
    return [(value, ids[i:i + per_line]) for value, ids in by_value.items() for i in range(0, len(ids), per_line)]


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-a between two rankings of the same items (no scipy: O(n^2), n small)."""
    n = len(a)
    if n < 2:
        return float("nan")
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    s = 0.0
    for i in range(n - 1):
        s += float(np.sum(np.sign(a[i] - a[i + 1:]) * np.sign(b[i] - b[i + 1:])))
    return s / (n * (n - 1) / 2)
