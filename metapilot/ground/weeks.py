"""ISO weeks, the unit of the weekly report and of the recommendations scored for it."""

from __future__ import annotations

import re
from datetime import date, datetime, timezone

WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$")


def parse_week(week: str) -> datetime:
    """'2024-W10' -> Monday 00:00 UTC of that ISO week."""
    m = WEEK_RE.match(week.strip())
    if not m:
        raise ValueError(f"week {week!r}: expected an ISO week such as 2024-W10")
    try:
        d = date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError as e:
        raise ValueError(f"week {week!r}: {e}") from None
    return datetime(d.year, d.month, d.day, tzinfo=timezone.utc)


def week_label(week_start: datetime) -> str:
    y, w, _ = week_start.isocalendar()
    return f"{y}-W{w:02d}"
