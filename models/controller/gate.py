"""The publish gate of SPEC §7, and the one score that checkpoint choice and planner tuning share.

A candidate (the learned controller, the planner) passes against the fixed contenders of a
window (the 21 baselines and the menu's objectives held fixed) when none of them is at least as
good on both mean wait and max wait, and its mean bounded slowdown is the lowest. A tie is not a
win: a difference under `SIGNIFICANT_REL` (0.5%, the plain-language verdict's) is a tie, and a tie
goes to the fixed rule, simpler to run. So a candidate must beat every fixed contender by more
than that on mean or max wait, and the best fixed bounded slowdown by more than that too.
(Measured: the controllers that passed the checkpoint weeks by under 0.5% of bounded slowdown,
CEA-Curie-A 6.32 vs 6.34 and the whole CEA-Curie trace 2.42 vs 2.43, lost held out.)

`publish_decision` asks for more than this gate on the checkpoint window: the same gate on the last
training weeks, and off-policy evaluation (FQE) that ranks the controller above the logged
behaviour (issue 11). Each can only refuse more.

`gate_score` ranks candidates the same way on any window: the worst of its distances to the best
fixed mean wait, max wait and mean bounded slowdown (1.0 = as good as the best fixed rule on all
three at once, which no fixed rule is), plus `FAIL` for each gate condition it fails: one that
passes always ranks above one that fails (with a penalty of 1, a failing setting whose max wait
was near the best fixed max outranked passing ones: CEA-Curie-B's tuning kept a teacher that
failed on bounded slowdown over one that passed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from metapilot.ground.units import fmt_duration

SIGNIFICANT_REL = 0.005  # differences under 0.5% are ties in the plain-language verdict
FAIL = 1000.0  # gate_score per failed condition: more than any worst ratio of a real candidate


@dataclass(frozen=True)
class Outcome:
    """What the gate reads of one contender's replay of a window."""

    name: str
    mean_wait_s: float
    max_wait_s: float
    mean_bsld: float

    @classmethod
    def of(cls, name: str, metrics: Mapping[str, float]) -> Outcome:
        """From a `models.simulator.metrics.overall` row (mean_wait, max_wait, mean_bsld). A replay
        that finished no job has no figures: said as such, not as `float(None)` (issue 54)."""
        if any(metrics.get(k) is None for k in ("mean_wait", "max_wait", "mean_bsld")):
            raise ValueError(f"the replay under {name} finished no job, so it has no waits to compare: no job of the "
                             "window fits the cluster's capacity, or none ran (`metapilot simulate` says which)")
        return cls(name, float(metrics["mean_wait"]), float(metrics["max_wait"]), float(metrics["mean_bsld"]))


@dataclass(frozen=True)
class GateVerdict:
    passes: bool
    dominated_by: list[str]
    bsld_ok: bool
    best_mean: Outcome
    best_max: Outcome
    best_bsld: Outcome
    mean_ratio: float  # candidate mean wait / best fixed mean wait
    max_ratio: float  # candidate max wait / best fixed max wait
    bsld_ratio: float  # candidate mean bounded slowdown / best fixed one
    candidate: Outcome
    recommended: Outcome  # the fixed contender to run if the candidate is not published
    reasons: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return gate_score(self)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["score"] = self.score
        return d


def dominates(f: Outcome, c: Outcome) -> bool:
    """`f` is at least as good as `c` on both mean and max wait (ties count for the fixed rule)."""
    return not better(c.mean_wait_s, f.mean_wait_s) and not better(c.max_wait_s, f.max_wait_s)


def better(a: float, b: float) -> bool:
    """Lower-is-better `a` beats `b` by more than a tie (`SIGNIFICANT_REL`)."""
    return a * (1.0 + SIGNIFICANT_REL) < b


