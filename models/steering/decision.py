"""Which decision to export or steer by: the published one (what the monthly retrain recorded) or a
rule named by hand, and whether a person approved it (publishing is not deploying, SPEC §12)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import duckdb

from metapilot.models.simulator.rules import TAIL_RULE, guard_fires, parse_rule, rule_name
from metapilot.warehouse.publish_store import latest_decision
from metapilot.warehouse.steer_store import latest_approval


class DecisionError(ValueError):
    """No decision to follow, or one not approved: the message says what to run."""


@dataclass(frozen=True)
class SteerDecision:
    """What to steer by: a fixed rule (`rule`, e.g. 'SAF+EASY') or the published controller."""

    kind: str  # fixed | controller | planner
    label: str  # 'SAF+EASY', 'controller <policy_id>' or 'planner'
    rule: str | None = None
    policy_id: str | None = None
    published_at: datetime | None = None
    source: str = ""
    guard_h: float | None = None  # the walk forward's tail guard: oldest first once a job has waited this long
    planner: dict | None = None  # the planner's settings (`PlannerConfig` fields) when kind is 'planner'
    backtest_id: str | None = None  # the walk forward whose record backs the decision
    origin_s: float | None = None  # the instant F1 counts from: the backing walk forward's span start (epoch s)
    _live: object = field(default=None, repr=False, compare=False)  # a planner decision's planner, across cycles

    def objective(self, oldest_wait_s: float) -> str | None:
        """The priority rule of this cycle for a fixed rule: its own, or oldest first while the tail
        guard fires (a pending job has waited more than `guard_h`), exactly as the replay engine
        orders the queue under the same decision (`walk_forward.RuleDecider`: TAIL_RULE)."""
        if self.kind != "fixed":
            return None
        if guard_fires(oldest_wait_s, self.guard_h):
            return parse_rule(TAIL_RULE)[0]
        return self.priority_rule

    def planner_objective(self, jobs, nodes, now_s: float, oldest_wait_s: float) -> str:  # noqa: ANN001 - frames
        """This cycle's objective for a planner decision: the walk forward's guard over it (oldest first
        past `guard_h`, as `PolicyDecider`), else the planner's pick from the live queue."""
        if guard_fires(oldest_wait_s, self.guard_h):
            return parse_rule(TAIL_RULE)[0]
        if self._live is None:
            from metapilot.models.steering.live_planner import LivePlanner

            object.__setattr__(self, "_live", LivePlanner(self.planner or {}, origin_s=self.origin_s))
        return self._live.decide(jobs, nodes, now_s)

    @property
    def priority_rule(self) -> str | None:
        return parse_rule(self.rule)[0] if self.rule else None

    @property
    def backfill(self) -> str:
        return parse_rule(self.rule)[1] if self.rule else "easy"


def named_rule(text: str) -> SteerDecision:
    """A rule given by hand ('saf+easy', 'SJF'): the person naming it is its approval."""
    try:
        pol, bf = parse_rule(text)
    except ValueError as e:
        raise DecisionError(str(e)) from None
    name = rule_name(pol, bf)
    return SteerDecision("fixed", name, rule=name, source=f"the rule {name}, named with --policy/--decision")


FUTURE_TOLERANCE = timedelta(minutes=5)  # clocks of the publishing and the steering host may differ a little
STALE_AFTER = timedelta(days=45)  # the monthly retrain publishes every month: older means it stopped


def published(con: duckdb.DuckDBPyConnection, cluster: str, now: datetime | None = None) -> SteerDecision:
    """The cluster's latest publish decision (the last written); refused when it is stamped in the
    future, which only a clock set wrong makes."""
    d = latest_decision(con, cluster)
    if d is None:
        raise DecisionError(f"no publish decision for {cluster} yet: run `metapilot pipeline --cluster {cluster}`, "
                            "or name a rule (e.g. --policy SAF+EASY)")
    at = d["published_at"]
    now = now or datetime.now(timezone.utc)
    if at is not None and at > now + FUTURE_TOLERANCE:
        raise DecisionError(f"the latest publish decision for {cluster} is stamped {at:%Y-%m-%d %H:%M} UTC, after this "
                            f"host's clock ({now:%Y-%m-%d %H:%M} UTC): a clock is wrong; fix it and publish again, or "
                            "name a rule with --policy")
    backed = d.get("record") or {}
    origin = datetime.fromisoformat(backed["span_from"]).timestamp() if backed.get("span_from") else None
    source = f"published {at:%Y-%m-%d %H:%M} UTC: {d['message'] or d['recommendation']}" if at else ""
    if d["kind"] == "planner":
        return SteerDecision("planner", "planner", published_at=at, source=source, guard_h=d.get("guard_h"),
                             planner=d.get("planner"), backtest_id=d.get("backtest_id"), origin_s=origin)
    if d["kind"] == "controller":
        return SteerDecision("controller", f"controller {d['policy_id']}", policy_id=d["policy_id"], published_at=at,
                             source=f"published {at:%Y-%m-%d %H:%M} UTC: {d['message'] or d['recommendation']}")
    try:
        pol, bf = parse_rule(d["recommendation"] or "")
    except ValueError:
        raise DecisionError(f"the published decision for {cluster} names no rule to run ({d['recommendation']!r}): "
                            "keep the scheduler as it is, or name a rule") from None
    name = rule_name(pol, bf)
    return SteerDecision("fixed", name, rule=name, published_at=at,
                         source=f"published {at:%Y-%m-%d %H:%M} UTC: {d['message'] or name}",
                         guard_h=d.get("guard_h"), backtest_id=d.get("backtest_id") if backed else None,
                         origin_s=origin)


def resolve(con: duckdb.DuckDBPyConnection, cluster: str, spec: str) -> SteerDecision:
    """'published' or a rule's name."""
    return published(con, cluster) if spec.strip().lower() == "published" else named_rule(spec)


def require_approval(con: duckdb.DuckDBPyConnection, cluster: str, decision: SteerDecision) -> dict:
    """The approval of a published decision, or DecisionError saying how to approve it. A rule
    named by hand needs none (naming it is the act)."""
    if decision.published_at is None:
        return {"approved_by": "named on the command line", "approved_at": None}
    a = latest_approval(con, cluster)
    if a is None or a["decision"] != decision.label or a["published_at"] != decision.published_at:
        seen = f" (the latest approval is of {a['decision']}, by {a['approved_by']})" if a else ""
        when = f"{decision.published_at:%Y-%m-%d %H:%M}"
        raise DecisionError(f"the published decision for {cluster} ({decision.label}, {when} UTC) is not "
                            f"approved{seen}: a person runs `metapilot approve --cluster {cluster}` "
                            "first, or name a rule with --policy")
    return a


def decision_age(decision: SteerDecision, now: datetime | None = None, max_age: timedelta | None = None) -> str | None:
    """A warning when the published decision is older than STALE_AFTER (the monthly retrain stopped?);
    DecisionError when older than `max_age`. None for a fresh decision or a rule named by hand."""
    if decision.published_at is None:
        return None
    age = (now or datetime.now(timezone.utc)) - decision.published_at
    days = age.total_seconds() / 86400
    if max_age is not None and age > max_age:
        raise DecisionError(f"the published decision ({decision.label}) is {days:.0f} days old, beyond --max-age "
                            f"({max_age.total_seconds() / 86400:g} days): publish a new one (`metapilot pipeline`) or "
                            "name a rule with --policy")
    if age > STALE_AFTER:
        return (f"warning: the published decision ({decision.label}) is {days:.0f} days old: the monthly retrain may "
                "have stopped (--max-age refuses a decision that old)")
    return None
