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


def fmt_mib(mib: float | None) -> str:
    """A memory size given in MiB, in the largest binary unit that keeps it above 1 (40.0 TiB)."""
    if mib is None:
        return "unknown"
    for unit, scale in (("PiB", 1024.0**3), ("TiB", 1024.0**2), ("GiB", 1024.0)):
        if abs(mib) >= scale:
            return f"{mib / scale:,.1f} {unit}"
    return f"{mib:,.0f} MiB"
