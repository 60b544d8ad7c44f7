"""The report's figures: matplotlib (no pyplot, no display) rendered to PNG and returned as
base64 data URIs, so the HTML is one self-contained file. Each function takes the report data
(`models.reporting.data.collect`) and returns a data URI, or None when there is nothing to draw."""

from __future__ import annotations

import base64
import io
from datetime import datetime, timedelta

from matplotlib.figure import Figure
from matplotlib.patches import Patch

COLORS = {"gpu": "#d97706", "cluster": "#0f766e", "queue": "#7c3aed", "busy": "#0f766e",
          "mean": "#2563eb", "p95": "#93c5fd"}
# one colour per objective of the catalogue, the same in every report (U and W: the seed's names for SJF and FCFS)
OBJECTIVE_COLORS = {"SJF": "#d97706", "U": "#d97706", "SAF": "#16a34a", "F1": "#0891b2", "WFP3": "#dc2626",
                    "UNICEF": "#db2777", "FCFS": "#2563eb", "W": "#2563eb", "LAF": "#78716c"}
OTHER_COLOR = "#9ca3af"
DPI = 110


def _uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s)


def _style(ax) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)


def daily_utilisation(report: dict) -> str | None:
    """Bars: the cluster's core (and GPU) utilisation per day; lines: each partition's, if several."""
    daily = report["daily"]
    cluster = [r for r in daily if r["scope"] == "cluster"]
    if not cluster:
        return None
    fig = Figure(figsize=(8, 2.8))
    ax = fig.subplots()
    days = [r["day"][5:] for r in cluster]
    x = range(len(days))
    has_gpu = any((r["capacity_gpus"] or 0) > 0 for r in cluster)
    w = 0.4 if has_gpu else 0.6
    ax.bar([i - (w / 2 if has_gpu else 0) for i in x], [100 * (r["utilisation_cpu"] or 0) for r in cluster], w,
           color=COLORS["cluster"], label="cores (cluster)")
    if has_gpu:
        ax.bar([i + w / 2 for i in x], [100 * (r["utilisation_gpu"] or 0) for r in cluster], w, color=COLORS["gpu"],
               label="GPUs (cluster)")
    parts = sorted({r["partition"] for r in daily if r["scope"] == "partition"}, key=lambda p: (p is None, p or ""))
    if len(parts) > 1:
        for p in parts:
            vals = {r["day"]: r["utilisation_cpu"] for r in daily if r["scope"] == "partition" and r["partition"] == p}
            ax.plot(list(x), [100 * (vals.get(r["day"]) or 0) for r in cluster], marker="o", ms=3, lw=1,
                    label=f"cores ({p})")
    ax.set_xticks(list(x), days)
    ax.set_ylabel("utilisation (%)")
    ax.set_ylim(0, max(100, ax.get_ylim()[1]))
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    ax.set_title("Daily utilisation", fontsize=10, loc="left")
    _style(ax)
    return _uri(fig)


def queue_length(report: dict) -> str | None:
    """Hourly queue length (jobs waiting) and cores busy, through the week."""
    q = report["queue_hourly"]
    if not q:
        return None
    fig = Figure(figsize=(8, 2.8))
    ax = fig.subplots()
    t = [_ts(r["hour_start"]) for r in q]
    ax.fill_between(t, [r["queued_jobs"] for r in q], step="post", color=COLORS["queue"], alpha=0.35, lw=0)
    ax.step(t, [r["queued_jobs"] for r in q], where="post", color=COLORS["queue"], lw=1.2, label="jobs queued")
    ax.set_ylabel("jobs queued")
    ax2 = ax.twinx()
    cap = _cluster_cores(report)
    if cap:
        ax2.step(t, [100 * r["busy_cores"] / cap for r in q], where="post", color=COLORS["busy"], lw=1, label="cores busy (%)")
        ax2.set_ylabel("cores busy (%)")
        ax2.set_ylim(0, 105)
    ax2.spines[["top"]].set_visible(False)
    _style(ax)
    _days_axis(ax)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, frameon=False, loc="lower right",
              bbox_to_anchor=(1.0, 1.0), ncol=2)
    ax.set_title("Queue length and busy cores, hourly (UTC)", fontsize=10, loc="left")
    return _uri(fig)


