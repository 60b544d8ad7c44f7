"""The weekly report's section "If you had followed MetaPilot": the cluster's latest walk forward
(`metapilot backtest`), as plain data for the renderers, its tables, and what it was worth.

An operator reads it to decide whether to follow MetaPilot at all: the regret table says how
following the decisions, each made from the past alone, compares with every rule they could have
kept; the periods say what was decided, in words; the plot shows where along the span the
difference was made."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from metapilot.ground.units import fmt_duration
from metapilot.models.evaluation.roi import BACKTEST_SPAN, RoiConfig, assumptions, roi_from_backtest
from metapilot.models.evaluation.walk_forward import bar_verdict
from metapilot.warehouse.backtest_store import latest_backtest, load_backtest
from metapilot.warehouse.db import has_table

TITLE = "If you had followed MetaPilot"
# the contenders shown, in this order (the 21 fixed rules: only the bar's two references)
SHOWN_KINDS = ("metapilot", "current", "guarded-leader", "leader", "planner", "oracle", "as-run")


def backtest_section(con: duckdb.DuckDBPyConnection, cluster: str, rows: Any, roi_config: RoiConfig | None = None) -> dict:
    """The latest walk forward of `cluster`, or a status saying how to run one. `rows` turns a frame
    into JSON-ready dicts (the report's own converter)."""
    bid = latest_backtest(con, cluster) if has_table(con, "backtests") else None
    if bid is None:
        return {"status": "none", "message": f"No walk forward has been run for {cluster} yet: "
                                             f"`metapilot backtest --cluster {cluster}` replays following MetaPilot "
                                             "period after period, each decision learned from the past alone."}
    bt = load_backtest(con, bid)
    span = bt["contenders"]
    first = span.row(0, named=True)
    current = first["current_rule"]
    verdict = bar_verdict(span.rename({"contender": "name"}), current)
    refs = {first["reference"], first["reference_any"]} - {None}
    shown = span.filter(pl.col("kind").is_in(SHOWN_KINDS) | pl.col("contender").is_in(list(refs)))
    order = {k: i for i, k in enumerate(SHOWN_KINDS)}
    shown = shown.with_columns(pl.col("kind").replace_strict(order, default=len(order)).alias("_o")).sort("_o", "bsld_mean")
    cfg = roi_config or RoiConfig()
    try:
        roi = [r.to_dict() for r in roi_from_backtest(span, cfg, bt["capacity_cores"])]
    except ValueError:
        roi = []
    return {
        "status": "ok", "backtest_id": bid, "span_from": first["span_from"].isoformat(),
        "span_to": first["span_to"].isoformat(), "current": current, "reference": first["reference"],
        "reference_any": first["reference_any"], "bar": verdict, "created_at": first["created_at"].isoformat(),
        "rows": rows(shown.drop("_o")), "periods": rows(bt["periods"]), "figures": rows(bt["figures"]),
        "roi": roi, "roi_assumptions": assumptions(cfg, None, BACKTEST_SPAN),
    }


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1%}"


def regret_table(section: dict) -> tuple[list[str], list[list[str]]]:
    """One row per shown contender: waits, bounded slowdown, regret against the bar's reference
    (with its block-bootstrap interval) and against the best rule overall."""
    head = ["contender", "kind", "mean wait", "p99 wait", "max wait", "bsld", "regret bsld [95% CI]",
            "regret mean wait", "regret bsld vs best overall"]
    body = []
    for r in section["rows"]:
        if r["status"] != "ok":
            body.append([r["contender"], r["kind"], "unavailable", "", "", "", "", "", r.get("note") or ""])
            continue
        tag = (" (reference)" if r["contender"] == section["reference"] else "") + (
            " (best overall)" if r["contender"] == section["reference_any"] else "")
        ci = (f" [{_pct(r['regret_bsld_lo'])}, {_pct(r['regret_bsld_hi'])}]"
              if r.get("regret_bsld_lo") is not None else "")
        body.append([r["contender"], r["kind"] + tag, fmt_duration(r["wait_mean_s"]), fmt_duration(r["wait_p99_s"]),
                     fmt_duration(r["wait_max_s"]), f"{r['bsld_mean']:.2f}", _pct(r["regret_bsld"]) + ci,
                     _pct(r["regret_wait_mean"]), _pct(r["regret_bsld_any"])])
    return head, body


