"""Held-out replay of a controller on a held-out window: the evidence an operator reads.

Contenders (SPEC §6, §7, §9): the controller (objective switched per epoch), each objective of its
menu held fixed, the lookahead planner and the guarded rule it was taught by, the oracle planner
that sees the future (a bound, never published), the 21 fixed rules, and the as-run history (the logged
starts of the same jobs): each a `contender.Contender` of a kind in `contender.KINDS`, measured here
into its `WindowFigures`. Every contender's figures come from `models.simulator.metrics` (the as-run history
is wrapped in a `SimResult` with the logged starts), so no metric is computed two ways.

The pure part (contender results -> table, winners, bootstrap intervals, verdict) needs no
warehouse; `run_heldout` at the bottom is the entry point a command or a flow calls.

The differences of the controller are measured against, per metric, the fixed contender that is
*best on that metric* (so the controller is never credited for beating a weak rule), and against
the as-run history. Their 95% intervals come from a paired percentile bootstrap over weeks (the
weekly figures of both sides, resampled together, fixed seed).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from metapilot.models.evaluation.contender import HELDOUT_KINDS, Contender

if TYPE_CHECKING:
    import duckdb
    from metapilot.models.simulator import Capacity, SimResult
    from metapilot.transforms.workload import Workload

CONTROLLER = "MetaPilot"
AS_RUN = "as-run"
FIXED_KINDS = ("objective", "baseline")  # what "best fixed contender" chooses from

# replay_objectives(workload, capacity, objective_per_epoch, epoch_s=3600) -> SimResult, where
# objective_per_epoch is an action index held all window, or state vector -> action index.
ObjectiveReplay = Callable[..., "SimResult"]
StatePolicy = Callable[[np.ndarray], int]


@dataclass(frozen=True)
class Metric:
    """One column of the comparison: where it comes from and which way is better."""

    column: str  # heldout_replays / heldout_weeks column
    label: str
    better: str  # "min" | "max"
    unit: str  # "s" | "fraction" | "1"
    sim_name: str  # name in models.simulator.metrics frames
    weekly: bool = True  # has a per-week figure (bootstrap over weeks)


METRICS: tuple[Metric, ...] = (
    Metric("wait_mean_s", "mean wait", "min", "s", "mean_wait"),
    Metric("wait_median_s", "median wait", "min", "s", "median_wait"),
    Metric("wait_p95_s", "p95 wait", "min", "s", "p95_wait"),
    Metric("wait_p99_s", "p99 wait", "min", "s", "p99_wait"),
    Metric("wait_max_s", "max wait", "min", "s", "max_wait"),
    Metric("bsld_mean", "mean bounded slowdown", "min", "1", "mean_bsld"),
    Metric("bsld_mean_1min", "mean bounded slowdown (runs of 1 min or more)", "min", "1", "mean_bsld_1min"),
    Metric("util_cpu", "core utilisation", "max", "fraction", "util_cores"),
    Metric("util_gpu", "GPU utilisation", "max", "fraction", "util_gpus"),
    Metric("util_mem", "memory utilisation", "max", "fraction", "util_mem"),
    Metric("makespan_s", "makespan", "min", "s", "makespan", weekly=False),
    Metric("util_cpu_backlog", "core utilisation while jobs wait", "max", "fraction", "util_cores_backlog", weekly=False),
)
METRIC_BY_COLUMN: dict[str, Metric] = {m.column: m for m in METRICS}
METRIC_COLUMNS: tuple[str, ...] = tuple(m.column for m in METRICS)
TIE_REL = 1e-9  # values within this relative distance of the best also win


# --- contenders -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowFigures:
    """A contender's figures on the held-out window: overall (heldout_replays columns) and per week."""

    name: str
    kind: str
    overall: dict[str, Any] | None  # METRIC_COLUMNS + jobs, jobs_not_run, first_submit, last_end; None = unavailable
    weekly: pl.DataFrame | None = None  # heldout_weeks columns (without ids)
    note: str | None = None

    @property
    def available(self) -> bool:
        return self.overall is not None


