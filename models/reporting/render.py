"""HTML and Markdown of the weekly report, from the data of `models.reporting.data.collect`.

The HTML is one self-contained file: inline CSS (with a print stylesheet), figures as base64 PNG
data URIs, no scripts, fonts or links to fetch. Both renderers format the same numbers with the
same functions, so the HTML, the Markdown and report.json never disagree."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from metapilot.models.reporting import backtest as walk_forward
from metapilot.models.reporting import plots
from metapilot.ground.units import fmt_duration

SECTIONS: tuple[tuple[str, str], ...] = (
    ("glance", "Week at a glance"),
    ("daily", "Daily utilisation"),
    ("queue", "Queue length"),
    ("waits", "Wait by job size"),
    ("recommendations", "Recommended objective"),
    ("heldout", "Held-out replay"),
    ("roi", "Return on investment"),
    ("backtest", "If you had followed MetaPilot"),
    ("data_quality", "Data quality"),
)
PLACEMENT = ("placement", "Node placement")  # shown only when the cluster has placement runs
TITLES = dict(SECTIONS + (PLACEMENT,))
PLACEMENT_METRICS = ("pods", "placed", "failed", "mean_wait_s", "gpu_alloc_share", "frag_gpu_share", "imbalance",
                     "hot_node_share", "idle_share")


# --- number formats -------------------------------------------------------------------------------


def fmt_pct(f: float | None, digits: int = 1) -> str:
    return "–" if f is None else f"{100 * f:.{digits}f}%"


def fmt_int(n: float | None) -> str:
    return "–" if n is None else f"{n:,.0f}"


def fmt_num(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def fmt_change(cur: float | None, prev: float | None) -> str:
    """Relative change against the previous weeks' figure, e.g. '+12%'."""
    if cur is None or prev is None or prev == 0:
        return ""
    return f"{100 * (cur / prev - 1):+.0f}%"


def fmt_change_pp(cur: float | None, prev: float | None) -> str:
    """Change of a fraction in percentage points, e.g. '+8.4 pp'."""
    if cur is None or prev is None:
        return ""
    return f"{100 * (cur - prev):+.1f} pp"


def _metric_fmt(unit: str) -> Callable[[float | None], str]:
    return {"s": fmt_duration, "fraction": lambda v: fmt_pct(v, 2)}.get(unit, lambda v: fmt_num(v, 2))


def partition_name(p: str | None) -> str:
    return "whole cluster" if p == "*" else ("(no partition)" if p is None else p)


# --- the table views both renderers use -------------------------------------------------------------


def glance_rows(report: dict) -> list[dict]:
    """The at-a-glance rows to show: each partition when there are several, and the whole cluster."""
    rows = report["glance"]
    parts = [r for r in rows if r["scope"] == "partition"]
    cluster = [r for r in rows if r["scope"] == "cluster"]
    return (parts if len(parts) > 1 else []) + cluster


def glance_table(report: dict) -> tuple[list[str], list[list[str]]]:
    has_gpu = any((r["capacity_gpus"] or 0) > 0 for r in report["glance"])
    head = ["partition", "jobs submitted", "jobs started", "core-hours", *(["GPU-hours"] if has_gpu else []),
            "core utilisation", *(["GPU utilisation"] if has_gpu else []), "mean wait", "p95 wait", "max wait"]
    body = []
    for r in glance_rows(report):
        def vs(cur: float | None, prev: float | None, f: Callable) -> str:
            if r["prev_weeks"] == 0:
                return f(cur)
            ch = fmt_change_pp(cur, prev) if f is fmt_pct else fmt_change(cur, prev)
            return f"{f(cur)} (4 wk: {f(prev)}{', ' + ch if ch else ''})"

        body.append([
            partition_name(r["partition"]),
            vs(r["jobs_submitted"], r["prev_jobs_submitted"], fmt_int),
            fmt_int(r["jobs_started"]),
            vs(r["cpu_hours"], r["prev_cpu_hours"], fmt_int),
            *([vs(r["gpu_hours"], r["prev_gpu_hours"], fmt_int)] if has_gpu else []),
            vs(r["utilisation_cpu"], r["prev_utilisation_cpu"], fmt_pct),
            *([vs(r["utilisation_gpu"], r["prev_utilisation_gpu"], fmt_pct)] if has_gpu else []),
            vs(r["wait_mean_s"], r["prev_wait_mean_s"], fmt_duration),
            vs(r["wait_p95_s"], r["prev_wait_p95_s"], fmt_duration),
            vs(r["wait_max_s"], r["prev_wait_max_s"], fmt_duration),
        ])
    return head, body


