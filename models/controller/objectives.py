"""The controller's actions: a menu of objectives the scheduling engine can be switched between.

The action of an epoch is an index into the menu (`StateConfig.menu`, SPEC §7). Each objective
is a queue ordering (a SPEC §6 priority rule) with a backfilling mode; the simulator's
objective-switching engine runs exactly these, and the as-run history is labelled with the
objective whose ordering best matches the real start order (`models.controller.asrun`), through
the engine's own score function (`sort_keys`).

The default menu spans the trade-off SPEC §6 measures: SJF drains the queue (lowest mean wait,
longest tail), SAF and F1 favour small and short jobs (low mean wait and slowdown), WFP3 serves
the longest waits relative to size (the tail), FCFS is the user-first order real schedulers
follow, each with EASY. On KTH-SP2 (EASY) SJF gives mean wait 4,611 s / max 681,785 s and FCFS
6,893 s / 262,194 s; no fixed rule gets both a low mean and a low maximum, a switching controller
can. `uw` is the seed's two-objective preset (U = SJF+EASY, W = FCFS+EASY). An earlier U (jobs
that fit now first, then largest area first) was dominated by W on every measure, so the engine
keeps that mode (`fit_first`) for experiments only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metapilot.models.simulator.engine import backfill_code
from metapilot.models.simulator.policies import policy_code
from metapilot.models.simulator.policies import scores_at as score_many
from metapilot.transforms.state import DEFAULT_MENU, StateConfig

@dataclass(frozen=True)
class Objective:
    """What an action means to the scheduling engine."""

    name: str
    meaning: str
    priority_rule: str  # SPEC §6 rule name the ordering builds on
    fit_now_first: bool  # jobs that fit the free resources now go before the rest
    backfill: str  # none | easy | conservative

    def describe(self) -> str:
        first = "jobs that fit now first, then " if self.fit_now_first else ""
        return f"{self.meaning} ({first}{self.priority_rule} order, {self.backfill.upper()} backfilling)"


# Every objective a menu may hold (SPEC §7). U and W are the seed's names for SJF and FCFS.
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
# Named menus; any comma-separated list of CATALOGUE names is a menu too.
MENUS: dict[str, tuple[str, ...]] = {"default": DEFAULT_MENU, "uw": ("U", "W")}
TAIL_FIRST_RULES: tuple[str, ...] = ("WFP3", "UNICEF", "FCFS")  # the starvation guard's choice, in order


def menu_names(menu: str | Sequence[str]) -> tuple[str, ...]:
    """A menu by preset name (`default`, `uw`) or as names ("SJF,WFP3" or a sequence), checked."""
    if isinstance(menu, str):
        names = MENUS.get(menu.strip().lower()) or tuple(x.strip().upper() for x in menu.split(",") if x.strip())
    else:
        names = tuple(str(x) for x in menu)
    unknown = [n for n in names if n not in CATALOGUE]
    if unknown or len(names) < 2 or len(set(names)) != len(names):
        raise ValueError(f"a menu is two or more distinct objectives from {sorted(CATALOGUE)} or a preset "
                         f"{sorted(MENUS)}; got {menu!r}")
    return names


@dataclass(frozen=True)
class Menu:
    """The actions of the controller: action i runs objective `names[i]`."""

    names: tuple[str, ...] = DEFAULT_MENU

    @classmethod
    def of(cls, menu: str | Sequence[str] | Menu | StateConfig) -> Menu:
        if isinstance(menu, Menu):
            return menu
        if isinstance(menu, StateConfig):
            return cls(menu_names(menu.menu))
        return cls(menu_names(menu))

    def __len__(self) -> int:
        return len(self.names)

    @property
    def specs(self) -> tuple[Objective, ...]:
        return tuple(CATALOGUE[n] for n in self.names)

    def index(self, name: str) -> int:
        return self.names.index(name)

    @property
    def tail_first(self) -> int:
        """The action the starvation guard switches to: the menu's tail-first objective."""
        rules = [o.priority_rule for o in self.specs]
        for rule in TAIL_FIRST_RULES:
            if rule in rules:
                return rules.index(rule)
        return len(self.names) - 1

    @property
    def user_first(self) -> int:
        """FCFS-like objective (real schedulers' default), else the last one."""
        rules = [o.priority_rule for o in self.specs]
        return rules.index("FCFS") if "FCFS" in rules else len(self.names) - 1

    @property
    def settings(self) -> tuple[tuple[int, int, bool], ...]:
        """Engine settings per action: (priority rule code, backfilling code, fit-first)."""
        return tuple((policy_code(o.priority_rule), backfill_code(o.backfill), o.fit_now_first) for o in self.specs)

    def meanings(self) -> dict[int, str]:
        """Action index -> description, for the model card and `advise`."""
        return {i: o.describe() for i, o in enumerate(self.specs)}


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
