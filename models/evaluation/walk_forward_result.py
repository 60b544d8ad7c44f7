"""What a walk forward returns (`backtest.run_backtest`): typed, so that the layer that builds it and
the layers that read it (the flows, `metapilot backtest`, `pipeline --backtest`, the benches) share
one definition; `to_json` is the file `metapilot backtest --json` writes, field for field."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

from metapilot.models.simulator.rules import Decision


def json_safe(v: Any) -> Any:
    """A figure that does not exist is null, never NaN or infinity (which are not JSON)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    return [json_safe(x) for x in v] if isinstance(v, (list, tuple)) else v


@dataclass(frozen=True)
class ContenderFigures:
    """One contender's figures over the span (a `walk_forward.compare` span row); a figure that does
    not exist is None. Every field is a key of the JSON's `contenders`, in this order."""

    name: str
    kind: str
    wait_mean_s: float | None = None
    wait_p95_s: float | None = None
    wait_p99_s: float | None = None
    wait_max_s: float | None = None
    bsld_mean: float | None = None
    bsld_mean_1min: float | None = None
    util_cpu_backlog: float | None = None
    gain_wait_mean: float | None = None
    gain_bsld: float | None = None
    regret_bsld: float | None = None
    regret_bsld_ci: list | None = None
    regret_wait_mean: float | None = None
    regret_wait_mean_ci: list | None = None
    regret_bsld_any: float | None = None
    regret_wait_mean_any: float | None = None
    admissible: bool | None = None
    worst_user_wait_s: float | None = None
    worst_account_wait_s: float | None = None
    jain_users: float | None = None
    note: str | None = None

    @classmethod
    def of(cls, row: dict) -> ContenderFigures:
        return cls(**{f.name: json_safe(row.get(f.name)) for f in fields(cls)})

    @property
    def replayed(self) -> bool:
        return self.wait_mean_s is not None

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


JSON_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ContenderFigures))


@dataclass(frozen=True)
class Bar:
    """Issue 38's bar for MetaPilot (`walk_forward.bar_verdict`): met, and each condition; None where
    it was not judged (MetaPilot not replayed). `why`: what the verdict means, when it needs saying."""

    met: bool
    beats_current: bool | None = None
    not_dominated: bool | None = None
    dominated_by: tuple[str, ...] | None = None
    regret_within_5pct: bool | None = None
    starves_no_one_more: bool | None = None
    why: str | None = None

    @classmethod
    def of(cls, verdict: dict) -> Bar:
        dom = verdict.get("dominated_by")
        return cls(**{**verdict, "dominated_by": None if dom is None else tuple(dom)})

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name == "met" or getattr(self, f.name) is not None}
        if self.dominated_by is not None:
            out["dominated_by"] = list(self.dominated_by)
        return out


@dataclass(frozen=True)
class Period:
    """One period of the walk forward: MetaPilot's decision from its origin to the next, why (in the
    decision's `source`), and what the past and the fold said at the origin."""

    start: datetime
    end: datetime
    decision: Decision
    leader: str
    guarded_leader: Decision
    fold_gate: str
    fold_policy_id: str | None
    fidelity: dict | None

    def to_json(self) -> dict:
        return {"from": self.start.isoformat(), "to": self.end.isoformat(), "decision": self.decision.describe(),
                "why": self.decision.source, "leader": self.leader, "guarded_leader": self.guarded_leader.describe(),
                "fold_gate": self.fold_gate, "fold_policy_id": self.fold_policy_id,
                "fidelity": json_safe(self.fidelity)}


