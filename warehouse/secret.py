"""The per-site secret used for keyed name hashes, kept outside the database file (SPEC §8)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from metapilot.ground.paths import db_path


def secret_path(db: str | Path | None = None) -> Path:
    """`METAPILOT_SECRET_FILE`, else `secret.key` beside the database (git-ignored, mode 0600)."""
    env = os.environ.get("METAPILOT_SECRET_FILE")
    return Path(env) if env else db_path(db).resolve().parent / "secret.key"


def load_or_create_secret(db: str | Path | None = None) -> bytes:
    """Read the site key, creating a random one on first use."""
    path = secret_path(db)
    if path.exists():
        return bytes.fromhex(path.read_text().strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    return key
