"""Return on investment of the controller, from a stored held-out replay (SPEC §9).

A deliberately small model, every input printed with the result:

- **Recovered core-hours** = (controller's core utilisation while jobs wait - the reference's) x
  core capacity x hours of the checkpoint window; likewise **recovered GPU-hours** where the
  cluster has GPUs. Only utilisation while jobs wait counts (SPEC §6: over a whole window arrivals
  fix utilisation; a policy recovers capacity only by filling the machine while work is queued),
  so a gain means machine time that sat idle with work waiting.
- **Wait-hours saved** = (reference's mean wait - controller's mean wait) / 3600 per job, times the
  window's jobs; per week = divided by the window's weeks.
- **Maximum-wait reduction** = reference's max wait - controller's; **earlier completion** =
  reference's makespan - controller's (the window's work finishes that much sooner).
- **Value per week** = recovered core-hours x cost per core-hour + recovered GPU-hours x cost per
  GPU-hour + wait-hours saved x value of a user wait-hour, all per week of the window.
- **Payback** = deployment cost / value per week; "never" when the value is not positive or the
  payback would take longer than ten horizons (it will not happen in any planning period);
  **net value** over the horizon = value per week x horizon weeks - deployment cost.

References: each saving is measured against the *fixed contender that is best on that very
measure* (a fixed objective or a baseline; so the controller is never credited for beating a weak
rule), and separately against the as-run history. A negative saving is shown as what it is (more
waiting, a longer maximum), never as a negative "reduction".

Defaults (`RoiConfig`), to be replaced by the site's own figures in `warehouse/roi.toml`:
cost per core-hour 0.03 (a typical internal recharge rate of an academic cluster; cloud
on-demand is roughly 0.04-0.05 per vCPU-hour), cost per GPU-hour 1.00 (amortised on-premises
data-centre GPU; cloud is 2-4), value of a researcher's wait-hour 10 (a researcher costs about 50
an hour fully loaded, and about a fifth of the time their jobs wait is time they cannot work
around: set it to the site's own figure), deployment cost 10,000 (about two engineer-weeks to integrate, monitor and
retrain), horizon 52 weeks, currency USD.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import polars as pl

HOUR = 3600.0
WEEK_H = 168.0
BACKTEST_SPAN = "the walk forward's span"


@dataclass(frozen=True)
class RoiConfig:
    """Prices and horizon of the ROI model (see the module docstring for the defaults' sources)."""

    cost_per_core_hour: float = 0.03
    cost_per_gpu_hour: float = 1.00
    value_per_wait_hour: float = 10.0  # price of a researcher-hour spent waiting
    deployment_cost: float = 10_000.0
    horizon_weeks: float = 52.0
    currency: str = "USD"

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name != "currency" and (not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0):
                raise ValueError(f"roi.{f.name} must be a number >= 0 (got {v!r})")

    def to_dict(self) -> dict:
        return asdict(self)


def load_roi_config(path: str | Path | None = None, **overrides: Any) -> RoiConfig:
    """Defaults, then the TOML file (top-level keys or a `[roi]` table) if it exists, then the
    overrides that are not None (CLI options)."""
    cfg = RoiConfig()
    known = {f.name for f in fields(RoiConfig)}
    if path is not None and Path(path).exists():
        doc = tomllib.loads(Path(path).read_text())
        doc = doc.get("roi", doc)
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ValueError(f"{path}: unknown ROI settings {unknown}; known: {sorted(known)}")
        cfg = replace(cfg, **doc)
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"unknown ROI settings {unknown}; known: {sorted(known)}")
    return replace(cfg, **given)


@dataclass(frozen=True)
class RoiInputs:
    """What the model needs from a held-out replay: the controller's figures, the reference figure per
    measure (and who it comes from), capacity, window length and job count."""

    controller: dict[str, float | None]  # util_cpu, util_gpu, wait_mean_s, wait_max_s, makespan_s
    reference: dict[str, tuple[str, float | None]]  # measure -> (contender, value)
    capacity_cores: float
    capacity_gpus: float
    window_hours: float
    jobs: int


