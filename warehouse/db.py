"""Open the warehouse: create it and its tables on first use, read-only for queries.

DuckDB lets one process write a database file, or several processes read it, never both at once.
So every writer holds the database only for its short commit (under the writer lock beside the
file, one writer at a time), and every connection that meets the other kind's lock waits with a
short backoff and says so, instead of failing with DuckDB's lock error.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from metapilot.ground.paths import SQL_DIR, db_path, sql_statements, sql_text

if TYPE_CHECKING:
    import polars as pl

LOCK_MARKERS = ("Could not set lock", "Conflicting lock")
# How long a connection waits for the other kind's lock: readers wait for a writer's commit,
# writers for readers to finish their queries. $METAPILOT_DB_WAIT_S overrides both.
READ_WAIT_S = 120.0
WRITE_WAIT_S = 900.0
# The sandbox of `metapilot sql` (SPEC §8): read-only, no files, no other databases, no extensions,
# no settings changed after connecting.
SANDBOX_CONFIG = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
}


class WarehouseBusyError(RuntimeError):
    """Another process kept the warehouse locked for longer than this one would wait."""


class CorruptWarehouseError(OSError):
    """The warehouse file exists but DuckDB cannot read it (damaged, truncated, another kind of file)."""


_CORRUPT_MARKERS = ("not a valid DuckDB database", "Corrupt", "corrupt", "checksum", "Invalid database", "database file")


def _unreadable_database(e: BaseException) -> bool:
    """DuckDB's errors for a file it cannot read as a database (not a lock)."""
    return isinstance(e, (duckdb.IOException, duckdb.SerializationException, duckdb.InternalException)) \
        and any(m in str(e) for m in _CORRUPT_MARKERS)


def _first_line(e: BaseException) -> str:
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)


def require_warehouse(db: str | Path | None) -> Path:
    """The warehouse file, which must exist: commands that only read or replay what was ingested
    (simulate, heldout, dataset, train) never create an empty one for a mistyped --db."""
    path = db_path(db)
    if not path.exists():
        raise FileNotFoundError(f"no warehouse at {path}: check --db (or $METAPILOT_DB), or run `metapilot ingest PATH...` first")
    return path


