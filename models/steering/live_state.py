"""The §7 state of a live cluster, from squeue and sinfo, built as `advise` builds it from the
warehouse: the same aggregates (`transforms.state.AGGREGATES`) turned into features by the same
function (`state_from_aggregates`), so the published controller reads the live queue as it read
the as-run history. A policy whose state also holds lookahead features (planner rollouts) cannot be
fed from a live queue yet: `steer` refuses it and says so."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from metapilot.models.simulator import Capacity
from metapilot.models.simulator.engine import Engine
from metapilot.transforms.state import AGGREGATES, StateConfig, state_from_aggregates
from metapilot.transforms.workload import Workload


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


RUNNING_STATES = ("RUNNING", "COMPLETING")
UNLIMITED_S = 365 * 86400.0  # a job with no time limit: a year, as the rank's own default


@dataclass(frozen=True)
class LiveView:
    """The engine's view of the live cluster and the boundary's aggregates (AGGREGATES order)."""

    engine: Engine
    aggregates: np.ndarray
    origin_s: float


def live_view(jobs: pl.DataFrame, nodes: pl.DataFrame, now_s: float, origin_s: float | None = None) -> LiveView:
    """The planning view of the live queue, as `Engine.planning_view` builds it in the replay: the
    running jobs since their start, in start order, each to end at its time limit; the pending jobs with
    their submit time, time limit and cores; the nodes' cores as one pool; requested times as run times
    and no arrivals to come. A running job with no start time in the answer is taken to have started now. `origin_s`: time zero of the view (F1 counts its
    seconds from it; the walk forward's span start for a decision it backs)."""
    run = jobs.filter(pl.col("state").is_in(list(RUNNING_STATES)))
    pend = jobs.filter(pl.col("state") == "PENDING")
    run_start = run["start_s"].fill_null(int(now_s)).cast(pl.Float64).to_numpy()
    order = np.argsort(run_start, kind="stable")
    run_start = run_start[order]
    limit = lambda f: f["time_limit_s"].cast(pl.Float64).fill_null(UNLIMITED_S).to_numpy()  # noqa: E731
    cores = lambda f: np.maximum(f["cpus"].cast(pl.Float64).fill_null(1.0).to_numpy(), 1.0)  # noqa: E731
    submit = np.r_[run["submit_s"].cast(pl.Float64).fill_null(now_s).to_numpy()[order],
                   pend["submit_s"].cast(pl.Float64).fill_null(now_s).to_numpy()]
    if origin_s is not None:
        origin = float(origin_s)
    else:
        origin = float(min(submit.min(), run_start.min() if run_start.size else now_s, now_s)) - 1.0 if submit.size else now_s - 1.0
    req = np.maximum(np.r_[limit(run)[order], limit(pend)], 1.0)
    need = np.r_[cores(run)[order], cores(pend)]
    cap = float(nodes["cpus"].sum()) if not nodes.is_empty() else float(need.sum())
    cap = max(cap, float(need.max()) if need.size else 1.0, 1.0)  # a job wider than sinfo says still plans
    wl = Workload.from_arrays(submit=submit - origin, run=req, req_time=req, cores=need)
    # from_arrays sorts by submit: find each job again by its position in the arrays given
    pos = np.argsort(wl.job_ids.astype(np.int64), kind="stable") if wl.job_ids is not None else np.arange(len(wl))
    full = Engine(wl, Capacity.single(cap))
    n_run = run.height
    view, _ = full.view(pos[:n_run], run_start - origin, pos[n_run:], float(now_s - origin))
    agg = live_aggregates(jobs, nodes, now_s, StateConfig())
    return LiveView(view, np.array([float(agg[k]) for k in AGGREGATES]), origin)


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
