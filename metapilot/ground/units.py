"""Numbers for people, one way everywhere (CLI tables, reports, the publish message)."""

from __future__ import annotations


def fmt_duration(s: float | None) -> str:
    """Seconds for people: s, min, h (below two days) or d; "–" for none."""
    if s is None or s != s:
        return "–"
    a = abs(s)
    if a == float("inf"):
        return str(s)
    if a < 120:
        return f"{s:,.0f} s"
    if a < 3600:
        return f"{s / 60:,.1f} min"
    if a < 172_800:
        return f"{s / 3600:,.1f} h"
    return f"{s / 86400:,.1f} d"
