"""Running a walk forward on the warehouse: the decisions of every fold followed over the span,
against every contender, stored (`backtests`, `backtest_periods`). The folds' learning itself runs
in `flows/backtest.py` (the same stages as `pipeline`, on the past of each origin only); this module
receives what each fold decided and judges it (`models.evaluation.walk_forward`).

MetaPilot's decision for a period (issue 38 item 5, chosen on the walk forward's evidence), in order:
1. the learned controller when the fold's publish gate keeps it, with the tail guard of the guarded
   leader layered over it;
2. the lookahead planner the fold tuned on its past (deployable, SPEC §7), when the walk-forward
   record up to the origin prefers it: followed since the span's start, it starved no one more than
   the current rule and was ahead of the guarded leader on both mean bounded slowdown and mean wait
   (`walk_forward.observed_by`: only what had happened by the origin, queued jobs counted with the
   wait they had had; SPEC §7 lets the gate use this record, which is past data at t_k);
3. otherwise the guarded leader's rule and threshold, chosen on *all* the past (the evidence: a
   rule chosen on two checkpoint weeks carries over badly, a mean over a longer past carries over),
   never the checkpoint weeks' recommendation alone. The first period has no record: 1 or 3.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import polars as pl

from metapilot.models.evaluation.choice import (
    Choice,
    Past,
    Recheck,
    choose_guarded,
    stay_with,
    choose_leader,
    fidelity,
    guard_thresholds_h,
    recent_tail,
    record_prefers,
)
from metapilot.models.evaluation.contender import Contender
from metapilot.models.evaluation.walk_forward import (
    GUARDED_RULES,
    Figures,
    PolicyDecider,
    RuleDecider,
    bar_verdict,
    compare,
    follow,
    jobs_between,
    observed_by,
)
from metapilot.models.evaluation.walk_forward_result import (
    Bar,
    ContenderFigures,
    NextDecision,
    Period,
    Record,
    WalkForwardResult,
)
from metapilot.ground.pool import process_map
from metapilot.models.simulator import Capacity, simulate
from metapilot.models.simulator.metrics import job_frame
from metapilot.models.simulator.rules import RULES, Decision, parse_rule, rule_name
from metapilot.transforms.workload import Workload

EPOCH_S = 3600


@dataclass(frozen=True)
class Fold:
    """What the learning at one origin produced: the trained policy and the gate's verdict on it
    (`gate`: controller | fixed | failed), in words in `note`."""

    origin: datetime
    policy_id: str | None = None
    gate: str = "failed"
    note: str = ""
    db: str | None = None  # the fold's own warehouse, where its policy and replays are

    def to_dict(self) -> dict:
        return {"origin": self.origin.isoformat(), "policy_id": self.policy_id, "gate": self.gate, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict, db: str | None) -> Fold:
        return cls(datetime.fromisoformat(d["origin"]), d.get("policy_id"), d["gate"], d.get("note") or "", db)


def new_backtest_id() -> str:
    return f"bt-{datetime.now(timezone.utc):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class PastChoice:
    """What the past up to one origin says: follow-the-leader's rule, the guarded leader's choice (the
    current rule when it keeps), the safety guard any other decision carries, and the fidelity of the
    replay (None where the log records no start times)."""

    leader: str
    guarded: str
    guard_h: float | None
    why: str = ""
    fired: int | None = None
    safety_h: float | None = None
    fidelity: dict | None = None
    pasts: tuple | None = None  # (the candidates' replays of the past, the current rule's): for `stay_with`

    @property
    def faithful(self) -> bool:
        """The replay reproduces the cluster closely enough for its advice to count."""
        return not (self.fidelity or {}).get("far", False)


def past_choice(workload: Workload, capacity: Capacity, current: str, span_s: float | None = None,
                asrun: pl.DataFrame | None = None, conf: Any = None) -> PastChoice:
    """Replay the past (every job submitted before the origin, from an empty machine; `span_s`: the
    origin, in seconds since the past's start) under the 21 fixed rules and the guarded ones, check
    the current rule's replay against the as-run history (`asrun`: its job frame), and choose as
    follow-the-leader and the guarded leader do (`choice.choose_guarded`). With the site's slurm.conf
    (`conf`, issue 51) the past is replayed on its Slurm: the current rule is its multifactor (keeping
    it is `current`, by name), the rules are their seven orders ('X+EASY') under Slurm's backfill, each
    guard the kernel's own."""
    if len(workload) == 0:
        return PastChoice(current, current, None, "keep: no job in the past")
    span_s = float(span_s if span_s is not None else np.nanmax(workload.submit) + 1.0)
    frames: dict[str, pl.DataFrame] = {}
    if conf is None:
        for r in RULES:
            pol, bf = parse_rule(r)
            frames[r] = jobs_between(simulate(workload, capacity, pol, bf), -np.inf, np.inf)
    else:
        from metapilot.models.simulator.slurm import simulate_slurm

        for r in RULES:
            pol, bf = parse_rule(r)
            if bf == "easy":
                frames[r] = jobs_between(simulate_slurm(workload, conf, pol), -np.inf, np.inf)
    figs = {r: Figures.of(f) for r, f in frames.items()}
    leader = choose_leader(figs)
    if conf is not None:  # the site's own configuration is what keeping means there
        frames[current] = jobs_between(simulate_slurm(workload, conf, "multifactor"), -np.inf, np.inf)
    thresholds = guard_thresholds_h(recent_tail(frames[current], span_s))
    fid = fidelity(frames[current], asrun) if asrun is not None else None
    fid_d = fid.to_dict() if fid is not None else None
    if fid is not None and fid.far:
        return PastChoice(leader, current, None, f"keep: the replay does not reproduce this cluster ({fid.words()})",
                          safety_h=thresholds[-1], fidelity=fid_d)
    now = Past.of(frames[current], span_s)
    candidates: dict[tuple[str, float | None], Past] = {}
    for r in GUARDED_RULES:
        unguarded: Past | None = None  # the rule's own replay, where a guard never fires
        for h in thresholds:
            if figs[r].wait_max_s <= h * 3600.0:  # no job ever waits that long: the guard never fires
                unguarded = unguarded or Past.of(frames[r], span_s, fired=0)
                candidates[(r, h)] = unguarded
                continue
            if conf is not None:  # the guard in Slurm's replay (how often it fired is not counted there)
                res = simulate_slurm(workload, conf, parse_rule(r)[0], guard_h=h)
                candidates[(r, h)] = Past.of(jobs_between(res, -np.inf, np.inf), span_s)
                continue
            guarded = RuleDecider(r, h)
            res = follow(workload, capacity, [(0.0, guarded)], epoch_s=EPOCH_S)
            candidates[(r, h)] = Past.of(jobs_between(res, -np.inf, np.inf), span_s, fired=guarded.fired)
    c: Choice = choose_guarded(candidates, now, current)
    if conf is not None:  # keeping, on a Slurm site, is keeping its own configuration
        c = replace(c, why=c.why.replace(current, SITE_WORDS))
    return PastChoice(leader, c.rule, c.guard_h, c.why, c.fired, thresholds[-1], fid_d, (candidates, now))


def hold_course(choices: Sequence[PastChoice], current: str) -> list[PastChoice]:
    """The guarded leader's choices in time order, each moving from the rule the one before chose
    only on a material lead over it (`choice.stay_with`)."""
    out: list[PastChoice] = []
    for c in choices:
        if out and c.pasts is not None and c.faithful:
            s = stay_with(out[-1].guarded, Choice(c.guarded, c.guard_h, c.why, c.fired), *c.pasts, current)
            c = replace(c, guarded=s.rule, guard_h=s.guard_h, why=s.why, fired=s.fired)
        out.append(c)
    return out


def _controller_decider(loaded: Any, guard_h: float | None) -> PolicyDecider:
    """The learned controller at each boundary, reading the state it was trained on."""
    from metapilot.models.controller.lookahead import LookaheadProbe
    from metapilot.models.controller.objectives import Menu
    from metapilot.models.evaluation.heldout import policy_state_fn
    from metapilot.models.simulator.epoch_replay import StateEncoder
    from metapilot.transforms.state import lookahead_features

    sc = loaded.state_config
    menu = Menu.of(sc)
    act = policy_state_fn(loaded)
    live: dict[str, Any] = {}

    def reset(replay) -> None:
        live["encode"] = StateEncoder(sc, replay.origin_s, sc.epoch_s)
        live["probe"] = LookaheadProbe(sc) if sc.lookahead_h > 0 else None
        if live["probe"] is not None:
            live["probe"].reset()

    def choose(replay, agg) -> int:
        s = live["encode"](agg, replay.k)
        if live["probe"] is not None:
            costs = live["probe"].costs(replay.engine, agg, menu.settings)
            s = np.concatenate([s, lookahead_features(costs, sc.epoch_s)[0]])
        a = act(s)
        return a if 0 <= a < len(menu) else menu.user_first

    return PolicyDecider(choose, reset, menu.settings, guard_h)


def _past_choice_task(args: tuple) -> PastChoice:
    return past_choice(*args)


def past_windows(con, cluster: str, origins: Sequence[datetime], current: str, conf: Any = None) -> list[tuple]:
    """Every job submitted before each origin, with the cluster's capacity at the first, the origin
    in seconds since the past's start and the as-run history of those jobs: what `past_choices`
    replays (read here, so the replays need no warehouse). `conf`: the site's slurm.conf, passed on."""
    from metapilot.models.evaluation.heldout import asrun_result
    from metapilot.transforms.workload import normalise
    from metapilot.warehouse.sim_store import load_capacity, load_window

    capacity = Capacity.from_rows(load_capacity(con, cluster, origins[0]))
    current = rule_name(*parse_rule(current))
    out = []
    for t in origins:
        jobs = load_window(con, cluster, None, t)
        w = normalise(jobs)
        if len(w) == 0:
            out.append((w, capacity, current, 0.0, None, conf))
            continue
        asrun = job_frame(asrun_result(w, capacity, jobs)).select("job_id", "wait", "bsld", "start")
        out.append((w, capacity, current, (t - w.window_start).total_seconds(), asrun, conf))
    return out


def past_choices(pasts: Sequence[tuple[Workload, Capacity, str]],
                 log: Callable[[str], None] | None = None) -> list[PastChoice]:
    """`past_choice` at each origin: independent replays, on the usable cores. They depend on no fold,
    so the walk forward's flow works them out while the folds learn."""
    tick = time.perf_counter()
    choices = process_map(_past_choice_task, list(pasts), log=log)
    if log:
        log(f"past replays at {len(choices)} origins: {time.perf_counter() - tick:.1f} s")
    return choices


_SPAN: tuple[Workload, Capacity] | None = None  # a worker's span (`_hold_span`)


def _hold_span(workload: Workload, capacity: Capacity) -> None:
    global _SPAN
    _SPAN = (workload, capacity)


def _replay_task(spec: tuple[str, Any]):
    """One contender over the span: ("fixed", rule) held throughout, or ("follow", [(start, decider
    spec)...]) with ("rule", rule, guard_h) or ("planner", config, oracle) deciders. Returned without
    the workload (the caller has it: not sent back from a worker)."""
    assert _SPAN is not None
    workload, capacity = _SPAN
    kind, arg = spec
    if kind == "fixed":
        pol, bf = parse_rule(arg)
        res = simulate(workload, capacity, pol, bf)
    else:
        res = follow(workload, capacity, [(s, RuleDecider(d[1], d[2]) if d[0] == "rule" else _planner_decider(*d[1:]))
                                          for s, d in arg], epoch_s=EPOCH_S)
    return replace(res, workload=None)


def _planner_decider(config: Any, oracle: bool = False, guard_h: float | None = None) -> PolicyDecider:
    """The planner as it says (issue 48): with no horizon, the fixed objective it holds, with its own
    guard; with one, the lookahead from its base objective on; and either way the walk forward's tail
    guard (`guard_h`) over it, as over every decision."""
    from metapilot.models.controller.objectives import Menu
    from metapilot.models.controller.planner import LookaheadPlanner, oracle_of

    menu = Menu()
    planner = LookaheadPlanner(menu, oracle_of(config) if oracle else config, EPOCH_S)
    return PolicyDecider(lambda rp, agg: planner.plan(rp.engine, agg, menu.settings), lambda rp: planner.reset(),
                         menu.settings, guard_h)


def _planner_words(cfg: Any) -> str:
    guard = f", tail guard {cfg.guard_h:g} h" if getattr(cfg, "guard_h", 0) else ""
    return f"{cfg.horizon_h:g} h horizon, lambda {cfg.lam:g}{guard}"


def _fold_artifacts(fold: Fold) -> tuple[Any, dict | None, str | None]:
    """The fold's loaded controller (from the fold's own warehouse), its model card, and why not."""
    if not fold.policy_id or not fold.db:
        return None, None, fold.note or "the fold's learning failed"
    from metapilot.models.evaluation.heldout import load_controller
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.policy_store import policy_row

    try:
        con = connect(fold.db, read_only=True)
        try:
            row = policy_row(con, fold.policy_id)
        finally:
            con.close()
    except (LookupError, FileNotFoundError) as e:
        return None, None, str(e)
    _, loaded, why = load_controller(row, fold.db)
    card = getattr(loaded, "card", None)
    return loaded, card, why


def run_backtest(con, cluster: str, folds: Sequence[Fold], span_end: datetime, *, current: str = "FCFS+EASY",
                 planner: bool = True, n_boot: int = 2000, seed: int = 0, log: Callable[[str], None] | None = None,
                 backtest_id: str | None = None, choices: list[PastChoice] | None = None,
                 current_conf: Any = None) -> WalkForwardResult:
    """Follow the folds' decisions over [first origin, span_end), compare, store; returns the result
    (its `to_json`: what `metapilot backtest --json` writes). `choices`: what the past says at each
    origin (`past_choices`), when already worked out. `current_conf` (a `SlurmConf`: the site's
    slurm.conf): every contender is judged on the site's Slurm (`on_slurm`), against its multifactor."""
    from metapilot.models.controller.planner import PlannerConfig
    from metapilot.models.evaluation.heldout import asrun_result
    from metapilot.transforms.workload import normalise
    from metapilot.warehouse.backtest_store import job_owners, store_backtest
    from metapilot.warehouse.sim_store import load_capacity, load_window

    say = log or (lambda _m: None)
    current = rule_name(*parse_rule(current))
    origins = [f.origin for f in folds]
    t0 = origins[0]
    capacity = Capacity.from_rows(load_capacity(con, cluster, t0))

    # what the past says at each origin and at the span's end (the decision for the next period),
    # computed while the folds learned when the flow could
    if choices is None:
        choices = past_choices(past_windows(con, cluster, [*origins, span_end], current, current_conf), log=say)
    choices = hold_course(choices, current)
    ahead = choices[len(folds)] if len(choices) > len(folds) else None
    choices = choices[:len(folds)]

    # the span, and the contenders that do not depend on MetaPilot's decisions
    jobs = load_window(con, cluster, t0, span_end)
    workload = normalise(jobs, t0)
    starts = [(t - t0).total_seconds() for t in origins]
    bounds = [*starts, (span_end - t0).total_seconds()]
    say(f"span {t0:%Y-%m-%d} .. {span_end:%Y-%m-%d}: {len(workload):,} jobs, {len(origins)} periods")
    arts = [_fold_artifacts(fold) for fold in folds]
    planners = [PlannerConfig(**card["planner"]) if card and card.get("planner") else PlannerConfig()
                for _, card, _ in arts]
    tick = time.perf_counter()
    # the contenders that do not depend on MetaPilot's decisions, on the usable cores at once: the
    # planner-driven ones first (the longest), then the leaders, then the fixed rules
    specs: list[tuple[str, Any]] = []
    if planner:  # every planner decision carries the tail guard (the guarded leader's, or the safety net)
        specs += [("follow", [(s, ("planner", cfg, oracle, c.guard_h or c.safety_h))
                              for s, cfg, c in zip(starts, planners, choices, strict=True)]) for oracle in (False, True)]
    specs += [("follow", [(s, ("rule", c.leader, None)) for s, c in zip(starts, choices, strict=True)]),
              ("follow", [(s, ("rule", c.guarded, c.guard_h)) for s, c in zip(starts, choices, strict=True)])]
    # what the guarded leader chooses at each later origin, followed from the span's start: the record
    # the planner's is compared with (the same past, the leader's present choice, not its earlier ones)
    present = sorted({(c.guarded, c.guard_h) for c in [*choices[1:], *([ahead] if ahead else [])]
                      if c.guard_h is not None}) if planner else []
    specs += [("follow", [(0.0, ("rule", r, h))]) for r, h in present]
    specs += [("fixed", r) for r in RULES]
    runs = [replace(r, workload=workload) for r in process_map(_replay_task, specs, initializer=_hold_span,
                                                                 initargs=(workload, capacity), log=say)]
    planned_run, oracle_run = (runs.pop(0), runs.pop(0)) if planner else (None, None)
    leader_run, guarded_run = runs.pop(0), runs.pop(0)
    present_runs = {k: runs.pop(0) for k in present}
    contenders: list[Contender] = [Contender(r, "fixed", res) for r, res in zip(RULES, runs, strict=True)]
    cur = next(c for c in contenders if c.name == current)
    contenders.append(Contender(f"{current} (current)", "current", cur.result, note="the site's rule today"))
    asrun = asrun_result(workload, capacity, jobs)
    if len(workload) and np.isnan(asrun.start).all():  # SWF wait -1 throughout (NASA-iPSC, Lublin-256)
        contenders.append(Contender("as-run", "as-run", None, note="the log records no start times: no as-run history"))
    else:
        contenders.append(Contender("as-run", "as-run", asrun,
                                    note="the logged starts; the real cluster also ran jobs submitted before the span"))
    contenders.append(Contender("leader", "leader", leader_run,
                                note="at each origin, the fixed rule with the lowest bounded slowdown over all the past"))
    guarded = Contender("guarded leader", "guarded-leader", guarded_run,
                        note="the same among rules with a tail guard, admissible over the past")
    contenders.append(guarded)
    planned = None
    if planner:
        planned = Contender("planner", "planner", planned_run, note="the lookahead planner each fold tuned on its past")
        contenders += [planned, Contender("oracle (bound)", "oracle", oracle_run,
                                          note="sees the true future: a bound, never a decision")]

    # MetaPilot's decision per period, from the fold's gate and the record up to its origin
    decisions: list[Decision] = []
    deciders: list[Any] = []
    frames = {c.name: job_frame(c.result) for c in (cur, planned) if c is not None}
    frames.update({f"{r} {h}": job_frame(res) for (r, h), res in present_runs.items()})
    if current_conf is not None:  # the record, too, on the site's Slurm: its multifactor is the current rule
        from metapilot.models.simulator.policies import POLICIES
        from metapilot.models.simulator.slurm import simulate_slurm

        frames[cur.name] = job_frame(simulate_slurm(workload, current_conf, "multifactor"))
        if planned is not None:
            frames[planned.name] = job_frame(simulate_slurm(workload, current_conf, segments=[
                (t, POLICIES[code], None) for t, code in planned.result.applied]))
        frames.update({f"{r} {h}": job_frame(simulate_slurm(workload, current_conf, parse_rule(r)[0], guard_h=h))
                       for (r, h) in present_runs})
    for k, (fold, choice, (loaded, card, why), cfg) in enumerate(zip(folds, choices, arts, planners, strict=True)):
        reason = why if fold.gate == "controller" else (fold.note or f"the fold's gate: {fold.gate}")
        kept = (fold.policy_id, loaded) if (fold.gate == "controller" and loaded is not None
                                             and int(loaded.state_config.epoch_s) == EPOCH_S) else None
        d, decider = _decide(choice, reason, starts[k] if k > 0 else None, frames, cur.name,
                             planned.name if planned else None, cfg, kept)
        decisions.append(d)
        deciders.append(decider)
    if current_conf is not None:  # a keep leaves the site's own configuration as it is
        decisions = [replace(d, source=f"keep {SITE_WORDS}: {d.source}") if k else d
                     for d, k in zip(decisions, [d.kind == "rule" and d.rule == current and d.guard_h is None
                                                 for d in decisions], strict=True)]
    recheck = Recheck(frames[cur.name])
    contenders.insert(0, Contender("MetaPilot", "metapilot", follow(workload, capacity, list(zip(starts, deciders)),
                                                                     epoch_s=EPOCH_S, name="MetaPilot",
                                                                     recheck=recheck)))
    decisions = [_rechecked(d, s, recheck.tightened, t0) for d, s in zip(decisions, starts, strict=True)]
    say(f"continuous replays: {time.perf_counter() - tick:.1f} s")
    judged_by = current  # the contender every other is judged against
    site_fidelity = None
    if current_conf is not None:
        tick = time.perf_counter()
        keep = [d.kind == "rule" and d.rule == current and d.guard_h is None for d in decisions]
        plans = {"MetaPilot": _slurm_segments(starts, decisions, keep),
                 "leader": [(s, c.leader, None) for s, c in zip(starts, choices, strict=True)],
                 "guarded leader": [(s, "multifactor" if c.guarded == current and c.guard_h is None else c.guarded,
                                     c.guard_h) for s, c in zip(starts, choices, strict=True)]}
        contenders, judged_by = on_slurm(contenders, workload, current_conf, plans)
        site = next(c for c in contenders if c.kind == "current")
        if asrun is not None and not np.isnan(asrun.start).all():
            f = fidelity(job_frame(site.result), job_frame(asrun))
            site_fidelity = f.to_dict() if f is not None else None
        say(f"the contenders on the site's Slurm: {time.perf_counter() - tick:.1f} s")

    owners = job_owners(con, cluster, t0, span_end)
    span, per = compare(contenders, bounds, judged_by, owners, n_boot=n_boot, seed=seed)
    if site_fidelity is not None:
        span = span.with_columns(pl.when(pl.col("kind") == "current").then(pl.lit(site_fidelity["kendall_tau"]))
                                 .otherwise(None).cast(pl.Float64).alias("asrun_kendall_tau"))
    verdict = bar_verdict(span, judged_by)
    unfaithful = sum(1 for c in choices if not c.faithful)
    if unfaithful and not verdict.get("met") and "why" not in verdict:
        verdict["why"] = (f"MetaPilot kept {judged_by} in {unfaithful} of {len(choices)} periods because the replay does "
                          f"not reproduce this cluster (fidelity before advice: see each period's reason); the "
                          f"replays' gains there are not advice")
    backtest_id = backtest_id or new_backtest_id()
    figures = tuple(ContenderFigures.of(r) for r in span.iter_rows(named=True))
    bar = Bar.of(verdict)
    reference = span["reference"][0]
    nxt = None
    if ahead is not None:  # the decision for the next period, from all the past, with the record behind it
        d, _ = _decide(ahead, "decided at the span's end from all the past", bounds[-1], frames, cur.name,
                       planned.name if planned else None, planners[-1])
        # the record's time zero is the replay's: F1's origin live
        nxt = NextDecision(d, span_end, backtest_id, Record.of(figures, judged_by, reference, bar, t0))
    periods = tuple(Period(origins[k], origins[k + 1] if k + 1 < len(origins) else span_end, d, choice.leader,
                           Decision(choice.guarded, choice.guard_h), fold.gate, fold.policy_id, choice.fidelity)
                    for k, (fold, choice, d) in enumerate(zip(folds, choices, decisions, strict=True)))
    store_backtest(con, backtest_id, _contender_rows(span, cluster, t0, span_end, judged_by),
                   _period_rows(periods, choices, folds, per), per)
    return WalkForwardResult(backtest_id, cluster, t0, span_end, judged_by, reference, span["reference_any"][0], bar,
                             periods, figures, nxt, site_fidelity=site_fidelity)


SITE_SLURM = "the site's Slurm (current)"
SITE_WORDS = "the site's own Slurm configuration (its multifactor)"


def _slurm_segments(starts: Sequence[float], decisions: Sequence[Decision], keep: Sequence[bool]) -> list:
    """MetaPilot's periods as the order rules of Slurm's replay: a keep is the site's multifactor, a rule
    its order with its guard; a planner or controller period is followed by the orders it applied on
    the engine's replay (filled in by `on_slurm` from `SimResult.applied`: None here)."""
    return [(s, "multifactor" if k else d.rule if d.kind == "rule" else None, None if k else d.guard_h)
            for s, d, k in zip(starts, decisions, keep, strict=True)]


def on_slurm(contenders: Sequence[Contender], workload: Workload, conf: Any,
             plans: dict[str, list] | None = None) -> tuple[list[Contender], str]:
    """The contenders judged as the site's Slurm would run them (issue 51): its nodes, partitions and
    main and backfill schedulers (`simulate_slurm` on `conf`), the current contender being its
    multifactor priority. A fixed rule is its priority order under Slurm's backfill (what `steer`
    sets through the site factor: the 21 rules are seven orders there). A contender named in `plans`
    follows its periods' (start, rule, guard h) there, a keep being the site's multifactor and a
    period without a rule (the planner, the controller) the orders it applied on the engine's replay
    (`SimResult.applied`); the planner and the oracle follow those orders throughout. The as-run
    history stays as it is: the check of the site's replay. Returns (contenders, the current one's name)."""
    from metapilot.models.simulator.policies import POLICIES
    from metapilot.models.simulator.slurm import simulate_slurm

    out: list[Contender] = []
    seen: set[str] = set()
    for c in contenders:
        if c.kind == "fixed":
            pol, _ = parse_rule(c.name)
            if pol not in seen:
                seen.add(pol)
                out.append(Contender(f"{pol} on Slurm", "fixed", simulate_slurm(workload, conf, pol),
                                     note=f"{pol} order (steer's site factor) under the site's Slurm backfill"))
        elif c.kind == "current":
            out.append(Contender(SITE_SLURM, "current", simulate_slurm(workload, conf, "multifactor"),
                                 note="the site's slurm.conf: its multifactor priority under its Slurm's backfill, on "
                                      "its nodes"))
        elif c.result is not None and c.result.applied:
            applied = [(t, POLICIES[code], None) for t, code in c.result.applied]
            plan = (plans or {}).get(c.name)
            segs = applied if plan is None else _fill_plan(plan, applied)
            out.append(replace(c, result=simulate_slurm(workload, conf, segments=segs),
                               note=(c.note + "; " if c.note else "") + "on the site's Slurm"))
        else:
            out.append(c)
    return out, SITE_SLURM


def _fill_plan(plan: list, applied: list) -> list:
    """The plan's periods, a period without a rule taking the applied orders that fall in it (and the
    one in force at its start)."""
    out = []
    bounds = [s for s, _, _ in plan[1:]] + [np.inf]
    for (start, rule, guard), end in zip(plan, bounds, strict=True):
        if rule is not None:
            out.append((start, rule, guard))
            continue
        before = [a for a in applied if a[0] <= start]
        out.append((start, before[-1][1] if before else applied[0][1], None))
        out.extend(a for a in applied if start < a[0] < end)
    return out


def _period_rows(periods: Sequence[Period], choices: Sequence[PastChoice], folds: Sequence[Fold],
                 per: pl.DataFrame) -> pl.DataFrame:
    """`backtest_periods`' rows: each period's decision, what the past and the fold said, its jobs."""
    me = per.filter(pl.col("name") == "MetaPilot")
    rows = []
    for k, (p, choice, fold) in enumerate(zip(periods, choices, folds, strict=True)):
        d = p.decision
        rows.append({"period": k, "period_from": p.start, "period_to": p.end, "decision": d.describe(), "rule": d.rule,
                     "guard_h": d.guard_h, "policy_id": d.policy_id, "leader": choice.leader,
                     "guarded_leader": choice.guarded, "guarded_leader_h": choice.guard_h,
                     "fold_policy_id": fold.policy_id, "fold_gate": fold.gate, "fold_note": fold.note,
                     **_fidelity_columns(choice.fidelity),
                     "jobs": int(me.filter(pl.col("period") == k)["jobs"].sum()) if me.height else 0,
                     "why": d.source})
    return pl.DataFrame(rows, infer_schema_length=None)


def _decide(choice: PastChoice, reason: str, at_s: float | None, frames: dict[str, pl.DataFrame], current: str,
            planned: str | None, cfg: Any, controller: tuple[str, Any] | None = None) -> tuple[Decision, Any]:
    """MetaPilot's decision from what the past says at one origin (`choice`), the fold's learned
    controller when its gate kept it (`controller`: (policy id, the loaded policy)) and the
    walk-forward record up to the origin (`at_s`, seconds since the span's start; None at the first,
    where there is no record): (the decision, the decider that follows it)."""
    guard = choice.guard_h or choice.safety_h
    incumbent = frames[current] if choice.guard_h is None else frames.get(f"{choice.guarded} {choice.guard_h}")
    if not choice.faithful:  # fidelity before advice: nothing the replays say counts here
        decider = RuleDecider(choice.guarded)
        decider.rechecked = False
        return Decision(choice.guarded, None, None, choice.why), decider
    if controller is not None:
        return (Decision(choice.guarded, guard, controller[0], "the fold's gate kept the learned controller",
                         guard_fired=choice.fired if choice.guard_h else None),
                _controller_decider(controller[1], guard))
    if planned is not None and at_s is not None and incumbent is not None and record_prefers(
            observed_by(frames[planned], at_s), observed_by(incumbent, at_s), observed_by(frames[current], at_s)):
        return (Decision("planner", guard, None, f"the walk-forward record so far prefers the planner to what the "
                                                  f"guarded leader chooses now ({choice.why}; {reason})",
                         planner=_planner_words(cfg), planner_settings=asdict(cfg)),
                _planner_decider(cfg, False, guard))
    return (Decision(choice.guarded, choice.guard_h, None, f"the guarded leader: {choice.why} ({reason})",
                     guard_fired=choice.fired), RuleDecider(choice.guarded, choice.guard_h))


def _rechecked(d: Decision, start_s: float, tightened: Sequence[tuple[float, float, float]], t0: datetime) -> Decision:
    """The decision with what its weekly recheck did in its period, in its reason."""
    mine = [(now, g) for s, now, g in tightened if s == start_s]
    if not mine:
        return d
    words = "; ".join(f"{t0 + timedelta(seconds=now):%Y-%m-%d}: guard tightened to {g / 3600.0:.1f} h"
                      for now, g in mine)
    return replace(d, source=f"{d.source}; rechecked weekly against the current rule, its tail passed the margin "
                             f"({words})")


def _fidelity_columns(f: dict | None) -> dict:
    """The fidelity at an origin as `backtest_periods`' columns (all None where there is none)."""
    keys = ("wait_mean_replay_s", "wait_mean_asrun_s", "waited_replay", "waited_asrun", "kendall_tau", "far")
    return {f"fidelity_{k}": (f or {}).get(k) for k in keys}


def _contender_rows(span: pl.DataFrame, cluster: str, t0: datetime, t1: datetime, current: str) -> pl.DataFrame:
    def ci(col: str, i: int) -> pl.Expr:
        if col not in span.columns or span.schema[col] == pl.Null:  # one period: no interval
            return pl.lit(None, pl.Float64)
        return pl.col(col).list.get(i, null_on_oob=True)

    return span.with_columns(
        pl.col("name").alias("contender"),
        pl.when(pl.col("jobs").is_null()).then(pl.lit("unavailable")).otherwise(pl.lit("ok")).alias("status"),
        pl.lit(cluster).alias("cluster"), pl.lit(t0).cast(pl.Datetime("us", "UTC")).alias("span_from"),
        pl.lit(t1).cast(pl.Datetime("us", "UTC")).alias("span_to"), pl.lit(current).alias("current_rule"),
        ci("regret_bsld_ci", 0).alias("regret_bsld_lo"), ci("regret_bsld_ci", 1).alias("regret_bsld_hi"),
        ci("regret_wait_mean_ci", 0).alias("regret_wait_mean_lo"), ci("regret_wait_mean_ci", 1).alias("regret_wait_mean_hi"),
    )
