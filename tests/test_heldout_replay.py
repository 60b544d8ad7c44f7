"""Held-out replay on a small real window (KTH-SP2, three held-out weeks): every contender is
in the table, and the figures are consistent with the schedules they come from and with the raw
log. The objective-switching replay is the real `models.controller.replay.replay_objectives` when
it imports, else the stand-in of tests/evidence_fixtures.py (test ids say which)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
import pytest
from evidence_fixtures import (
    CLUSTER,
    POLICY_ID,
    TRAIN_FROM,
    TRAIN_TO,
    VALID_TO,
    insert_policy,
    kth_warehouse,
    objective_replay,
    stub_controller,
    write_test_artifact,
)
from metapilot.models.simulator import RULE_PAIRS, Capacity, simulate
from metapilot.models.evaluation.heldout import (
    AS_RUN,
    CONTROLLER,
    METRICS,
    baseline_name,
    bootstrap_mean_ci,
    controller_differences,
    run_heldout,
    verdict,
    winners,
)
from metapilot.transforms.workload import normalise
from metapilot.warehouse.sim_store import load_capacity, load_window
from metapilot.transforms.state import StateConfig
from metapilot.warehouse.heldout_store import load_heldout

REPLAY, REAL_REPLAY = objective_replay()
REPLAY_ID = "real-replay" if REAL_REPLAY else "stub-replay"
MENU = StateConfig().menu  # the default objectives, each held fixed as a contender
FIXED_U, FIXED_W = "fixed-SJF", "fixed-FCFS"  # SJF+EASY and FCFS+EASY (the seed's U and W)
PLANNERS = {"planner", "guard (SJF; WFP3 after 24 h)", "oracle (bound)"}  # default teacher settings (no card)
ALL = {CONTROLLER, AS_RUN} | {f"fixed-{n}" for n in MENU} | PLANNERS | {baseline_name(p, b) for p, b in RULE_PAIRS}


@pytest.fixture(scope="module")
def wh():
    con = kth_warehouse()
    insert_policy(con)
    yield con
    con.close()


@pytest.fixture(scope="module")
def val(wh):
    vid = run_heldout(wh, POLICY_ID, replay=REPLAY, controller_fn=stub_controller, seed=7)
    return load_heldout(wh, vid)


@pytest.fixture(scope="module")
def window(wh):
    jobs = load_window(wh, CLUSTER, TRAIN_TO, VALID_TO)
    capacity = Capacity.from_rows(load_capacity(wh, CLUSTER, TRAIN_TO))
    return jobs, normalise(jobs, TRAIN_TO), capacity


@pytest.mark.parametrize("replay_kind", [REPLAY_ID])
def test_every_contender_is_in_the_table(val, replay_kind):
    t = val.table
    assert set(t["contender"]) == ALL and t.height == 1 + len(MENU) + len(PLANNERS) + 21 + 1
    assert (t["status"] == "ok").all(), t.filter(pl.col("status") != "ok").select("contender", "note")
    kinds = dict(zip(t["contender"], t["kind"], strict=True))
    assert kinds[CONTROLLER] == "controller" and kinds[FIXED_U] == kinds[FIXED_W] == "objective"
    assert kinds[AS_RUN] == "history" and sum(k == "baseline" for k in kinds.values()) == 21
    assert kinds["planner"] == "planner" and kinds["oracle (bound)"] == "bound"
    assert t["contender"][0] == CONTROLLER  # controller first, history last
    assert t["contender"][-1] == AS_RUN
    meta = val.meta
    # default held-out window: right after training, as long as training (three weeks)
    assert meta["window_from"] == TRAIN_TO and meta["window_to"] == TRAIN_TO + (TRAIN_TO - TRAIN_FROM) == VALID_TO
    assert meta["policy_id"] == POLICY_ID and meta["cluster"] == CLUSTER
    assert meta["capacity_cores"] == 100 and meta["capacity_gpus"] == 0
    # the heldout_replays columns start as the issue says
    cols = val.table.columns
    assert cols[:3] == ["heldout_id", "policy_id", "contender"]
    assert cols[3:3 + len(METRICS)] == [m.column for m in METRICS]


def test_figures_are_internally_consistent(val, window):
    _, workload, _ = window
    for r in val.table.iter_rows(named=True):
        assert r["jobs"] + r["jobs_not_run"] == len(workload), r["contender"]
        assert 0 <= r["wait_median_s"] <= r["wait_p95_s"] <= r["wait_p99_s"] <= r["wait_max_s"], r["contender"]
        assert r["wait_mean_s"] <= r["wait_max_s"]
        assert r["bsld_mean"] >= 1.0
        assert 0.0 < r["util_cpu"] <= 1.0 and 0.0 < r["util_cpu_backlog"] <= 1.0
        assert r["util_gpu"] is None and r["util_mem"] is None  # KTH: no GPUs, memory unknown
        assert r["makespan_s"] == pytest.approx((r["last_end"] - r["first_submit"]).total_seconds(), abs=1e-3)


def test_utilisation_is_work_over_capacity_times_span(val, window):
    """Recomputed from each replay's schedule: sum(cores x (end - start)) / (100 x (last end - first submit))."""
    _, workload, capacity = window
    stored = {r["contender"]: r for r in val.table.iter_rows(named=True)}
    results = {baseline_name(p, b): simulate(workload, capacity, p, b) for p, b in RULE_PAIRS}
    results[FIXED_U] = REPLAY(workload, capacity, MENU.index("SJF"), epoch_s=3600)
    results[FIXED_W] = REPLAY(workload, capacity, MENU.index("FCFS"), epoch_s=3600)
    results[CONTROLLER] = REPLAY(workload, capacity, stub_controller, epoch_s=3600)
    for name, res in results.items():
        ok = ~np.isnan(res.start)
        work = float((workload.cores[ok] * (res.end[ok] - res.start[ok])).sum())
        span = float(res.end[ok].max() - workload.submit[ok].min())
        assert stored[name]["util_cpu"] == pytest.approx(work / (100.0 * span), rel=1e-12), name
        waits = res.start[ok] - workload.submit[ok]
        assert stored[name]["wait_mean_s"] == pytest.approx(waits.mean(), rel=1e-12), name
        assert stored[name]["wait_max_s"] == pytest.approx(waits.max()), name
        assert stored[name]["makespan_s"] == pytest.approx(span), name


