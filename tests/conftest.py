"""Shared fixtures. Prefect's test harness starts once per session, and only for flow tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
REPO = TESTS.parent
SAMPLES = REPO / "samples"
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()

os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def prefect_harness():
    """A throwaway Prefect API (SQLite) for the whole session: flows run without a real server."""
    import tempfile

    os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = tempfile.mkdtemp(prefix="metapilot-prefect-results-")
    import metapilot.flows  # noqa: F401  (quiet, offline Prefect defaults)
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture
def site_key() -> bytes:
    return bytes(range(32))


@pytest.fixture
def mem_con():
    from metapilot.warehouse.db import connect_memory

    con = connect_memory()
    yield con
    con.close()
