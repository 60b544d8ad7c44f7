"""Choosing from the past (SPEC §7, issue 48): when to leave the site's current rule, and for what.

A decision rule shaped on a few logs is a guess about the next one, so each test here is a
principle with its constant named once, none tuned to a log:

- **Keep unless it matters.** The current rule is left only for a setting whose lead over it in the
  past is material on *both* mean bounded slowdown and mean wait: more than `MATERIAL_LEAD` (the
  bar's own 5%: a difference within it counts as none), more than the idle tolerances (60 s, 0.05),
  and holding across the past's weeks (the paired block bootstrap's `LEAD_LEVEL` interval of the
  relative difference wholly below zero). An uninformative past, a tie or a tie-break means keep.
- **A tail test with support.** The tail is the mean of the k largest waits (k = sqrt of the jobs,
  `TAIL_MIN_JOBS` at least), judged over the whole past and over its recent quarter: a candidate
  passes when in both its tail is at most `CHOICE_TAIL` (a margin inside the bar's 1.5x) times the
  current rule's plus `TAIL_SLACK_S` (less excess than that is not starvation). One job cannot
  decide it either way.
- **A guard relative to the current rule's tail.** Every setting that leaves the current rule
  carries the tail guard (oldest first once a job has waited T); T is a fraction of the current
  rule's recent tail (`GUARD_FRACTIONS` of its tail over the last `RECENT_WEEKS`), so a guard can
  fire at any load: the loosest unless a tighter one leads it materially; whether it fired in the
  past is reported with the decision.
- **A promise kept as the period unfolds.** Every `RECHECK_S` the followed decision's record since
  its period began (each job's wait by then) is held against the current rule's over the same jobs:
  when its tail passes the same margin, the guard is tightened to the current rule's longest wait
  so far (never below `TAIL_SLACK_S`) for the rest of the period (`Recheck`).
- **Fidelity before advice.** Where the replay of the current rule does not reproduce what the
  cluster lived over the same past (mean wait, bounded slowdown's excess over 1, or the share of
  jobs that waited, an order of magnitude apart: `FIDELITY_FACTOR`), nothing the replays say is
  advice: keep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from metapilot.models.evaluation.walk_forward import IDLE_TOLERANCE, Figures, nan_last, period_sums, regret
from metapilot.models.simulator.rules import RULES

WEEK_S = 7 * 86400.0
MATERIAL_LEAD = 0.05  # a lead of at most 5% on either objective is no reason to change what the scheduler runs
LEAD_LEVEL = 0.90  # the lead holds across the past's weeks: its two-sided 90% interval (one-sided 95%) below zero
LEAD_BOOT = 1000  # bootstrap resamples for that interval
CHOICE_TAIL = 1.25  # a chosen setting's tail at most this times the current rule's: a margin inside ADMISSIBLE_TAIL
TAIL_SLACK_S = 3600.0  # an excess of waiting below an hour is not starvation (nor a guard worth its name)
TAIL_MIN_JOBS = 10  # the tail is never fewer jobs than this (all of a block's jobs when it has fewer)
RECENT_WEEKS = 13  # the current rule's recent tail (the guard's reference): the last quarter of the past
GUARD_FRACTIONS: tuple[float, ...] = (1.0, 2.0, 4.0)  # guard thresholds, as multiples of that recent tail
RECHECK_S = WEEK_S  # the followed decision is held to its tail promise once a week
FIDELITY_FACTOR = 10.0  # replay and as-run an order of magnitude apart: the replay does not reproduce the cluster
WAITED_S = 60.0  # a job "waited" when it waited more than a minute


def tail_k(jobs: int) -> int:
    """How many of the largest waits make the tail: grows with the jobs (sqrt), never below the minimum."""
    return min(jobs, max(TAIL_MIN_JOBS, math.ceil(math.sqrt(jobs))))


def tail_wait(waits: np.ndarray) -> float:
    """The mean of the k largest waits (0 with no jobs)."""
    w = np.asarray(waits, dtype=np.float64)
    w = w[np.isfinite(w)]
    if w.size == 0:
        return 0.0
    k = tail_k(w.size)
    return float(np.partition(w, w.size - k)[w.size - k:].mean())


@dataclass(frozen=True)
class Past:
    """One setting replayed over the past: its figures, per-week sums (the bootstrap's blocks), the
    tail per block, and how many epochs its tail guard fired (None: it has none)."""

    figures: Figures
    weeks: np.ndarray
    tails: np.ndarray
    fired: int | None = None

    @classmethod
    def of(cls, frame: pl.DataFrame, span_s: float, fired: int | None = None) -> Past:
        """`frame`: the replayed jobs (submit, wait, bsld, run; seconds since the past's start),
        `span_s`: the past's length. Tails: over the whole past, then over its recent quarter."""
        weeks = period_sums(frame, _bounds(span_s, WEEK_S))
        recent = frame["submit"].to_numpy() >= span_s - RECENT_WEEKS * WEEK_S
        waits = frame["wait"].to_numpy()
        return cls(Figures.of(frame), weeks, np.array([tail_wait(waits), tail_wait(waits[recent])]), fired)


def _bounds(span_s: float, step: float) -> np.ndarray:
    """Block bounds over [0, span_s), the last block taking the remainder (at least one block)."""
    n = max(1, int(span_s // step))
    b = np.arange(n + 1, dtype=np.float64) * step
    b[-1] = max(span_s, b[-1])
    b[0] = -np.inf  # jobs submitted before the window's start (none, normally) fall in the first block
    return b


def recent_tail(frame: pl.DataFrame, span_s: float) -> float:
    """The current rule's tail over the last `RECENT_WEEKS` of the past: the guard's reference (recent
    and over many jobs, not the single longest wait of the whole past)."""
    recent = frame.filter(pl.col("submit") >= span_s - RECENT_WEEKS * WEEK_S)
    return tail_wait(recent["wait"].to_numpy())


def guard_thresholds_h(reference_s: float) -> tuple[float, ...]:
    """The guard thresholds (hours, to the minute) for a current rule whose recent tail is `reference_s`."""
    return tuple(sorted({round(max(f * reference_s, TAIL_SLACK_S) / 60.0) / 60.0 for f in GUARD_FRACTIONS}))


class Recheck:
    """Holds each period's decider to its tail promise as the period unfolds, with nothing read after
    the instant of the check: MetaPilot's jobs submitted since the period began, each with its wait by
    now, against the current rule's replay of the same jobs (a replay up to now reads only what was
    submitted by now). `tightened`: (period start, when, new guard in s), in time order."""

    def __init__(self, current: pl.DataFrame, every_s: float = RECHECK_S) -> None:
        self.submit = current["submit"].to_numpy()
        self.wait = current["wait"].to_numpy()
        self.every_s = float(every_s)
        self.period_s = 0.0
        self.next_s = math.inf
        self.tightened: list[tuple[float, float, float]] = []

    def start(self, replay, period_s: float) -> None:  # noqa: ANN001 - an `EpochReplay`
        self.period_s = float(period_s)
        self.next_s = self.period_s + self.every_s

    def check(self, replay, decider) -> None:  # noqa: ANN001 - an `EpochReplay`, a decider with `tighten`
        now = float(replay.now)
        self.next_s = now + self.every_s
        if not getattr(decider, "rechecked", True):  # a keep the replays cannot advise on (fidelity)
            return
        mine = _waits_by(replay.engine.jobs.submit[replay.arrival_idx], replay.engine.start[replay.arrival_idx],
                         self.period_s, now)
        theirs = _waits_by(self.submit, self.submit + self.wait, self.period_s, now)
        if min(mine.size, theirs.size) < TAIL_MIN_JOBS:
            return
        if tail_wait(mine) <= CHOICE_TAIL * tail_wait(theirs) + TAIL_SLACK_S:
            return
        guard_s = max(float(theirs.max()), TAIL_SLACK_S)
        if decider.tighten(guard_s):
            self.tightened.append((self.period_s, now, guard_s))


def _waits_by(submit: np.ndarray, start: np.ndarray, lo: float, now: float) -> np.ndarray:
    """The waits, as of `now`, of the jobs submitted in [lo, now) (a job not started by now: now - submit)."""
    m = (submit >= lo) & (submit < now)
    s, st = submit[m], start[m]
    return np.where(np.isnan(st) | (st > now), now, st) - s


def tail_holds(candidate: Past, current: Past) -> bool:
    """Over the whole past and over its recent quarter, the candidate's tail is within the margin of
    the current rule's (each over many jobs: one job's wait decides neither)."""
    return bool(np.all(candidate.tails <= CHOICE_TAIL * current.tails + TAIL_SLACK_S))


def lead(candidate: Past, current: Past) -> tuple[bool, str]:
    """Whether the candidate's lead over the current rule is material on both objectives, and in words."""
    words, ok = [], True
    for (name, col_name, tol), col in zip(IDLE_TOLERANCE, (2, 1), strict=True):
        point, _lo, hi = regret(candidate.weeks, current.weeks, col, n_boot=LEAD_BOOT, level=LEAD_LEVEL)
        diff = getattr(candidate.figures, col_name) - getattr(current.figures, col_name)
        material = (not math.isnan(point) and point <= -MATERIAL_LEAD and -diff > tol and hi is not None and hi < 0)
        ok &= material
        words.append(f"{name} {point:+.1%}" + (f" [..{hi:+.1%}]" if hi is not None else "") if not math.isnan(point)
                     else f"{name} –")
    return ok, ", ".join(words)


@dataclass(frozen=True)
class Choice:
    """What the past says: a rule (the current one: keep) with its guard, and why, in words."""

    rule: str
    guard_h: float | None
    why: str
    fired: int | None = None


def choose_guarded(candidates: Mapping[tuple[str, float | None], Past], current: Past, current_rule: str) -> Choice:
    """The guarded leader: among the settings whose tail holds against the current rule's in every
    block of the past and whose lead is material on both objectives, the lowest mean bounded
    slowdown; otherwise keep the current rule, saying why."""
    if not current.figures.jobs:
        return Choice(current_rule, None, "keep: no job in the past")
    ranked = sorted((k for k, p in candidates.items() if p.figures.jobs),
                    key=lambda k: (nan_last(candidates[k].figures.bsld_mean),
                                   nan_last(candidates[k].figures.wait_mean_s),
                                   -(k[1] or 0.0), RULES.index(k[0])))
    # exact ties (a guard that did not fire) go to the looser guard: a tighter one that cost nothing in the
    # past fires more in the future; whether the chosen one ever fired is reported with the decision
    starves = []
    for k in ranked:
        if k[0] == current_rule and k[1] is None:
            continue
        p = candidates[k]
        if not tail_holds(p, current):
            starves.append(k)
            continue
        ok, words = lead(p, current)
        if ok:
            k, how = _guard_of(k[0], candidates, current)
            return Choice(k[0], k[1], f"leads {current_rule} over the past: {lead(candidates[k], current)[1]}{how}",
                          candidates[k].fired)
        if not starves:
            return Choice(current_rule, None, f"keep: the best setting whose tail holds ({_name(k)}) does not lead "
                                              f"{current_rule} materially on both over the past's weeks ({words})")
        return Choice(current_rule, None, f"keep: the settings ahead of {current_rule} starve jobs more "
                                          f"({', '.join(map(_name, starves[:2]))}); the best one that does not "
                                          f"({_name(k)}) does not lead materially ({words})")
    return Choice(current_rule, None, f"keep: no setting's tail holds against {current_rule}'s over the past")


def _guard_of(rule: str, candidates: Mapping[tuple[str, float | None], Past],
              current: Past) -> tuple[tuple[str, float | None], str]:
    """The rule's guard: the loosest threshold whose setting passes, unless a tighter one leads it
    materially over the past (a guard, too, changes only on evidence: one that cost nothing in the
    past but fires more in the future is no gain)."""
    ok = sorted((k for k, p in candidates.items() if k[0] == rule and k[1] is not None and p.figures.jobs
                 and tail_holds(p, current) and lead(p, current)[0]), key=lambda k: -k[1])
    chosen, how = ok[0], ""
    for k in ok[1:]:
        better, words = lead(candidates[k], candidates[chosen])
        if better:
            chosen, how = k, f"; the tighter guard leads the looser one: {words}"
    return chosen, how


def stay_with(previous: str, proposed: Choice, candidates: Mapping[tuple[str, float | None], Past],
              current: Past, current_rule: str) -> Choice:
    """Keep unless it matters, between two rules too: a guarded leader that left the current rule for
    `previous` moves to another rule only when the new one leads `previous` (as guarded now)
    materially over the past; otherwise it stays with `previous`, re-guarded at this origin, while
    that still passes the tail test and leads the current rule."""
    if proposed.rule in (previous, current_rule) or previous == current_rule:
        return proposed
    ok = [k for k, p in candidates.items() if k[0] == previous and k[1] is not None and p.figures.jobs
          and tail_holds(p, current) and lead(p, current)[0]]
    if not ok:
        return proposed
    k, _ = _guard_of(previous, candidates, current)
    better, words = lead(candidates[(proposed.rule, proposed.guard_h)], candidates[k])
    if better:
        return Choice(proposed.rule, proposed.guard_h, f"{proposed.why}; it leads {previous}, followed until now: {words}",
                      proposed.fired)
    return Choice(k[0], k[1], f"stays with {previous}: {proposed.rule} leads {current_rule} too but not {previous} "
                              f"materially ({words}); {previous} {lead(candidates[k], current)[1]}", candidates[k].fired)


def _name(k: tuple[str, float | None]) -> str:
    return k[0] if k[1] is None else f"{k[0]} guarded at {k[1]:g} h"


def record_prefers(challenger: Figures, incumbent: Figures, current: Figures) -> bool:
    """Whether a walk-forward record prefers `challenger` (the planner) over `incumbent` (what the
    guarded leader chooses now, replayed over the same record): its p99 and max wait within the
    choice margin of the current rule's (plus the slack), and a material lead on both mean bounded
    slowdown and mean wait (a tie is not a win)."""
    if not challenger.jobs or not incumbent.jobs:
        return False
    tail_ok = all(v <= CHOICE_TAIL * c + TAIL_SLACK_S for v, c in ((challenger.wait_p99_s, current.wait_p99_s),
                                                                  (challenger.wait_max_s, current.wait_max_s)))
    return tail_ok and all(
        getattr(challenger, col) <= (1.0 - MATERIAL_LEAD) * getattr(incumbent, col)
        and getattr(incumbent, col) - getattr(challenger, col) > tol for _, col, tol in IDLE_TOLERANCE)


def choose_leader(past: Mapping[str, Figures]) -> str:
    """Follow-the-leader: the fixed rule with the lowest mean bounded slowdown over the past (ties:
    lower mean wait, then the catalogue's order), among those replayed (on a site's Slurm, seven)."""
    return min((r for r in RULES if r in past),
               key=lambda r: (nan_last(past[r].bsld_mean), nan_last(past[r].wait_mean_s), RULES.index(r)))


# --- fidelity: does the replay reproduce the cluster? ----------------------------------------------


@dataclass(frozen=True)
class Fidelity:
    """The replay of the current rule next to the as-run history of the same jobs."""

    jobs: int
    wait_mean_replay_s: float
    wait_mean_asrun_s: float
    bsld_replay: float
    bsld_asrun: float
    waited_replay: float  # share of jobs that waited more than a minute
    waited_asrun: float
    kendall_tau: float | None  # of the start order
    wait_p95_replay_s: float | None = None
    wait_p95_asrun_s: float | None = None
    wait_max_replay_s: float | None = None
    wait_max_asrun_s: float | None = None

    @property
    def far(self) -> bool:
        """An order of magnitude apart on either objective the decision weighs (mean wait; bounded
        slowdown, as its excess over 1) or on the share of jobs that waited, where either side waited
        at all (two idle pictures agree, whatever their ratio)."""
        def apart(a: float, b: float, floor: float) -> bool:
            if max(a, b) <= floor:
                return False
            return max(a, b) > FIDELITY_FACTOR * max(min(a, b), 1e-12)

        (_, _, bsld_tol), (_, _, wait_tol) = IDLE_TOLERANCE
        return self.jobs > 0 and (apart(self.wait_mean_replay_s, self.wait_mean_asrun_s, wait_tol)
                                  or apart(self.bsld_replay - 1.0, self.bsld_asrun - 1.0, bsld_tol)
                                  or apart(self.waited_replay, self.waited_asrun, 0.01))

    def words(self) -> str:
        tau = "–" if self.kendall_tau is None else f"{self.kendall_tau:.2f}"
        return (f"mean wait {self.wait_mean_replay_s:,.0f} s replayed vs {self.wait_mean_asrun_s:,.0f} s as run, "
                f"bsld {self.bsld_replay:.2f} vs {self.bsld_asrun:.2f}, jobs that waited over a minute "
                f"{self.waited_replay:.1%} vs {self.waited_asrun:.1%}, Kendall's tau of the start order {tau}")

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {**asdict(self), "far": self.far}


def fidelity(replay: pl.DataFrame, asrun: pl.DataFrame) -> Fidelity | None:
    """The replay of the current rule (job frame) against the as-run history (job frame) of the same
    past, over the jobs both started; None where the log records no start times."""
    both = replay.select("job_id", "wait", "bsld", "start").join(
        asrun.select("job_id", pl.col("wait").alias("wait_r"), pl.col("bsld").alias("bsld_r"),
                     pl.col("start").alias("start_r")), on="job_id", how="inner").drop_nulls().filter(
        pl.col("start").is_not_nan() & pl.col("start_r").is_not_nan())
    if both.height == 0:
        return None
    tau = None
    if both.height > 1:
        from scipy.stats import kendalltau

        t = kendalltau(both["start"].to_numpy(), both["start_r"].to_numpy()).statistic
        tau = None if t is None or math.isnan(t) else float(t)
    w, wr = both["wait"].to_numpy(), both["wait_r"].to_numpy()
    return Fidelity(both.height, float(w.mean()), float(wr.mean()), float(both["bsld"].mean()),
                    float(both["bsld_r"].mean()), float((w > WAITED_S).mean()), float((wr > WAITED_S).mean()), tau,
                    float(np.percentile(w, 95)), float(np.percentile(wr, 95)), float(w.max()), float(wr.max()))