def daily_table(report: dict) -> tuple[list[str], list[list[str]]]:
    rows = [r for r in report["daily"] if r["scope"] == "cluster"]
    has_gpu = any((r["capacity_gpus"] or 0) > 0 for r in rows)
    head = ["day", "jobs submitted", "jobs started", "core-hours", "core utilisation",
            *(["GPU utilisation"] if has_gpu else []), "mean wait", "max wait"]
    body = [[r["day"], fmt_int(r["jobs_submitted"]), fmt_int(r["jobs_started"]), fmt_int(r["cpu_hours"]),
             fmt_pct(r["utilisation_cpu"]), *([fmt_pct(r["utilisation_gpu"])] if has_gpu else []),
             fmt_duration(r["wait_mean_s"]), fmt_duration(r["wait_max_s"])] for r in rows]
    return head, body


def queue_summary(report: dict) -> dict:
    """Peak, mean and empty hours of the hourly queue (from the queue_hourly rows)."""
    q = report["queue_hourly"]
    if not q:
        return {"hours": 0}
    peak = max(q, key=lambda r: r["queued_jobs"])
    return {
        "hours": len(q),
        "queued_jobs_max": peak["queued_jobs"],
        "queued_jobs_max_at": peak["hour_start"],
        "queued_jobs_mean": sum(r["queued_jobs"] for r in q) / len(q),
        "hours_queue_empty": sum(1 for r in q if r["queued_jobs"] == 0),
        "busy_cores_mean": sum(r["busy_cores"] for r in q) / len(q),
    }


def size_table(report: dict) -> tuple[list[str], list[list[str]]]:
    head = ["size class (cores)", "jobs started", "mean wait", "median wait", "p95 wait", "max wait"]
    body = [[r["size_class"], fmt_int(r["jobs_started"]), fmt_duration(r["wait_mean_s"]), fmt_duration(r["wait_median_s"]),
             fmt_duration(r["wait_p95_s"]), fmt_duration(r["wait_max_s"])] for r in report["wait_by_size"]]
    return head, body


def heldout_table(report: dict) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Contender rows; each cell is (text, is_winner_of_its_column)."""
    from metapilot.models.evaluation.heldout import METRIC_BY_COLUMN

    v = report["heldout"]
    metrics = [METRIC_BY_COLUMN[c] for c in v["metrics"]]
    head = ["contender", "kind", *[m.label for m in metrics], "jobs"]
    body = []
    for r in v["rows"]:
        if r["status"] != "ok":
            body.append([(r["contender"], False), (r["kind"], False), ("unavailable", False),
                         *[("", False)] * (len(metrics) - 1), ("", False)])
            continue
        cells = [(r["contender"], False), (r["kind"], False)]
        for m in metrics:
            cells.append((_metric_fmt(m.unit)(r[m.column]), r["contender"] in v["winners"].get(m.column, [])))
        cells.append((fmt_int(r["jobs"]), False))
        body.append(cells)
    return head, body


def diffs_table(report: dict) -> tuple[list[str], list[list[str]]]:
    from metapilot.models.evaluation.heldout import METRIC_BY_COLUMN, interval_word

    head = ["measure", "compared with", "MetaPilot", "reference", "difference", "weekly 95% CI", "weeks", "reading"]
    body = []
    for d in report["heldout"]["diffs"]:
        m = METRIC_BY_COLUMN[d["metric"]]
        f = _metric_fmt(m.unit)
        diff = (fmt_pct(d["diff"], 2).replace("%", " pp") if m.unit == "fraction" else
                (("+" if d["diff"] > 0 else "") + f(d["diff"])))
        ci = "–" if d["ci_low"] is None else f"{f(d['ci_low'])} .. {f(d['ci_high'])}"
        word = "better" if d["better"] else ("equal" if d["diff"] == 0 else "worse")
        reading = word + ("" if d["ci_low"] is None else f", {interval_word(d, m)} over weeks")
        ref = d["reference"] + (" (best fixed)" if d["reference_kind"] == "best-fixed" else "")
        body.append([m.label, ref, f(d["controller_value"]), f(d["reference_value"]), diff, ci, str(d["weeks"]), reading])
    return head, body


def roi_table(report: dict) -> tuple[list[str], list[list[str]]]:
    from metapilot.models.evaluation.roi import RoiResult, roi_rows

    results = [RoiResult.from_dict(r) for r in report["roi"]["results"]]
    head = ["", *[f"vs {r.reference_kind}" for r in results]]
    return head, [[label, *vals] for label, vals in roi_rows(results)]


def placement_table(report: dict) -> tuple[list[str], list[list[str]]]:
    """Latest placement replay per policy and mode: SPEC §11's metrics (shares as %, waits as durations)."""
    head = ["mode", "policy", *PLACEMENT_METRICS]
    body = []
    for r in report.get("placement") or []:
        cells = [r["mode"], r["policy"]]
        for k in PLACEMENT_METRICS:
            v = r.get(k)
            cells.append(fmt_int(v) if k in ("pods", "placed", "failed") else
                         fmt_duration(v) if k == "mean_wait_s" else fmt_pct(v, 2) if v is not None else "–")
        body.append(cells)
    return head, body


