"""Refuse a replay whose window has no job that can run (issue 54): `simulate` and `backtest` say
so in one sentence and exit 2, instead of an empty result and exit 0."""

from __future__ import annotations

from datetime import datetime

import duckdb


def first_unrunnable(con: duckdb.DuckDBPyConnection, cluster: str, bounds: list[datetime]) -> str | None:
    """The sentence for the first window [bounds[i], bounds[i+1]) that holds jobs none of which can
    run on the capacity in force at its start; None when every such window has one that can."""
    from metapilot.models.simulator import Capacity
    from metapilot.models.simulator.runnable import nothing_runs
    from metapilot.warehouse.sim_store import load_replay_window

    for lo, hi in zip(bounds, bounds[1:]):
        if hi <= lo:
            continue
        workload, rows = load_replay_window(con, cluster, lo, hi)
        if len(workload) == 0:
            continue  # a quiet window (or only jobs that never ran): nothing wrong with the capacity
        why = nothing_runs(workload, Capacity.from_rows(rows), f"{cluster} submitted {lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M}")
        if why is not None:
            return why
    return None
