"""Choosing the planner's horizon, lam and guard, and the reward's lam, on the training window only
(SPEC §7): every setting of a small grid is replayed over the window and scored by the publish
gate against the 21 fixed baselines of the same window (`gate.gate_score`).

The reward's lam is the one under which the aligned reward ranks the menu's objectives (held
fixed over the window) as `total wait + lam * max wait` does, choosing among the grid's values
the one whose ranking best agrees with the gate's; the check itself is recorded.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import numpy as np

from metapilot.models.controller.gate import GateVerdict, Outcome, gate
from metapilot.models.controller.objectives import Menu
from metapilot.models.controller.planner import LookaheadPlanner, PlannerConfig
from metapilot.models.controller.replay import replay_objectives
from metapilot.models.simulator import RULE_PAIRS, Capacity, simulate
from metapilot.transforms.reward import ControllerRewardConfig
from metapilot.transforms.state import StateConfig
from metapilot.transforms.workload import Workload

DEFAULT_GRID: dict[str, tuple] = {
    "horizon_h": (6.0, 12.0, 24.0),
    "lam": (0.0, 30.0, 100.0, 300.0),
    "guard_h": (None, 12.0, 24.0),
    "rule_guard_h": (None, 6.0, 12.0, 24.0),  # no lookahead: each objective of the menu with these guards
    # lookaheads that also see the arrivals forecast by persistence (`PlannerConfig.forecast_h`), without a
    # guard: opt-in (e.g. {"forecast_h": (168.0,), "forecast_horizon_h": (6.0, 12.0), "forecast_lam": (0.0, 30.0)});
    # measured on KTH-SP2 and two CEA-Curie cuts, tuning never kept one, and they doubled its time
    "forecast_h": (),
    "forecast_horizon_h": (6.0, 12.0),
    "forecast_lam": (0.0, 30.0),
    # anchored lookaheads (`PlannerConfig.base` with a horizon): each of the `anchors` menu objectives of
    # lowest mean bounded slowdown held fixed over the window, left only when another is cheaper by more
    # than the margin; with the slowdown weights of `anchor_slowdown` (0: mean wait, 1: bounded slowdown).
    # Held fixed, every objective ties a baseline, so slowdown is the gate condition an anchor can keep
    # (measured: anchoring also on the objective of next-best gate score took a WFP3 anchor on CEA-Curie-A
    # that lost held out)
    "anchors": 1,
    "anchor_horizon_h": (6.0, 12.0),
    "anchor_lam": (0.0,),  # 30 as well: 8 settings more, never kept on the three traces, ~5 s more on the main job
    "anchor_margin": (0.02, 0.1),
    "anchor_slowdown": (0.0, 1.0),
}


@dataclass
class Tuning:
    """The chosen planner and reward lam, and the evidence (every setting's verdict)."""

    planner: PlannerConfig
    reward_lam: float
    verdict: GateVerdict
    fixed: list[Outcome]
    rows: list[dict] = field(default_factory=list)
    ranking_check: dict = field(default_factory=dict)
    seconds: float = 0.0
    window: tuple[datetime, datetime] | None = None  # the weeks tuned on, when from the warehouse (`tune_window`)
    partition: str | None = None

    def to_dict(self) -> dict:
        return {"planner": self.planner.to_dict(), "reward_lam": self.reward_lam, "verdict": self.verdict.to_dict(),
                "fixed": [f.__dict__ for f in self.fixed], "grid": self.rows, "ranking_check": self.ranking_check,
                "seconds": round(self.seconds, 2),
                "window": None if self.window is None else [t.isoformat() for t in self.window],
                "partition": self.partition}


def fixed_of(tuning: dict | None, window: tuple[datetime, datetime], partition: str | None = None) -> list[Outcome] | None:
    """The fixed contenders' outcomes a stored tuning already replayed, when it was tuned on exactly
    `window` of the same partition: the checkpoint evaluator's training weeks are the tuning's, so
    their 21 replays need not run twice (CEA-Curie-B: ~7 s). None when they are not the same."""
    if not tuning or not tuning.get("window") or not tuning.get("fixed") or tuning.get("partition") != partition:
        return None
    if [datetime.fromisoformat(t) for t in tuning["window"]] != list(window):
        return None
    return [Outcome(**f) for f in tuning["fixed"]]


def describe(config: PlannerConfig, menu: Menu) -> str:
    """A planner setting in words."""
    guard = "no guard" if config.guard_h is None else f"{menu.names[menu.tail_first]} once a job waited {config.guard_h:g} h"
    if config.horizon_h <= 0:
        return f"{config.base or menu.names[0]}, {guard}"
    forecast = f", arrivals forecast from {config.forecast_h:g} h before" if config.forecast_h > 0 else ""
    anchor = f", held on {config.base} unless another is {config.margin:.0%} cheaper" if config.base else ""
    slowdown = f", slowdown weight {config.slowdown:g}" if config.slowdown > 0 else ""
    return f"lookahead {config.horizon_h:g} h, lam {config.lam:g}, {guard}{forecast}{anchor}{slowdown}"


def fixed_outcomes(workload: Workload, capacity: Capacity) -> list[Outcome]:
    """The 21 baselines of SPEC §6 replayed over the window (the menu's objectives are among them)."""
    return [Outcome.of(f"{p}+{b}", simulate(workload, capacity, p, b).metrics().row(0, named=True))
            for p, b in RULE_PAIRS]


def planner_outcome(workload: Workload, capacity: Capacity, state: StateConfig, config: PlannerConfig,
                    partition: str | None = None) -> tuple[Outcome, np.ndarray]:
    """The planner's replay of the window: its outcome and the objective of every epoch."""
    res = replay_objectives(workload, capacity, LookaheadPlanner(Menu.of(state), config, state.epoch_s),
                            state.epoch_s, state, partition=partition)
    return Outcome.of("planner", res.metrics().row(0, named=True)), res.objectives


POOL_MIN_SETTINGS = 8  # fewer settings replay in this process: starting workers costs ~2 s
_WINDOW: tuple | None = None  # a worker's window (`_start_worker`)


def _start_worker(window: tuple) -> None:
    global _WINDOW
    _WINDOW = window


def _worker_outcome(config: PlannerConfig) -> Outcome:
    workload, capacity, state, partition = _WINDOW
    return planner_outcome(workload, capacity, state, config, partition)[0]


def planner_outcomes(workload: Workload, capacity: Capacity, state: StateConfig, settings: Sequence[PlannerConfig],
                     partition: str | None = None, workers: int | None = None,
                     log: Callable[[str], None] | None = None) -> list[Outcome]:
    """Every setting's outcome over the window, in `workers` processes (default: the usable cores,
    `ground.cores`): the replays are independent, and KTH-SP2's 64 settings took 27.0 s in one
    process, 17.6 s in two. The window goes to each worker once. Same outcomes either way; when
    workers cannot start (no /dev/shm, a process limit, a daemon process such as a Dask worker's,
    which may have no children), the replays run here."""
    from metapilot.ground.pool import process_map

    return process_map(_worker_outcome, settings, workers=workers, min_items=POOL_MIN_SETTINGS,
                       initializer=_start_worker, initargs=((workload, capacity, state, partition),), log=log)


def lowest_slowdown(menu: Menu, runs: Sequence, k: int) -> list[str]:
    """The `k` objectives of lowest mean bounded slowdown among `runs`, the menu's objectives held
    fixed over a window: the anchors of the anchored lookaheads."""
    bsld = [float(r.metrics()["mean_bsld"][0]) for r in runs]
    return [menu.names[i] for i in np.argsort(bsld, kind="stable")[:k]]


def anchored_settings(anchors: Sequence[str], grid: dict[str, Sequence]) -> list[PlannerConfig]:
    """The grid's anchored lookaheads (`anchor_*` keys, no guard) on each anchor."""
    return [PlannerConfig(horizon_h=float(h), lam=float(lam), guard_h=None, base=name, margin=float(m), slowdown=float(b))
            for name, h, lam, m, b in itertools.product(anchors, grid.get("anchor_horizon_h", ()),
                                                        grid.get("anchor_lam", ()), grid.get("anchor_margin", ()),
                                                        grid.get("anchor_slowdown", ()))]


def tune_planner(workload: Workload, capacity: Capacity, state: StateConfig, *, partition: str | None = None,
                 grid: dict[str, Sequence] | None = None, log: Callable[[str], None] | None = None,
                 workers: int | None = None) -> Tuning:
    """Replay every setting of the grid over the (training) window, lookahead planners and guarded
    rules, and keep the best gate score (ties: the earlier setting of the grid)."""
    t0 = time.perf_counter()
    grid = grid or DEFAULT_GRID
    fixed = fixed_outcomes(workload, capacity)
    menu = Menu.of(state)
    runs = [replay_objectives(workload, capacity, a, state.epoch_s, state, partition=partition)
            for a in range(len(menu))]
    anchors = lowest_slowdown(menu, runs, int(grid.get("anchors", 0)))
    best: tuple[float, PlannerConfig, GateVerdict] | None = None
    rows = []
    settings = [PlannerConfig(horizon_h=float(h), lam=float(lam), guard_h=None if g is None else float(g),
                              slowdown=float(b))
                for b, h, lam, g in itertools.product(grid.get("slowdown", (0.0,)), grid["horizon_h"], grid["lam"],
                                                      grid["guard_h"])]
    settings += [PlannerConfig(horizon_h=float(h), lam=float(lam), guard_h=None, forecast_h=float(f))
                 for f, h, lam in itertools.product(grid.get("forecast_h", ()), grid.get("forecast_horizon_h", ()),
                                                    grid.get("forecast_lam", ()))]
    settings += anchored_settings(anchors, grid)
    settings += [PlannerConfig(horizon_h=0.0, lam=0.0, guard_h=None if g is None else float(g), base=name)
                 for name in menu.names for g in grid.get("rule_guard_h", ())]
    for cfg, out in zip(settings, planner_outcomes(workload, capacity, state, settings, partition, workers, log),
                        strict=True):
        v = gate(out, fixed)
        rows.append(cfg.to_dict() | {"mean_wait_s": out.mean_wait_s, "max_wait_s": out.max_wait_s,
                                     "mean_bsld": out.mean_bsld, "score": v.score, "passes": v.passes})
        if best is None or v.score < best[0]:
            best = (v.score, cfg, v)
    assert best is not None
    if log:
        log(f"teacher: {describe(best[1], menu)} (gate score {best[0]:.3f} on the training window, "
            f"{len(rows)} settings tried)")
    lam, check = choose_reward_lam(workload, capacity, state, fixed, grid["lam"], partition, prefer=best[1].lam,
                                   runs=runs)
    return Tuning(best[1], lam, best[2], fixed, rows, check, time.perf_counter() - t0)


def choose_reward_lam(workload: Workload, capacity: Capacity, state: StateConfig, fixed: list[Outcome],
                      lams: Sequence[float], partition: str | None = None, prefer: float | None = None,
                      runs: Sequence | None = None) -> tuple[float, dict]:
    """The reward lam whose return ranks the menu's objectives most like the gate score does, and
    the check that the return ranks them as `total wait + lam * max wait` does. `runs`: the menu's
    objectives held fixed over the window, when already replayed."""
    menu = Menu.of(state)
    if runs is None:
        runs = [replay_objectives(workload, capacity, a, state.epoch_s, state, partition=partition)
                for a in range(len(menu))]
    metrics = [r.metrics().row(0, named=True) for r in runs]
    gate_rank = _ranks([gate(Outcome.of(n, m), fixed).score for n, m in zip(menu.names, metrics, strict=True)])
    candidates = []
    for lam in lams:
        rc = ControllerRewardConfig(lam=float(lam))
        returns = [float(r.epoch_rewards(rc).sum()) for r in runs]
        tau = _kendall(_ranks([-x for x in returns]), gate_rank)
        candidates.append((tau, float(lam) == prefer, -float(lam), float(lam), returns))
    tau, _, _, lam, returns = max(candidates)
    n = [int(m["jobs"]) for m in metrics]
    metric = [nj * float(m["mean_wait"]) + lam * float(m["max_wait"]) for nj, m in zip(n, metrics, strict=True)]
    check = {
        "objectives": list(menu.names), "lam": lam, "returns": returns, "total_wait_plus_lam_max": metric,
        "rank_by_return": _ranks([-x for x in returns]), "rank_by_metric": _ranks(metric),
        "agrees": _ranks([-x for x in returns]) == _ranks(metric), "tau_with_gate": tau,
    }
    return lam, check


def _ranks(values: Sequence[float]) -> list[int]:
    order = np.argsort(np.asarray(values, dtype=np.float64), kind="stable")
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order))
    return out.tolist()