@dataclass(frozen=True)
class RoiResult:
    """The ROI against one reference (`reference_kind` 'best-fixed' or 'as-run')."""

    reference_kind: str
    references: dict[str, str]  # measure -> contender it was compared with
    window_hours: float
    window_weeks: float
    jobs: int
    util_gain_cpu: float | None
    util_gain_gpu: float | None
    recovered_core_hours: float
    recovered_gpu_hours: float
    recovered_core_hours_per_week: float
    recovered_gpu_hours_per_week: float
    wait_hours_saved_per_job: float | None
    wait_hours_saved: float
    wait_hours_saved_per_week: float
    max_wait_reduction_s: float | None
    max_wait_reduction_pct: float | None
    earlier_completion_h: float | None
    value_per_week: float
    value_core_per_week: float
    value_gpu_per_week: float
    value_wait_per_week: float
    payback_weeks: float | None  # None: never (no positive value)
    horizon_value: float
    net_value: float
    config: RoiConfig

    def to_dict(self) -> dict:
        d = asdict(self)
        d["config"] = self.config.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RoiResult:
        """Back from `to_dict` (report.json)."""
        return cls(**{**d, "config": RoiConfig(**d["config"])})


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def compute_roi(inputs: RoiInputs, config: RoiConfig, reference_kind: str) -> RoiResult:
    """The arithmetic of the module docstring, nothing else."""
    c, ref = inputs.controller, inputs.reference
    val = lambda k: ref.get(k, (None, None))[1]  # noqa: E731
    hours = inputs.window_hours
    weeks = hours / WEEK_H
    gain_cpu = _diff(c.get("util_cpu_backlog"), val("util_cpu_backlog"))
    gain_gpu = _diff(c.get("util_gpu"), val("util_gpu")) if inputs.capacity_gpus > 0 else None
    core_h = (gain_cpu or 0.0) * inputs.capacity_cores * hours
    gpu_h = (gain_gpu or 0.0) * inputs.capacity_gpus * hours
    per_job = _diff(val("wait_mean_s"), c.get("wait_mean_s"))
    per_job_h = None if per_job is None else per_job / HOUR
    wait_h = (per_job_h or 0.0) * inputs.jobs
    max_red = _diff(val("wait_max_s"), c.get("wait_max_s"))
    max_pct = None if max_red is None or not val("wait_max_s") else 100.0 * max_red / val("wait_max_s")
    earlier = _diff(val("makespan_s"), c.get("makespan_s"))
    per_week = lambda x: x / weeks if weeks > 0 else 0.0  # noqa: E731
    v_core = per_week(core_h) * config.cost_per_core_hour
    v_gpu = per_week(gpu_h) * config.cost_per_gpu_hour
    v_wait = per_week(wait_h) * config.value_per_wait_hour
    value = v_core + v_gpu + v_wait
    payback = config.deployment_cost / value if value > 0 else None
    if payback is not None and payback > 10 * max(config.horizon_weeks, 1.0):
        payback = None  # would take longer than ten planning horizons: never, in practice
    horizon = value * config.horizon_weeks
    return RoiResult(
        reference_kind=reference_kind, references={k: v[0] for k, v in ref.items()}, window_hours=hours,
        window_weeks=weeks, jobs=inputs.jobs, util_gain_cpu=gain_cpu, util_gain_gpu=gain_gpu,
        recovered_core_hours=core_h, recovered_gpu_hours=gpu_h, recovered_core_hours_per_week=per_week(core_h),
        recovered_gpu_hours_per_week=per_week(gpu_h), wait_hours_saved_per_job=per_job_h, wait_hours_saved=wait_h,
        wait_hours_saved_per_week=per_week(wait_h), max_wait_reduction_s=max_red, max_wait_reduction_pct=max_pct,
        earlier_completion_h=None if earlier is None else earlier / HOUR, value_per_week=value,
        value_core_per_week=v_core, value_gpu_per_week=v_gpu, value_wait_per_week=v_wait, payback_weeks=payback,
        horizon_value=horizon, net_value=horizon - config.deployment_cost, config=config,
    )


