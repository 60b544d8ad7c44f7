"""`metapilot steer --cluster C --slurm`: the live loop that applies the approved decision to a real
Slurm through the admin site factor (models/steering/loop.py); `steer explain JOBID` for the
helpdesk; `steer report` compares a dry run's rankings with the order Slurm really started jobs in."""

from __future__ import annotations

import re
import signal
import time
from typing import Annotated, Optional

import typer

steer_app = typer.Typer(help="Steer a live Slurm by the approved decision (SPEC §12).")

DB_HELP = "Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb)."


class _Terminated(Exception):
    """SIGTERM: leave the loop and release."""


EVERY_MIN_S, EVERY_MAX_S = 1.0, 86400.0  # a cycle a second at most (slurmctld's RPCs), one a day at least
SITE_FACTOR_MAX = 2_147_483_645  # scontrol's bound (models/steering/rank.py)


def parse_every(text: str) -> float:
    """'60s', '2m', '1h' or seconds, 1 s to 1 day (0 would spin on slurmctld; a huge one overflows sleep)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m:
        raise typer.BadParameter(f"--every: a duration such as 60s, 2m or 1h, not {text!r}")
    seconds = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if not EVERY_MIN_S <= seconds <= EVERY_MAX_S:
        raise typer.BadParameter(f"--every: 1s to 24h between cycles, not {text!r}")
    return seconds


def parse_age(text: str | None):
    """--max-age: '30d', '12h', '2w' (days without a unit); None: no limit."""
    from datetime import timedelta

    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([hdw]?)\s*", text)
    if not m:
        raise typer.BadParameter(f"--max-age: an age such as 30d, 12h or 2w, not {text!r}")
    hours = float(m.group(1)) * {"h": 1, "": 24, "d": 24, "w": 168}[m.group(2)]
    if not 1 <= hours <= 24 * 3660:
        raise typer.BadParameter(f"--max-age: 1h to 10 years, not {text!r}")
    return timedelta(hours=hours)


def parse_pause(text: str) -> float:
    """--guard-pause: 1 minute to 7 days."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if not m:
        raise typer.BadParameter(f"--guard-pause: a duration such as 10m or 1h, not {text!r}")
    seconds = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    if not 60 <= seconds <= 7 * 86400:
        raise typer.BadParameter(f"--guard-pause: 1m to 7d, not {text!r}")
    return seconds


@steer_app.callback(invoke_without_command=True)
def steer_main(
    ctx: typer.Context,
    cluster: Annotated[Optional[str], typer.Option(help="The cluster (its decision, its tables' rows).")] = None,
    slurm: Annotated[bool, typer.Option("--slurm", help="Steer a Slurm cluster (the client commands on PATH, SLURM_CONF).")] = False,
    every: Annotated[str, typer.Option(help="Time between cycles (60s, 2m, ...).")] = "60s",
    policy: Annotated[str, typer.Option(help="'published' (the approved publish decision) or a fixed rule, e.g. SAF+EASY.")] = "published",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Shadow mode: record what would be set, change nothing.")] = False,
    once: Annotated[bool, typer.Option("--once", help="One cycle, then exit (the factors stay set; --release clears them).")] = False,
    release: Annotated[bool, typer.Option("--release", help="Set every steered job's site factor back to 0 and exit.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Steer again after the live tail guard halted steering.")] = False,
    max_changes: Annotated[int, typer.Option(help="At most this many site factors changed per cycle (its update RPCs: about one each).")] = 2000,
    step: Annotated[Optional[int], typer.Option(help="Site factor between adjacent ranks (default: one more than the largest PriorityWeight).")] = None,
    guard_h: Annotated[Optional[float], typer.Option("--halt-h", "--guard-h", help="Safety stop (not the decision's tail guard, which ranks oldest first past its threshold): when a pending job has waited longer since it became eligible (hours), release everything, pause steering for --guard-pause, then put that job ahead of its group. --guard-h is its older name.")] = 168.0,
    util_floor: Annotated[Optional[float], typer.Option(help="Release everything and pause steering when cores in use / capacity falls below this while jobs wait (0-1).")] = None,
    guard_pause: Annotated[str, typer.Option(help="How long a guard trip pauses steering (at most one trip per pause): 10m, 1h, ...")] = "1h",
    slurm_bin: Annotated[Optional[str], typer.Option(help="Folder of squeue/sinfo/scontrol/sdiag (default: PATH).")] = None,
    max_age: Annotated[Optional[str], typer.Option(help="Refuse a published decision older than this (30d, 2w); one older than 45 days is steered with a warning.")] = None,
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,
) -> None:
    """Each cycle: read squeue/sinfo, choose the objective, rank the pending jobs within each group Slurm
    compares, set the site factors that must change (scontrol update job=ID SiteFactor=N)."""
    if ctx.invoked_subcommand is not None:
        return
    from metapilot.cli.errors import guarded

    guarded(_run_loop)(cluster, slurm, every, policy, dry_run, once, release, resume, max_changes, step, guard_h,
                       util_floor, slurm_bin, db, max_age, guard_pause)