def wait_by_size(report: dict) -> str | None:
    """Mean and p95 wait (hours) per job-size class, with the job counts."""
    rows_ = report["wait_by_size"]
    if not rows_:
        return None
    fig = Figure(figsize=(8, 0.42 * len(rows_) + 1.1))
    ax = fig.subplots()
    y = list(range(len(rows_)))
    h = 0.38
    p95 = [(r["wait_p95_s"] or 0) / 3600 for r in rows_]
    mean = [(r["wait_mean_s"] or 0) / 3600 for r in rows_]
    ax.barh([i + h / 2 for i in y], p95, h, color=COLORS["p95"], label="p95")
    ax.barh([i - h / 2 for i in y], mean, h, color=COLORS["mean"], label="mean")
    top = max(p95 + mean + [1e-9])
    for i, (m, p) in enumerate(zip(mean, p95, strict=True)):
        ax.text(m + top * 0.01, i - h / 2, f"{m:,.1f} h", va="center", fontsize=7)
        ax.text(p + top * 0.01, i + h / 2, f"{p:,.1f} h", va="center", fontsize=7, color="#1e3a8a")
    label = lambda r: f"{r['size_class']} core{'' if r['size_class'] == '1' else 's'} ({r['jobs_started']} jobs)"  # noqa: E731
    ax.set_yticks(y, [label(r) for r in rows_], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.12)
    ax.set_xlabel("wait (hours)")
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    ax.set_title("Wait by job size (jobs started this week)", fontsize=10, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    return _uri(fig)


def recommendations(report: dict) -> str | None:
    """The recommended objective per epoch (top) above the observed queue (bottom)."""
    rec = report["recommendations"]
    if rec["status"] != "ok":
        return None
    fig = Figure(figsize=(8, 3.2))
    ax1, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    parts = sorted({r["partition"] for r in rec["rows"]})
    part = "*" if "*" in parts else parts[0]
    rr = [r for r in rec["rows"] if r["partition"] == part]
    for r in rr:
        start = _ts(r["epoch_start"])
        ax1.axvspan(start, start + timedelta(seconds=r["epoch_s"]), color=OBJECTIVE_COLORS.get(r["objective"], OTHER_COLOR),
                    lw=0)
    ax1.set_yticks([])
    handles = [Patch(color=OBJECTIVE_COLORS.get(k, OTHER_COLOR), label=objective_label(k)) for k in sorted(rec["share"])]
    ax1.legend(handles=handles, fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax1.set_title(f"Recommended objective ({rec['policy_id']}) and the observed queue", fontsize=10, loc="left")
    q = report["queue_hourly"]
    t = [_ts(r["hour_start"]) for r in q]
    ax2.step(t, [r["queued_jobs"] for r in q], where="post", color=COLORS["queue"], lw=1.2)
    ax2.set_ylabel("jobs queued")
    _style(ax2)
    _days_axis(ax2)
    return _uri(fig)


def objective_meaning(name: str) -> str | None:
    """What an objective of the catalogue means ('drain the queue: shortest requested time first'), or None."""
    from metapilot.models.evaluation.heldout import objective_meaning as meaning

    return meaning(name)


def objective_label(name: str) -> str:
    """'SJF: drain the queue' (the objective's meaning up to its colon)."""
    meaning = objective_meaning(name)
    return f"{name}: {meaning.split(':')[0]}" if meaning else name


def heldout_weeks(report: dict) -> str | None:
    """Weekly mean wait of the controller, its planner, the best fixed contender and the as-run history."""
    v = report["heldout"]
    weekly = v.get("weeks") or []
    if v["status"] != "ok" or not weekly:
        return None
    names = ["MetaPilot", "planner", "as-run"]
    best = v["winners"].get("wait_mean_s", [])
    fixed_best = next((d["reference"] for d in v["diffs"] if d["metric"] == "wait_mean_s" and d["reference_kind"] == "best-fixed"), None)
    for extra in ([fixed_best] if fixed_best else []) + best[:1]:
        if extra and extra not in names:
            names.append(extra)
    fig = Figure(figsize=(8, 2.8))
    ax = fig.subplots()
    drawn = 0
    for n in names:
        pts = sorted((r["week_start"], r["wait_mean_s"]) for r in weekly if r["contender"] == n and r["wait_mean_s"] is not None)
        if not pts:
            continue
        ax.plot([_ts(a) for a, _ in pts], [b / 3600 for _, b in pts], marker="o", ms=3, lw=1.5 if n == "MetaPilot" else 1,
                label=n)
        drawn += 1
    if not drawn:
        return None
    ax.set_ylabel("mean wait (h)")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title("Held-out replay: mean wait per week (jobs submitted that week)", fontsize=10, loc="left")
    _style(ax)
    return _uri(fig)


def _cluster_cores(report: dict) -> float | None:
    for r in report["glance"]:
        if r["scope"] == "cluster" and r["capacity_cores"]:
            return float(r["capacity_cores"])
    return None


def _days_axis(ax) -> None:
    import matplotlib.dates as mdates

    ax.xaxis.set_major_locator(mdates.DayLocator())
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%a %d"))


def backtest_cumulative(report: dict) -> str | None:
    """The walk forward over time: cumulative wait-hours and the running mean bounded slowdown of
    the jobs submitted so far, per contender shown in the regret table, at each period's end."""
    bt = report.get("backtest") or {}
    figures = bt.get("figures") or []
    if bt.get("status") != "ok" or not figures:
        return None
    names = [r["contender"] for r in bt["rows"] if r["status"] == "ok" and r["kind"] != "as-run"]
    fig = Figure(figsize=(8, 3.2))
    ax_w, ax_b = fig.subplots(1, 2)
    for n in names:
        pts = sorted((r["period_to"], r["wait_h_cum"], r["bsld_sum_cum"] / r["jobs_cum"] if r["jobs_cum"] else None)
                     for r in figures if r["contender"] == n)
        if not pts:
            continue
        x = [_ts(a) for a, _, _ in pts]
        style = {"lw": 2.0, "color": "#111827"} if n == "MetaPilot" else {"lw": 1.0}
        ax_w.plot(x, [w for _, w, _ in pts], marker="o", ms=3, label=n, **style)
        ax_b.plot(x, [b for _, _, b in pts], marker="o", ms=3, label=n, **style)
    ax_w.set_ylabel("wait-hours, cumulative")
    ax_b.set_ylabel("mean bounded slowdown so far")
    for ax in (ax_w, ax_b):
        _style(ax)
        ax.tick_params(axis="x", labelsize=7, rotation=30)
    ax_b.legend(fontsize=6, frameon=False)
    fig.suptitle("Following each contender over the walk forward (jobs submitted up to each period's end)",
                 fontsize=10, x=0.02, ha="left")
    return _uri(fig)