def period_lines(section: dict) -> list[str]:
    """What MetaPilot ran in each period, in words, and why; with how far the replay of the current
    rule was from what the cluster lived over the past at that origin (fidelity before advice)."""
    out = []
    for p in section["periods"]:
        why = p.get("why") or p.get("fold_note") or p.get("fold_gate") or ""
        out.append(f"{p['period_from'][:10]} .. {p['period_to'][:10]}: {p['decision']}"
                   + (f" ({why})" if why else "") + fidelity_words(p))
    return out


def fidelity_words(p: dict) -> str:
    """The replay against the as-run history at one origin, in numbers ('' where the log has no starts)."""
    if p.get("fidelity_wait_mean_replay_s") is None:
        return ""
    tau = p.get("fidelity_kendall_tau")
    far = " (too far apart: the decision keeps the current rule)" if p.get("fidelity_far") else ""
    return (f"; the replay of the current rule over the past: mean wait {p['fidelity_wait_mean_replay_s']:,.0f} s "
            f"against {p['fidelity_wait_mean_asrun_s']:,.0f} s as run, jobs that waited over a minute "
            f"{p['fidelity_waited_replay']:.0%} against {p['fidelity_waited_asrun']:.0%}"
            + ("" if tau is None else f", Kendall's tau of the start order {tau:.2f}") + far)


def summary_lines(section: dict) -> list[str]:
    """The bar in words and what following MetaPilot was worth against the current rule."""
    bar = section["bar"]
    lines = [f"Walk forward {section['backtest_id']} over {section['span_from'][:10]} .. {section['span_to'][:10]}: "
             f"each period's decision learned from the jobs submitted before it only. Reference (the bar): "
             f"{section['reference']}, the best fixed rule held throughout in hindsight among those that starve no "
             f"one more than {section['current']} (p99 and max wait at most 1.5x); best overall: "
             f"{section['reference_any']}."]
    if "beats_current" in bar:
        lines.append(f"Bar {'met' if bar['met'] else 'not met'}: beats {section['current']} on mean wait and "
                     f"bounded slowdown: {_yes(bar['beats_current'])}; dominated by no fixed rule: "
                     f"{_yes(bar['not_dominated'])}; regret within 5% of the reference: "
                     f"{_yes(bar['regret_within_5pct'])}; starves no one more: {_yes(bar['starves_no_one_more'])}. "
                     "A regret below zero is a win only when its interval's upper end is below zero too.")
        if bar.get("why"):
            lines.append(f"{bar['why'][0].upper()}{bar['why'][1:]}.")
    else:
        lines.append(f"Bar not met: {bar.get('why', 'MetaPilot was not replayed')}.")
    site = next((r for r in section["rows"] if r["kind"] == "current" and r.get("asrun_kendall_tau") is not None), None)
    lived = next((r for r in section["rows"] if r["kind"] == "as-run" and r["status"] == "ok"), None)
    if site is not None and lived is not None:  # `backtest --current-conf`: how close the site's replay is
        lines.append(f"The site's Slurm (its slurm.conf) replayed against what it lived over the span: mean wait "
                     f"{fmt_duration(site['wait_mean_s'])} against {fmt_duration(lived['wait_mean_s'])} as run, p95 "
                     f"{fmt_duration(site['wait_p95_s'])} against {fmt_duration(lived['wait_p95_s'])}, max "
                     f"{fmt_duration(site['wait_max_s'])} against {fmt_duration(lived['wait_max_s'])}; Kendall's tau of "
                     f"the start order {site['asrun_kendall_tau']:.3f}.")
    cur = next((r for r in section["roi"] if r["reference_kind"] == "current"), None)
    if cur is not None:
        money = cur["config"]["currency"]
        h = cur["wait_hours_saved"]
        lines.append(f"Against {section['current']}: {abs(h):,.0f} wait-hours {'saved' if h >= 0 else 'more'} over the "
                     f"span ({abs(cur['wait_hours_saved_per_week']):,.0f} per week), worth "
                     f"{cur['value_wait_per_week'] * cur['window_weeks']:+,.0f} {money} at "
                     f"{cur['config']['value_per_wait_hour']:,.4g} {money} per researcher wait-hour "
                     f"(`metapilot roi --backtest {section['backtest_id']}` for the full table).")
    return lines


def _yes(v: Any) -> str:
    return "yes" if v else "no"
