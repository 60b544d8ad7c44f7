"""The fixed rules and the decision that names one (SPEC §6, §7; issue 50): one catalogue, one
spelling, one parser, one tail guard, for the engine, the planner, the walk forward, `export` and
`steer` alike.

A *rule* is a priority rule with its backfilling mode, spelled as an operator names it ('SAF+EASY');
there are 21 (seven priority rules x three modes). A *policy* is only ever a learned one (the
controller's), a *baseline* only an offline-RL baseline (BC, DQN, BCQ). The *tail guard* of a
decision runs `TAIL_RULE` (oldest first) for the whole queue while the oldest queued job has waited
more than the guard: `guard_fires` is the one test of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from metapilot.models.simulator.engine import BACKFILL_CODES, backfill_code
from metapilot.models.simulator.objectives import Setting
from metapilot.models.simulator.policies import POLICIES, policy_code

BACKFILLS: tuple[str, ...] = tuple(BACKFILL_CODES)
# The 21 rules as (priority rule, backfilling mode): seven priority rules x three modes.
RULE_PAIRS: tuple[tuple[str, str], ...] = tuple((p, b) for b in BACKFILLS for p in POLICIES)
TAIL_RULE = "FCFS+EASY"  # what the guard runs while the oldest job has waited too long: oldest first


def rule_name(policy: str, backfill: str) -> str:
    """'SAF', 'easy' -> 'SAF+EASY' (how an operator names a fixed rule)."""
    return f"{policy}+{backfill.upper()}"


RULES: tuple[str, ...] = tuple(rule_name(p, b) for p, b in RULE_PAIRS)


def parse_rule(name: str) -> tuple[str, str]:
    """'saf+easy' -> ('SAF', 'easy'); refuses a name that is not one of the 21 fixed rules."""
    pol, sep, bf = name.strip().partition("+")
    canon = rule_name(pol.upper(), (bf or "easy").lower()) if sep or pol else ""
    if canon not in RULES:
        raise ValueError(f"unknown rule {name!r}: one of {', '.join(RULES)}")
    return pol.upper(), (bf or "easy").lower()


def rule_setting(name: str) -> Setting:
    """A rule as the engine's setting (priority code, backfilling code, fit-first)."""
    pol, bf = parse_rule(name)
    return (policy_code(pol), backfill_code(bf), False)


def guard_fires(oldest_wait_s: float, guard_h: float | None) -> bool:
    """Whether a tail guard of `guard_h` hours runs `TAIL_RULE` now: the oldest queued job (its wait
    `oldest_wait_s`) has waited more than the guard. None: no guard."""
    return guard_h is not None and oldest_wait_s > guard_h * 3600.0


@dataclass(frozen=True)
class Decision:
    """What to run for a period, whatever its kind: a fixed rule; the lookahead planner with its
    settings (`planner_settings`, `PlannerConfig` fields; `planner`: the same in words); or the learned
    controller (`policy_id`); each with the tail guard (`guard_h`: None for none). `source` says where
    it came from, in words; `guard_fired`: the epochs its guard fired over the past (0: a safety net
    never exercised)."""

    rule: str
    guard_h: float | None = None
    policy_id: str | None = None
    source: str = ""
    planner: str | None = None
    guard_fired: int | None = None
    planner_settings: dict | None = None

    @property
    def kind(self) -> str:
        """'controller', 'planner' or 'rule'."""
        return "controller" if self.policy_id else "planner" if self.planner_settings or self.planner else "rule"

    def describe(self) -> str:
        what = (f"the learned controller {self.policy_id}" if self.policy_id else
                f"the lookahead planner ({self.planner})" if self.planner else self.rule)
        guard = f", oldest first once a job has waited {self.guard_h:g} h" if self.guard_h else ""
        if guard and self.guard_fired == 0:
            guard += " (a safety net: it never fired over the past)"
        return f"{what}{guard}"

    def to_dict(self) -> dict:
        return asdict(self)