def _run_loop(cluster, slurm, every, policy, dry_run, once, release, resume, max_changes, step, guard_h, util_floor,
              slurm_bin, db, max_age=None, guard_pause="1h") -> None:
    from metapilot.models.steering.decision import decision_age, require_approval, resolve
    from metapilot.models.steering.identity import current_operator
    from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
    from metapilot.models.steering.slurm_cli import SlurmCli
    from metapilot.warehouse.db import connect

    if not cluster:
        raise typer.BadParameter("--cluster is needed")
    if not slurm:
        raise typer.BadParameter("--slurm is needed (the only scheduler steer drives; PBS Pro: `metapilot export`)")
    if sum([dry_run, release]) > 1:
        raise typer.BadParameter("--dry-run and --release exclude each other")
    interval = parse_every(every)
    pause_s = parse_pause(guard_pause)
    if guard_h is not None and not 0 < guard_h <= 24 * 3660:
        raise typer.BadParameter(f"--guard-h must be above 0 and at most 10 years in hours, not {guard_h:g}")
    if util_floor is not None and not 0 <= util_floor <= 1:
        raise typer.BadParameter(f"--util-floor is a share of the cores, 0 to 1, not {util_floor:g}")
    oldest = parse_age(max_age)
    if max_changes < 0:
        raise typer.BadParameter("--max-changes must be >= 0")
    if step is not None and not 1 <= step <= SITE_FACTOR_MAX:
        # a negative step inverts the rule; 0 orders nothing
        raise typer.BadParameter(f"--step must be 1 to {SITE_FACTOR_MAX} (the site factor between adjacent ranks), "
                                 f"not {step}")
    from metapilot.models.steering.decision import SteerDecision
    from metapilot.warehouse.db import require_warehouse

    if release or resume or policy.strip().lower() == "published":
        # what to release, the halt to resume and the published decision live in the warehouse: a
        # mistyped --db must not create an empty one and report success
        require_warehouse(db)
    con = connect(db)
    try:
        if release:  # releasing needs no decision: it undoes whatever the loop set
            decision = SteerDecision("release", "release", source="--release")
        else:
            decision = resolve(con, cluster, policy)
            approval = require_approval(con, cluster, decision)
            stale = decision_age(decision, max_age=oldest)
            if stale:
                typer.echo(stale, err=True)
    finally:
        con.close()
    opts = SteerOptions(cluster, dry_run=dry_run, step=step, max_changes=max_changes, guard_h=guard_h,
                        util_floor=util_floor, guard_pause_s=pause_s,
                        lock_stale_s=max(300.0, 5 * interval))  # a holder silent for 5 cycles is gone
    advisor = None
    if decision.kind == "controller" and not release:
        from metapilot.models.controller.advice import Advisor
        from metapilot.warehouse.policy_store import registered_sums

        con = connect(db, read_only=True)
        try:
            sums = registered_sums(con, decision.policy_id)
        finally:
            con.close()
        from metapilot.models.controller.artifact import ArtifactIntegrityError
        from metapilot.models.steering.decision import DecisionError

        try:
            advisor = Advisor(decision.policy_id, db, sums)  # verifies the artifact's checksums
        except ArtifactIntegrityError as e:  # a refusal to act on a tampered file, not a bug
            raise DecisionError(f"the published controller's artifact does not match the warehouse: {e}") from None
    steerer = Steerer(SlurmCli(bin_dir=slurm_bin), warehouse_connector(db), decision, opts, advisor=advisor)
    if decision.kind == "planner" and not release and not once:
        # the planner's lookahead grows with the queue: a loop that cannot finish a cycle in --every is refused
        took = steerer.objective_seconds()
        if interval < 2 * took:
            raise typer.BadParameter(f"--every {every} is shorter than twice what one planner cycle takes on this "
                                     f"queue now ({took:.1f} s): steer every {max(60, int(4 * took))} s or more")
    if release:
        for line in _reach(steerer.check_cluster):  # job ids mean other jobs on another cluster
            typer.echo(line, err=True)
        for line in _locked(steerer, "release"):
            typer.echo(line, err=True)
        try:
            out = steerer.release("--release")
        finally:
            steerer.free_lock()
        typer.echo(out.line)
        raise typer.Exit(_exit_code(out))
    halt = steerer.halted()
    if halt is not None:
        if not resume:
            typer.echo(f"steering on {cluster} is halted since {halt['at']:%Y-%m-%d %H:%M} UTC: {halt['message']}",
                       err=True)
            typer.echo(f"look at the queue, then `metapilot steer --cluster {cluster} --slurm --resume`", err=True)
            raise typer.Exit(3)
        steerer.resume(str(current_operator()))
    typer.echo(f"steering {cluster} by {decision.label} ({decision.source}; approved by {who_approved(approval)})"
               f"{' in shadow mode (--dry-run): nothing is changed' if dry_run else ''}")
    if not dry_run:  # one loop per cluster (a dry run changes nothing)
        for line in _locked(steerer, "once" if once else "live"):
            typer.echo(line)
    try:
        for line in _reach(steerer.start):
            typer.echo(line)
    except BaseException:
        steerer.free_lock()
        raise
    if once:
        try:
            out = steerer.cycle()
            typer.echo(out.line)
            if out.row["status"] == "ok" and not dry_run:
                steerer.keep()  # a clean exit: the next start carries on from these factors
        finally:
            steerer.free_lock()
        raise typer.Exit(_exit_code(out))

    busy = {"cycle": False, "term": False}

    def on_term(signum, frame):  # noqa: ARG001
        # inside a cycle the signal waits for its end: raised in a warehouse query, DuckDB turns it into
        # "Query interrupted" and the exit was reported as a bug
        busy["term"] = True
        if not busy["cycle"]:
            raise _Terminated()

    old = signal.signal(signal.SIGTERM, on_term)
    reason = "the loop ended"
    code = 0
    try:
        while True:
            t0 = time.monotonic()
            busy["cycle"] = True
            try:
                out = steerer.cycle()
            finally:
                busy["cycle"] = False
            typer.echo(out.line)
            if busy["term"]:
                raise _Terminated()
            if steerer.lost_lock:  # another loop took over: its factors are its own now
                code = 2
                break
            _sleep_watching(steerer, t0 + interval, max(5.0, interval / 6))
    except _Terminated:
        reason = "SIGTERM"
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        signal.signal(signal.SIGTERM, old)
        if not dry_run and not steerer.lost_lock:
            out = steerer.release(f"exit ({reason})")
            typer.echo(out.line)
            code = code or _exit_code(out)  # factors left set are never a clean exit
        steerer.free_lock()
    raise typer.Exit(code)