def figures_of(c: Contender) -> WindowFigures:
    """A contender's figures (of its replay, or of the wrapped as-run history) in the heldout_replays'
    column names; one that could not be replayed is kept, unavailable, with its reason."""
    if c.kind not in HELDOUT_KINDS:
        raise ValueError(f"{c.kind!r} is not a held-out contender's kind; known: {HELDOUT_KINDS}")
    if c.result is None:
        return WindowFigures(c.name, c.kind, None, None, c.note)
    result = c.result
    o = result.metrics().row(0, named=True)
    origin = result.workload.window_start

    def ts(x: float | None) -> datetime | None:
        return None if x is None or not math.isfinite(x) else origin + timedelta(seconds=float(x))

    o["util_cores_backlog"] = backlog_utilisation(result)
    overall = {m.column: _num(o.get(m.sim_name)) for m in METRICS}
    overall.update(jobs=int(o["jobs"] or 0), jobs_not_run=int(len(result.workload) - int(result.replayed.sum())),
                   first_submit=ts(o.get("first_submit")), last_end=ts(o.get("last_end")))
    wk = result.weekly()
    if wk.height:
        wk = wk.rename({m.sim_name: m.column for m in METRICS if m.weekly}).select(
            "week", "week_start", pl.col("jobs").cast(pl.Int64), *[m.column for m in METRICS if m.weekly],
            pl.col("jobs_completed").cast(pl.Int64),
        )
    return WindowFigures(c.name, c.kind, overall, wk, c.note)


def backlog_utilisation(result: SimResult) -> float | None:
    """Core utilisation over the time some job of the window is waiting (SPEC §6: over a whole
    trace arrivals fix utilisation; policies differ in how well they fill the machine while work
    waits). Used core-seconds inside the union of the jobs' [submit, start) intervals / (core
    capacity x that union's length); None when no job ever waits."""
    ok = result.replayed
    w = result.workload
    submit, start, end, cores = w.submit[ok], result.start[ok], result.end[ok], w.cores[ok]
    waiting = start > submit
    if not waiting.any():
        return None
    order = np.argsort(submit[waiting], kind="stable")
    lo, hi = submit[waiting][order], start[waiting][order]
    a, b = [lo[0]], [hi[0]]  # merge into disjoint sorted intervals
    for x, y in zip(lo[1:], hi[1:], strict=True):
        if x <= b[-1]:
            b[-1] = max(b[-1], y)
        else:
            a.append(x)
            b.append(y)
    a_, b_ = np.array(a), np.array(b)
    cum = np.concatenate([[0.0], np.cumsum(b_ - a_)])

    def covered(t: np.ndarray) -> np.ndarray:  # backlog seconds before t
        i = np.searchsorted(a_, t, side="right") - 1
        inside = np.where(i >= 0, np.clip(t - a_[np.maximum(i, 0)], 0.0, (b_ - a_)[np.maximum(i, 0)]), 0.0)
        return np.where(i >= 0, cum[np.maximum(i, 0)] + inside, 0.0)

    used = float((cores * (covered(end) - covered(start))).sum())
    cap = float(result.capacity.cores.sum())
    span = float(cum[-1])
    return used / (cap * span) if cap > 0 and span > 0 else None


def baseline_name(policy: str, backfill: str) -> str:
    return f"{policy}+{backfill}"


