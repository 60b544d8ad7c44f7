"""What every flow shares: one writer at a time, transient-failure retries, cache keys."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from metapilot.ground.paths import beside_db, db_path

TRANSIENT_MARKERS = ("Could not set lock", "database is locked", "Conflicting lock", "Resource temporarily unavailable",
                     "Connection refused", "timed out")


def configure_prefect_storage(db: str | None) -> None:
    """Persist cached task results beside the warehouse (before Prefect reads its settings)."""
    os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(beside_db(db, ".prefect-results")))


def is_transient(task, task_run, state) -> bool:
    """Retry condition: another writer holds the database, or a network blip to a Dask/Prefect server."""
    try:
        state.result()
    except Exception as e:  # noqa: BLE001 - inspecting the failure is the point
        return any(m in str(e) for m in TRANSIENT_MARKERS) or isinstance(e, (TimeoutError, ConnectionError))
    return False


@contextmanager
def warehouse_writer(db: str | None, wait_s: float = 3600.0, log=None) -> Iterator[None]:
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
                if not told and log:
                    log(f"another MetaPilot run is writing to {path}; waiting for it to finish")
                    told = True
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path} stayed locked by another run for {wait_s:.0f} s; "
                                       f"check running flows (`prefect flow-run ls`) or remove {lock} if none is")
                time.sleep(0.5)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def data_fingerprint(con, cluster: str) -> str:
    """Changes whenever the cluster's jobs change: part of every cache key over a window."""
    row = con.execute("SELECT count(*), max(ingested_at)::VARCHAR FROM jobs WHERE cluster = ?", [cluster]).fetchall()[0]
    return f"{row[0]}@{row[1]}"