def _sleep_watching(steerer, until: float, every: float) -> None:
    """Sleep until the next cycle (`until`, monotonic), looking every `every` seconds for steered
    jobs moved to another partition (one small squeue read): one found, the next cycle runs at once."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, every))
        if time.monotonic() < until:
            moved = steerer.moved_jobs()
            if moved:
                typer.echo(f"{len(moved)} steered jobs moved to another partition ({', '.join(moved[:5])}): "
                           "cycling now")
                return


def _locked(steerer, mode: str) -> list[str]:
    """Take the cluster's steering lock: held by another live loop, one error line naming it and
    exit 3 (nothing changed)."""
    from metapilot.models.steering.identity import current_operator
    from metapilot.models.steering.lock import SteerLocked

    try:
        return steerer.take_lock(mode, current_operator().account)
    except SteerLocked as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(3) from None


def _reach(step) -> list[str]:
    """Run a step that asks Slurm before any cycle: Slurm unreachable, or an answer it cannot
    parse, is one error line and exit 2 (nothing was changed), not a traceback."""
    from metapilot.models.steering.slurm_cli import SlurmUnreachable
    from metapilot.models.steering.squeue import SlurmParseError

    try:
        return step()
    except (SlurmUnreachable, SlurmParseError) as e:
        typer.echo(f"error: {e}: nothing changed", err=True)
        raise typer.Exit(2) from None


def who_approved(approval: dict) -> str:
    """The approval's account, with the sudo user it claimed (a rule named by hand: said so)."""
    from metapilot.models.steering.identity import describe

    return describe(approval["approved_by"], approval.get("claimed_by"))


