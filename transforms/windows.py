"""Time windows for training, checkpoint choice and held-out validation (SPEC §7: split by time,
never shuffled across). Boundaries fall on ISO week starts so weekly figures line up."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone


def week_floor(t: datetime) -> datetime:
    """Monday 00:00 of t's ISO week (same tzinfo)."""
    d = t.replace(hour=0, minute=0, second=0, microsecond=0)
    return d - timedelta(days=d.weekday())


def split_history(first: datetime, last: datetime, train_share: float = 0.6, valid_share: float = 0.15,
                  ) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime], tuple[datetime, datetime]]:
    """Train, validation (checkpoint choice) and held-out test windows over [first, last].

    Raises ValueError when the history is shorter than six weeks: too short to learn anything."""
    if last - first < timedelta(weeks=6):
        raise ValueError(f"only {(last - first).days} days of history: at least six weeks are needed "
                         "to train on one window and validate on a later one; ingest a longer history "
                         "(or choose a cluster that has one with --cluster)")
    start = week_floor(first) + (timedelta(weeks=1) if first > week_floor(first) else timedelta(0))
    span = last - start
    train_to = week_floor(start + span * train_share)
    valid_to = week_floor(start + span * (train_share + valid_share))
    if valid_to <= train_to:
        valid_to = train_to + timedelta(weeks=1)
    return (start, train_to), (train_to, valid_to), (valid_to, last)


def parse_utc(value: str | None) -> datetime | None:
    """A command-line time (ISO date or date-time; naive means UTC) as an aware datetime."""
    if value is None:
        return None
    d = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)
