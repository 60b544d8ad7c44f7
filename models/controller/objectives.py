"""The controller's actions: a menu of objectives the scheduling engine can be switched between.

The action of an epoch is an index into the menu (`StateConfig.menu`, SPEC §7). Each objective
is one of the simulator's (`models.simulator.objectives.CATALOGUE`: a SPEC §6 priority rule with a
backfilling mode); the menu picks them by name, and the as-run history is labelled with the
objective whose ordering best matches the real start order (`models.controller.asrun`), through
the engine's own score function (`sort_keys`). `uw` is the seed's two-objective preset
(U = SJF+EASY, W = FCFS+EASY).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metapilot.models.simulator.objectives import CATALOGUE, Objective, Setting, user_first_index
from metapilot.transforms.state import DEFAULT_MENU, StateConfig

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
        return user_first_index(self.specs)

    @property
    def settings(self) -> tuple[Setting, ...]:
        """Engine settings per action: (priority rule code, backfilling code, fit-first)."""
        return tuple(o.setting for o in self.specs)

    def meanings(self) -> dict[int, str]:
        """Action index -> description, for the model card and `advise`."""
        return {i: o.describe() for i, o in enumerate(self.specs)}
