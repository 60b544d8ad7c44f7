"""The site key is guarded (SPEC §8): the warehouse records its fingerprint; an ingest with a missing
or different key stops and says where the key belongs; a new key only with --new-key, recorded;
a corrupt key file is a message, not a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metapilot.cli import app
from metapilot.warehouse.db import connect
from metapilot.warehouse.ingest import IngestOptions, ingest_file, ingest_file_to
from metapilot.warehouse.secret import (
    SiteKeyError,
    key_fingerprint,
    load_site_key,
    secret_path,
)

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "logs"
PBS = SAMPLES / "pbs" / "xdmod-unit-accounting-logs.log"
SACCT = SAMPLES / "slurm" / "hpc-cost-simulator-sacct-output-v2.txt"


@pytest.fixture(autouse=True)
def _no_secret_env(monkeypatch):
    monkeypatch.delenv("METAPILOT_SECRET_FILE", raising=False)


@pytest.fixture
def loaded(tmp_path) -> Path:
    """A warehouse file with one log ingested under a fresh site key."""
    db = tmp_path / "w" / "m.duckdb"
    key = load_site_key(db)
    assert ingest_file_to(db, PBS, IngestOptions(), key).outcome == "loaded"
    return db


def ingest_cli(db: Path, *args: str):
    return CliRunner().invoke(app, ["ingest", str(SACCT), "--db", str(db), *args])


def site_keys(db: Path) -> list[tuple]:
    con = connect(db, read_only=True)
    try:
        return con.execute("SELECT fingerprint, note FROM site_keys ORDER BY recorded_at").fetchall()
    finally:
        con.close()


def test_first_ingest_creates_the_key_beside_the_database_and_records_its_fingerprint(loaded):
    path = secret_path(loaded)
    assert path == loaded.parent / "secret.key"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    key = bytes.fromhex(path.read_text().strip())
    assert site_keys(loaded) == [(key_fingerprint(key), "first site key of this warehouse")]
    assert key.hex() not in str(site_keys(loaded))


def test_a_missing_key_is_refused_not_regenerated(loaded):
    path = secret_path(loaded)
    path.unlink()
    r = ingest_cli(loaded)
    assert r.exit_code == 2
    assert "site key of this warehouse is missing" in r.stderr and str(path) in r.stderr and "--new-key" in r.stderr
    assert "Traceback" not in r.output
    assert not path.exists()  # not silently replaced
    with pytest.raises(SiteKeyError, match="missing"):
        load_site_key(loaded)


def test_a_different_key_is_refused(loaded):
    path = secret_path(loaded)
    recorded = site_keys(loaded)[0][0]
    path.write_text(bytes(range(32)).hex() + "\n")
    r = ingest_cli(loaded)
    assert r.exit_code == 2
    assert "not the one this warehouse was built with" in r.stderr
    assert recorded in r.stderr and key_fingerprint(bytes(range(32))) in r.stderr


def test_the_check_lives_in_the_ingest_itself(loaded, tmp_path):
    """Whatever calls the loader (ingest, collect, a script) with another key is refused, and the
    file is not loaded."""
    con = connect(loaded)
    try:
        before = con.execute("SELECT count(*) FROM jobs").fetchone()[0]
        with pytest.raises(SiteKeyError, match="not the one this warehouse was built with"):
            ingest_file(con, SACCT, IngestOptions(), bytes(range(32)))
        assert con.execute("SELECT count(*) FROM jobs").fetchone()[0] == before
        assert con.execute("SELECT count(*) FROM ingest_files").fetchone()[0] == 1
    finally:
        con.close()


def test_a_corrupt_key_is_a_message(loaded):
    path = secret_path(loaded)
    path.write_text("this is not a key\n")
    r = ingest_cli(loaded)
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: {path} is not a MetaPilot site key")
    assert "Traceback" not in r.output and "fromhex" not in r.output


def test_a_new_key_only_on_request_and_recorded(loaded):
    path = secret_path(loaded)
    old = site_keys(loaded)[0][0]
    path.unlink()
    key = load_site_key(loaded, new_key=True)
    assert path.exists() and key_fingerprint(key) != old
    rep = ingest_file_to(loaded, SACCT, IngestOptions(new_key=True), key)
    assert rep.outcome == "loaded"
    rows = site_keys(loaded)
    assert [r[0] for r in rows] == [old, key_fingerprint(key)]
    assert "--new-key" in rows[1][1]
    # from now on the new key is the warehouse's: no option needed, and the old one is refused
    assert load_site_key(loaded) == key


def test_metapilot_secret_file_is_honoured(tmp_path, monkeypatch):
    elsewhere = tmp_path / "vault" / "site.key"
    monkeypatch.setenv("METAPILOT_SECRET_FILE", str(elsewhere))
    db = tmp_path / "m.duckdb"
    key = load_site_key(db)
    assert elsewhere.exists() and not (tmp_path / "secret.key").exists()
    assert ingest_file_to(db, PBS, IngestOptions(), key).outcome == "loaded"
    elsewhere.unlink()
    with pytest.raises(SiteKeyError, match=str(elsewhere)):
        load_site_key(db)