def gate(candidate: Outcome, fixed: Iterable[Outcome]) -> GateVerdict:
    """The publish gate of `candidate` against the fixed contenders of the same window."""
    fixed = list(fixed)
    if not fixed:
        raise ValueError("the gate needs at least one fixed contender")
    best_mean = min(fixed, key=lambda o: o.mean_wait_s)
    best_max = min(fixed, key=lambda o: o.max_wait_s)
    best_bsld = min(fixed, key=lambda o: o.mean_bsld)
    dom = [f.name for f in fixed if dominates(f, candidate)]
    bsld_ok = better(candidate.mean_bsld, best_bsld.mean_bsld)
    reasons = []
    if dom:
        reasons.append(f"dominated on (mean wait, max wait) by {', '.join(dom[:3])}{' ...' if len(dom) > 3 else ''}")
    if not bsld_ok:
        if candidate.mean_bsld > best_bsld.mean_bsld:
            reasons.append(f"mean bounded slowdown {candidate.mean_bsld:.2f} > {best_bsld.mean_bsld:.2f} ({best_bsld.name})")
        else:
            reasons.append(f"mean bounded slowdown {candidate.mean_bsld:.3f} only ties {best_bsld.mean_bsld:.3f} "
                           f"({best_bsld.name}; a lead under {SIGNIFICANT_REL:.1%} is a tie)")
    return GateVerdict(
        passes=not dom and bsld_ok, dominated_by=dom, bsld_ok=bsld_ok, best_mean=best_mean, best_max=best_max,
        best_bsld=best_bsld, mean_ratio=_ratio(candidate.mean_wait_s, best_mean.mean_wait_s),
        max_ratio=_ratio(candidate.max_wait_s, best_max.max_wait_s),
        bsld_ratio=_ratio(candidate.mean_bsld, best_bsld.mean_bsld), candidate=candidate,
        recommended=best_fixed(fixed) if len(fixed) > 1 else fixed[0], reasons=reasons,
    )


def gate_score(v: GateVerdict) -> float:
    """Lower is better (see the module docstring)."""
    worst = min(max(v.mean_ratio, v.max_ratio, v.bsld_ratio), FAIL - 1.0)
    return worst + FAIL * ((1.0 if v.dominated_by else 0.0) + (0.0 if v.bsld_ok else 1.0))


def best_fixed(fixed: Iterable[Outcome]) -> Outcome:
    """The fixed contender to recommend when no controller passes: the one the gate itself ranks
    first, the lowest mean bounded slowdown among those no other one dominates on (mean, max) wait.

    Not the one closest to the best mean, max and slowdown at once (the rule before): a maximum is
    one job's wait, and the rule of the lowest one changes from window to window. On 7 KTH-SP2 and
    CEA-Curie windows that choice recommended LAF+CONSERVATIVE and UNICEF+EASY, whose bounded
    slowdown on the next weeks was 19.6 and 8.4 times the best fixed rule's; this one's was at most
    2.0 times (1.2 on average), at a max wait 1.6-11.7 times the best there (docs/benchmarks.md)."""
    fixed = list(fixed)

    def key(o: Outcome) -> tuple:
        dominated = any(f.mean_wait_s <= o.mean_wait_s and f.max_wait_s <= o.max_wait_s  # exactly: among rules
                        and (f.mean_wait_s, f.max_wait_s) != (o.mean_wait_s, o.max_wait_s) for f in fixed)
        return (dominated, o.mean_bsld, o.mean_wait_s, o.name)

    return min(fixed, key=key)


def behaviour_value(ope: Mapping | None) -> float | None:
    """The logged behaviour's value in the card's off-policy evaluation: the FQE value of its
    behaviour-cloning policy (the same estimator as the chosen policy's), else the behaviour's own
    discounted return; None when the card has neither."""
    ope = ope or {}
    bc = (ope.get("baselines") or {}).get("bc") or {}
    return bc.get("fqe_value") if bc.get("fqe_value") is not None else ope.get("behaviour_mc_return")


def ope_says_better(ope: Mapping | None) -> tuple[bool, str]:
    """Issue 11: off-policy evaluation must rank the chosen policy above the logged behaviour; a
    card without both values does not pass. Returns (passes, the comparison in words)."""
    chosen = ((ope or {}).get("chosen") or {}).get("fqe_value")
    behaviour = behaviour_value(ope)
    if chosen is None or behaviour is None:
        return False, "off-policy evaluation (FQE) has no value for it or for the logged behaviour"
    words = f"off-policy evaluation (FQE) values it at {chosen:.2f} against the logged behaviour's {behaviour:.2f}"
    return chosen > behaviour, words