def _stderr(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def is_lock_error(e: BaseException) -> bool:
    """DuckDB's error when another process holds the file with the other kind of lock."""
    return isinstance(e, duckdb.Error) and any(m in str(e) for m in LOCK_MARKERS)


def _wait_s(default: float) -> float:
    env = os.environ.get("METAPILOT_DB_WAIT_S")
    try:
        return float(env) if env else default
    except ValueError:
        return default


def writer_wait_s() -> float:
    """How long a writer (or an ingest's look before writing) waits for the database."""
    return _wait_s(WRITE_WAIT_S)


def _open(path: Path, read_only: bool, config: dict | None, wait_s: float | None,
          log: Callable[[str], None] | None) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, waiting with a short backoff while another process holds the file."""
    wait = _wait_s(READ_WAIT_S if read_only else WRITE_WAIT_S) if wait_s is None else wait_s
    deadline = time.monotonic() + wait
    delay = 0.05
    told = False
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config or {})
        except duckdb.Error as e:
            if not is_lock_error(e):
                if _unreadable_database(e):
                    raise CorruptWarehouseError(
                        f"{path} is not a readable MetaPilot warehouse ({_first_line(e)}): restore it from your backup, "
                        f"together with its site key ({path.parent / 'secret.key'}), or pass the right --db") from None
                raise
            if time.monotonic() + delay > deadline:
                what = "reading" if read_only else "writing"
                raise WarehouseBusyError(
                    f"the warehouse {path} stayed busy for {wait:.0f} s (another MetaPilot process holds it, "
                    f"so {what} must wait): try again when it has finished, or set METAPILOT_DB_WAIT_S to wait longer"
                ) from None
            if not told:
                (log or _stderr)(f"waiting: the warehouse {path} is in use by another MetaPilot process "
                                 f"({'a writer is committing' if read_only else 'readers are querying it'}); "
                                 f"retrying for up to {wait:.0f} s")
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def apply_ddl(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table and view the project defines (idempotent), migrating an older
    warehouse's tables first where a key or a name changed."""
    from metapilot.warehouse.renames import rename_legacy

    rename_legacy(con)
    legacy = _ingest_files_keyed_by_hash(con)
    if legacy:
        con.execute("ALTER TABLE ingest_files RENAME TO ingest_files_v1")
    for f in sorted((SQL_DIR / "ddl").glob("*.sql")):
        con.execute(f.read_text())
    if legacy:
        for stmt in sql_statements("migrate/ingest_files_keyed_by_cluster.sql"):
            con.execute(stmt)
    for f in sorted((SQL_DIR / "marts").glob("*.sql")):
        con.execute(f.read_text())


def _ingest_files_keyed_by_hash(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether `ingest_files` is an older warehouse's, keyed by the file's hash alone (issue 33)."""
    keys = con.execute(sql_text("migrate/ingest_files_key.sql")).fetchall()
    return bool(keys) and list(keys[0][0]) == ["sha256"]


def connect(db: str | Path | None = None, read_only: bool = False, wait_s: float | None = None,
            log: Callable[[str], None] | None = None) -> duckdb.DuckDBPyConnection:
    """Connect to the warehouse at `db` (see `metapilot.ground.paths.db_path`).

    Read-only connections refuse a missing database with an error that says what to run. Both
    kinds wait (saying so through `log`, default stderr) while another process holds the file.
    """
    path = db_path(db)
    if read_only:
        if not path.exists():
            raise FileNotFoundError(f"no warehouse at {path}: run `metapilot ingest PATH...` first, or pass --db")
        return _open(path, True, None, wait_s, log)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = _open(path, False, None, wait_s, log)
    con.execute("SET TimeZone = 'UTC'")
    apply_ddl(con)
    return con


def connect_sandboxed(db: str | Path | None = None, wait_s: float | None = None,
                      log: Callable[[str], None] | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection that cannot reach files, other databases, extensions or settings:
    for SQL typed by a user (`metapilot sql`). Tables and marts are queryable as usual."""
    path = db_path(db)
    if not path.exists():
        raise FileNotFoundError(f"no warehouse at {path}: run `metapilot ingest PATH...` first, or pass --db")
    con = _open(path, True, SANDBOX_CONFIG, wait_s, log)
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET lock_configuration = true")
    return con


def connect_memory() -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse with the full schema: for tests and dry runs."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    apply_ddl(con)
    return con


@contextmanager
def writer_lock(db: str | Path | None, wait_s: float = 3600.0, log: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the warehouse's writer lock (a file lock beside the database, so it works with or
    without a Prefect server and across processes); wait for another writer rather than fail."""
    path = db_path(db).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(str(path) + ".writer.lock")
    with open(lock, "a+") as f:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told:
                    (log or _stderr)(f"waiting: another MetaPilot run is writing to {path}; "
                                     "this one continues when it has committed")
                    told = True
                if time.monotonic() > deadline:
                    raise WarehouseBusyError(
                        f"{path} stayed locked by another run for {wait_s:.0f} s; check running flows "
                        f"(`prefect flow-run ls`) or remove {lock} if none is") from None
                time.sleep(0.2)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the warehouse has a table (a read-only connection to an older warehouse may not)."""
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()[0][0])


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether a table has a column (a read-only connection to an older warehouse may lack it)."""
    return bool(con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = ? AND column_name = ?",
                            [table, column]).fetchall()[0][0])


def query_frame(con: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None) -> "pl.DataFrame":
    """Run a query with positional (`?`) or named (`$name`) parameters and return a polars frame
    (DuckDB 2 wants results consumed)."""
    import polars as pl

    return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())


def insert_frame(con: duckdb.DuckDBPyConnection, table: str, df: "pl.DataFrame") -> None:
    """Append a polars frame to a table, columns matched by name."""
    con.register("__frame", df.to_arrow())
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM __frame")
    finally:
        con.unregister("__frame")
