"""Where things live: the database, and the folders beside it (policies, reports, the site key)."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # a checkout's top; in an installed wheel, nothing of ours
DEFAULT_DB = Path("warehouse") / "metapilot.duckdb"


def package_dir(package: str, checkout_folder: str) -> Path:
    """The folder of a package of the `metapilot` distribution that holds data read at run time
    (`metapilot.sql` = the checkout's `sql/`, `metapilot.samples`, ...), found through
    importlib.resources so that a wheel installed anywhere works, not only a checkout. An
    editable install made before the package existed falls back to the checkout's folder."""
    try:
        return Path(str(files(package)))
    except ModuleNotFoundError:
        return REPO_ROOT / checkout_folder


SQL_DIR = package_dir("metapilot.sql", "sql")


def db_path(db: str | Path | None = None) -> Path:
    """`--db`, else `METAPILOT_DB`, else `warehouse/metapilot.duckdb` (relative to the cwd)."""
    chosen = db or os.environ.get("METAPILOT_DB") or DEFAULT_DB
    return Path(chosen).expanduser()


def beside_db(db: str | Path | None, name: str) -> Path:
    """A folder next to the database file: `policies`, `reports`, ..."""
    return db_path(db).resolve().parent / name


def samples_dir() -> Path:
    """The bundled real logs (`samples/logs`, package data `metapilot.samples`): `pipeline`'s default."""
    return package_dir("metapilot.samples", "samples") / "logs"


def expectations_file() -> Path:
    """The great-expectations suite every loaded row is checked against (`warehouse/expectations/jobs.json`)."""
    return package_dir("metapilot.warehouse", "warehouse") / "expectations" / "jobs.json"


def sql_text(relpath: str) -> str:
    """The text of a file under `sql/`."""
    return (SQL_DIR / relpath).read_text()


def sql_statements(relpath: str) -> list[str]:
    """The statements of a multi-statement file under `sql/` (split at `;` line ends), for
    running each with parameters (DuckDB binds parameters to one statement at a time)."""
    text = sql_text(relpath)
    parts = [p.strip() for p in text.split(";\n")]
    return [p for p in parts if p and not all(ln.strip().startswith("--") or not ln.strip() for ln in p.splitlines())]