def test_as_run_row_equals_the_raw_log(wh, val):
    """The as-run contender, recomputed from the jobs table alone: logged waits, the normalised
    work (size = max(alloc, req) cores, run cut at the requested time) over the logged span."""
    q = """
    WITH j AS (
        SELECT epoch(start_time) - epoch(submit_time) AS wait,
               epoch(submit_time) AS sub, epoch(start_time) AS st,
               greatest(alloc_cpus, coalesce(req_cpus, alloc_cpus)) AS cores,
               CASE WHEN timelimit_s > 0 THEN least(run_s, timelimit_s) ELSE run_s END AS run
        FROM jobs
        WHERE cluster = ? AND submit_time >= ? AND submit_time < ? AND run_s > 0 AND start_time IS NOT NULL
    )
    SELECT count(*), avg(wait), max(wait), quantile_cont(wait, 0.95), sum(cores * run),
           max(st + run) - min(sub), avg(greatest(1, (wait + run) / greatest(run, 10))),
           avg(greatest(1, (wait + run) / greatest(run, 10))) FILTER (WHERE run >= 60), count(*) FILTER (WHERE run < 60)
    FROM j
    """
    n, mean_w, max_w, p95_w, work, span, bsld, bsld_1min, short = wh.execute(q, [CLUSTER, TRAIN_TO, VALID_TO]).fetchall()[0]
    r = val.table.filter(pl.col("contender") == AS_RUN).row(0, named=True)
    assert r["jobs"] == n
    assert r["wait_mean_s"] == pytest.approx(mean_w, rel=1e-9)
    assert r["wait_max_s"] == pytest.approx(max_w)
    assert r["wait_p95_s"] == pytest.approx(p95_w, rel=1e-9)
    assert r["util_cpu"] == pytest.approx(work / (100 * span), rel=1e-9)
    assert r["makespan_s"] == pytest.approx(span)
    assert r["bsld_mean"] == pytest.approx(bsld, rel=1e-9)
    assert 0 < short < n  # both kinds of job are in the window, so the two means differ in what they count
    assert r["bsld_mean_1min"] == pytest.approx(bsld_1min, rel=1e-9)


def test_fixed_w_is_fcfs_easy(val):
    """W is defined as FCFS order with EASY backfilling: held all window it must replay exactly as
    the FCFS+easy baseline (models/controller/objectives.py)."""
    t = {r["contender"]: r for r in val.table.iter_rows(named=True)}
    for m in METRICS:
        assert t[FIXED_W][m.column] == t["FCFS+easy"][m.column], m.column