PLACEMENT_NOTE = ("Latest replay of each policy on the cluster's node list (`metapilot place replay`; a PPO "
                  "policy id is a trained agent, `metapilot place train`). time: the pods at their logged times "
                  "(shares and imbalance time-weighted); inflate: the FGD paper's experiment, figures when the "
                  "arrived GPU demand reaches 100% of the cluster's. imbalance: standard deviation of node "
                  "utilisation.")


def recommendation_summary(report: dict) -> str:
    rec = report["recommendations"]
    if rec["status"] != "ok":
        return rec["message"]
    share = ", ".join(f"{k} {fmt_pct(v, 0)}" for k, v in sorted(rec["share"].items()))
    legend = "; ".join(f"{k} = {m}" for k in sorted(rec["share"]) if (m := plots.objective_meaning(k)))
    text = (f"Policy {rec['policy_id']} recommends, over the {rec['epochs']} epochs of the week: {share} "
            f"({rec['switches']} switches). {legend + '. ' if legend else ''}"
            "Recommendations are scored on the observed (as-run) state of each epoch.")
    if rec.get("published") is False:
        text += (" This controller is not the one the publish gate kept (see 'What to run'): its recommendations "
                 "are for comparison only.")
    return text


def headline(report: dict) -> list[tuple[str, str, str]]:
    """(label, value, vs the previous four weeks) for the whole cluster."""
    c = next(r for r in report["glance"] if r["scope"] == "cluster")
    has_gpu = (c["capacity_gpus"] or 0) > 0
    prev = c["prev_weeks"] > 0

    def cmp(cur, p, f) -> str:
        if not prev:
            return "no earlier weeks"
        ch = fmt_change_pp(cur, p) if f is fmt_pct else fmt_change(cur, p)
        return f"4 wk: {f(p)}" + (f" ({ch})" if ch else "")

    items = [("jobs submitted", fmt_int(c["jobs_submitted"]), cmp(c["jobs_submitted"], c["prev_jobs_submitted"], fmt_int)),
             ("core-hours", fmt_int(c["cpu_hours"]), cmp(c["cpu_hours"], c["prev_cpu_hours"], fmt_int))]
    if has_gpu:
        items.append(("GPU-hours", fmt_int(c["gpu_hours"]), cmp(c["gpu_hours"], c["prev_gpu_hours"], fmt_int)))
    items.append(("core utilisation", fmt_pct(c["utilisation_cpu"]), cmp(c["utilisation_cpu"], c["prev_utilisation_cpu"], fmt_pct)))
    if has_gpu:
        items.append(("GPU utilisation", fmt_pct(c["utilisation_gpu"]), cmp(c["utilisation_gpu"], c["prev_utilisation_gpu"], fmt_pct)))
    items += [("mean wait", fmt_duration(c["wait_mean_s"]), cmp(c["wait_mean_s"], c["prev_wait_mean_s"], fmt_duration)),
              ("p95 wait", fmt_duration(c["wait_p95_s"]), cmp(c["wait_p95_s"], c["prev_wait_p95_s"], fmt_duration)),
              ("max wait", fmt_duration(c["wait_max_s"]), cmp(c["wait_max_s"], c["prev_wait_max_s"], fmt_duration))]
    return items