def asrun_result(workload: Workload, capacity: Capacity, jobs: pl.DataFrame) -> SimResult:
    """The as-run history as a `SimResult`: each replayed job starts at its logged start and runs
    its (normalised) run time, so the metrics are the simulator's own. Jobs without a logged start
    are left out (NaN), as cannot-fit jobs are in a replay.

    `jobs` are the canonical rows the workload was normalised from (`job_id`, `submit_time`,
    `start_time`); jobs are matched on (job id, submit time)."""
    from metapilot.models.simulator import SimResult

    origin_us = int(workload.window_start.timestamp() * 1_000_000)
    secs = lambda c: ((pl.col(c).cast(pl.Datetime("us", "UTC")).dt.epoch("us") - origin_us).cast(pl.Float64) / 1e6)  # noqa: E731
    logged = jobs.select(
        pl.col("job_id").cast(pl.Utf8), secs("submit_time").alias("submit"), secs("start_time").alias("logged_start"),
    ).unique(["job_id", "submit"], keep="last")
    order = pl.DataFrame({"job_id": workload.job_ids.astype(str), "submit": workload.submit,
                          "i": np.arange(len(workload))})
    joined = order.join(logged, on=["job_id", "submit"], how="left").sort("i")
    start = joined["logged_start"].fill_null(float("nan")).to_numpy().astype(np.float64)
    end = start + workload.run
    pool = capacity.pool_index(workload.partition_names())
    counters = dict(workload.report.as_dict()) if workload.report is not None else {}
    counters["no_logged_start"] = int(np.isnan(start).sum())
    counters["cannot_fit"] = 0
    return SimResult(
        workload=workload, capacity=capacity, policy=AS_RUN, backfill="logged", start=start, end=end,
        pool=pool, cannot_fit=np.zeros(0, dtype=np.int64), wall_s=0.0, events=0, counters=counters,
    )


# --- the comparison -------------------------------------------------------------------------------


def comparison_table(contenders: Sequence[WindowFigures]) -> pl.DataFrame:
    """One row per contender (heldout_replays' metric columns, then kind, status, note, counts)."""
    names = [c.name for c in contenders]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate contender names: {names}")
    rows = []
    for c in contenders:
        o = c.overall or {}
        rows.append({
            "contender": c.name,
            **{m: _num(o.get(m)) for m in METRIC_COLUMNS},
            "kind": c.kind, "status": "ok" if c.available else "unavailable", "note": c.note,
            "jobs": o.get("jobs"), "jobs_not_run": o.get("jobs_not_run"),
            "first_submit": o.get("first_submit"), "last_end": o.get("last_end"),
        })
    schema = {"contender": pl.Utf8, **{m: pl.Float64 for m in METRIC_COLUMNS}, "kind": pl.Utf8, "status": pl.Utf8,
              "note": pl.Utf8, "jobs": pl.Int64, "jobs_not_run": pl.Int64,
              "first_submit": pl.Datetime("us", "UTC"), "last_end": pl.Datetime("us", "UTC")}
    return pl.DataFrame(rows, schema=schema)


def weekly_table(contenders: Sequence[WindowFigures]) -> pl.DataFrame:
    """The per-week figures of every available contender, with a `contender` column."""
    frames = [c.weekly.with_columns(pl.lit(c.name).alias("contender")) for c in contenders
              if c.available and c.weekly is not None and c.weekly.height]
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed").select("contender", pl.exclude("contender"))


def _best_value(values: Iterable[float | None], better: str) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None
    return min(vals) if better == "min" else max(vals)


def _ties(v: float | None, best: float | None) -> bool:
    if v is None or best is None or not math.isfinite(v):
        return False
    return abs(v - best) <= TIE_REL * max(1.0, abs(best))


