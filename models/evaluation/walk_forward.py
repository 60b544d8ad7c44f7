"""The walk forward (SPEC §7): what following MetaPilot would have done, period after period.

At each origin t_k the decision D_k is made from the past alone (the learning stages on jobs
submitted before t_k, `flows/backtest.py`); here the decisions are *followed*: one continuous
replay of [t_0, end) in which the engine runs D_k from t_k to t_{k+1}, the queue and the running
jobs carried across every boundary (one engine throughout, never restarted from an empty machine).
Beside it, over the same span: every fixed rule held throughout, the site's current rule, the
as-run history, follow-the-leader (at each origin, the fixed rule best on all the past), the
guarded leader (the same among the rules with a tail guard, rule and threshold from the past, and
only those that starve no one more than the current rule did in the past), the lookahead planner
and its oracle (a bound, never a decision).

The tail guard: while the oldest queued job has waited more than T hours, the epoch runs
oldest-first (FCFS+EASY); otherwise the decision's own rule. It is layered over any decision.

Figures per contender, over the span and per period (jobs attributed to the period they were
submitted in): waits (mean, p95, p99, max), bounded slowdown (all jobs, and jobs that ran a minute
or more), core utilisation while jobs wait, the gain over the current rule, regret against two
references chosen in hindsight (the best *admissible* fixed rule, p99 and max wait at most 1.5x the
current rule's: the bar; and the best fixed rule overall: the price of the tail), each with a block
bootstrap interval over the periods, and fairness (the worst-served user's and account's mean wait,
Jain's index over users' mean waits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from metapilot.models.evaluation.contender import Contender
from metapilot.models.evaluation.heldout import backlog_utilisation
from metapilot.models.simulator import Capacity
from metapilot.models.simulator.epoch_replay import EpochReplay
from metapilot.models.simulator.metrics import job_frame, wait_stats
from metapilot.models.simulator.objectives import Setting
from metapilot.models.simulator.result import SimResult
from metapilot.models.simulator.rules import RULES, TAIL_RULE, guard_fires, rule_setting
from metapilot.transforms.state import AGGREGATES
from metapilot.transforms.workload import Workload

WAIT_MAX = AGGREGATES.index("wait_max_s")
ADMISSIBLE_TAIL = 1.5  # p99 and max wait at most this times the current rule's: "starves no one more"
# (figure, column, tolerance): a difference this small counts as none on a nearly idle span
IDLE_TOLERANCE = (("bsld", "bsld_mean", 0.05), ("wait_mean", "wait_mean_s", 60.0))
GUARDED_RULES: tuple[str, ...] = ("SAF+EASY", "SJF+EASY", "F1+EASY", "WFP3+EASY", "UNICEF+EASY", "LAF+EASY")
HOLD_MAX_EPOCHS = 24 * 7 * 8  # at most eight weeks in one engine call


# --- following decisions: one continuous replay -------------------------------------------------


class RuleDecider:
    """A fixed rule, with the tail guard when `guard_h` is set."""

    def __init__(self, rule: str, guard_h: float | None = None) -> None:
        self.base = rule_setting(rule)
        self.tail = rule_setting(TAIL_RULE)
        self.guard_h = None if guard_h is None else float(guard_h)
        self.fired = 0  # epochs the guard ran oldest first (whether it ever fired is part of the decision's record)

    def start(self, replay: EpochReplay) -> None:  # noqa: ARG002 - a rule keeps no state
        return None

    @property
    def guard_s(self) -> float | None:
        return None if self.guard_h is None else self.guard_h * 3600.0

    def tighten(self, guard_s: float) -> bool:
        """Lower the guard to `guard_s` (add one where there is none); False when it is already as tight."""
        if self.guard_s is not None and self.guard_s <= guard_s:
            return False
        self.guard_h = float(guard_s) / 3600.0
        return True

    def setting(self, replay: EpochReplay, aggregates: np.ndarray) -> Setting:  # noqa: ARG002
        if guard_fires(float(aggregates[WAIT_MAX]), self.guard_h):
            self.fired += 1
            return self.tail
        return self.base

    def steady_s(self, aggregates: np.ndarray) -> float:
        """How long the decision cannot change: without a guard, ever; with one that is not firing,
        until the oldest queued job could reach the threshold (waits grow one second a second, later
        arrivals start at zero); a firing guard is looked at again at the next boundary."""
        if self.guard_s is None:
            return math.inf
        return max(self.guard_s - float(aggregates[WAIT_MAX]), 0.0)


class PolicyDecider:
    """A policy that picks an objective of its menu at each boundary (the learned controller, the
    planner): `choose(replay, aggregates) -> menu index`, `reset(replay)` at the start of its period;
    the tail guard layered over it."""

    def __init__(self, choose, reset, menu_settings: Sequence[Setting], guard_h: float | None = None) -> None:
        self._choose, self._reset = choose, reset
        self.menu_settings = tuple(menu_settings)
        self.rule = RuleDecider(TAIL_RULE, guard_h)

    def start(self, replay: EpochReplay) -> None:
        self._reset(replay)

    def tighten(self, guard_s: float) -> bool:
        return self.rule.tighten(guard_s)

    def setting(self, replay: EpochReplay, aggregates: np.ndarray) -> Setting:
        if guard_fires(float(aggregates[WAIT_MAX]), self.rule.guard_h):
            return self.rule.tail
        return self.menu_settings[int(self._choose(replay, aggregates))]

    def steady_s(self, aggregates: np.ndarray) -> float:  # noqa: ARG002 - a policy decides every epoch
        return 0.0


def follow(workload: Workload, capacity: Capacity, periods: Sequence[tuple[float, Any]], *, epoch_s: int = 3600,
           name: str = "walk-forward", recheck: Any = None) -> SimResult:
    """Replay the workload once, each period under its decider (`periods`: (start in seconds since
    the workload's window start, decider), in time order; the first starts at 0). One engine
    throughout: at a boundary the queue, the running jobs and the reservations carry over.
    `recheck` (`choice.Recheck`): holds each period's decider to its tail promise as the period unfolds."""
    settings = [rule_setting(r) for r in RULES]
    index = {s: i for i, s in enumerate(settings)}
    rp = EpochReplay(workload, capacity, epoch_s=epoch_s, settings=settings)
    agg = rp.reset()
    p = 0
    decider = periods[0][1]
    decider.start(rp)
    if recheck is not None:
        recheck.start(rp, periods[0][0])
    horizon = float(periods[-1][0])
    applied: list[tuple[float, int]] = []  # (from when, the priority rule's code) as the deciders chose
    while not rp.done or rp.now < horizon:
        while p + 1 < len(periods) and rp.now >= periods[p + 1][0]:
            p += 1
            decider = periods[p][1]
            decider.start(rp)
            if recheck is not None:
                recheck.start(rp, periods[p][0])
        if recheck is not None and rp.now >= recheck.next_s:
            recheck.check(rp, decider)
        s = decider.setting(rp, agg)
        i = index.get(s)
        if i is None:  # a setting outside the 21 (fit-first objectives): add it
            settings.append(s)
            i = index[s] = len(settings) - 1
            rp.settings = tuple(settings)
        if not applied or applied[-1][1] != s[0]:
            applied.append((float(rp.now), int(s[0])))
        # hold the setting while the decider cannot change it (the same schedule, far fewer steps)
        steady = decider.steady_s(agg)
        n = HOLD_MAX_EPOCHS if math.isinf(steady) else int(steady // epoch_s)
        if p + 1 < len(periods):
            n = min(n, int((periods[p + 1][0] - rp.now) // epoch_s))
        if recheck is not None:
            n = min(n, max(int((recheck.next_s - rp.now) // epoch_s), 1))
        if n > 1:
            rp.hold(i, min(n, HOLD_MAX_EPOCHS))
        else:
            rp.advance(i)
        agg = rp.aggregates()
    eng = rp.engine
    pool = eng.jobs.pool.copy()
    pool[eng.cannot_fit] = -1
    counters = dict(workload.report.as_dict()) if workload.report is not None else {}
    counters["cannot_fit"] = int(eng.cannot_fit.size)
    return SimResult(workload=workload, capacity=capacity, policy=name, backfill="mixed", start=eng.start.copy(),
                     end=eng.end.copy(), pool=pool, cannot_fit=eng.cannot_fit, wall_s=0.0, events=rp.events,
                     counters=counters, applied=tuple(applied))


# --- choosing from the past ------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """The figures the choices and the bar read, over one set of jobs."""

    jobs: int
    wait_mean_s: float
    wait_p95_s: float
    wait_p99_s: float
    wait_max_s: float
    bsld_mean: float
    bsld_mean_1min: float

    @classmethod
    def of(cls, frame: pl.DataFrame) -> Figures:
        if frame.height == 0:
            return cls(0, *(float("nan"),) * 6)
        r = frame.select(wait_stats()).row(0, named=True)
        num = lambda k: float("nan") if r[k] is None else float(r[k])  # noqa: E731
        return cls(int(r["jobs"]), num("mean_wait"), num("p95_wait"), num("p99_wait"), num("max_wait"),
                   num("mean_bsld"), num("mean_bsld_1min"))

    def admissible(self, current: Figures, factor: float = ADMISSIBLE_TAIL) -> bool:
        """Starves no one more than `current`: p99 and max wait within `factor` of its (a rule
        on an idle span, where the current rule waits nothing, is admissible when it waits nothing too)."""
        return all(v <= factor * c or v <= 60.0 for v, c in ((self.wait_p99_s, current.wait_p99_s),
                                                             (self.wait_max_s, current.wait_max_s)))


def jobs_between(result: SimResult, lo: float, hi: float) -> pl.DataFrame:
    """The replayed jobs submitted in [lo, hi) (seconds since the window start), with wait and bsld."""
    return job_frame(result).filter((pl.col("submit") >= lo) & (pl.col("submit") < hi))


def observed_by(frame: pl.DataFrame, t: float) -> Figures:
    """A contender's record as an operator could have read it at time `t` (seconds since the span's
    start), having followed it since the start: the jobs submitted before `t`, each with the wait it
    had had by then (a job still queued at `t` counts t - submit), and the bounded slowdown of the
    jobs that had ended. Nothing after `t` is read."""
    seen = frame.filter(pl.col("submit") < t).with_columns(
        pl.min_horizontal(pl.col("wait"), pl.lit(t) - pl.col("submit")).alias("wait"),
        pl.when(pl.col("end") <= t).then(pl.col("bsld")).otherwise(None).alias("bsld"),
    )
    return Figures.of(seen)


def nan_last(v: float) -> float:
    return math.inf if v is None or math.isnan(v) else v


# --- the comparison over the span ------------------------------------------------------------------


def period_sums(frame: pl.DataFrame, bounds: Sequence[float]) -> np.ndarray:
    """Per period: (jobs, sum of waits, sum of bsld, jobs >= 1 min, their bsld sum): what the span's
    means and the bootstrap's resamples are built from."""
    k = np.searchsorted(np.asarray(bounds), frame["submit"].to_numpy(), side="right") - 1
    out = np.zeros((len(bounds) - 1, 5))
    ok = (k >= 0) & (k < len(bounds) - 1)
    long = frame["run"].to_numpy() >= 60.0
    np.add.at(out[:, 0], k[ok], 1.0)
    np.add.at(out[:, 1], k[ok], frame["wait"].to_numpy()[ok])
    np.add.at(out[:, 2], k[ok], frame["bsld"].to_numpy()[ok])
    np.add.at(out[:, 3], k[ok & long], 1.0)
    np.add.at(out[:, 4], k[ok & long], frame["bsld"].to_numpy()[ok & long])
    return out


def regret(a: np.ndarray, b: np.ndarray, col: int, *, n_boot: int = 2000, seed: int = 0,
           level: float = 0.95) -> tuple[float, float | None, float | None]:
    """Regret of `a` against `b` on the mean in column `col` of `period_sums` (1: wait, 2: bsld):
    a's mean / b's mean - 1 over the span, and a percentile interval from a block bootstrap over the
    periods (the same periods resampled for both: a period is one block)."""

    def ratio(idx: np.ndarray) -> np.ndarray:  # idx: (draws, periods); one ratio per draw
        na, nb = a[idx, 0].sum(axis=-1), b[idx, 0].sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ma = np.where(na > 0, a[idx, col].sum(axis=-1) / np.where(na > 0, na, 1.0), np.nan)
            mb = np.where(nb > 0, b[idx, col].sum(axis=-1) / np.where(nb > 0, nb, 1.0), np.nan)
            return np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0) - 1.0, np.where(ma == mb, 0.0, np.nan))

    n = a.shape[0]
    point = float(ratio(np.arange(n)[None, :])[0])
    if n < 2 or math.isnan(point):
        return point, None, None
    rng = np.random.default_rng(seed)
    draws = ratio(rng.integers(0, n, (n_boot, n)))
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return point, None, None
    lo, hi = np.quantile(draws, [(1 - level) / 2, 1 - (1 - level) / 2])
    return point, float(lo), float(hi)


def fairness(frame: pl.DataFrame, owners: pl.DataFrame | None) -> dict[str, float | None]:
    """The worst-served user's and account's mean wait and Jain's index over users' mean waits
    (owners: job_id, user, account; hashed ids, as stored)."""
    out: dict[str, float | None] = {"worst_user_wait_s": None, "worst_account_wait_s": None, "jain_users": None}
    if owners is None or owners.height == 0 or frame.height == 0:
        return out
    # in job order, groups in order of appearance: the same sums, to the last digit, run after run
    joined = frame.select("job_id", "wait").join(owners, on="job_id", how="inner").sort("job_id")
    for col, key in (("user", "worst_user_wait_s"), ("account", "worst_account_wait_s")):
        per = joined.filter(pl.col(col).is_not_null()).group_by(col, maintain_order=True).agg(pl.col("wait").mean())
        if per.height:
            out[key] = float(per["wait"].max())
    users = (joined.filter(pl.col("user").is_not_null()).group_by("user", maintain_order=True)
             .agg(pl.col("wait").mean())["wait"].to_numpy())
    if users.size and (users ** 2).sum() > 0:
        out["jain_users"] = float(users.sum() ** 2 / (users.size * (users ** 2).sum()))
    elif users.size:
        out["jain_users"] = 1.0  # nobody waits: everyone is served alike
    return out


def compare(contenders: Sequence[Contender], bounds: Sequence[float], current: str,
            owners: pl.DataFrame | None = None, *, n_boot: int = 2000, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Span table (one row per contender) and period table (one row per contender and period)."""
    lo, hi = float(bounds[0]), float(bounds[-1])
    frames: dict[str, pl.DataFrame] = {}
    sums: dict[str, np.ndarray] = {}
    figs: dict[str, Figures] = {}
    for c in contenders:
        if c.result is None:
            continue
        frames[c.name] = jobs_between(c.result, lo, hi)
        sums[c.name] = period_sums(frames[c.name], bounds)
        figs[c.name] = Figures.of(frames[c.name])
    fixed = [c.name for c in contenders if c.kind == "fixed" and c.name in figs]
    cur = figs[current]
    admissible = [r for r in fixed if figs[r].admissible(cur)]

    def best(names: list[str]) -> str | None:
        return min(names, key=lambda r: (nan_last(figs[r].bsld_mean), nan_last(figs[r].wait_mean_s))) if names else None

    bar, any_best = best(admissible), best(fixed)
    rows, prow = [], []
    for c in contenders:
        row: dict[str, Any] = {"name": c.name, "kind": c.kind, "note": c.note}
        if c.result is None:
            rows.append(row)
            continue
        f = figs[c.name]
        row.update({k: v for k, v in asdict(f).items()})
        row["util_cpu_backlog"] = backlog_utilisation(c.result)
        row["gain_wait_mean"] = 1.0 - f.wait_mean_s / cur.wait_mean_s if cur.wait_mean_s else None
        row["gain_bsld"] = 1.0 - f.bsld_mean / cur.bsld_mean if cur.bsld_mean else None
        for ref, tag in ((bar, ""), (any_best, "_any")):
            for col, metric in ((2, "bsld"), (1, "wait_mean")):
                point, lo_ci, hi_ci = (regret(sums[c.name], sums[ref], col, n_boot=n_boot, seed=seed) if ref
                                       else (None, None, None))
                row[f"regret_{metric}{tag}"] = point
                row[f"regret_{metric}{tag}_ci"] = [lo_ci, hi_ci] if lo_ci is not None else None
        row["admissible"] = f.admissible(cur)
        frame = frames[c.name]
        row.update(fairness(frame, owners))
        rows.append(row)
        s = sums[c.name]
        for k in range(len(bounds) - 1):
            per = frame.filter((pl.col("submit") >= bounds[k]) & (pl.col("submit") < bounds[k + 1]))
            pf = Figures.of(per)
            prow.append({"name": c.name, "period": k, "jobs": int(s[k, 0]), "wait_mean_s": pf.wait_mean_s,
                         "wait_max_s": pf.wait_max_s, "bsld_mean": pf.bsld_mean,
                         "wait_sum_s": float(s[k, 1]), "bsld_sum": float(s[k, 2])})
    span = pl.DataFrame(rows, infer_schema_length=None)
    span = span.with_columns(pl.lit(bar).alias("reference"), pl.lit(any_best).alias("reference_any"))
    return span, pl.DataFrame(prow, infer_schema_length=None)


def bar_verdict(span: pl.DataFrame, current: str, name: str = "MetaPilot") -> dict[str, Any]:
    """Issue 38's bar for one contender: (a) beats the current rule on mean wait and bsld; (b) no
    fixed rule dominates it on (mean wait, max wait), 1% tolerance; (c) regret <= 5% on both against
    the best admissible rule (or within 60 s / 0.05 on a nearly idle span); (d) p99 and max wait
    within 1.5x the current rule's."""
    rows = {r["name"]: r for r in span.iter_rows(named=True)}
    me, cur = rows.get(name), rows[current]
    if not me or me.get("wait_mean_s") is None:
        return {"met": False, "why": f"{name} was not replayed"}
    ref = rows.get(me.get("reference") or "")
    a = me["wait_mean_s"] < cur["wait_mean_s"] and me["bsld_mean"] < cur["bsld_mean"]
    dominated_by = [r["name"] for r in rows.values() if r["kind"] == "fixed" and r.get("wait_mean_s") is not None
                    and r["wait_mean_s"] * 1.01 < me["wait_mean_s"] and r["wait_max_s"] * 1.01 < me["wait_max_s"]]
    b = not dominated_by
    c = ref is not None and all(
        (me[f"regret_{m}"] is not None and me[f"regret_{m}"] <= 0.05) or abs(me[col] - ref[col]) <= tol
        for m, col, tol in IDLE_TOLERANCE)
    d = bool(me.get("admissible"))
    out = {"met": bool(a and b and c and d), "beats_current": a, "not_dominated": b, "dominated_by": dominated_by,
           "regret_within_5pct": c, "starves_no_one_more": d}
    fixed = [r for r in rows.values() if r["kind"] == "fixed" and r.get("wait_mean_s") is not None]
    if not a and fixed and all(abs(r[col] - cur[col]) <= tol for r in fixed for _, col, tol in IDLE_TOLERANCE):
        out["why"] = (f"over this span no fixed rule's waits differ from {current}'s by more than 60 s of mean wait "
                      f"or 0.05 of bounded slowdown: there was nothing to beat (keep {current})")
    return out