def capacity_line(report: dict) -> str:
    caps = report["capacity"]
    if not caps:
        return "capacity unknown: utilisation cannot be computed (load it with `metapilot capacity --config`)"
    parts = [f"{partition_name(c['partition'])}: {fmt_int(c['cores'])} cores"
             + (f", {fmt_int(c['gpus'])} GPUs" if c["gpus"] else "") + f" ({c['source']})" for c in caps]
    warn = " (inferred from the peak allocation in the logs: utilisation depends on it)" if any(
        c["source"] == "inferred-peak" for c in caps) else ""
    return "capacity: " + "; ".join(parts) + warn


# --- HTML -----------------------------------------------------------------------------------------

CSS = """
:root { --ink:#111827; --muted:#6b7280; --line:#e5e7eb; --accent:#0f766e; --win:#065f46; --winbg:#d1fae5; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--ink);
       max-width: 1020px; margin: 0 auto; padding: 24px 28px 48px; }
header h1 { font-size: 22px; margin: 0 0 4px; }
header p { margin: 2px 0; color: var(--muted); }
nav { margin: 14px 0 8px; font-size: 13px; }
nav a { color: var(--accent); text-decoration: none; margin-right: 14px; }
section { margin-top: 26px; }
h2 { font-size: 17px; border-bottom: 2px solid var(--accent); padding-bottom: 3px; margin: 0 0 10px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; margin-bottom: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
.card .label { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.card .value { font-size: 20px; font-weight: 600; }
.card .prev { font-size: 11px; color: var(--muted); }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 8px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 6px; text-align: right; vertical-align: top; }
th { background: #f9fafb; font-weight: 600; }
th:first-child, td:first-child { text-align: left; }
td.win { background: var(--winbg); color: var(--win); font-weight: 700; }
img { max-width: 100%; height: auto; display: block; margin: 6px 0; }
.note { color: var(--muted); font-size: 12.5px; }
.verdict { border-left: 4px solid var(--accent); background: #f0fdfa; padding: 8px 12px; margin: 8px 0; }
.verdict.loses { border-left-color: #b45309; background: #fffbeb; }
.verdict p { margin: 3px 0; }
.empty { border: 1px dashed #9ca3af; padding: 10px 12px; color: #374151; background: #f9fafb; }
footer { margin-top: 34px; font-size: 11.5px; color: var(--muted); border-top: 1px solid var(--line); padding-top: 8px; }
@page { size: A4; margin: 14mm 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 10.5pt; }
  nav { display: none; }
  section { break-inside: avoid-page; page-break-inside: avoid; }
  section.long { break-inside: auto; page-break-inside: auto; }
  table { font-size: 8.5pt; }
  tr { break-inside: avoid; }
  .card { border-color: #9ca3af; }
  td.win { background: none; text-decoration: underline; }
  a { color: inherit; text-decoration: none; }
}
"""


def _e(s: object) -> str:
    return html.escape("" if s is None else str(s))


