"""The §7 state of a live cluster, from squeue and sinfo, built as `advise` builds it from the
warehouse: the same aggregates (`transforms.state.AGGREGATES`) turned into features by the same
function (`state_from_aggregates`), so the published controller reads the live queue as it read
the as-run history. A policy whose state also holds lookahead features (planner rollouts) cannot be
fed from a live queue yet: `steer` refuses it and says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from metapilot.transforms.state import StateConfig, state_from_aggregates


def live_aggregates(jobs: pl.DataFrame, nodes: pl.DataFrame, now_s: float, config: StateConfig) -> dict[str, float]:
    """One epoch boundary's aggregates at `now_s` (memory in MiB; GPUs not read: 0)."""
    pend = jobs.filter(pl.col("state") == "PENDING")
    run = jobs.filter(pl.col("state").is_in(["RUNNING", "COMPLETING"]))
    waits = (now_s - pend["submit_s"].fill_null(int(now_s)).cast(pl.Float64)).clip(lower_bound=0).to_numpy()
    submitted = jobs["submit_s"].fill_null(0).to_numpy()
    return {
        "epoch_start": int(now_s),
        "used_cpu": float(run["cpus"].fill_null(0).sum()), "used_gpu": 0.0,
        "used_mem": float(nodes["alloc_memory"].sum()) if not nodes.is_empty() else 0.0,
        "cap_cpu": float(nodes["cpus"].sum()) if not nodes.is_empty() else 0.0, "cap_gpu": 0.0,
        "cap_mem": float(nodes["real_memory"].sum()) if not nodes.is_empty() else 0.0,
        "queue_len": float(pend.height), "queued_cpu": float(pend["cpus"].fill_null(0).sum()), "queued_gpu": 0.0,
        "queued_mem": 0.0,
        "wait_mean_s": float(waits.mean()) if len(waits) else 0.0,
        "wait_max_s": float(waits.max()) if len(waits) else 0.0,
        "long_tail_share": float((waits > config.long_tail_s).mean()) if len(waits) else 0.0,
        "req_mean_s": float(pend["time_limit_s"].drop_nulls().mean() or 0.0) if pend.height else 0.0,
        "arrivals": float(np.sum(submitted > now_s - config.epoch_s)),
    }


def live_state(jobs: pl.DataFrame, nodes: pl.DataFrame, now_s: float, config: StateConfig,
               probe: object | None = None, origin_s: float | None = None) -> np.ndarray:
    """The controller's state of the live cluster; a state with lookahead features gets them from the
    planner's rollouts of the live view (`live_planner.live_view`, as the replay's probe rolls the
    engine's), through `probe` (a `LookaheadProbe`, kept across cycles) or a new one; `origin_s`: the
    instant F1's rollout counts from (`live_view`)."""
    agg = live_aggregates(jobs, nodes, now_s, config)
    base = state_from_aggregates(**agg, config=config)
    if config.lookahead_h <= 0:
        return base
    if config.lookahead_forecast_h > 0:
        raise ValueError("this controller's lookahead forecasts arrivals from the jobs submitted earlier, which a live "
                         "queue does not show: steer by a fixed rule (--policy RULE), or publish a controller without "
                         "a forecast")
    from metapilot.models.controller.lookahead import LookaheadProbe
    from metapilot.models.steering.live_planner import live_view
    from metapilot.transforms.state import lookahead_features

    probe = probe if probe is not None else LookaheadProbe(config)
    v = live_view(jobs, nodes, now_s, origin_s)
    costs = probe.costs(v.engine, v.aggregates, probe.menu.settings)
    return np.concatenate([np.asarray(base, dtype=np.float32).reshape(-1),
                           lookahead_features(costs, config.epoch_s)[0]]).reshape(np.shape(base)[:-1] + (-1,))


def controller_menu(policy_id: str, db: str | Path | None) -> list[str]:
    """The objectives a published controller picks from (its model card, checksums verified)."""
    from metapilot.models.controller.artifact import find_policy, load_card

    card = load_card(find_policy(policy_id, db))
    return list(card["state"]["config"]["menu"])
