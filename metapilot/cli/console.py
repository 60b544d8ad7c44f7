"""Printing for people: frames as rich tables."""

from __future__ import annotations

import sys

import polars as pl
from rich.console import Console
from rich.table import Table

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
    return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) >= 1e-4 else f"{v:.2e}"


def print_frame(df: pl.DataFrame, limit: int = 50, title: str | None = None) -> None:
    """Print a polars frame as a rich table, numbers right-aligned, at most `limit` rows."""
    table = Table(title=title, show_lines=False)
    for name, dtype in df.schema.items():
        table.add_column(name, justify="right" if dtype.is_numeric() else "left")
    for row in df.head(limit).iter_rows():
        table.add_row(*["" if v is None else (fmt_number(v) if isinstance(v, float) else str(v)) for v in row])
    console.print(table)
    if df.height > limit:
        console.print(f"[dim]... {df.height - limit} more rows (use --limit or --format csv)[/dim]")