def _html_table(head: Sequence[str], body: Sequence[Sequence[object]], caption: str | None = None) -> str:
    out = ["<table>"]
    if caption:
        out.append(f"<caption class='note'>{_e(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>")
    for row in body:
        cells = []
        for c in row:
            text, win = c if isinstance(c, tuple) else (c, False)
            cells.append(f"<td class='win'>{_e(text)}</td>" if win else f"<td>{_e(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _img(uri: str | None, alt: str) -> str:
    return f"<img src=\"{uri}\" alt=\"{_e(alt)}\">" if uri else f"<p class='empty'>No data to plot: {_e(alt)}.</p>"


def render_html(report: dict) -> str:
    """The report as one self-contained HTML page."""
    cluster, week = report["cluster"], report["week"]
    sec: dict[str, str] = {}

    cards = "".join(f"<div class='card'><div class='label'>{_e(a)}</div><div class='value'>{_e(b)}</div>"
                    f"<div class='prev'>{_e(c)}</div></div>" for a, b, c in headline(report))
    head, body = glance_table(report)
    sec["glance"] = (f"<div class='cards'>{cards}</div>" + _html_table(head, body) +
                     "<p class='note'>Waits are over the jobs started in the week; “4 wk” compares with the four weeks "
                     "before (jobs and hours: weekly average; mean wait: all their jobs pooled; p95: average of the "
                     "weekly p95; max: the longest). " + _e(capacity_line(report)) + "</p>")
    head, body = daily_table(report)
    sec["daily"] = _img(plots.daily_utilisation(report), "daily utilisation") + _html_table(head, body)
    qs = queue_summary(report)
    qtext = ("No hourly data." if not qs["hours"] else
             f"Peak {fmt_int(qs['queued_jobs_max'])} jobs queued ({_e(qs['queued_jobs_max_at'][:16].replace('T', ' '))} UTC); "
             f"{fmt_num(qs['queued_jobs_mean'])} on average; the queue was empty at {qs['hours_queue_empty']} of "
             f"{qs['hours']} hours. Queue = jobs submitted and not yet started, at the start of each hour.")
    sec["queue"] = _img(plots.queue_length(report), "queue length") + f"<p class='note'>{_e(qtext)}</p>"
    head, body = size_table(report)
    sec["waits"] = (_img(plots.wait_by_size(report), "wait by job size") + _html_table(head, body)
                    if report["wait_by_size"] else "<p class='empty'>No job started this week.</p>")
    rec = report["recommendations"]
    sec["recommendations"] = ((_img(plots.recommendations(report), "recommended objective") +
                               f"<p class='note'>{_e(recommendation_summary(report))}</p>") if rec["status"] == "ok"
                              else f"<p class='empty'>{_e(rec['message'])}</p>")
    sec["heldout"] = _heldout_html(report)
    sec["roi"] = _roi_html(report)
    sec["backtest"] = _backtest_html(report)
    sec["data_quality"] = _data_quality_html(report)

    shown = SECTIONS
    if report.get("placement"):
        head, body = placement_table(report)
        sec["placement"] = _html_table(head, body) + f"<p class='note'>{_e(PLACEMENT_NOTE)}</p>"
        shown = SECTIONS[:-1] + (PLACEMENT, SECTIONS[-1])
    nav = "".join(f"<a href='#{k}'>{_e(t)}</a>" for k, t in shown)
    sections = "".join(f"<section id='{k}'{' class=long' if k == 'heldout' else ''}><h2>{_e(t)}</h2>{sec[k]}</section>"
                       for k, t in shown)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(cluster)} weekly report {_e(week)}</title><style>{CSS}</style></head><body>"
        f"<div class='verdict{'' if report['decision'].get('kind') == 'controller' else ' loses'}' id='decision'>"
        f"<p><b>What to run:</b> {_e(report['decision']['message'])}</p></div>"
        f"<header><h1>{_e(cluster)}: weekly report {_e(week)}</h1>"
        f"<p>{_e(report['week_start'][:10])} to {_e(report['week_end'][:10])} (ISO week, UTC) · "
        f"generated {_e(report['generated_at'].replace('T', ' ')[:16])} UTC</p></header>"
        f"<nav>{nav}</nav>{sections}"
        "<footer>Every figure is the result of the queries in <code>sql/reports/</code> run on the warehouse "
        f"(marts: Open XDMoD definitions; replay: SPEC §6). Code version {_e(report['code_version'])}. "
        "The same numbers are in report.json and report.md.</footer></body></html>\n"
    )


def data_quality_lines(report: dict) -> tuple[list[str], list[str], str | None]:
    """(summary lines, warnings, link to the GX data docs) of the report's data-quality section."""
    dq = report.get("data_quality") or {}
    if not dq:
        return ["No data-quality information for this report."], [], None
    share = dq.get("quarantined_share")
    lines = [f"{fmt_int(dq.get('files'))} ingested files, {fmt_int(dq.get('lines'))} lines; "
             f"{fmt_int(dq.get('quarantined'))} quarantined ({fmt_pct(share, 2) if share is not None else '–'}), "
             "each with its reason in the quarantine table.",
             f"Data checks (great-expectations suite): {fmt_int(dq.get('data_check_failed_files'))} file(s) with "
             "rows that failed an expectation (those rows are quarantined)."]
    warnings = [f"{w['file']}: {w['warning']}" for w in dq.get("warnings") or []]
    lines += [f"Not loaded ({w['outcome']}): {w['file']}: {w['why']}" for w in dq.get("lost") or []]
    if dq.get("docs_message"):
        lines.append(dq["docs_message"])
    return lines, warnings, dq.get("docs_link")


