"""Which files in a landing folder are complete (issue 41): a log copied in while the daily ingest
runs must not be loaded half-written (its torn last line would be quarantined for good, and the
complete file loaded later as a new one).

Two conventions, either enough: a writer that names its file `NAME.part` while writing and renames
it when done is never read early (`.part` files are left alone); any other file is read only once
its size and modification time have not changed over a settle interval (default 5 s,
`METAPILOT_LANDING_SETTLE_S`), and not while its modification time is within that interval of now.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

PART_SUFFIX = ".part"
SETTLE_S = 5.0


def settle_seconds(value: float | None = None) -> float:
    """The settle interval: `value`, else $METAPILOT_LANDING_SETTLE_S, else 5 s."""
    if value is not None:
        return max(0.0, float(value))
    env = os.environ.get("METAPILOT_LANDING_SETTLE_S")
    if env:
        try:
            return max(0.0, float(env))
        except ValueError:
            raise ValueError(f"METAPILOT_LANDING_SETTLE_S={env!r} is not a number of seconds") from None
    return SETTLE_S


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def settled(files: list[Path], settle_s: float, sleep: Callable[[float], None] = time.sleep,
            now: Callable[[], float] = time.time) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(files ready to load, [(file, why it waits)]): `.part` files wait for their rename; the rest
    are looked at twice, `settle_s` apart, and wait if their size or modification time changed or
    if they were modified less than `settle_s` ago."""
    waiting: list[tuple[Path, str]] = []
    candidates = []
    for f in files:
        if f.name.endswith(PART_SUFFIX):
            waiting.append((f, f"a {PART_SUFFIX} file: still being written (it is loaded once renamed)"))
        else:
            candidates.append(f)
    if not candidates or settle_s <= 0:
        return candidates, waiting
    before = {f: _signature(f) for f in candidates}
    sleep(settle_s)
    ready = []
    for f in candidates:
        after = _signature(f)
        if after is None or after != before[f]:
            waiting.append((f, f"changed during the last {settle_s:g} s: still being written (loaded by a later run)"))
        elif now() - after[1] / 1e9 < settle_s:
            waiting.append((f, f"modified less than {settle_s:g} s ago: may still be written (loaded by a later run)"))
        else:
            ready.append(f)
    return ready, waiting