MEASURES: tuple[str, ...] = ("util_cpu", "util_cpu_backlog", "util_gpu", "wait_mean_s", "wait_max_s", "makespan_s")


def roi_from_heldout(table: pl.DataFrame, config: RoiConfig, controller: str = "MetaPilot") -> list[RoiResult]:
    """ROI against the best fixed contender (per measure) and against the as-run history, from a
    held-out replay's contender table (the `heldout_replays` rows). Raises ValueError when the controller
    has no figures (not replayed)."""
    from metapilot.models.evaluation.heldout import AS_RUN, best_fixed_on

    ok = table.filter(pl.col("status") == "ok")
    rows = {r["contender"]: r for r in ok.iter_rows(named=True)}
    if controller not in rows:
        note = table.filter(pl.col("contender") == controller)["note"].to_list()
        raise ValueError("the controller was not replayed in this held-out replay"
                         + (f" ({note[0]})" if note and note[0] else ""))
    c = rows[controller]
    first = table.row(0, named=True)
    hours = (first["window_to"] - first["window_from"]).total_seconds() / HOUR
    base = dict(controller={k: c[k] for k in MEASURES}, capacity_cores=float(first["capacity_cores"] or 0.0),
                capacity_gpus=float(first["capacity_gpus"] or 0.0), window_hours=hours, jobs=int(c["jobs"] or 0))
    out = []
    fixed = {}
    for k in MEASURES:
        name = best_fixed_on(table, k)
        if name is not None:
            fixed[k] = (name, rows[name][k])
    out.append(compute_roi(RoiInputs(reference=fixed, **base), config, "best-fixed"))
    if AS_RUN in rows:
        out.append(compute_roi(RoiInputs(reference={k: (AS_RUN, rows[AS_RUN][k]) for k in MEASURES}, **base),
                               config, "as-run"))
    return out


def roi_from_backtest(contenders: pl.DataFrame, config: RoiConfig, capacity_cores: float,
                      controller: str = "MetaPilot") -> list[RoiResult]:
    """ROI of following MetaPilot over a walk forward's span (the `backtests` rows of one
    backtest_id): against the site's current rule, then against the best admissible fixed rule held
    throughout in hindsight (the bar). Raises ValueError when MetaPilot has no figures."""
    ok = contenders.filter(pl.col("status") == "ok")
    rows = {r["contender"]: r for r in ok.iter_rows(named=True)}
    if controller not in rows:
        raise ValueError("MetaPilot's decisions were not replayed in this walk forward")
    c = rows[controller]
    measures = ("util_cpu_backlog", "wait_mean_s", "wait_max_s")
    hours = (c["span_to"] - c["span_from"]).total_seconds() / HOUR
    base = dict(controller={k: c.get(k) for k in MEASURES}, capacity_cores=float(capacity_cores or 0.0),
                capacity_gpus=0.0, window_hours=hours, jobs=int(c["jobs"] or 0))
    current = next((r for r in rows.values() if r["kind"] == "current"), None)
    out = []
    for kind, name, ref in (("current", c["current_rule"], current),
                            ("best admissible", c["reference"], rows.get(c["reference"] or ""))):
        if ref is not None:
            out.append(compute_roi(RoiInputs(reference={k: (name, ref[k]) for k in measures}, **base), config, kind))
    return out


