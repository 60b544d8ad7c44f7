"""A contender: one way the cluster could have been run over the same jobs, replayed to be compared
with the others, in the walk forward (`walk_forward.compare`) and on a held-out window
(`heldout.figures_of`) alike; and every kind of contender, in one list, with what each means.

The kinds are the words the warehouse stores (`backtests.kind`, `heldout_replays.kind`) and the SQL
in sql/ reads, so they are kept as they were: the held-out tables name three kinds by older words
('baseline', 'history', 'bound'), said below next to the walk forward's word for the same thing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metapilot.models.simulator.result import SimResult

KINDS: dict[str, str] = {
    # the walk forward (`backtests`), in the order its tables are shown
    "metapilot": "MetaPilot's decision each period (a guarded rule, the planner or the controller), followed",
    "current": "the site's rule today, held throughout: the reference for gains and for 'starves no one more'",
    "guarded-leader": "at each origin, the best guarded rule over the past among those that starve no one more",
    "leader": "at each origin, the rule with the lowest bounded slowdown over all the past",
    "planner": "the lookahead planner with the settings tuned on the past (held out: also its tuning's guarded rule)",
    "oracle": "the planner that sees the true future: a bound, never a decision",
    "as-run": "the logged starts of the same jobs",
    "fixed": "one of the 21 rules, held throughout",
    # a held-out window (`heldout_replays`)
    "controller": "the learned controller alone, its objective switched each epoch",
    "objective": "one objective of the controller's menu, held throughout",
    "baseline": "one of the 21 rules, held throughout: the held-out tables' word for 'fixed'",
    "history": "the logged starts of the same jobs: the held-out tables' word for 'as-run'",
    "bound": "the planner that sees the true future: the held-out tables' word for 'oracle'",
}
WALK_FORWARD_KINDS: tuple[str, ...] = ("metapilot", "current", "guarded-leader", "leader", "planner", "oracle",
                                       "as-run", "fixed")
HELDOUT_KINDS: tuple[str, ...] = ("controller", "objective", "baseline", "history", "planner", "bound")


@dataclass(frozen=True)
class Contender:
    """A named replay of one kind (`KINDS`); `result` None: it could not be replayed, `note` says why."""

    name: str
    kind: str
    result: SimResult | None
    note: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown contender kind {self.kind!r}; known: {', '.join(KINDS)}")