def test_weeks_sum_to_the_window(val):
    wk = val.weekly
    assert set(wk["contender"]) == ALL
    per = wk.group_by("contender").agg(pl.col("jobs").sum(), pl.col("jobs_completed").sum())
    jobs = dict(zip(val.table["contender"], val.table["jobs"], strict=True))
    for r in per.iter_rows(named=True):
        assert r["jobs"] == jobs[r["contender"]] == r["jobs_completed"]
    # waits by submit week: three full weeks of submissions
    assert wk.filter((pl.col("contender") == CONTROLLER) & (pl.col("jobs") > 0))["week"].to_list() == [
        "1996-W43", "1996-W44", "1996-W45"]


def test_winners_per_column(val):
    won = winners(val.table)
    assert set(won) == {"wait_mean_s", "wait_median_s", "wait_p95_s", "wait_p99_s", "wait_max_s", "bsld_mean",
                        "bsld_mean_1min", "util_cpu", "makespan_s", "util_cpu_backlog"}
    for m in METRICS:
        if m.column not in won:
            continue
        vals = val.table[m.column].to_numpy()
        best = np.nanmin(vals) if m.better == "min" else np.nanmax(vals)
        expect = {n for n, v in zip(val.table["contender"], vals, strict=True) if abs(v - best) <= 1e-9 * max(1, abs(best))}
        assert set(won[m.column]) == expect


def test_differences_and_bootstrap_intervals(val):
    d = val.diffs
    fixed = val.table.filter(pl.col("kind").is_in(["objective", "baseline"]))
    best = d.filter(pl.col("reference_kind") == "best-fixed")
    assert set(best["metric"]) == {"wait_mean_s", "wait_median_s", "wait_p95_s", "wait_p99_s", "wait_max_s", "bsld_mean",
                                   "bsld_mean_1min", "util_cpu", "makespan_s", "util_cpu_backlog"}
    ctrl = val.table.filter(pl.col("contender") == CONTROLLER).row(0, named=True)
    for r in best.iter_rows(named=True):
        m = next(x for x in METRICS if x.column == r["metric"])
        col = fixed[m.column]
        assert r["reference_value"] == (col.min() if m.better == "min" else col.max())
        assert r["diff"] == pytest.approx(ctrl[m.column] - r["reference_value"])
        assert r["better"] == (r["diff"] < 0 if m.better == "min" else r["diff"] > 0)
        if m.weekly:
            assert r["weeks"] >= 3 and r["n_boot"] == 2000 and r["seed"] == 7
            assert r["ci_low"] <= r["weekly_mean_diff"] <= r["ci_high"]
            # the weekly mean difference recomputed from heldout_weeks
            wk = val.weekly.filter(pl.col("contender").is_in([CONTROLLER, r["reference"]])).pivot(
                on="contender", index="week", values=m.column).drop_nulls()
            assert r["weeks"] == wk.height
            assert r["weekly_mean_diff"] == pytest.approx((wk[CONTROLLER] - wk[r["reference"]]).mean())
        else:
            assert r["ci_low"] is None and r["weeks"] == 0
    asrun = d.filter(pl.col("reference_kind") == "as-run")
    assert set(asrun["reference"]) == {AS_RUN} and asrun.height == best.height
    # same inputs and seed, same intervals
    again = controller_differences(val.table, val.weekly, n_boot=2000, seed=7)
    key = ["metric", "reference_kind"]
    assert again.select(*key, "ci_low", "ci_high").sort(key).equals(d.select(*key, "ci_low", "ci_high").sort(key))


def test_backlog_utilisation_by_hand():
    """2 cores; A (1 core, 0-10 s), B (2 cores, submitted at 0, 10 s), C (1 core, submitted at 5, 5 s).
    EASY backfills C at 5: backlog [0, 10) (B waits), used 1 x 10 + 1 x 5 = 15 of 2 x 10 -> 0.75.
    No backfilling: C waits until 20: backlog [0, 20), used 1 x 10 (A) + 2 x 10 (B) = 30 of 40 -> 0.75.
    Nobody waits (4 cores): None."""
    from metapilot.models.evaluation.heldout import backlog_utilisation
    from metapilot.transforms.workload import Workload

    w = Workload.from_arrays(submit=[0, 0, 5], run=[10, 10, 5], cores=[1, 2, 1])
    easy = simulate(w, Capacity.single(2), "FCFS", "easy")
    assert list(easy.start) == [0, 10, 5] and backlog_utilisation(easy) == pytest.approx(0.75)
    none = simulate(w, Capacity.single(2), "FCFS", "none")
    assert list(none.start) == [0, 10, 20] and backlog_utilisation(none) == pytest.approx(0.75)
    w2 = Workload.from_arrays(submit=[0, 0, 5, 30], run=[10, 10, 5, 10], cores=[1, 2, 1, 2])
    r = simulate(w2, Capacity.single(2), "FCFS", "easy")  # D starts at once at 30: same backlog as above
    assert backlog_utilisation(r) == pytest.approx(0.75)
    assert backlog_utilisation(simulate(w, Capacity.single(4), "FCFS", "easy")) is None