def _data_quality_html(report: dict) -> str:
    lines, warnings, link = data_quality_lines(report)
    out = "".join(f"<p class='note'>{_e(x)}</p>" for x in lines)
    if warnings:
        out += "<p>Files over the 1% quarantine warning:</p><ul>" + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul>"
    if link:
        out += f"<p><a href=\"{_e(link)}\">Validation results of every ingested file (GX data docs)</a></p>"
    return out


def _heldout_html(report: dict) -> str:
    v = report["heldout"]
    if v["status"] != "ok":
        return f"<p class='empty'>{_e(v['message'])}</p>"
    loses = not any("MetaPilot" in w for w in v["winners"].values()) or any(
        "does NOT win" in line or "was not replayed" in line for line in v["verdict"])
    head, body = heldout_table(report)
    out = [f"<p class='note'>Validation {_e(v['heldout_id'])} of policy {_e(v['policy_id'])}: held-out window "
           f"{_e(v['window_from'][:16].replace('T', ' '))} to {_e(v['window_to'][:16].replace('T', ' '))} UTC, replayed "
           "under every contender. Highlighted: best in its column (ties all marked).</p>",
           f"<div class='verdict{' loses' if loses else ''}'>" + "".join(f"<p>{_e(x)}</p>" for x in v["verdict"]) + "</div>",
           _html_table(head, body)]
    notes: dict[str, list[str]] = {}
    for r in v["rows"]:
        if r["note"]:
            notes.setdefault(r["note"], []).append(r["contender"])
    out += [f"<p class='note'>{_e(', '.join(n))}: {_e(t)}</p>" for t, n in notes.items()]
    if v["diffs"]:
        head, body = diffs_table(report)
        out.append("<p class='note'>The controller against the best fixed contender on each measure and against the "
                   "as-run history; intervals: paired bootstrap over weeks (95%).</p>" + _html_table(head, body))
    out.append(_img(plots.heldout_weeks(report), "weekly mean wait of the contenders"))
    return "".join(out)


def _roi_html(report: dict) -> str:
    roi = report["roi"]
    assumptions = "<ul class='note'>" + "".join(f"<li>{_e(a)}</li>" for a in roi["assumptions"]) + "</ul>"
    if roi["status"] != "ok":
        return f"<p class='empty'>{_e(roi['message'])}</p><p class='note'>Assumptions the ROI would use:</p>" + assumptions
    head, body = roi_table(report)
    note = f"<div class='verdict loses'><p>{_e(roi['note'])}</p></div>" if roi.get("note") else ""
    return note + _html_table(head, body) + "<p class='note'>Assumptions:</p>" + assumptions


def _backtest_html(report: dict) -> str:
    bt = report.get("backtest") or {"status": "none", "message": "No walk forward in this report."}
    if bt["status"] != "ok":
        return f"<p class='empty'>{_e(bt['message'])}</p>"
    lines = walk_forward.summary_lines(bt)
    out = [f"<p class='note'>{_e(lines[0])}</p>",
           f"<div class='verdict{'' if bt['bar'].get('met') else ' loses'}'>" + "".join(f"<p>{_e(x)}</p>" for x in lines[1:]) + "</div>",
           _img(plots.backtest_cumulative(report), "cumulative wait over the walk forward"),
           _html_table(*walk_forward.regret_table(bt)),
           "<p>What MetaPilot ran, period by period (each decided at the period's start from the past alone):</p><ul>"
           + "".join(f"<li>{_e(x)}</li>" for x in walk_forward.period_lines(bt)) + "</ul>"]
    return "".join(out)


# --- Markdown -------------------------------------------------------------------------------------


