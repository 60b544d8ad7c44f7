"""`metapilot backtest --cluster C`: the walk forward. Had the site followed MetaPilot's decisions
period after period, learning only from the past each time, what would its users have waited,
against every rule it could have kept instead and the rule it runs today?"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from metapilot.cli.options import (
    COMPLETE_S_HELP,
    QOS_PRIORITY_HELP,
    SHARES_HELP,
    OptionError,
    complete_s_option,
    qos_priority_option,
    shares_option,
)

if TYPE_CHECKING:
    from metapilot.models.evaluation.walk_forward_result import WalkForwardResult


MAX_WEEKS = 1040  # 20 years: longer than any log; a date that far ahead overflows Python's datetime


def _weeks(value: str, option: str) -> int:
    """A number of weeks, 1 to MAX_WEEKS (a usage error otherwise, never an overflow deep in the walk)."""
    m = re.fullmatch(r"\s*(\d+)\s*w?\s*", value or "")
    if not m:
        raise typer.BadParameter(f"{option} takes a number of weeks such as 4w, got {value!r}")
    weeks = int(m.group(1))
    if not 1 <= weeks <= MAX_WEEKS:
        raise typer.BadParameter(f"{option} takes 1 to {MAX_WEEKS} weeks, got {value!r}")
    return weeks


def backtest_cmd(
    cluster: Annotated[Optional[str], typer.Option(help="Cluster to walk forward on (default: the longest history).")] = None,
    every: Annotated[str, typer.Option(help="A new decision every this many weeks (origins t_k).")] = "4w",
    warmup: Annotated[Optional[str], typer.Option(help="Weeks with jobs learned from before the first origin (default: 26, or half the weeks with jobs on a shorter log, seven at least).")] = None,
    start: Annotated[Optional[str], typer.Option("--from", help="Follow the decisions from this date (ISO, UTC) on.")] = None,
    end: Annotated[Optional[str], typer.Option("--to", help="... up to this date (exclusive).")] = None,
    current: Annotated[str, typer.Option(help="The rule the site runs today, e.g. FCFS+EASY: the reference for gains and for 'starves no one more'.")] = "FCFS+EASY",
    current_conf: Annotated[Optional[str], typer.Option("--current-conf", help="The site's slurm.conf: the current contender is its multifactor priority under Slurm's own backfill on its nodes, and every contender is judged as that Slurm would run it (the replay's distance from the as-run history is reported).")] = None,
    qos_priority: Annotated[Optional[str], typer.Option("--qos-priority", help=QOS_PRIORITY_HELP + " With --current-conf.")] = None,
    complete_s: Annotated[Optional[float], typer.Option("--complete-s", help=COMPLETE_S_HELP + " With --current-conf.")] = None,
    shares: Annotated[Optional[str], typer.Option("--shares", help=SHARES_HELP + " With --current-conf.")] = None,
    steps: Annotated[int, typer.Option(help="Gradient steps per fold's training run.")] = 2000,
    dask: Annotated[Optional[str], typer.Option(help="Where the folds learn: a Dask scheduler address, local:N, or slurm[:N] (pbs, sge, lsf: N worker jobs; README, On the site's own cluster) (default: side by side on a local Dask cluster, one process per usable core, when more than one fold is new; METAPILOT_WORKERS=1: one after another).")] = None,
    planner: Annotated[bool, typer.Option("--planner/--no-planner", help="Also follow the lookahead planner and its oracle bound (slower).")] = True,
    json_out: Annotated[Optional[str], typer.Option("--json", help="Write the result as JSON to this file.")] = None,
    relearn: Annotated[bool, typer.Option("--relearn", help="Learn every fold again, even those whose past has not changed "
                                                            "since an earlier walk forward learned them.")] = False,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file.")] = None,
) -> None:
    """Walk forward: learn at each origin from the past only, follow each decision to the next, compare."""
    from metapilot.cli.batch import prefect_session
    from metapilot.cli.console import console
    from metapilot.ground.paths import db_path
    from metapilot.models.simulator.rules import parse_rule
    from metapilot.transforms.windows import parse_utc

    every_w = _weeks(every, "--every")
    warmup_w = None if warmup is None else _weeks(warmup, "--warmup")
    try:
        parse_rule(current)
        t_from, t_to = parse_utc(start), parse_utc(end)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if t_from and t_to and t_to <= t_from:
        raise typer.BadParameter(f"--to ({end}) must come after --from ({start})")
    _check_dask(dask)
    qos = qos_priority_option(qos_priority)
    if qos is not None and current_conf is None:
        raise OptionError("QOS priorities weigh in the site's multifactor: add --current-conf slurm.conf",
                          param_hint="--qos-priority")
    shares = shares_option(shares)
    if shares is not None and current_conf is None:
        raise OptionError("fair-share shares weigh in the site's multifactor: add --current-conf slurm.conf",
                          param_hint="--shares")
    if complete_s_option(complete_s) is not None and current_conf is None:
        raise OptionError("the completing time is the site's Slurm's: add --current-conf slurm.conf",
                          param_hint="--complete-s")
    if current_conf is not None:
        from metapilot.models.simulator.slurm import read_slurm_conf

        if not Path(current_conf).is_file():
            raise typer.BadParameter(f"no slurm.conf at {current_conf}", param_hint="--current-conf")
        try:
            site = read_slurm_conf(current_conf)
        except (ValueError, OSError) as e:
            raise typer.BadParameter(f"{current_conf}: {e}", param_hint="--current-conf") from None
        current_conf = str(Path(current_conf).resolve())
        for note in site.notes:  # what of the site's Slurm the replay reads past
            console.print(f"[yellow]note:[/yellow] slurm.conf: {note}", highlight=False)
        unweighed = (site.with_qos(qos) if qos else site).qos_unweighed()
        if unweighed:
            console.print(f"[yellow]note:[/yellow] {unweighed}", highlight=False)
    if not db_path(db).exists():
        console.print(f"[red]error:[/red] no warehouse at {db_path(db)}: ingest logs first (metapilot ingest PATH...) or pass --db")
        raise typer.Exit(2)
    try:
        from metapilot.flows.backtest import plan_origins

        name, first, _, origins, span_end = plan_origins(db, cluster, every_w, warmup_w, t_from, t_to)  # a too-short log: refused before any work
        why = _nothing_runs(db, name, [first, *origins, span_end])
    except (LookupError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    if why is not None:  # every fold would replay nothing: refused before any learning (issue 54)
        console.print(f"[red]error:[/red] {why}", highlight=False)
        raise typer.Exit(2)
    from metapilot.ground.interrupt import stop_on_interrupt

    with stop_on_interrupt(), prefect_session(db):  # Ctrl-C reaches the folds' and the replays' processes
        from metapilot.flows.backtest import backtest_flow

        out = backtest_flow(db=db, cluster=name, every_weeks=every_w, warmup_weeks=warmup_w, start=t_from, end=t_to,
                            current=current, steps=steps, dask=dask, planner=planner, relearn=relearn,
                            current_conf=current_conf, current_qos=qos, current_complete_s=complete_s or 0.0,
                            current_shares=shares)
    print_backtest(out)
    console.print(f"[dim]each fold's own warehouse (its past, policy and replays): {out.folds}; the next walk forward "
                  "reuses the folds whose past has not changed (--relearn: learn them all again)[/dim]")
    if json_out:
        Path(json_out).write_text(json.dumps(out.to_json(), indent=2, default=str, allow_nan=False) + "\n",
                                  encoding="utf-8")
        console.print(f"JSON: {json_out}")


def _check_dask(dask: str | None) -> None:
    """A malformed `slurm:N` is a usage error before any work."""
    from metapilot.flows.batch_workers import parse_batch

    try:
        parse_batch(dask)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--dask") from None


def _nothing_runs(db: str | None, cluster: str, bounds: list) -> str | None:
    """The first window (the warm-up past, then each period) whose jobs cannot run on the capacity."""
    from metapilot.cli.runnable import first_unrunnable
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        return first_unrunnable(con, cluster, bounds)
    finally:
        con.close()


def _f(v, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


def print_backtest(out: WalkForwardResult) -> None:
    """The periods' decisions in words, then every contender's figures and regrets."""
    from rich.table import Table

    from metapilot.cli.console import console
    from metapilot.ground.units import fmt_duration
    from metapilot.models.evaluation.contender import WALK_FORWARD_KINDS

    console.print(f"[bold]Walk forward on {out.cluster}[/bold], {out.span_from.isoformat()[:10]} .. "
                  f"{out.span_to.isoformat()[:10]}: {len(out.periods)} periods; current rule {out.current}; bar: the "
                  f"best admissible fixed rule in hindsight, {out.reference} (best overall: {out.reference_any})")
    for p in out.periods:
        console.print(f"  {p.start.isoformat()[:10]} .. {p.end.isoformat()[:10]}: {p.decision.describe()}  "
                      f"[dim]({p.decision.source})[/dim]")
    t = Table(title=f"Backtest {out.backtest_id}")
    for col in ("contender", "kind", "mean wait", "p99 wait", "max wait", "bsld", "regret bsld [95% CI]",
                "regret wait", "regret bsld (any)"):
        t.add_column(col, justify="left" if col in ("contender", "kind") else "right")

    def ci(point: float | None, iv: list | None) -> str:
        text = _f(point, "+.1%")
        return f"{text} [{_f(iv[0], '+.1%')}, {_f(iv[1], '+.1%')}]" if iv else text

    order = {k: i for i, k in enumerate(WALK_FORWARD_KINDS)}
    for c in sorted(out.contenders, key=lambda c: (order.get(c.kind, 9), c.bsld_mean or 1e300)):
        if not c.replayed:
            t.add_row(c.name, c.kind, "unavailable", "", "", "", "", "", "")
            continue
        t.add_row(c.name, c.kind, fmt_duration(c.wait_mean_s), fmt_duration(c.wait_p99_s),
                  fmt_duration(c.wait_max_s), _f(c.bsld_mean, ".2f"), ci(c.regret_bsld, c.regret_bsld_ci),
                  ci(c.regret_wait_mean, c.regret_wait_mean_ci), _f(c.regret_bsld_any, "+.1%"))
    console.print(t)
    bar = out.bar
    word = "[green]met[/green]" if bar.met else "[yellow]not met[/yellow]"
    console.print(f"Bar (issue 38): {word}. beats {out.current} on mean wait and bsld: {bar.beats_current}; "
                  f"no fixed rule dominates it: {bar.not_dominated}"
                  f"{' (dominated by ' + ', '.join(bar.dominated_by) + ')' if bar.dominated_by else ''}; "
                  f"regret <= 5%: {bar.regret_within_5pct}; starves no one more: {bar.starves_no_one_more}"
                  + (f". {bar.why[0].upper()}{bar.why[1:]}" if bar.why else ""))
    console.print("[dim]A regret below zero is a win only when its interval's upper end is below zero too.[/dim]")
    if out.site_fidelity:
        console.print(f"The site's Slurm replayed against the as-run history (the check of --current-conf): "
                      f"{site_fidelity_words(out.site_fidelity)}", highlight=False)


def site_fidelity_words(f: dict) -> str:
    """`WalkForwardResult.site_fidelity` in one line: replayed vs as run."""
    from metapilot.ground.units import fmt_duration

    def pair(key: str) -> str:
        return f"{fmt_duration(f.get(f'wait_{key}_replay_s'))} replayed vs {fmt_duration(f.get(f'wait_{key}_asrun_s'))} as run"

    tau = f.get("kendall_tau")
    return (f"mean wait {pair('mean')}, p95 {pair('p95')}, max {pair('max')}; Kendall's tau of the start order "
            f"{'–' if tau is None else f'{tau:.3f}'} ({f.get('jobs', 0):,} jobs)")


def register(app: typer.Typer) -> None:
    app.command("backtest")(backtest_cmd)
