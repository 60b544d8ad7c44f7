"""What every flow shares: one writer at a time, transient-failure retries, cache keys."""

from __future__ import annotations

import os

from metapilot.ground.paths import beside_db
from metapilot.warehouse.db import writer_lock

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


def warehouse_writer(db: str | None, wait_s: float = 3600.0, log=None):
    """Hold the warehouse's writer lock (`warehouse.db.writer_lock`): one writer at a time,
    across processes; a second writer waits, saying so, rather than fail."""
    return writer_lock(db, wait_s=wait_s, log=log)