def test_bootstrap_by_hand():
    assert bootstrap_mean_ci(np.array([5.0, 5.0, 5.0])) == (5.0, 5.0, 5.0)
    assert bootstrap_mean_ci(np.array([2.0])) == (2.0, None, None)
    assert bootstrap_mean_ci(np.array([])) == (None, None, None)
    d = np.array([-3.0, -1.0, 0.0, 2.0])
    mean, lo, hi = bootstrap_mean_ci(d, n_boot=4000, seed=1)
    assert mean == pytest.approx(-0.5)
    assert -3.0 <= lo < mean < hi <= 2.0  # resampled means lie within the data's range
    assert bootstrap_mean_ci(d, n_boot=4000, seed=1) == (mean, lo, hi)


def test_verdict_is_plain(val):
    lines = verdict(val.table, val.diffs)
    won = winners(val.table)
    wins = [c for c, names in won.items() if CONTROLLER in names]
    if len(wins) < len(won):
        assert any("does NOT win" in line for line in lines)
    assert any("vs " in line and "CI" in line for line in lines)
    # a tie is not a win: a measure where a fixed rule is as good is never listed among the wins
    first = lines[0]
    assert first.startswith(f"{CONTROLLER} is significantly better than every fixed rule on ")
    listed = first.split(":", 1)[1].split(".")[0] if ":" in first.split(" measures")[1][:2] else ""
    for m in METRICS:
        names = won.get(m.column, [])
        tied_with_fixed = CONTROLLER in names and any(n != CONTROLLER and not n.startswith(("planner", "guard", "oracle"))
                                                      for n in names)
        if tied_with_fixed:
            assert m.label not in listed.split(", "), m.label
    # the publish record keeps the first sentences: what it wins, and what it does not
    from metapilot.models.evaluation.heldout import verdict_summary

    lost = [line for line in lines if "does NOT win" in line]
    assert verdict_summary(val.table, val.diffs) == " ".join([first] + lost)
    assert "95% CI" not in verdict_summary(val.table, val.diffs)  # the per-measure intervals stay in the report


def test_controller_unavailable_is_said_plainly(wh, monkeypatch):
    import metapilot.models.evaluation.heldout as mv

    monkeypatch.setattr(mv, "load_objective_replay", lambda: (None, "the objective-switching replay is not built"))
    vid = run_heldout(wh, POLICY_ID, TRAIN_TO, TRAIN_TO + timedelta(days=7))
    v = load_heldout(wh, vid)
    status = dict(zip(v.table["contender"], v.table["status"], strict=True))
    assert status[CONTROLLER] == status[FIXED_U] == status[FIXED_W] == "unavailable"
    assert sum(s == "ok" for s in status.values()) == 22  # 21 baselines + as-run
    assert v.table.filter(pl.col("status") == "unavailable")["wait_mean_s"].null_count() == 1 + len(MENU) + len(PLANNERS)
    assert v.diffs.height == 0
    text = " ".join(verdict(v.table, v.diffs))
    assert "was not replayed" in text and "not built" in text
    from metapilot.models.evaluation.heldout import verdict_summary

    assert verdict_summary(v.table, v.diffs) == text  # the publish record says the same


