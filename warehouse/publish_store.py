"""Promote a policy to be its cluster's current one: a row in `published_policies` and a small
pointer file beside the artifacts (`policies/<cluster>.published.json`) that deployments read."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from metapilot.ground.paths import beside_db


def promote(con: duckdb.DuckDBPyConnection, policy_id: str, validation_id: str | None, verdict: str | None,
            db: str | Path | None = None) -> Path:
    """Record the promotion and write the pointer file; returns the pointer's path."""
    row = con.execute("SELECT cluster, partition, path FROM policies WHERE policy_id = ?", [policy_id]).fetchall()
    if not row:
        raise LookupError(f"no policy {policy_id!r} in the registry: train one with `metapilot train` first")
    cluster, partition, path = row[0]
    now = datetime.now(timezone.utc)
    con.execute("INSERT INTO published_policies VALUES (?,?,?,?,?,?)",
                [cluster, partition, policy_id, validation_id, now, verdict])
    pointer = beside_db(db, "policies") / f"{cluster}.published.json"
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.write_text(json.dumps({"cluster": cluster, "partition": partition, "policy_id": policy_id, "path": path,
                                   "validation_id": validation_id, "published_at": now.isoformat(),
                                   "verdict": verdict}, indent=2) + "\n")
    return pointer


def current_policy(con: duckdb.DuckDBPyConnection, cluster: str) -> str | None:
    """The cluster's latest published policy id, or None."""
    row = con.execute("SELECT policy_id FROM published_policies WHERE cluster = ? ORDER BY published_at DESC LIMIT 1",
                      [cluster]).fetchall()
    return row[0][0] if row else None
