"""Pending jobs -> the site factor each should carry (SPEC §12): pure frames, no Slurm.

Which jobs: only those pending for Priority or Resources, or with no reason yet (never running,
held, limit-blocked or dependency-waiting ones), and an array as a whole (its pending record's id, which scontrol applies
to every task) or a split task by its own id; never a task of an array that is partly running or
split, through the array's id. Jobs in a reservation keep their place (not ranked).

Where: within each group Slurm itself compares (partition and its PriorityTier): a job is only
ever moved among jobs of its own group, so a higher tier stays ahead and no job changes group.

How: the group's jobs in the objective's queue order (`models.simulator.objectives.queue_order`,
the engine's own rule and tie-breaks), placed in a band of site factors that is the same for every
group whatever its size (`Band`: [step, 2 x half], its middle `half`), so a job moved to another group
carries no advantage earned in a big one. Ranks are laid out with gaps (`GAP_STEPS` steps apart, centred
on the band's middle), and a cycle keeps every factor that still falls in the rule's order: an arrival
takes a free place between its neighbours (one job set), a start leaves the others as they were; only
when a gap is exhausted are the jobs around it spread again (`place`), and the whole group only when it
has drifted to an edge of the band. Jobs the loop cannot rank (asking for several partitions, an array
with a task running, a job whose QOS may preempt) are set to the band's middle: their place relative
to the rule, not below every raised job. The factor adds to the multifactor priority: adjacent ranks
at least `step` apart, so with `step` above the spread of the other factors the rule decides the
order (a group too large for the band at that spacing blends with age, fair-share and QOS).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from metapilot.models.simulator.objectives import queue_order

# "None": Slurm clears a pending job's reason while a scheduling pass evaluates it (measured on 22.05:
# every pending job showed None for a moment); leaving such jobs out made the loop reset their factor
# to 0 and set it again the next cycle. Held, dependent and limit-blocked jobs always carry their reason.
STEERABLE_REASONS = ("Priority", "Resources", "None")
SITE_FACTOR_MAX = 2_147_483_645  # scontrol's bound
BAND_SLOTS = 1 << 17  # steps in each half of a group's band (capped by SITE_FACTOR_MAX)
GAP_STEPS = 8  # steps between adjacent ranks when a group is laid out afresh: room for arrivals between them
MIDDLE = "middle"  # `place` of a job set to the band's middle (not ranked)


@dataclass(frozen=True)
class Band:
    """The site factors every group's jobs are placed in, the same for every group: [low, high], a
    steered job never at 0 (0 is untouched or released)."""

    step: int
    half: int

    @property
    def low(self) -> int:
        return min(self.step, self.half)

    @property
    def mid(self) -> int:
        return self.half

    @property
    def high(self) -> int:
        return 2 * self.half


def band_for(step: int) -> Band:
    """The band for a step: `BAND_SLOTS` steps either side of the middle, within scontrol's bound."""
    step = max(1, int(step))
    return Band(step, max(1, min(step * BAND_SLOTS, SITE_FACTOR_MAX // 2)))


def targets(jobs: pl.DataFrame, preempting_qos: frozenset[str] = frozenset()) -> pl.DataFrame:
    """Each squeue record with `target` (the id scontrol is given, or null), `skip` (why not) and
    `place`: 'rank' (ranked in its group) or 'middle' (set to the band's middle: a job asking for
    several partitions, the pending rest of an array with a task running, a job whose QOS may preempt)."""
    arr = pl.col("array_job_id").is_not_null()
    running_arrays = jobs.filter(arr & (pl.col("state") != "PENDING"))["array_job_id"].unique().to_list()
    split_arrays = (jobs.filter(arr & (pl.col("state") == "PENDING") & pl.col("array_task_id").is_not_null())
                    ["array_job_id"].unique().to_list())
    split = pl.col("array_task_id").is_not_null()
    unsplit = pl.col("array_task_string").is_not_null() & pl.col("array_task_id").is_null()
    skip = (pl.when(pl.col("state") != "PENDING").then(pl.lit("not pending"))
            .when(~pl.col("reason").is_in(STEERABLE_REASONS)).then(pl.concat_str(pl.lit("pending for "), pl.col("reason")))
            .when(pl.col("reservation").is_not_null()).then(pl.lit("in a reservation: keeps its place"))
            .when(unsplit & pl.col("array_job_id").is_in(split_arrays))
            .then(pl.lit("array partly split: not through the array's id"))
            .otherwise(pl.lit(None, dtype=pl.Utf8)))
    middle = (pl.col("qos").is_in(list(preempting_qos)) | pl.col("partition").str.contains(",", literal=True)
              | (unsplit & pl.col("array_job_id").is_in(running_arrays)))
    target = (pl.when(skip.is_not_null()).then(pl.lit(None, dtype=pl.Utf8))
              .when(split).then(pl.concat_str(pl.col("array_job_id"), pl.lit("_"), pl.col("array_task_id")))
              .when(unsplit).then(pl.col("array_job_id"))
              .otherwise(pl.col("job_id")))
    place = pl.when(skip.is_not_null()).then(pl.lit(None, dtype=pl.Utf8)).when(middle).then(pl.lit(MIDDLE)).otherwise(pl.lit("rank"))
    return jobs.with_columns(skip.alias("skip"), target.alias("target"), place.alias("place"))


def group_keys(jobs: pl.DataFrame, tiers: dict[str, int]) -> pl.Series:
    """'partition|tier N' per job (a job in several partitions is its own group: Slurm compares it
    in each; it is ranked only with jobs asking for the same list)."""
    tier = jobs["partition"].map_elements(lambda p: max((tiers.get(x, 1) for x in p.split(",")), default=1),
                                          return_dtype=pl.Int64)
    return pl.concat_str([jobs["partition"], pl.lit("|tier "), tier.cast(pl.Utf8)]).alias("group_key")


def desired_factors(jobs: pl.DataFrame, objective: str, now_s: float, step: int,
                    tiers: dict[str, int], current: pl.DataFrame | None = None,
                    origin_s: float | None = None) -> pl.DataFrame:
    """The steerable jobs (`targets` done, `skip` null) ranked within their groups and placed in the
    band: target, group_key, rank (0 = first; null: set to the band's middle), site_factor, and
    moved_from (the group a job carried its factor in, when that was another: a partition changed).

    `current`: what the loop set before (job_id, site_factor, group_key): factors still in the rule's
    order in the same group are kept (`place`). `origin_s`: the instant F1 counts its seconds from
    (the walk forward's span start for a decision it backs, so the order is the replay's); by default
    one second before each group's oldest job."""
    schema = {"target": pl.Utf8, "group_key": pl.Utf8, "rank": pl.Int32, "site_factor": pl.Int64,
              "moved_from": pl.Utf8}
    cand = jobs.filter(pl.col("target").is_not_null())
    if cand.is_empty():
        return pl.DataFrame(schema=schema)
    band = band_for(step)
    cand = cand.with_columns(group_keys(cand, tiers))
    if current is None or current.is_empty():
        was: dict[str, tuple[int, str | None]] = {}
    else:
        gk = current["group_key"] if "group_key" in current.columns else pl.Series([None] * current.height, dtype=pl.Utf8)
        was = {j: (int(v), g) for j, v, g in zip(current["job_id"].to_list(), current["site_factor"].to_list(), gk.to_list())}
    if "place" not in cand.columns:
        cand = cand.with_columns(pl.lit("rank").alias("place"))
    out = []
    mid = cand.filter(pl.col("place") == MIDDLE)
    if not mid.is_empty():
        out.append(pl.DataFrame({"target": mid["target"], "group_key": mid["group_key"],
                                 "rank": pl.Series([None] * mid.height, dtype=pl.Int32),
                                 "site_factor": pl.Series([band.mid] * mid.height, dtype=pl.Int64),
                                 "moved_from": pl.Series([None] * mid.height, dtype=pl.Utf8)}))
    for (key,), g in cand.filter(pl.col("place") != MIDDLE).group_by(["group_key"], maintain_order=True):
        submit = g["submit_s"].fill_null(now_s).to_numpy().astype(np.float64)
        req = g["time_limit_s"].fill_null(365 * 86400).to_numpy().astype(np.float64)
        cores = g["cpus"].fill_null(1).to_numpy().astype(np.float64)
        ids = g["target"].to_list()
        seq = np.array([float(t.split("_")[0]) + (float(t.split("_")[1]) / 1e7 if "_" in t else 0.0) for t in ids])
        order = queue_order(objective, submit_s=submit, req_time_s=req, cores=cores, job_seq=seq,
                            now_s=float(now_s), origin_s=float(submit.min()) - 1.0 if origin_s is None else origin_s)
        n = len(order)
        rank = np.empty(n, dtype=np.int32)
        rank[order] = np.arange(n, dtype=np.int32)
        in_order = [ids[i] for i in order]
        moved = [was[t][1] if t in was and was[t][1] is not None and was[t][1] != key else None for t in ids]
        # a factor carried from another group is not kept: the job is placed afresh in its new group
        cur = [was[t][0] if t in was and (was[t][1] is None or was[t][1] == key) else None for t in in_order]
        factor_in_order = place(cur, band)
        factor = np.empty(n, dtype=np.int64)
        factor[order] = np.asarray(factor_in_order, dtype=np.int64)
        out.append(pl.DataFrame({"target": g["target"], "group_key": key, "rank": rank, "site_factor": factor,
                                 "moved_from": pl.Series(moved, dtype=pl.Utf8)}, schema=schema))
    return pl.concat(out, how="vertical_relaxed").select(list(schema)).cast(schema)


def place(current: list[int | None], band: Band) -> list[int]:
    """Site factors for one group's jobs in rank order (first = highest), strictly decreasing.

    Keeps the longest chain of current factors that is still in order (and at least a step apart,
    within the band): a new or moved job takes a place in the gap between its kept neighbours. A gap
    too small for the jobs it must take is widened by spreading the jobs around it again (its kept
    neighbours given up, one side then the other, until roomy enough: `_roomy`); a group with no room
    left at an edge of the band, or none kept, is laid out afresh, centred on the band's middle."""
    n = len(current)
    if n == 0:
        return []
    step, lo, hi = band.step, band.low, band.high
    keep = _kept_chain(current, band)
    while keep:
        bad = _first_tight_segment(keep, current, n, band, slack=1)
        if bad is None:
            break
        i = bad  # the segment above keep[i] (i == len(keep): the one below the last kept job)
        if i == 0 or i == len(keep):
            keep = []  # no room at the band's edge: the group has drifted there; lay it out afresh
            break
        up, down, turn = i - 1, i, 0  # the kept jobs bounding the gap: give them up until it is roomy
        while True:
            top = current[keep[up]] if up >= 0 else hi + step
            bottom = current[keep[down]] if down < len(keep) else lo - step
            first = keep[up] + 1 if up >= 0 else 0
            last = keep[down] - 1 if down < len(keep) else n - 1
            if top - bottom >= _roomy(last - first + 1) * (last - first + 2) * step or (up < 0 and down >= len(keep)):
                break
            if up < 0 or (turn == 0 and down < len(keep)):
                down += 1
            else:
                up -= 1
            turn ^= 1
        if up < 0 or down >= len(keep):
            keep = []  # the widening reached an edge of the band: lay the group out afresh
            break
        keep = keep[:up + 1] + keep[down:]
    if not keep:
        spacing = max(1, min(GAP_STEPS * step, (hi - lo) // max(n - 1, 1)))
        return [int(min(hi, max(lo, round(band.mid + ((n - 1) / 2 - r) * spacing)))) for r in range(n)]
    out: list[int] = [0] * n
    for k in keep:
        out[k] = int(current[k])
    bounds = [(None, keep[0])] + list(zip(keep, keep[1:])) + [(keep[-1], None)]
    for above, below in bounds:
        first = 0 if above is None else above + 1
        last = n - 1 if below is None else below - 1
        c = last - first + 1
        if c <= 0:
            continue
        top = hi + step if above is None else out[above]
        bottom = lo - step if below is None else out[below]
        if above is None:  # above the first kept job: GAP_STEPS apart upwards, or evenly when short of room
            sp = min(GAP_STEPS * step, (top - bottom) // (c + 1))
            for j in range(c):
                out[first + j] = bottom + sp * (c - j)
        else:  # below the last kept job, or between two: downwards
            sp = (top - bottom) // (c + 1) if below is not None else min(GAP_STEPS * step, (top - bottom) // (c + 1))
            for j in range(c):
                out[first + j] = top - sp * (j + 1)
    return out


def _roomy(c: int) -> float:
    """Steps per job a widened gap of `c` jobs must offer before its jobs are spread evenly in it: two
    for a few jobs (room for the next arrival), more for more (four at 2^17): list labelling's density thresholds, so that arrivals
    again and again at one place widen ever larger windows ever more rarely (a few updates per
    arrival, amortised, instead of the window's size each time)."""
    import math

    return 2.0 + 2.0 * min(1.0, math.log2(c + 1) / 17)


def _kept_chain(current: list[int | None], band: Band) -> list[int]:
    """Indices (rank order) of the longest chain of current factors within the band, strictly
    decreasing by at least a step: those stay as they are (patience sorting, O(n log n))."""
    import bisect

    tails: list[int] = []  # tails[k]: the least (-factor) ending a chain of k + 1
    at: list[int] = []
    parent: dict[int, int | None] = {}
    for i, c in enumerate(current):
        if c is None or not band.low <= c <= band.high:
            continue
        x = -int(c)
        j = bisect.bisect_right(tails, x - band.step)
        parent[i] = at[j - 1] if j > 0 else None
        if j == len(tails):
            tails.append(x)
            at.append(i)
        elif x < tails[j]:
            tails[j], at[j] = x, i
    chain: list[int] = []
    i = at[-1] if at else None
    while i is not None:
        chain.append(i)
        i = parent[i]
    return chain[::-1]


def _first_tight_segment(keep: list[int], current: list[int | None], n: int, band: Band, slack: int) -> int | None:
    """The first gap (0: above keep[0], len(keep): below the last) too small for the jobs between its
    kept neighbours at a step apart, or None."""
    step = band.step
    for i in range(len(keep) + 1):
        top = band.high + step if i == 0 else current[keep[i - 1]]
        bottom = band.low - step if i == len(keep) else current[keep[i]]
        first = 0 if i == 0 else keep[i - 1] + 1
        last = n - 1 if i == len(keep) else keep[i] - 1
        c = last - first + 1
        if c > 0 and top - bottom < slack * (c + 1) * step:
            return i
    return None


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
    if "moved_from" in moved.columns:  # jobs whose partition changed first: their factor was earned elsewhere
        moved = moved.sort([pl.col("moved_from").is_null(), "rank"], nulls_last=True)
    else:
        moved = moved.sort("rank", nulls_last=True)
    todo = pl.concat([reset, moved.select("target", "site_factor", "rank", "group_key")])
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