def _kendall(a: Sequence[int], b: Sequence[int]) -> float:
    a, b = np.asarray(a), np.asarray(b)
    n = len(a)
    if n < 2:
        return 1.0
    s = np.sign(a[:, None] - a[None, :]) * np.sign(b[:, None] - b[None, :])
    return float(s[np.triu_indices(n, 1)].sum() / (n * (n - 1) / 2))


TUNING_WEEKS = 13.0  # the last weeks of the training window: the planner is tuned, and the controller checked, on them


def tuning_weeks(window_from, window_to, max_weeks: float = TUNING_WEEKS) -> tuple[datetime, datetime]:
    """The last `max_weeks` of a training window (all of it when shorter), as aware datetimes."""
    from metapilot.models.controller.tuples import as_utc

    lo, hi = as_utc(window_from), as_utc(window_to)
    return max(lo, hi - timedelta(weeks=max_weeks)), hi


def tune_window(con, cluster: str, window_from, window_to, *, partition: str | None = None,
                state: StateConfig = StateConfig(), max_weeks: float = TUNING_WEEKS,
                log: Callable[[str], None] | None = None) -> Tuning:
    """`tune_planner` on the warehouse's jobs of the last `max_weeks` of a (training) window: the
    most recent regime, and a bounded cost (a quarter replays 36 settings in ~10 s on one core)."""
    from metapilot.warehouse.sim_store import load_replay_window

    lo, hi = tuning_weeks(window_from, window_to, max_weeks)
    workload, rows = load_replay_window(con, cluster, lo, hi, partition)
    if len(workload) == 0:
        raise ValueError(f"no jobs of {cluster} submitted in {lo:%Y-%m-%d} .. {hi:%Y-%m-%d} to tune the planner on")
    return replace(tune_planner(workload, Capacity.from_rows(rows), state, partition=partition, log=log),
                   window=(lo, hi), partition=partition)


