"""The ROI model: arithmetic checked by hand on a small case, references chosen from a validation
table, configuration from TOML and options, and `metapilot roi` end to end."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
import pytest
from metapilot.models.evaluation.roi import (
    RoiConfig,
    RoiInputs,
    assumptions,
    compute_roi,
    load_roi_config,
    roi_from_heldout,
    roi_rows,
)
from metapilot.models.evaluation.heldout import WindowFigures, comparison_table

UTC = timezone.utc


def _inputs(**over) -> RoiInputs:
    base = dict(
        controller={"util_cpu_backlog": 0.75, "util_gpu": 0.5, "wait_mean_s": 3600.0, "wait_max_s": 36_000.0, "makespan_s": 400 * 3600.0},
        reference={"util_cpu_backlog": ("A", 0.70), "util_gpu": ("B", 0.4), "wait_mean_s": ("C", 7200.0),
                   "wait_max_s": ("D", 72_000.0), "makespan_s": ("A", 410 * 3600.0)},
        capacity_cores=100.0, capacity_gpus=8.0, window_hours=336.0, jobs=1000,
    )
    base.update(over)
    return RoiInputs(**base)


CFG = RoiConfig(cost_per_core_hour=0.05, cost_per_gpu_hour=2.0, value_per_wait_hour=1.0, deployment_cost=1000.0,
                horizon_weeks=10.0)


def test_arithmetic_by_hand():
    r = compute_roi(_inputs(), CFG, "best-fixed")
    # two weeks; +5 pp of 100 cores over 336 h = 1,680 core-hours, 840 per week
    assert r.window_weeks == 2.0
    assert r.util_gain_cpu == pytest.approx(0.05)
    assert r.recovered_core_hours == pytest.approx(1680.0)
    assert r.recovered_core_hours_per_week == pytest.approx(840.0)
    # +10 pp of 8 GPUs over 336 h = 268.8 GPU-hours, 134.4 per week
    assert r.recovered_gpu_hours == pytest.approx(268.8)
    assert r.recovered_gpu_hours_per_week == pytest.approx(134.4)
    # mean wait 2 h -> 1 h: 1 h per job, 1,000 jobs, 500 h per week
    assert r.wait_hours_saved_per_job == pytest.approx(1.0)
    assert r.wait_hours_saved == pytest.approx(1000.0)
    assert r.wait_hours_saved_per_week == pytest.approx(500.0)
    assert r.max_wait_reduction_s == pytest.approx(36_000.0) and r.max_wait_reduction_pct == pytest.approx(50.0)
    assert r.earlier_completion_h == pytest.approx(10.0)
    # 840 x 0.05 + 134.4 x 2 + 500 x 1 = 42 + 268.8 + 500 = 810.8 per week
    assert (r.value_core_per_week, r.value_gpu_per_week, r.value_wait_per_week) == pytest.approx((42.0, 268.8, 500.0))
    assert r.value_per_week == pytest.approx(810.8)
    assert r.payback_weeks == pytest.approx(1000.0 / 810.8)
    assert r.horizon_value == pytest.approx(8108.0)
    assert r.net_value == pytest.approx(7108.0)
    assert r.references == {"util_cpu_backlog": "A", "util_gpu": "B", "wait_mean_s": "C", "wait_max_s": "D",
                            "makespan_s": "A"}
    rows = dict(roi_rows([r]))
    assert rows["wait per job"] == ["1.000 h saved"] and rows["max wait"] == ["10.0 h shorter (50.0%)"]


def test_a_payback_beyond_ten_horizons_is_never():
    tiny = _inputs(controller={"util_cpu_backlog": 0.70, "util_gpu": 0.4, "wait_mean_s": 7199.0, "wait_max_s": 72_000.0,
                               "makespan_s": 410 * 3600.0})
    r = compute_roi(tiny, CFG, "best-fixed")
    assert 0 < r.value_per_week < 1000 / (10 * CFG.horizon_weeks) and r.payback_weeks is None
    assert RoiConfig().value_per_wait_hour > 0  # waiting is priced by default (documented in models/evaluation/roi.py)


def test_no_gain_means_no_payback():
    worse = _inputs(controller={"util_cpu_backlog": 0.69, "util_gpu": 0.4, "wait_mean_s": 9000.0, "wait_max_s": 80_000.0,
                                "makespan_s": 420 * 3600.0})
    r = compute_roi(worse, CFG, "best-fixed")
    assert r.recovered_core_hours == pytest.approx(-0.01 * 100 * 336)
    assert r.wait_hours_saved_per_job == pytest.approx(-0.5)
    assert r.value_per_week < 0 and r.payback_weeks is None
    assert r.net_value == pytest.approx(r.value_per_week * 10 - 1000)
    rows = dict(roi_rows([r]))
    assert rows["payback"] == ["never"]
    # a loss is said as one: never a negative "reduction"
    assert rows["wait per job"] == ["0.500 h more waiting"] and rows["max wait"][0].startswith("2.2 h longer")


def test_without_gpus_gpu_hours_are_not_counted():
    r = compute_roi(_inputs(capacity_gpus=0.0), CFG, "as-run")
    assert r.util_gain_gpu is None and r.recovered_gpu_hours == 0.0 and r.value_gpu_per_week == 0.0
    assert r.value_per_week == pytest.approx(42.0 + 500.0)


def _table(controller: bool = True) -> pl.DataFrame:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)

    def c(name, kind, mean, mx, util, span_h):
        o = {"wait_mean_s": mean, "wait_median_s": mean / 2, "wait_p95_s": mx / 2, "wait_p99_s": mx * 0.9,
             "wait_max_s": mx, "bsld_mean": 2.0, "util_cpu": util, "util_cpu_backlog": util, "util_gpu": None,
             "util_mem": None,
             "makespan_s": span_h * 3600.0, "jobs": 500, "jobs_not_run": 0, "first_submit": t0,
             "last_end": t0 + timedelta(hours=span_h)}
        return WindowFigures(name, kind, o)

    cs = [c("MetaPilot", "controller", 3000.0, 50_000.0, 0.72, 200.0) if controller else
          WindowFigures("MetaPilot", "controller", None, note="no replay"),
          c("fixed-U", "objective", 5000.0, 90_000.0, 0.73, 199.0),
          c("fixed-W", "objective", 3500.0, 40_000.0, 0.71, 201.0),
          c("SJF+easy", "baseline", 2500.0, 120_000.0, 0.70, 205.0),
          c("as-run", "history", 9000.0, 300_000.0, 0.60, 240.0)]
    return comparison_table(cs).with_columns(
        pl.lit(t0).alias("window_from"), pl.lit(t0 + timedelta(days=7)).alias("window_to"),
        pl.lit(64.0).alias("capacity_cores"), pl.lit(0.0).alias("capacity_gpus"))


def test_references_from_a_validation_table():
    best, asrun = roi_from_heldout(_table(), CFG)
    assert best.reference_kind == "best-fixed" and asrun.reference_kind == "as-run"
    # each measure against the fixed contender best on it
    assert best.references == {"util_cpu": "fixed-U", "util_cpu_backlog": "fixed-U", "wait_mean_s": "SJF+easy",
                               "wait_max_s": "fixed-W", "makespan_s": "fixed-U"}
    assert best.util_gain_cpu == pytest.approx(-0.01)
    assert best.recovered_core_hours == pytest.approx(-0.01 * 64 * 168)
    assert best.wait_hours_saved_per_job == pytest.approx(-500 / 3600)
    assert best.wait_hours_saved == pytest.approx(-500 / 3600 * 500)
    assert best.max_wait_reduction_s == pytest.approx(-10_000.0)
    assert best.earlier_completion_h == pytest.approx(-1.0)
    assert asrun.util_gain_cpu == pytest.approx(0.12)
    assert asrun.recovered_core_hours_per_week == pytest.approx(0.12 * 64 * 168)
    assert asrun.wait_hours_saved_per_week == pytest.approx(6000 / 3600 * 500)
    assert asrun.max_wait_reduction_pct == pytest.approx(100 * 250_000 / 300_000)
    assert asrun.earlier_completion_h == pytest.approx(40.0)
    v = 0.12 * 64 * 168 * 0.05 + 6000 / 3600 * 500 * 1.0
    assert asrun.value_per_week == pytest.approx(v)
    assert asrun.payback_weeks == pytest.approx(1000 / v)


def test_no_roi_without_the_controller():
    with pytest.raises(ValueError, match="not replayed.*no replay"):
        roi_from_heldout(_table(controller=False), CFG)


def test_config_from_toml_and_options(tmp_path):
    assert load_roi_config(tmp_path / "absent.toml") == RoiConfig()
    p = tmp_path / "roi.toml"
    p.write_text("[roi]\ncost_per_core_hour = 0.02\ndeployment_cost = 5000\ncurrency = \"EUR\"\n")
    cfg = load_roi_config(p, deployment_cost=None, horizon_weeks=26)
    assert (cfg.cost_per_core_hour, cfg.deployment_cost, cfg.currency, cfg.horizon_weeks) == (0.02, 5000, "EUR", 26)
    p.write_text("cost_per_gpu_hour = 3.5\n")  # top-level keys work too
    assert load_roi_config(p).cost_per_gpu_hour == 3.5
    p.write_text("[roi]\ncost_per_cpu_hour = 1\n")
    with pytest.raises(ValueError, match="unknown ROI settings"):
        load_roi_config(p)
    with pytest.raises(ValueError, match=">= 0"):
        RoiConfig(deployment_cost=-1)
    text = " ".join(assumptions(cfg, 336.0))
    for needle in ("core-hour", "GPU-hour", "wait-hour", "deployment cost", "horizon", "336.0 h", "best fixed", "payback"):
        assert needle in text


def test_roi_command(tmp_path):
    """`metapilot roi --heldout ID` on a stored held-out replay with the controller replayed."""
    from evidence_fixtures import (
        POLICY_ID,
        insert_policy,
        kth_warehouse,
        objective_replay,
        stub_controller,
    )
    from metapilot.models.evaluation.heldout import run_heldout
    from typer.testing import CliRunner

    from metapilot.cli import app

    db = tmp_path / "w.duckdb"
    con = kth_warehouse(db)
    insert_policy(con)
    replay, _ = objective_replay()
    vid = run_heldout(con, POLICY_ID, datetime(1996, 10, 21, tzinfo=UTC), datetime(1996, 11, 4, tzinfo=UTC),
                         replay=replay, controller_fn=stub_controller)
    con.close()
    (tmp_path / "roi.toml").write_text("[roi]\ndeployment_cost = 2500\n")
    res = CliRunner().invoke(app, ["roi", "--heldout", vid, "--db", str(db), "--cost-per-core-hour", "0.04"])
    assert res.exit_code == 0, res.output
    for needle in ("vs best-fixed", "vs as-run", "recovered core-hours / week", "wait per week", "payback",
                   "Assumptions", "cost of a core-hour: 0.04 USD", "deployment cost: 2,500 USD"):
        assert needle in res.output, needle
    # no publish decision yet: the figures come with what they are not
    flat = " ".join(res.output.split())  # the console wraps long lines
    assert "not the published one (no publish decision" in flat and "not a case for deploying it" in flat
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import promote

    con = connect(db)
    promote(con, POLICY_ID, vid, None, db=db)  # published: no such warning
    con.close()
    res = CliRunner().invoke(app, ["roi", "--validation", vid, "--db", str(db)])  # the old option name still works
    assert res.exit_code == 0 and "not the published one" not in res.output
    res = CliRunner().invoke(app, ["roi", "--validation", "val-missing", "--db", str(db)])
    assert res.exit_code == 2 and "no validation" in res.output
