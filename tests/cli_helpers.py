"""What the hostile-pass and scheduled-run tests share: the CLI as a user calls it, a read-only
look into a warehouse, and lines of the real pozidriv sacct log."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from metapilot.cli import app

POZIDRIV = Path(__file__).resolve().parent / "data" / "slurm" / "xdmod-reference" / "pozidriv.log.gz"


def cli(*args, **kw):
    return CliRunner().invoke(app, [str(a) for a in args], **kw)


def query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def pozidriv_lines(n: int, start: int = 0) -> list[str]:
    with gzip.open(POZIDRIV, "rt") as f:
        return f.read().splitlines()[start:start + n]