def _exit_code(out) -> int:
    """0 for a cycle or release that did what it should; 3 when the live tail guard tripped or holds
    steering paused (nothing set); 2 when it failed (Slurm unreachable, an update or release that did
    not go through)."""
    return {"guard": 3, "paused": 3, "halted": 3, "error": 2}.get(out.row["status"], 0)


@steer_app.command("explain")
def explain_cmd(
    job_id: Annotated[str, typer.Argument(help="The job id as squeue shows it (an array: its id).")],
    cluster: Annotated[str, typer.Option(help="The cluster.")],
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,
) -> None:
    """For the helpdesk: the job's rank, site factor, the objective and why."""
    from metapilot.models.simulator.objectives import CATALOGUE
    from metapilot.warehouse.db import connect, require_warehouse
    from metapilot.warehouse.steer_store import explain_job

    require_warehouse(db)
    con = connect(db, read_only=True)
    try:
        live, shadow = explain_job(con, cluster, job_id)
    finally:
        con.close()
    if live.is_empty() and shadow.is_empty():
        typer.echo(f"job {job_id}: MetaPilot never set its site factor on {cluster}; its priority is Slurm's own "
                   "(sprio -j shows the factors)")
        return
    if not live.is_empty():
        r = live.row(0, named=True)
        obj = CATALOGUE.get(r["objective"])
        state = (f"released at {r['released_at']:%Y-%m-%d %H:%M:%S} UTC (site factor back to 0, or the job left the queue)"
                 if r["released_at"] is not None else "still set")
        typer.echo(f"job {job_id} on {cluster}: site factor {r['site_factor']} ({state}), set "
                   f"{r['set_at']:%Y-%m-%d %H:%M:%S} UTC")
        typer.echo(f"  rank {r['rank'] + 1 if r['rank'] is not None else '-'} of {r['group_size']} steered in its group "
                   f"({r['group_key']}): jobs are only ever reordered among jobs of the same partition and tier")
        typer.echo(f"  objective {r['objective']}: {obj.describe() if obj else r['objective']}; decision {r['decision']} "
                   f"({_why_objective(r['decision'], r['objective'])})")
        typer.echo("  why: the site factor is added to Slurm's multifactor priority (age, fair-share, QOS and the rest "
                   "still count; `sprio -j` shows it under SITE); a job ranked higher by the objective gets a larger one")
    if not shadow.is_empty():
        s = shadow.row(0, named=True)
        typer.echo(f"  shadow (dry run) at {s['shadow_at']:%Y-%m-%d %H:%M:%S} UTC: rank {s['rank'] + 1} in {s['group_key']}, "
                   f"would set {s['site_factor']} ({s['objective']})")


