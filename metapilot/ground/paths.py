"""Where things live: the database, and the folders beside it (policies, reports, the site key)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SQL_DIR = REPO_ROOT / "sql"
DEFAULT_DB = Path("warehouse") / "metapilot.duckdb"


def db_path(db: str | Path | None = None) -> Path:
    """`--db`, else `METAPILOT_DB`, else `warehouse/metapilot.duckdb` (relative to the cwd)."""
    chosen = db or os.environ.get("METAPILOT_DB") or DEFAULT_DB
    return Path(chosen).expanduser()


def beside_db(db: str | Path | None, name: str) -> Path:
    """A folder next to the database file: `policies`, `reports`, ..."""
    return db_path(db).resolve().parent / name


def sql_text(relpath: str) -> str:
    """The text of a file under `sql/`."""
    return (SQL_DIR / relpath).read_text()


def sql_statements(relpath: str) -> list[str]:
    """The statements of a multi-statement file under `sql/` (split at `;` line ends), for
    running each with parameters (DuckDB binds parameters to one statement at a time)."""
    text = sql_text(relpath)
    parts = [p.strip() for p in text.split(";\n")]
    return [p for p in parts if p and not all(ln.strip().startswith("--") or not ln.strip() for ln in p.splitlines())]