@dataclass(frozen=True)
class Record:
    """What following MetaPilot did over the span, as a published decision's reason: its regret (and
    interval) against the admissible reference, its gain over the current rule, its max wait against
    the current rule's, the bar's verdict, and `words`, the same in one line. `span_from`: the
    replay's time zero."""

    reference: str | None
    current: str
    bar_met: bool
    regret_bsld: float | None
    regret_bsld_ci: list | None
    regret_wait_mean: float | None
    regret_wait_mean_ci: list | None
    gain_bsld: float | None
    gain_wait_mean: float | None
    max_wait_ratio: float | None
    words: str
    span_from: datetime

    @classmethod
    def of(cls, contenders: Sequence[ContenderFigures], current: str, reference: str | None, bar: Bar,
           span_from: datetime) -> Record:
        rows = {c.name: c for c in contenders}
        none = ContenderFigures("", "fixed")
        me, cur = rows.get("MetaPilot", none), rows.get(f"{current} (current)", none)
        ratio = (me.wait_max_s / cur.wait_max_s) if me.wait_max_s is not None and cur.wait_max_s else None

        def pct(v, ci=None) -> str:
            if v is None:
                return "–"
            band = f" [{ci[0]:+.1%}, {ci[1]:+.1%}]" if ci and None not in ci else ""
            return f"{v:+.1%}{band}"

        words = (f"followed over the walk forward: regret against {reference or 'the reference'} (best admissible "
                 f"rule in hindsight) bsld {pct(me.regret_bsld, me.regret_bsld_ci)}, mean wait "
                 f"{pct(me.regret_wait_mean, me.regret_wait_mean_ci)}; gain over {current}: bsld "
                 f"{pct(me.gain_bsld)}, mean wait {pct(me.gain_wait_mean)}; max wait "
                 f"{'–' if ratio is None else f'{ratio:.2f}x'} the current rule's; bar "
                 f"{'met' if bar.met else 'not met'}")
        return cls(reference, current, bool(bar.met), me.regret_bsld, me.regret_bsld_ci, me.regret_wait_mean,
                   me.regret_wait_mean_ci, me.gain_bsld, me.gain_wait_mean, ratio, words, span_from)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["span_from"] = self.span_from.isoformat()
        return out


@dataclass(frozen=True)
class NextDecision:
    """The decision for the period after the span, from all the past (what `pipeline --backtest` and
    the monthly deployment publish), with the walk-forward record behind it."""

    decision: Decision
    decided_at: datetime
    backtest_id: str
    record: Record

    def to_json(self) -> dict:
        """The published decision's fields (`warehouse.publish_store.publish_walk_forward` reads them)."""
        return {**json_safe(self.decision.to_dict()), "decision": self.decision.describe(),
                "decided_at": self.decided_at.isoformat(), "backtest_id": self.backtest_id,
                "record": self.record.to_json()}


@dataclass(frozen=True)
class WalkForwardResult:
    """A walk forward over [span_from, span_to) on one cluster, as stored under `backtest_id`: the bar
    against `reference` (the best admissible fixed rule in hindsight; `reference_any`: the best
    overall), every period's decision, every contender's figures, the decision for the next period
    (None when there is none) and where the folds' warehouses are (`folds`, set by the flow)."""

    backtest_id: str
    cluster: str
    span_from: datetime
    span_to: datetime
    current: str
    reference: str | None
    reference_any: str | None
    bar: Bar
    periods: tuple[Period, ...]
    contenders: tuple[ContenderFigures, ...]
    next: NextDecision | None = None
    folds: str | None = None
    # with the site's slurm.conf (`--current-conf`): its Slurm's replay of the span against the as-run
    # history (`choice.Fidelity.to_dict()`: mean, p95 and max wait, share that waited, Kendall's tau)
    site_fidelity: dict | None = None

    def contender(self, name: str) -> ContenderFigures | None:
        return next((c for c in self.contenders if c.name == name), None)

    def with_folds(self, folds: str) -> WalkForwardResult:
        return replace(self, folds=folds)

    def to_json(self) -> dict:
        """The file `metapilot backtest --json` writes (the keys read by tests, benches and operators)."""
        out = {"backtest_id": self.backtest_id, "cluster": self.cluster,
               "span": [self.span_from.isoformat(), self.span_to.isoformat()], "current": self.current,
               "reference": self.reference, "reference_any": self.reference_any, "bar": self.bar.to_json(),
               "periods": [p.to_json() for p in self.periods], "contenders": [c.to_json() for c in self.contenders],
               "site_fidelity": self.site_fidelity,
               "next": self.next.to_json() if self.next else None}
        if self.folds is not None:
            out["folds"] = self.folds
        return json_safe(out)