def _why_objective(decision: str, objective: str) -> str:
    """The decision's kind and why this cycle ran this objective, in words, for the helpdesk."""
    from metapilot.models.simulator.rules import parse_rule

    if decision == "planner":
        return f"the lookahead planner the walk forward published: its lookahead from the live queue picked {objective}"
    if decision.startswith("controller"):
        return f"the learned controller: it chose {objective} from the live state"
    try:
        own = parse_rule(decision)[0]
    except ValueError:
        return "a rule"
    if own != objective:
        return "a rule with the walk forward's tail guard: a pending job had waited past it, so oldest first this cycle"
    return "a fixed rule: its own order"


@steer_app.command("report")
def report_cmd(
    cluster: Annotated[str, typer.Option(help="The cluster.")],
    since: Annotated[Optional[str], typer.Option(help="From this UTC date (default: 7 days ago).")] = None,
    db: Annotated[Optional[str], typer.Option(help=DB_HELP)] = None,
) -> None:
    """Shadow mode's evidence: how well each dry-run ranking matched the order Slurm started jobs in
    (Kendall's tau per cycle and group, over the jobs that have started since; run `collect` first)."""
    from datetime import datetime, timedelta, timezone

    from metapilot.models.steering.report import shadow_agreement
    from metapilot.warehouse.db import connect, require_warehouse
    from metapilot.warehouse.steer_store import recent_cycles, shadow_vs_starts

    require_warehouse(db)
    start = (datetime.fromisoformat(since).replace(tzinfo=timezone.utc) if since
             else datetime.now(timezone.utc) - timedelta(days=7))
    con = connect(db, read_only=True)
    try:
        frame = shadow_vs_starts(con, cluster, start)
        cycles = recent_cycles(con, cluster, 5)
    finally:
        con.close()
    s = shadow_agreement(frame)
    if s["groups"] == 0:
        typer.echo(f"{cluster}: no dry-run ranking since {start:%Y-%m-%d} with two or more of its jobs started yet "
                   f"(run `metapilot steer --cluster {cluster} --slurm --dry-run`, then `metapilot collect`)")
    else:
        typer.echo(f"{cluster} since {start:%Y-%m-%d}: {s['cycles']} dry-run cycles, {s['groups']} rankings with >= 2 "
                   f"jobs started ({s['jobs']} jobs): Kendall's tau between the shadow ranking and Slurm's start order "
                   f"median {s['tau_median']:.2f}, mean {s['tau_mean']:.2f}; the shadow's first job started first in "
                   f"{s['head_agree']:.0%} of them")
        typer.echo("  tau 1: Slurm already starts jobs in the decision's order (steering would change little); "
                   "near 0 or below: steering would reorder the queue")
    if not cycles.is_empty():
        last = cycles.row(0, named=True)
        typer.echo(f"  latest cycle {last['started_at']:%Y-%m-%d %H:%M:%S} UTC: {last['mode']} {last['status']}"
                   + (f" ({last['message']})" if last["message"] else ""))


def register(app: typer.Typer) -> None:
    from metapilot.cli.errors import guarded

    steer_app.registered_commands[:] = []
    steer_app.command("explain")(guarded(explain_cmd))
    steer_app.command("report")(guarded(report_cmd))
    app.add_typer(steer_app, name="steer")
