"""The offline dataset's I/O: tuples in and out of `mdp_transitions` (DDL: sql/ddl/010_mdp.sql).
Which tuples a training run needs, and their schema, are the controller's business
(models/controller/dataset.py, tuples.py)."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from metapilot.ground.paths import sql_text
from metapilot.warehouse.db import insert_frame, query_frame

TRAJECTORY_KEY: tuple[str, ...] = (
    "cluster", "partition", "window_from", "window_to", "source", "behaviour_policy", "seed", "state_spec",
)


def replace_transitions(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> int:
    """Write tuples, replacing those stored for the same trajectories, in one transaction: a rebuilt
    window never leaves old and new tuples side by side."""
    if frame.height == 0:
        return 0
    con.register("_mp_traj", frame.select(TRAJECTORY_KEY).unique().to_arrow())
    try:
        con.execute("BEGIN TRANSACTION")
        con.execute(sql_text("mdp/replace_transitions.sql"))
        insert_frame(con, "mdp_transitions", frame)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("_mp_traj")
    return frame.height


def load_transitions(con: duckdb.DuckDBPyConnection, cluster: str, partition: str, *,
                     window: tuple[datetime, datetime] | None = None, epochs_from: datetime | None = None,
                     epochs_to: datetime | None = None, spec: str | None = None,
                     sources: tuple[str, ...] | None = None) -> pl.DataFrame:
    """Stored tuples as they are in the table (the caller conforms them), in a fixed order."""
    return query_frame(con, sql_text("mdp/load_transitions.sql"), {
        "cluster": cluster, "partition": partition,
        "window_from": window[0] if window else None, "window_to": window[1] if window else None,
        "epochs_from": epochs_from, "epochs_to": epochs_to, "spec": spec,
        "sources": list(sources) if sources else None,
    })
