"""How many processes a CPU-bound step may use: the cores this process may run on, or
`METAPILOT_WORKERS` (1 keeps every step in one process)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def workers() -> int:
    """`METAPILOT_WORKERS` when set (a whole number >= 1), else the usable cores."""
    raw = os.environ.get("METAPILOT_WORKERS", "").strip()
    if not raw:
        return usable_cores()
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"METAPILOT_WORKERS={raw!r}: give a whole number of processes, 1 or more") from None
    if n < 1:
        raise ValueError(f"METAPILOT_WORKERS={raw!r}: give a whole number of processes, 1 or more")
    return n