def winners(table: pl.DataFrame, kinds: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Per metric column, the contenders with the best value (ties all win); columns that no
    contender has a value for (e.g. GPU utilisation without GPUs) are left out."""
    t = table.filter(pl.col("status") == "ok")
    if kinds is not None:
        t = t.filter(pl.col("kind").is_in(list(kinds)))
    out: dict[str, list[str]] = {}
    for m in METRICS:
        best = _best_value(t[m.column].to_list(), m.better)
        if best is None:
            continue
        out[m.column] = [n for n, v in zip(t["contender"].to_list(), t[m.column].to_list(), strict=True) if _ties(v, best)]
    return out


def best_fixed_on(table: pl.DataFrame, metric: str) -> str | None:
    """The fixed contender (a menu objective held fixed, or a baseline) that is best on `metric` (first in
    table order on a tie); None when none has a value."""
    w = winners(table, FIXED_KINDS).get(metric)
    return w[0] if w else None


def bootstrap_mean_ci(d: np.ndarray, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """Mean of `d` and its percentile bootstrap interval (resampling the entries with
    replacement); (mean, None, None) with fewer than 2 entries."""
    d = np.asarray(d, dtype=np.float64)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None, None, None
    mean = float(d.mean())
    if d.size < 2:
        return mean, None, None
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return mean, float(lo), float(hi)


def paired_weeks(weekly: pl.DataFrame, a: str, b: str, metric: str) -> pl.DataFrame:
    """Weeks where both contenders have `metric`: columns week, a, b."""
    if weekly.height == 0 or metric not in weekly.columns:
        return pl.DataFrame({"week": [], "a": [], "b": []}, schema={"week": pl.Utf8, "a": pl.Float64, "b": pl.Float64})
    pick = lambda n, alias: weekly.filter(pl.col("contender") == n).select("week", pl.col(metric).alias(alias))  # noqa: E731
    return pick(a, "a").join(pick(b, "b"), on="week", how="inner").drop_nulls().filter(
        pl.col("a").is_finite() & pl.col("b").is_finite()).sort("week")


def controller_differences(table: pl.DataFrame, weekly: pl.DataFrame, controller: str = CONTROLLER,
                           n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> pl.DataFrame:
    """Controller minus reference, per metric, against the best fixed contender on that metric and
    against the as-run history, with a paired bootstrap interval over weeks (heldout_diffs rows).
    Empty when the controller is unavailable."""
    rows: list[dict] = []
    ok = table.filter(pl.col("status") == "ok")
    value = {r["contender"]: r for r in ok.iter_rows(named=True)}
    if controller not in value:
        return _empty_diffs()
    for m in METRICS:
        c_val = value[controller][m.column]
        if c_val is None:
            continue
        refs = [("best-fixed", best_fixed_on(table, m.column))]
        if AS_RUN in value:
            refs.append(("as-run", AS_RUN))
        for ref_kind, ref in refs:
            if ref is None or value[ref][m.column] is None:
                continue
            r_val = value[ref][m.column]
            diff = c_val - r_val
            mean = lo = hi = None
            n = 0
            if m.weekly:
                pw = paired_weeks(weekly, controller, ref, m.column)
                n = pw.height
                mean, lo, hi = bootstrap_mean_ci((pw["a"] - pw["b"]).to_numpy(), n_boot, seed, level)
            better = _better(diff, m.better)
            significant = None if lo is None else bool(hi < 0 or lo > 0)
            rows.append({
                "metric": m.column, "reference_kind": ref_kind, "reference": ref,
                "controller_value": c_val, "reference_value": r_val, "diff": diff,
                "rel_diff": diff / abs(r_val) if r_val else None, "weeks": n,
                "weekly_mean_diff": mean, "ci_low": lo, "ci_high": hi, "n_boot": n_boot, "seed": seed,
                "better": better, "significant": significant,
            })
    return pl.DataFrame(rows, schema=_DIFF_SCHEMA) if rows else _empty_diffs()


_DIFF_SCHEMA = {
    "metric": pl.Utf8, "reference_kind": pl.Utf8, "reference": pl.Utf8, "controller_value": pl.Float64,
    "reference_value": pl.Float64, "diff": pl.Float64, "rel_diff": pl.Float64, "weeks": pl.Int64,
    "weekly_mean_diff": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "n_boot": pl.Int64,
    "seed": pl.Int64, "better": pl.Boolean, "significant": pl.Boolean,
}


def _empty_diffs() -> pl.DataFrame:
    return pl.DataFrame(schema=_DIFF_SCHEMA)


def _better(diff: float, better: str) -> bool:
    return diff < 0 if better == "min" else diff > 0


def verdict(table: pl.DataFrame, diffs: pl.DataFrame, controller: str = CONTROLLER) -> list[str]:
    """Plain sentences: did the controller run, which columns it wins, which it does not (and who
    does), and the differences against the best fixed contender with their intervals."""
    head, details = _verdict_parts(table, diffs, controller)
    return head + details


def verdict_summary(table: pl.DataFrame, diffs: pl.DataFrame, controller: str = CONTROLLER) -> str:
    """The verdict's first sentences (what the controller wins, what it does not), for the publish
    record and the pointer file."""
    return " ".join(_verdict_parts(table, diffs, controller)[0])


def _verdict_parts(table: pl.DataFrame, diffs: pl.DataFrame, controller: str) -> tuple[list[str], list[str]]:
    """The verdict as (headline: wins and losses, details: one line per measure with its interval)."""
    row = table.filter(pl.col("contender") == controller)
    if row.height == 0 or row["status"][0] != "ok":
        reason = row["note"][0] if row.height and row["note"][0] else "it was not part of this held-out replay"
        return [f"The controller ({controller}) was not replayed: {reason}. "
                "The table compares the other contenders only; it is no evidence for or against the controller."], []
    won = winners(table)
    cols = [m for m in METRICS if m.column in won]
    ref = {r["metric"]: r for r in diffs.filter(pl.col("reference_kind") == "best-fixed").iter_rows(named=True)}

    def significant_win(m: Metric) -> bool:
        """Better than the best fixed contender, beyond the weekly interval (a tie is not a win)."""
        r = ref.get(m.column)
        if r is None or not r["better"]:
            return False
        return bool(r["significant"]) if r["ci_low"] is not None else (m.weekly is False and r["diff"] != 0)

    wins = [m.label for m in cols if significant_win(m)]
    ties = [m.label for m in cols if not significant_win(m) and controller in won[m.column]]
    lines = [f"{controller} is significantly better than every fixed rule on {len(wins)} of {len(cols)} measures"
             + (f": {', '.join(wins)}." if wins else ".")
             + (f" Tied or not significantly better (not wins): {', '.join(ties)}." if ties else "")]
    lost = []
    c = row.row(0, named=True)
    for m in cols:
        if controller in won[m.column]:
            continue
        best = won[m.column][0]
        bval = table.filter(pl.col("contender") == best)[m.column][0]
        lost.append(f"{m.label} (best {best} {fmt_value(bval, m.unit)}, {controller} {fmt_value(c[m.column], m.unit)})")
    if lost:
        lines.append(f"{controller} does NOT win: " + "; ".join(lost) + ".")
    details = []
    for r in diffs.filter(pl.col("reference_kind") == "best-fixed").iter_rows(named=True):
        m = METRIC_BY_COLUMN[r["metric"]]
        if r["ci_low"] is None:
            ci = f"no interval ({r['weeks']} paired week{'s' if r['weeks'] != 1 else ''})" if m.weekly else "overall figure only"
        else:
            ci = (f"weekly mean {fmt_diff(r['weekly_mean_diff'], m.unit)}, 95% CI {fmt_diff(r['ci_low'], m.unit)} .. "
                  f"{fmt_diff(r['ci_high'], m.unit)} over {r['weeks']} weeks: {interval_word(r, m)}")
        word = "better" if r["better"] else ("equal" if r["diff"] == 0 else "worse")
        details.append(f"{m.label}: {fmt_diff(r['diff'], m.unit)} vs {r['reference']} ({word}; {ci}).")
    return lines, details


def interval_word(diff_row: dict, metric: Metric) -> str:
    """What the weekly interval says: significantly better / worse, or not significant."""
    lo, hi = diff_row.get("ci_low"), diff_row.get("ci_high")
    if lo is None or hi is None:
        return "no interval"
    if hi < 0 or lo > 0:
        good = (hi < 0) == (metric.better == "min")
        return "significantly better" if good else "significantly worse"
    return "not significant"


def shown_metrics(table: pl.DataFrame) -> list[Metric]:
    """The metrics some contender has a value for (GPU / memory utilisation only where known)."""
    return [m for m in METRICS if m.column in table.columns and table[m.column].is_not_null().any()]


# --- formatting (shared by the CLI, the report and the ROI) -----------------------------------------


def fmt_value(v: float | None, unit: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if unit == "s":
        return f"{v:,.0f} s"
    if unit == "fraction":
        return f"{100 * v:.2f}%"
    return f"{v:,.3f}"


def fmt_diff(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "s":
        return f"{v:+,.0f} s"
    if unit == "fraction":
        return f"{100 * v:+.2f} pp"
    return f"{v:+,.3f}"


def _num(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


# --- running a held-out replay (warehouse in, its id out) ---------------------------------------------


@dataclass
class HeldOutWindow:
    """The window to replay and why it was chosen."""

    cluster: str
    partition: str | None
    start: datetime
    end: datetime
    notes: list[str] = field(default_factory=list)


def _utc(d: datetime | None) -> datetime | None:
    if d is None:
        return None
    return d.replace(tzinfo=timezone.utc) if d.tzinfo is None else d.astimezone(timezone.utc)


def choose_window(con: duckdb.DuckDBPyConnection, policy: dict, start: datetime | None = None,
                  end: datetime | None = None) -> HeldOutWindow:
    """The held-out window: by default it starts where the policy stopped looking at data (the end
    of its checkpoint-selection window when that lies after training, else the end of training)
    and is as long as the training window, cut at the cluster's last submitted job."""
    cluster = policy["cluster"]
    partition = None if policy.get("partition") in (None, "*") else policy["partition"]
    train_from, train_to = _utc(policy["train_from"]), _utc(policy["train_to"])
    valid_to = _utc(policy.get("valid_to"))
    notes: list[str] = []
    start, end = _utc(start), _utc(end)
    from metapilot.warehouse.jobs_store import last_submit

    last = last_submit(con, cluster, partition)
    if last is None:
        raise LookupError(f"no jobs for cluster {cluster!r}" + (f" partition {partition!r}" if partition else ""))
    last = _utc(last)
    if start is None:
        start = train_to
        if valid_to is not None and valid_to > train_to:
            if valid_to <= last:
                start = valid_to
                notes.append(f"window starts after the policy's checkpoint-selection window (to {valid_to:%Y-%m-%d %H:%M}), "
                             "so no data the policy was chosen on is replayed")
            else:
                notes.append("no jobs after the policy's checkpoint-selection window: replaying the window right after "
                             "training, which was used to pick the checkpoint (optimistic for the controller)")
    if end is None:
        end = min(start + (train_to - train_from), last + timedelta(microseconds=1))
    if end <= start:
        raise ValueError(f"empty checkpoint window {start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M}: no jobs after "
                         f"{start:%Y-%m-%d}; give --from/--to")
    if start < train_to and end > train_from:
        notes.append(f"the window overlaps the training window ({train_from:%Y-%m-%d} .. {train_to:%Y-%m-%d}): "
                     "this is not a held-out test")
    return HeldOutWindow(cluster, partition, start, end, notes)


def policy_state_fn(policy: Any) -> StatePolicy:
    """state vector -> action index, from a loaded policy (`.act(states)` of
    models.controller.artifact.ScriptedPolicy, or any callable on a batch of states)."""
    act = getattr(policy, "act", None) or policy

    def fn(state: np.ndarray) -> int:
        out = np.asarray(act(np.asarray(state, dtype=np.float32).reshape(1, -1)))
        return int(out.reshape(-1)[0]) if out.ndim <= 1 or out.shape[-1] == 1 else int(np.argmax(out.reshape(-1)))

    return fn


def load_objective_replay() -> tuple[ObjectiveReplay | None, str | None]:
    """The objective-switching replay (`models.controller.replay.replay_objectives`), or why not."""
    try:
        from metapilot.models.controller.replay import replay_objectives
    except ImportError as e:
        return None, f"the objective-switching replay is not available yet (models.controller.replay.replay_objectives: {e})"
    return replay_objectives, None


def load_controller(policy: dict, db: str | Path | None) -> tuple[StatePolicy | None, Any, str | None]:
    """The published policy as state -> action, its loaded artifact (state config, card), or why
    it cannot be used. The loader verifies the artifact's checksums (and the registry's hash of
    them) first."""
    try:
        from metapilot.models.controller.artifact import find_policy, load_policy
    except ImportError as e:
        return None, None, f"cannot load policies (models.controller.artifact: {e})"
    try:
        folder = Path(policy["path"]) if policy.get("path") and Path(policy["path"]).is_dir() else find_policy(policy["policy_id"], db)
        loaded = load_policy(folder, policy.get("sums_sha256"))
    except Exception as e:  # noqa: BLE001 - integrity errors, missing folders: reported as the contender's note
        return None, None, f"policy {policy['policy_id']} could not be loaded: {e}"
    return policy_state_fn(loaded), loaded, None


def teachers(card: dict | None, menu) -> list[tuple[str, str, Any]]:
    """The planner contenders of a controller's card: (name, kind, PlannerConfig): the tuned planner
    (the teacher), the best guarded rule of its tuning grid, and the oracle (a bound)."""
    from metapilot.models.controller.planner import PlannerConfig, oracle_of

    planner = PlannerConfig(**card["planner"]) if card and card.get("planner") else PlannerConfig()
    rules = [r for r in ((card or {}).get("tuning") or {}).get("grid", []) if r.get("horizon_h", 1) == 0 and r.get("guard_h")]
    best_rule = min(rules, key=lambda r: r["score"]) if rules else None
    guard = (PlannerConfig(0.0, 0.0, best_rule["guard_h"], best_rule.get("base")) if best_rule else
             PlannerConfig(0.0, 0.0, 24.0, menu.names[0]))
    return [("planner", "planner", planner), (f"guard ({guard.base or menu.names[0]}; {menu.names[menu.tail_first]} "
                                              f"after {guard.guard_h:g} h)", "planner", guard),
            ("oracle (bound)", "bound", oracle_of(planner))]


def run_heldout(
    con: duckdb.DuckDBPyConnection,
    policy_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    db: str | Path | None = None,
    replay: ObjectiveReplay | None = None,
    controller_fn: StatePolicy | None = None,
    epoch_s: int | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    state_config: Any = None,
) -> str:
    """Replay the held-out window under every contender, store `heldout_replays`, `heldout_weeks`
    and `heldout_diffs`, and return the held-out replay id.

    `replay` (default: models.controller.replay.replay_objectives) and `controller_fn` (default:
    the published policy, checksums verified) can be injected (with the `state_config`, menu
    included, it decides in; default: the default one); a missing one makes the contenders that
    need it `unavailable`, with the reason, instead of failing the replay."""
    from metapilot.models.simulator import RULE_PAIRS, Capacity, simulate
    from metapilot.transforms.workload import normalise
    from metapilot.warehouse.sim_store import load_capacity, load_window
    from metapilot.warehouse.policy_store import policy_row
    from metapilot.warehouse.heldout_store import store_heldout

    say = log or (lambda _msg: None)
    policy = policy_row(con, policy_id)
    win = choose_window(con, policy, start, end)
    for n in win.notes:
        say(f"note: {n}")
    jobs = load_window(con, win.cluster, win.start, win.end, win.partition)
    if jobs.height == 0:
        raise LookupError(f"no jobs of {win.cluster} submitted in {win.start:%Y-%m-%d} .. {win.end:%Y-%m-%d}")
    cap_rows = load_capacity(con, win.cluster, win.start)
    if win.partition is not None:  # a partition's policy: its own pool, else the whole cluster's
        own = cap_rows.filter(pl.col("partition") == win.partition)
        cap_rows = own if own.height else cap_rows.filter(pl.col("partition") == "*")
        if cap_rows.height == 0:
            raise LookupError(f"no capacity for partition {win.partition!r} of {win.cluster} (nor for '*')")
    capacity = Capacity.from_rows(cap_rows)
    workload = normalise(jobs, win.start)
    say(f"window {win.start:%Y-%m-%d %H:%M} .. {win.end:%Y-%m-%d %H:%M} UTC: {len(workload):,} jobs to replay "
        f"({workload.report.left_out:,} left out by normalisation)")

    contenders: list[WindowFigures] = []
    why_replay = None
    if replay is None:
        replay, why_replay = load_objective_replay()
    loaded, why_ctrl = None, None
    if controller_fn is None and why_replay is None:  # no replay: do not load torch for nothing
        controller_fn, loaded, why_ctrl = load_controller(policy, db)
    from metapilot.models.controller.objectives import Menu
    from metapilot.models.controller.planner import LookaheadPlanner
    from metapilot.transforms.state import StateConfig

    state = getattr(loaded, "state_config", None) or state_config or StateConfig()
    epoch = int(epoch_s or state.epoch_s or 3600)
    state = replace(state, epoch_s=epoch)
    menu = Menu.of(state)

    def objective_run(name: str, kind: str, objective, why: str | None) -> WindowFigures:
        if why is not None:
            return figures_of(Contender(name, kind, None, why))
        try:
            return figures_of(Contender(name, kind, replay(workload, capacity, objective, epoch_s=epoch,
                                                           state_config=state)))
        except Exception as e:  # noqa: BLE001 - the hook belongs to another module: report, do not abort
            return figures_of(Contender(name, kind, None, f"the objective replay failed: {type(e).__name__}: {e}"))

    contenders.append(objective_run(CONTROLLER, "controller", controller_fn, why_replay or why_ctrl))
    for i, name in enumerate(menu.names):
        contenders.append(objective_run(f"fixed-{name}", "objective", i, why_replay))
    for name, kind, cfg in teachers(getattr(loaded, "card", None), menu):
        contenders.append(objective_run(name, kind, LookaheadPlanner(menu, cfg, epoch), why_replay))
    for pol, bf in RULE_PAIRS:
        contenders.append(figures_of(Contender(baseline_name(pol, bf), "baseline", simulate(workload, capacity, pol, bf))))
    contenders.append(figures_of(Contender(
        AS_RUN, "history", asrun_result(workload, capacity, jobs),
        note="logged starts of the same jobs; the real cluster also ran jobs submitted before the window, "
             "the replays start from an empty cluster")))
    table = comparison_table(contenders)
    weekly = weekly_table(contenders)
    diffs = controller_differences(table, weekly, CONTROLLER, n_boot=n_boot, seed=seed)
    heldout_id = f"val-{datetime.now(timezone.utc):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}"
    cap = capacity.matrix
    store_heldout(con, heldout_id, policy_id=policy_id, table=table, weekly=weekly, diffs=diffs, meta={
        "cluster": win.cluster, "partition": win.partition, "window_from": win.start, "window_to": win.end,
        "epoch_s": epoch, "capacity_cores": float(cap[:, 0].sum()), "capacity_gpus": float(cap[:, 1].sum()),
        "capacity_mem_mib": float(cap[:, 2].sum()) if np.isfinite(cap[:, 2]).all() else None,
    })
    return heldout_id


def objective_meaning(name: str) -> str | None:
    """What an objective of the simulator's catalogue means, for readers of the results (None if unknown)."""
    from metapilot.models.simulator.objectives import CATALOGUE

    o = CATALOGUE.get(name)
    return o.meaning if o else None
