"""The per-site secret used for keyed name hashes, kept outside the database file (SPEC §8).

The key lives in `secret.key` beside the database (or `$METAPILOT_SECRET_FILE`); the warehouse
records only its fingerprint (`site_keys`). An ingest with a missing or different key stops and
says where the key belongs: a silently regenerated key would give the same users new ids. A new
key is accepted only on request (`--new-key`), and that is recorded.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from metapilot.ground.paths import db_path, sql_text

_HEX_KEY = re.compile(r"^[0-9a-fA-F]{64}$")
_FINGERPRINT_LABEL = b"metapilot site key fingerprint v1"
NEW_KEY_HINT = ("or, to start new pseudonyms (the same users then get new ids), re-run with --new-key")


class SiteKeyError(Exception):
    """The site key is missing, corrupt or not this warehouse's; the message says what to do."""


def secret_path(db: str | Path | None = None) -> Path:
    """`METAPILOT_SECRET_FILE`, else `secret.key` beside the database (git-ignored, mode 0600)."""
    env = os.environ.get("METAPILOT_SECRET_FILE")
    return Path(env).expanduser() if env else db_path(db).resolve().parent / "secret.key"


def key_fingerprint(key: bytes) -> str:
    """A short public fingerprint of the key (an HMAC of a fixed label: it does not reveal the key)."""
    return hmac.new(key, _FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:16]


def _where(path: Path) -> str:
    how = "$METAPILOT_SECRET_FILE" if os.environ.get("METAPILOT_SECRET_FILE") else "beside the database, or $METAPILOT_SECRET_FILE"
    return f"{path} ({how})"


def read_key(path: Path) -> bytes | None:
    """The key in `path`, None when there is no such file; a file that is not a key is an error."""
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SiteKeyError(f"cannot read the site key {path}: {e.strerror or e}; check its permissions") from None
    if not _HEX_KEY.match(text):
        raise SiteKeyError(f"{path} is not a MetaPilot site key (expected 64 hexadecimal digits, found "
                           f"{len(text)} characters): restore it from your backup; {NEW_KEY_HINT} after moving it away")
    return bytes.fromhex(text)


def readable_key(db: str | Path | None = None) -> bytes | None:
    """The warehouse's site key if there is a readable one, else None: for matching names a site's tools
    print to the warehouse's pseudonyms, where no key only means they are matched as given."""
    try:
        return read_key(secret_path(db))
    except SiteKeyError:
        return None


def _create_key(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another ingest created it a moment ago: use that one
        existing = read_key(path)
        if existing is None:
            raise
        return existing
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    return key


def recorded_fingerprint(con) -> str | None:
    """The fingerprint of the key the warehouse's names were hashed with (the latest recorded)."""
    import duckdb

    try:
        rows = con.execute(sql_text("site_keys/latest.sql")).fetchall()
    except duckdb.CatalogException:  # a warehouse from before key fingerprints, opened read-only
        return None
    return rows[0][0] if rows else None


def _has_hashed_names(con) -> bool:
    return con.execute(sql_text("site_keys/has_hashed_names.sql")).fetchall()[0][0]


def _warehouse_state(db: str | Path | None, log: Callable[[str], None] | None) -> tuple[str | None, bool]:
    """(recorded fingerprint, whether it holds pseudonymised rows) of the warehouse file, if any."""
    if not db_path(db).exists():
        return None, False
    from metapilot.warehouse.db import connect, writer_wait_s

    con = connect(db, read_only=True, wait_s=writer_wait_s(), log=log)
    try:
        return recorded_fingerprint(con), _has_hashed_names(con)
    finally:
        con.close()


def missing_key_message(path: Path) -> str:
    return (f"the site key of this warehouse is missing: it belongs at {_where(path)}. Restore it from your "
            f"backup; {NEW_KEY_HINT}")


def different_key_message(path: Path, found: str, recorded: str) -> str:
    return (f"the site key at {path} (fingerprint {found}) is not the one this warehouse was built with "
            f"(fingerprint {recorded}): put the right key at {_where(path)}; {NEW_KEY_HINT}")


def load_site_key(db: str | Path | None = None, new_key: bool = False, log: Callable[[str], None] | None = None) -> bytes:
    """The site key for an ingest into `db`, checked against the fingerprint the warehouse records.

    A missing key is created only for a warehouse that holds no pseudonymised rows yet (a first
    ingest), or with `new_key`; a key that is not the recorded one is refused unless `new_key`."""
    path = secret_path(db)
    key = read_key(path)
    recorded, has_rows = _warehouse_state(db, log)
    if key is None:
        if (recorded or has_rows) and not new_key:
            raise SiteKeyError(missing_key_message(path))
        key = _create_key(path)
        if log:
            log(f"created the site key {path}: keep it (and a backup) with the warehouse; names are hashed with it")
        return key
    found = key_fingerprint(key)
    if recorded and recorded != found and not new_key:
        raise SiteKeyError(different_key_message(path, found, recorded))
    return key


# The name the ingest path has always used; it no longer creates a key behind the user's back.
load_or_create_secret = load_site_key


def check_and_record_key(con, key: bytes, new_key: bool = False, key_file: str | Path | None = None) -> None:
    """Inside the ingest's transaction: the key must be the one the warehouse records; the first
    key (or a new one accepted with `new_key`) is recorded."""
    found = key_fingerprint(key)
    recorded = recorded_fingerprint(con)
    if recorded == found:
        return
    if recorded is None:
        note = ("the key in use when key fingerprints were introduced" if _has_hashed_names(con)
                else "first site key of this warehouse")
    elif new_key:
        note = (f"new site key accepted (--new-key), replacing {recorded}: names ingested from now on get new ids, "
                "rows already stored keep theirs")
    else:
        raise SiteKeyError(different_key_message(Path(key_file) if key_file else Path("secret.key"), found, recorded))
    con.execute(sql_text("site_keys/record.sql"), {"fingerprint": found, "recorded_at": datetime.now(timezone.utc),
                                                   "key_file": str(key_file) if key_file else None, "note": note})
