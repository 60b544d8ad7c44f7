"""Printing for people: frames as rich tables."""

from __future__ import annotations

import sys

import polars as pl
from rich.console import Console
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