def from_dict(d: dict) -> tuple[PlannerConfig, float]:
    """The planner and reward lam of a stored `Tuning.to_dict()`."""
    return PlannerConfig(**d["planner"]), float(d["reward_lam"])


LOOKAHEAD_RULE_H = 12.0  # the lookahead features' horizon when the tuned teacher is a rule (no horizon)


def with_lookahead(state: StateConfig, planner: PlannerConfig) -> StateConfig:
    """The state with the lookahead features of the teacher's own cost (its horizon, lam and
    slowdown weight): the controller sees what the planner weighs when it decides."""
    if planner.horizon_h > 0:
        return replace(state, lookahead_h=float(planner.horizon_h), lookahead_lam=float(planner.lam),
                       lookahead_slowdown=float(planner.slowdown), lookahead_forecast_h=float(planner.forecast_h))
    return replace(state, lookahead_h=LOOKAHEAD_RULE_H, lookahead_lam=0.0, lookahead_slowdown=float(planner.slowdown))


def apply_tuning(config, tuning: dict | None):
    """A `DatasetConfig` with the tuned planner and reward lam, and (with `config.lookahead`) the
    state's lookahead features from the tuned planner (unchanged without a tuning)."""
    if not tuning:
        return config
    planner, lam = from_dict(tuning)
    state = with_lookahead(config.state, planner) if getattr(config, "lookahead", False) else config.state
    return replace(config, planner=planner, reward=replace(config.reward, lam=lam), state=state)


def tuned_config(con, cluster: str, train_from, train_to, config, *, partition: str | None = None,
                 log: Callable[[str], None] | None = None):
    """`config` with the planner and reward lam tuned on the training window when the planner is a
    source (the commands' path; the flows cache `tune_window` as a task). Returns it and the tuning."""
    if "planner" not in config.sources or config.reward.kind != "aligned":
        return config, None
    tuning = tune_window(con, cluster, train_from, train_to, partition=partition, state=config.state, log=log).to_dict()
    return apply_tuning(config, tuning), tuning
