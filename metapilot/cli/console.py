"""Printing for people: frames as rich tables."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import polars as pl
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from metapilot.ground.units import fmt_duration

# Wide enough for summary tables when output is piped or logged (rich assumes 80 columns then).
console = Console() if sys.stdout.isatty() else Console(width=200)


def fmt_number(v: float) -> str:
    """A number for people: thousands separated, never in scientific notation."""
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 1 or v == 0:
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    if abs(v) >= 1e-4:
        return f"{v:.4f}".rstrip("0").rstrip(".")
    import numpy as np

    return np.format_float_positional(v, precision=3, fractional=False, trim="-")


def fmt_cell(v: object, unit: str | None = None) -> str:
    """One table cell: durations (unit "s") as s/min/h/d, fractions (unit "%") as percentages,
    other numbers by `fmt_number`."""
    if v is None:
        return ""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if unit == "s":
            return fmt_duration(v)
        if unit == "%":
            return f"{100 * float(v):.1f}%"
        return fmt_number(v) if isinstance(v, float) else f"{v:,}"
    return str(v)


def print_frame(df: pl.DataFrame, limit: int = 50, title: str | None = None,
                units: dict[str, str] | None = None) -> None:
    """Print a polars frame as a rich table, numbers right-aligned, at most `limit` rows; `units`:
    column -> "s" (seconds) or "%" (a fraction): each cell then carries its unit."""
    units = units or {}
    table = Table(title=title, show_lines=False)
    for name, dtype in df.schema.items():
        table.add_column(name, justify="right" if dtype.is_numeric() else "left")
    for row in df.head(limit).iter_rows():
        table.add_row(*[Text(fmt_cell(v, units.get(c))) for c, v in zip(df.columns, row, strict=True)])  # data, not markup
    console.print(table)
    if df.height > limit:
        console.print(f"[dim]... {df.height - limit} more rows (use --limit or --format csv)[/dim]")


@contextmanager
def progress_bar(what: str, after_s: float = 1.0, err: Console | None = None) -> Iterator[Callable[[int, int], None]]:
    """`update(done, total)` for a long loop (SPEC §10: long steps show progress): a bar on stderr (`err`),
    only where it is a terminal (logs and pipes stay clean), shown once the loop has run `after_s` (a
    quick one shows nothing) and gone when it ends."""
    err = err or Console(stderr=True)
    t0 = time.perf_counter()
    bar: list[tuple[Progress, object]] = []

    def update(done: int, total: int) -> None:
        if not err.is_terminal:
            return
        if not bar:
            if time.perf_counter() - t0 < after_s or done >= total:
                return
            p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                         TimeRemainingColumn(), console=err, transient=True)
            p.start()
            bar.append((p, p.add_task(what, total=total)))
        p, task = bar[0]
        p.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if bar:
            bar[0][0].stop()