def test_published_policy_drives_the_controller(wh, tmp_path):
    """Without an injected controller the published artifact is loaded (checksums verified) and
    replayed; a tampered artifact makes the controller unavailable, saying why."""
    folder, sums = write_test_artifact(tmp_path, "kth-artifact")
    insert_policy(wh, "kth-artifact", path=str(folder), sums_sha256=sums)
    end = TRAIN_TO + timedelta(days=7)
    loaded = load_heldout(wh, run_heldout(wh, "kth-artifact", TRAIN_TO, end, replay=REPLAY))
    injected = load_heldout(wh, run_heldout(wh, POLICY_ID, TRAIN_TO, end, replay=REPLAY, controller_fn=stub_controller,
                                                  state_config=StateConfig(menu=("U", "W"))))  # the artifact's menu
    a = loaded.table.filter(pl.col("contender") == CONTROLLER).row(0, named=True)
    b = injected.table.filter(pl.col("contender") == CONTROLLER).row(0, named=True)
    assert a["status"] == "ok" and a["policy_id"] == "kth-artifact"
    for m in METRICS:
        assert a[m.column] == b[m.column], m.column  # same decisions, same schedule
    (folder / "policy.pt").write_bytes((folder / "policy.pt").read_bytes() + b"x")
    bad = load_heldout(wh, run_heldout(wh, "kth-artifact", TRAIN_TO, end, replay=REPLAY))
    row = bad.table.filter(pl.col("contender") == CONTROLLER).row(0, named=True)
    assert row["status"] == "unavailable" and "SHA-256 mismatch" in row["note"]
    assert bad.table.filter(pl.col("contender") == FIXED_W)["status"][0] == "ok"


def test_window_notes_and_errors(wh):
    from metapilot.models.evaluation.heldout import choose_window
    from metapilot.warehouse.policy_store import policy_row

    row = policy_row(wh, POLICY_ID)
    w = choose_window(wh, row)
    assert (w.start, w.end, w.notes) == (TRAIN_TO, VALID_TO, [])
    w = choose_window(wh, row, TRAIN_FROM, TRAIN_TO)
    assert any("not a held-out test" in n for n in w.notes)
    with pytest.raises(LookupError, match="no policy"):
        policy_row(wh, "nope")


def test_heldout_command(tmp_path):
    """`metapilot heldout` end to end on a warehouse file (the controller is reported unavailable
    unless a real policy artifact and replay exist)."""
    from typer.testing import CliRunner

    from metapilot.cli import app

    db = tmp_path / "w.duckdb"
    con = kth_warehouse(db)
    insert_policy(con)
    con.close()
    res = CliRunner().invoke(app, ["heldout", "--policy", POLICY_ID, "--db", str(db), "--to", "1996-10-28"])
    assert res.exit_code == 0, res.output
    out = res.output
    for name in ("MetaPilot", FIXED_U, FIXED_W, "FCFS+easy", "F1+conservative", "as-run", "planner"):
        assert name in out
    assert "was not replayed" in out  # no published artifact at /nonexistent/policy
    assert "stored as held-out replay val-" in out and "heldout_replays" in out
    res = CliRunner().invoke(app, ["heldout", "--policy", "missing", "--db", str(db)])
    assert res.exit_code == 2 and "no policy" in res.output
    # the old name still works for a release, and says the new one
    res = CliRunner().invoke(app, ["validate", "--policy", "missing", "--db", str(db)])
    assert res.exit_code == 2 and "now `metapilot heldout`" in res.output and "no policy" in res.output
    assert "validate" not in CliRunner().invoke(app, ["--help"]).output


def test_a_warehouse_from_before_the_one_minute_figure_gains_its_column():
    """Validations stored before `bsld_mean_1min` existed keep their rows and read it as NULL, and
    the measure is then left out of what is shown, not shown as a row of zeros."""
    import duckdb
    from metapilot.ground.paths import SQL_DIR
    from metapilot.models.evaluation.heldout import shown_metrics
    from metapilot.warehouse.db import apply_ddl, query_frame

    con = duckdb.connect(":memory:")
    old = (SQL_DIR / "ddl" / "030_heldout.sql").read_text()
    old = "\n".join(line for line in old.splitlines() if "bsld_mean_1min" not in line)
    con.execute(old)
    con.execute("INSERT INTO heldout_replays (heldout_id, contender, wait_mean_s, bsld_mean, kind, status, cluster, "
                "window_from, window_to, epoch_s, code_version, created_at) VALUES ('v1', 'MetaPilot', 10, 2.5, "
                "'controller', 'ok', 'c', now(), now(), 3600, 'x', now())")
    apply_ddl(con)
    table = query_frame(con, "SELECT * FROM heldout_replays")
    assert table["bsld_mean"][0] == 2.5 and table["bsld_mean_1min"][0] is None
    assert "bsld_mean_1min" in [r[0] for r in con.execute("DESCRIBE heldout_weeks").fetchall()]
    assert "bsld_mean_1min" not in [m.column for m in shown_metrics(table)]