def publish_decision(gate_doc: dict | None, training_doc: dict | None = None,
                     ope: Mapping | None = None) -> tuple[str, str | None, str]:
    """What the publish step does with a controller whose card holds `gate_doc` (a
    `GateVerdict.to_dict()` from the checkpoint window), `training_doc` (the same on the last
    training weeks) and `ope` (its off-policy evaluation): ('controller', None, message) when it
    passed on both windows and FQE ranks it above the logged behaviour, else ('fixed', the
    recommended fixed contender, a message that says why in words). A card without `training_doc`
    (written before that check) is not published on its checkpoint window alone."""
    if not gate_doc:
        return "fixed", None, ("Not published: the controller was not checked on a checkpoint window "
                               "(no data after its training window), so keep the scheduler's current policy")
    cand = Outcome(**gate_doc["candidate"])
    rec = Outcome(**gate_doc["recommended"])
    if gate_doc["passes"] and training_doc is None:
        return "fixed", rec.name, (
            f"Keep {display_name(rec.name)}: the learned controller leads on its checkpoint window (mean bounded "
            f"slowdown {cand.mean_bsld:.2f} against {gate_doc['best_bsld']['mean_bsld']:.2f}) but was not checked on "
            f"the training weeks before it (its model card predates that check); train it again with `metapilot "
            f"pipeline` or `metapilot train` to check it")
    if gate_doc["passes"] and not training_doc["passes"]:
        reasons = "; ".join(training_doc.get("reasons") or [])
        return "fixed", rec.name, (
            f"Keep {display_name(rec.name)}: the learned controller leads on its checkpoint window (mean bounded "
            f"slowdown {cand.mean_bsld:.2f} against {gate_doc['best_bsld']['mean_bsld']:.2f}) but not on the training "
            f"weeks before it ({reasons}); a lead on one window only is not trusted")
    if gate_doc["passes"]:
        best = gate_doc["best_bsld"]
        lead = 1.0 - cand.mean_bsld / best["mean_bsld"]
        ope_ok, ope_words = ope_says_better(ope)
        if not ope_ok:
            return "fixed", rec.name, (
                f"Keep {display_name(rec.name)}: the learned controller leads on its checkpoint window (mean bounded "
                f"slowdown {cand.mean_bsld:.2f} against {best['mean_bsld']:.2f}) and on the training weeks before it, "
                f"but {ope_words}; the replays and the off-policy estimate must agree before it runs")
        return "controller", None, (
            f"Run the MetaPilot controller: on its checkpoint window no fixed rule beats it on both mean and max "
            f"wait, and its mean bounded slowdown {cand.mean_bsld:.2f} is the lowest, {lead:.1%} below the best fixed "
            f"({best['name']} {best['mean_bsld']:.2f})")
    if cand.max_wait_s == 0 and gate_doc["best_max"]["max_wait_s"] == 0:
        return "fixed", None, ("Keep the scheduler's current policy: on the checkpoint window no job waited, under the "
                               "controller or the fixed rules, so no policy can do better (the cluster was not busy "
                               "enough to learn from)")
    worse = in_words(cand, rec)
    if worse:
        return "fixed", rec.name, f"Keep {display_name(rec.name)}: the learned controller is {', '.join(worse)}"
    # not worse than the recommendation itself: say which condition of the gate it failed
    reasons = "; ".join(gate_doc.get("reasons") or []) or "it is better on no measure"
    return "fixed", rec.name, f"Keep {display_name(rec.name)}: the learned controller fails the publish gate ({reasons})"


def display_name(name: str) -> str:
    """'SAF+easy' -> 'SAF+EASY' (how operators write a policy)."""
    rule, _, backfill = name.partition("+")
    return f"{rule}+{backfill.upper()}" if backfill else name


def _ratio(x: float, best: float) -> float:
    return x / best if best > 0 else (1.0 if x <= 0 else float("inf"))


def in_words(candidate: Outcome, reference: Outcome) -> list[str]:
    """Where the candidate is worse than the reference, in words with units ('+13.6 min')."""
    out = []
    for label, a, b, unit in (("mean wait", candidate.mean_wait_s, reference.mean_wait_s, "s"),
                              ("max wait", candidate.max_wait_s, reference.max_wait_s, "s"),
                              ("mean bounded slowdown", candidate.mean_bsld, reference.mean_bsld, "1")):
        if better(b, a):  # worse by more than a tie
            out.append(f"worse on {label} ({'+' + fmt_duration(a - b) if unit == 's' else _apart(a, b)})")
    return out


def _apart(a: float, b: float) -> str:
    """'2.04 vs 1.98': as many decimals (1 to 3) as it takes to tell the two apart."""
    for d in (1, 2, 3):
        if f"{a:.{d}f}" != f"{b:.{d}f}":
            break
    return f"{a:.{d}f} vs {b:.{d}f}"