def assumptions(config: RoiConfig, window_hours: float | None = None,
                window: str = "the checkpoint window") -> list[str]:
    """Every assumption of the model, in words, for the report and the CLI."""
    cur = config.currency
    lines = [
        f"cost of a core-hour: {config.cost_per_core_hour:,.4g} {cur}",
        f"cost of a GPU-hour: {config.cost_per_gpu_hour:,.4g} {cur}",
        f"value of a researcher's wait-hour: {config.value_per_wait_hour:,.4g} {cur}"
        + (" (wait time is not priced: set value_per_wait_hour in roi.toml to price it)" if config.value_per_wait_hour == 0
           else " (default: a fifth of a fully loaded researcher-hour; set value_per_wait_hour in roi.toml)"),
        f"deployment cost: {config.deployment_cost:,.0f} {cur}; horizon: {config.horizon_weeks:g} weeks",
        f"recovered hours = gain in utilisation while jobs wait x capacity x hours of {window}"
        + (f" ({window_hours:,.1f} h)" if window_hours is not None else ""),
        f"wait-hours saved = mean-wait difference per job x jobs of {window}; per week = / its weeks",
        "the replay's gains are assumed to repeat every week of the horizon (same workload, same capacity)",
        "payback = deployment cost / value per week; 'never' when the value per week is not positive or the "
        "payback would take more than ten horizons",
    ]
    if window == BACKTEST_SPAN:
        lines += [
            "'current': the site's rule today held over the span; 'best admissible': the fixed rule held throughout "
            "with the lowest bounded slowdown among those whose p99 and max wait stay within 1.5x the current rule's, "
            "chosen in hindsight (the walk forward's bar)",
            "each of MetaPilot's decisions was made at its origin from the past alone, and the replay carries the "
            "queue and running jobs across the periods: no part of the gain comes from knowing the span",
        ]
        return lines
    lines += [
        "'best fixed': for each measure, the fixed contender (fixed U/W or one of the 21 baselines) best on that "
        "measure; 'as-run': the logged history of the same jobs",
        "against the as-run history part of the gain is the replay's idealisation (it starts from an empty cluster, "
        "without outages, reservations or the jobs submitted before the window): read it as an upper bound",
    ]
    return lines


def fmt_money(v: float | None, currency: str) -> str:
    return "–" if v is None else f"{v:,.2f} {currency}"


def roi_rows(results: list[RoiResult]) -> list[tuple[str, list[str]]]:
    """(label, one formatted value per result) rows: the ROI table of the CLI, Markdown and HTML."""
    def n(v: float | None, unit: str = "", digits: int = 1) -> str:
        return "–" if v is None else f"{v:+,.{digits}f}{unit}"

    def saved(h: float | None, digits: int = 1) -> str:
        if h is None:
            return "–"
        return f"{abs(h):,.{digits}f} h saved" if h >= 0 else f"{abs(h):,.{digits}f} h more waiting"

    def shorter(s: float | None, pct: float | None) -> str:
        if s is None:
            return "–"
        word = "shorter" if s >= 0 else "longer"
        return f"{abs(s) / HOUR:,.1f} h {word}" + (f" ({abs(pct):.1f}%)" if pct is not None else "")

    def sooner(h: float | None) -> str:
        return "–" if h is None else (f"{abs(h):,.1f} h sooner" if h >= 0 else f"{abs(h):,.1f} h later")

    cur = results[0].config.currency if results else ""
    rows = [
        ("compared with", [r.reference_kind + (f" ({', '.join(sorted(set(r.references.values())))})"
                                               if set(r.references.values()) - {r.reference_kind} else "")
                           for r in results]),
        ("core utilisation gain while jobs wait", ["–" if r.util_gain_cpu is None else f"{100 * r.util_gain_cpu:+.2f} pp"
                                                  for r in results]),
        ("recovered core-hours / week", [n(r.recovered_core_hours_per_week, " h") for r in results]),
        ("recovered GPU-hours / week", [n(r.recovered_gpu_hours_per_week, " h") if r.util_gain_gpu is not None else "– (no GPUs)"
                                        for r in results]),
        ("wait per job", [saved(r.wait_hours_saved_per_job, 3) for r in results]),
        ("wait per week", [saved(r.wait_hours_saved_per_week) for r in results]),
        ("max wait", [shorter(r.max_wait_reduction_s, r.max_wait_reduction_pct) for r in results]),
        ("completion of the window's work", [sooner(r.earlier_completion_h) for r in results]),
        ("value / week", [f"{r.value_per_week:+,.2f} {cur}" for r in results]),
        ("payback", ["never" if r.payback_weeks is None else f"{r.payback_weeks:,.1f} weeks" for r in results]),
        ("net value over the horizon", [f"{r.net_value:+,.2f} {cur}" for r in results]),
    ]
    return rows