def _md_table(head: Sequence[str], body: Sequence[Sequence[object]]) -> str:
    def cell(c: object) -> str:
        text, win = c if isinstance(c, tuple) else (c, False)
        text = str(text).replace("|", "\\|")
        return f"**{text}**" if win and text else text

    lines = ["| " + " | ".join(cell(h) for h in head) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def render_markdown(report: dict) -> str:
    """The report as Markdown (tables, no figures: they are in report.html)."""
    out = [f"**What to run:** {report['decision']['message']}",
           f"\n# {report['cluster']}: weekly report {report['week']}",
           f"{report['week_start'][:10]} to {report['week_end'][:10]} (ISO week, UTC); generated "
           f"{report['generated_at'].replace('T', ' ')[:16]} UTC. Figures: see report.html."]
    out.append(f"\n## {TITLES['glance']}\n")
    out.append("\n".join(f"- **{a}**: {b} ({c})" for a, b, c in headline(report)))
    out.append("\n" + _md_table(*glance_table(report)))
    out.append(f"\n{capacity_line(report)}")
    out.append(f"\n## {TITLES['daily']}\n\n" + _md_table(*daily_table(report)))
    qs = queue_summary(report)
    out.append(f"\n## {TITLES['queue']}\n")
    out.append("No hourly data." if not qs["hours"] else
               f"Peak {fmt_int(qs['queued_jobs_max'])} jobs queued ({qs['queued_jobs_max_at'][:16].replace('T', ' ')} UTC); "
               f"{fmt_num(qs['queued_jobs_mean'])} on average; queue empty at {qs['hours_queue_empty']} of {qs['hours']} hours.")
    out.append(f"\n## {TITLES['waits']}\n\n" + (_md_table(*size_table(report)) if report["wait_by_size"] else "No job started this week."))
    out.append(f"\n## {TITLES['recommendations']}\n\n" + recommendation_summary(report))
    v = report["heldout"]
    out.append(f"\n## {TITLES['heldout']}\n")
    if v["status"] != "ok":
        out.append(v["message"])
    else:
        out.append(f"Validation {v['heldout_id']} of policy {v['policy_id']}, window {v['window_from'][:10]} to "
                   f"{v['window_to'][:10]}. Bold: best in its column.\n")
        out.append("\n".join(f"> {line}" for line in v["verdict"]))
        out.append("\n" + _md_table(*heldout_table(report)))
        if v["diffs"]:
            out.append("\n" + _md_table(*diffs_table(report)))
    roi = report["roi"]
    out.append(f"\n## {TITLES['roi']}\n")
    if roi["status"] != "ok":
        out.append(roi["message"])
    else:
        if roi.get("note"):
            out.append(f"**Note:** {roi['note']}\n")
        out.append(_md_table(*roi_table(report)))
    out.append("\nAssumptions:\n\n" + "\n".join(f"- {a}" for a in roi["assumptions"]))
    bt = report.get("backtest") or {"status": "none", "message": "No walk forward in this report."}
    out.append(f"\n## {TITLES['backtest']}\n")
    if bt["status"] != "ok":
        out.append(bt["message"])
    else:
        out.append("\n\n".join(walk_forward.summary_lines(bt)))
        out.append("\n" + _md_table(*walk_forward.regret_table(bt)))
        out.append("\nWhat MetaPilot ran, period by period:\n\n" + "\n".join(f"- {x}" for x in walk_forward.period_lines(bt)))
    if report.get("placement"):
        out.append(f"\n## {TITLES['placement']}\n\n" + _md_table(*placement_table(report)) + f"\n\n{PLACEMENT_NOTE}")
    lines, warnings, link = data_quality_lines(report)
    out.append(f"\n## {TITLES['data_quality']}\n")
    out.append("\n".join(lines))
    if warnings:
        out.append("\nFiles over the 1% quarantine warning:\n\n" + "\n".join(f"- {w}" for w in warnings))
    if link:
        out.append(f"\n[Validation results of every ingested file (GX data docs)]({link})")
    out.append(f"\n---\nFigures from `sql/reports/` on the warehouse; code version {report['code_version']}.\n")
    return _no_raw_html("\n".join(out))


def _no_raw_html(md: str) -> str:
    """Markdown passes raw HTML through (report.md, the Prefect artifact): names from the data (a
    cluster, a file) must not become tags, so `&` and `<` are written as entities; they render the
    same, and no line of the report uses HTML on purpose."""
    return md.replace("&", "&amp;").replace("<", "&lt;")
