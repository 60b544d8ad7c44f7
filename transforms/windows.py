"""Time windows for training, checkpoint choice and the held-out replay (SPEC §7: split by time,
never shuffled across). Boundaries fall on ISO week starts so weekly figures line up.

Three windows, three names: *train* (what the controller learns from), *checkpoint* (the weeks that
choose which training checkpoint to keep) and *held-out* (the later weeks the chosen policy is
replayed on and judged by, which it never saw)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

Window = tuple[datetime, datetime]  # [from, to)


class LearningWindows(NamedTuple):
    """What one learning run may use, all before `held_out`: a caller (pipeline, the monthly retrain,
    a fold of the walk forward) decides them; the learning stages take them as given."""

    train: Window
    checkpoint: Window
    held_out: Window

    def to_dict(self) -> dict[str, list[str]]:
        return {name: [t.isoformat() for t in w] for name, w in self._asdict().items()}


FIRST_MONDAY = datetime(1970, 1, 5, tzinfo=timezone.utc)  # week 0 of the week numbers below
WEEK_S = 7 * 86400


def week_start(week: int) -> datetime:
    """Monday 00:00 UTC of week number `week` (whole weeks since `FIRST_MONDAY`; sql/jobs/busy_weeks.sql)."""
    return FIRST_MONDAY + timedelta(weeks=int(week))


def week_number(epoch_s: float) -> int:
    """The week number (see `week_start`) of a time in seconds since the Unix epoch."""
    return int((epoch_s - FIRST_MONDAY.timestamp()) // WEEK_S)


def week_floor(t: datetime) -> datetime:
    """Monday 00:00 of t's ISO week (same tzinfo)."""
    d = t.replace(hour=0, minute=0, second=0, microsecond=0)
    return d - timedelta(days=d.weekday())


def split_history(first: datetime, last: datetime, train_share: float = 0.6, valid_share: float = 0.15,
                  busy_weeks: Sequence[datetime] | None = None) -> LearningWindows:
    """Train, checkpoint and held-out windows over [first, last].

    The shares are of the time in which jobs were submitted: with `busy_weeks` (the Monday of
    every week that has a submit, `warehouse.jobs_store.busy_weeks`), weeks without any count for
    nothing, so a log with a gap of months (an outage, a break in the accounting) still has jobs in
    every window. Without gaps, or without `busy_weeks`, the shares are of the calendar span.

    Raises ValueError when the history is shorter than six weeks: too short to learn anything."""
    if last - first < timedelta(weeks=6):
        raise ValueError(f"only {(last - first).days} days of history: at least six weeks are needed "
                         "to train on one window and judge it on a later one; ingest a longer history "
                         "(or choose a cluster that has one with --cluster)")
    start = week_floor(first) + (timedelta(weeks=1) if first > week_floor(first) else timedelta(0))
    segments = _busy_segments(start, last, busy_weeks)
    if busy_weeks is not None and len(set(busy_weeks)) < 6:
        raise ValueError(f"jobs were submitted in only {len(set(busy_weeks))} weeks between {first.date()} and "
                         f"{last.date()}: at least six weeks with jobs are needed to train on one window and "
                         "judge it on a later one; ingest a longer history (or choose a cluster that has one "
                         "with --cluster)")
    busy = sum((hi - lo for lo, hi in segments), timedelta(0))
    train_to = week_floor(_at_busy_time(segments, busy * train_share))
    valid_to = week_floor(_at_busy_time(segments, busy * (train_share + valid_share)))
    if valid_to <= train_to:
        valid_to = train_to + timedelta(weeks=1)
    return LearningWindows((start, train_to), (train_to, valid_to), (valid_to, last))


def _busy_segments(start: datetime, last: datetime, busy_weeks: Sequence[datetime] | None) -> list[tuple[datetime, datetime]]:
    """[start, last] as the stretches of weeks with submits (all of it without `busy_weeks`)."""
    if busy_weeks is None:
        return [(start, last)]
    segments: list[tuple[datetime, datetime]] = []
    for w in sorted(set(busy_weeks)):
        lo, hi = max(w, start), min(w + timedelta(weeks=1), last)
        if lo >= hi:
            continue
        if segments and segments[-1][1] == lo:
            segments[-1] = (segments[-1][0], hi)
        else:
            segments.append((lo, hi))
    return segments or [(start, last)]


def _at_busy_time(segments: list[tuple[datetime, datetime]], offset: timedelta) -> datetime:
    """The calendar time at which `offset` of busy time has passed since the first segment began."""
    for lo, hi in segments:
        if offset <= hi - lo:
            return lo + offset
        offset -= hi - lo
    return segments[-1][1]


def parse_utc(value: str | None) -> datetime | None:
    """A command-line time (ISO date or date-time; naive means UTC) as an aware datetime."""
    if value is None:
        return None
    d = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


# The fewest weeks with jobs before an origin: a fold's learning splits its past into training,
# checkpoint and held-out weeks, six weeks at least, and the first week with jobs may hold only a day.
MIN_WARMUP_WEEKS = 7


def walk_forward_origins(busy_weeks: Sequence[datetime], last: datetime, every_weeks: int = 4,
                         warmup_weeks: int | None = None, start: datetime | None = None,
                         end: datetime | None = None) -> list[datetime]:
    """The origins t_k of a walk forward (SPEC §7): Monday 00:00 UTC, every `every_weeks` from the
    end of the warmup to the span's end. The warmup counts weeks *with jobs* (a log with a gap of
    months still learns from as many); by default 26 of them, or half the weeks with jobs when the
    log has fewer than 52 (seven at least). `start`/`end` narrow the span followed. Raises ValueError, with how much
    history is needed, when no origin has a past to learn from and a period to follow."""
    weeks = sorted(set(busy_weeks))
    if every_weeks < 1:
        raise ValueError(f"--every must be at least one week, got {every_weeks}")
    if warmup_weeks is None:
        warm = max(MIN_WARMUP_WEEKS, min(26, len(weeks) // 2))
    else:
        warm = int(warmup_weeks)
        if warm < MIN_WARMUP_WEEKS:
            raise ValueError(f"--warmup {warm} is too short: each origin's learning splits its past into training, "
                             f"checkpoint and held-out weeks, which takes at least {MIN_WARMUP_WEEKS} weeks with jobs")
    if len(weeks) <= warm:
        told = "" if warmup_weeks is None else f" (--warmup {warm})"
        hint = ("ingest a longer history" if len(weeks) <= MIN_WARMUP_WEEKS
                else f"ingest a longer history, or lower --warmup ({MIN_WARMUP_WEEKS} to {len(weeks) - 1})")
        raise ValueError(f"jobs were submitted in {len(weeks)} weeks; a walk forward needs at least "
                         f"{max(warm, MIN_WARMUP_WEEKS)} weeks with jobs to learn from before its first origin{told} "
                         f"and at least one week with jobs after it to follow: {hint}")
    first_origin = weeks[warm]
    if start is not None:
        first_origin = max(first_origin, week_floor(start) + (timedelta(weeks=1) if start > week_floor(start) else timedelta(0)))
    stop = min(last, end) if end is not None else last
    origins = []
    t = first_origin
    while t < stop:
        origins.append(t)
        t = t + timedelta(weeks=every_weeks)
    if not origins:
        raise ValueError(f"no origin between {first_origin.date()} and {stop.date()}: the span to follow is empty "
                         "(widen --from/--to, or lower --warmup)")
    return origins
