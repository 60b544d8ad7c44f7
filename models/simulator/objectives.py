"""What the engine can be switched between: objectives, each a queue ordering and a backfilling mode.

An objective is the simulator's own notion (SPEC §6): a priority rule the queue is ordered by, a
backfilling mode, and whether jobs that fit the free resources now go first. The controller's menu
of actions (`models.controller.objectives.Menu`) is a selection of these by name; the simulator
needs no menu, only the engine settings of each action (`Objective.setting`).

The catalogue spans the trade-off SPEC §6 measures: SJF drains the queue (lowest mean wait,
longest tail), SAF and F1 favour small and short jobs (low mean wait and slowdown), WFP3 serves
the longest waits relative to size (the tail), FCFS is the user-first order real schedulers
follow, each with EASY. On KTH-SP2 (EASY) SJF gives mean wait 4,611 s / max 681,785 s and FCFS
6,893 s / 262,194 s; no fixed rule gets both a low mean and a low maximum, a switching controller
can. `U` and `W` are the seed's names for SJF and FCFS. An earlier U (jobs that fit now first, then
largest area first) was dominated by W on every measure, so the engine keeps that mode
(`fit_first`) for experiments only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metapilot.models.simulator.engine import backfill_code
from metapilot.models.simulator.policies import policy_code
from metapilot.models.simulator.policies import scores_at as score_many
from metapilot.transforms.state import DEFAULT_MENU

Setting = tuple[int, int, bool]  # (priority rule code, backfilling code, fit-first): what the engine runs


@dataclass(frozen=True)
class Objective:
    """What an action means to the scheduling engine."""

    name: str
    meaning: str
    priority_rule: str  # SPEC §6 rule name the ordering builds on
    fit_now_first: bool  # jobs that fit the free resources now go before the rest
    backfill: str  # none | easy | conservative

    @property
    def setting(self) -> Setting:
        return (policy_code(self.priority_rule), backfill_code(self.backfill), self.fit_now_first)

    def describe(self) -> str:
        first = "jobs that fit now first, then " if self.fit_now_first else ""
        return f"{self.meaning} ({first}{self.priority_rule} order, {self.backfill.upper()} backfilling)"


# Every objective the engine can be switched to (SPEC §7 draws menus from these).
CATALOGUE: dict[str, Objective] = {o.name: o for o in (
    Objective("SJF", "drain the queue: shortest requested time first", "SJF", False, "easy"),
    Objective("SAF", "mean wait and slowdown first: smallest area (time x cores) first", "SAF", False, "easy"),
    Objective("F1", "mean wait first: the F1 rule (short and narrow, then oldest)", "F1", False, "easy"),
    Objective("WFP3", "tail first: longest waits relative to their size first", "WFP3", False, "easy"),
    Objective("UNICEF", "tail first: longest waits relative to width and time first", "UNICEF", False, "easy"),
    Objective("FCFS", "user first: oldest first", "FCFS", False, "easy"),
    Objective("LAF", "largest area first", "LAF", False, "easy"),
    Objective("U", "system first: drain the queue, shortest jobs first", "SJF", False, "easy"),
    Objective("W", "user first: oldest / longest-waiting first", "FCFS", False, "easy"),
)}
DEFAULT_OBJECTIVES: tuple[Objective, ...] = tuple(CATALOGUE[n] for n in DEFAULT_MENU)


def user_first_index(objectives: Sequence[Objective]) -> int:
    """The FCFS-like objective (real schedulers' default, what a replay starts under), else the last."""
    rules = [o.priority_rule for o in objectives]
    return rules.index("FCFS") if "FCFS" in rules else len(rules) - 1


def sort_keys(
    objective: str,
    *,
    submit_s: np.ndarray,
    req_time_s: np.ndarray,
    cores: np.ndarray,
    job_seq: np.ndarray,
    now_s: float,
    origin_s: float = 0.0,
) -> tuple[np.ndarray, ...]:
    """Sort keys of a queue under `objective` at time `now_s`, most significant first (lower =
    earlier): the engine's own score (`simulator.policies.score`), then submit time, then
    `job_seq` (a numeric stand-in for the job id). Times in seconds; `origin_s` is the window
    start F1 counts from. Feed `keys[::-1]` to `np.lexsort`, or use `queue_order`."""
    if objective not in CATALOGUE:
        raise ValueError(f"unknown objective {objective!r}; known: {sorted(CATALOGUE)}")
    rule = policy_code(CATALOGUE[objective].priority_rule)
    submit = np.asarray(submit_s, dtype=np.float64)
    req = np.maximum(np.nan_to_num(np.asarray(req_time_s, dtype=np.float64)), 1.0)
    n = np.maximum(np.asarray(cores, dtype=np.float64), 1.0)
    sc = score_many(rule, submit - origin_s, req, n, float(now_s) - origin_s)
    return (sc, submit, np.asarray(job_seq, dtype=np.float64))


def queue_order(objective: str, **queue) -> np.ndarray:
    """Indices of the queue in scheduling order under `objective` (see `sort_keys`)."""
    keys = sort_keys(objective, **queue)
    return np.lexsort(keys[::-1])
