"""The steering loop against a stand-in Slurm (tests/steer_standin.py): batching, only changed jobs,
bad input (Slurm unreachable, unparsable squeue, a job gone before the update), dry run, release,
the live tail guard, approval, explain."""

from __future__ import annotations

import json
import time

import polars as pl
import numpy as np
import pytest
from steer_standin import band_factor, calls, job, make_bin, mini_cluster, site_factors, update_state
from typer.testing import CliRunner

from metapilot.cli.app import app
from metapilot.models.steering.decision import DecisionError, named_rule
from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
from metapilot.models.steering.slurm_cli import SlurmCli, SlurmUnreachable

NOW = time.time()
# the fixture's four jobs (9, 3, 7, 5 min) by SJF at step 10: 2, 4, 3, 1, every one in the band
SJF4 = {"2": band_factor(10, 0, 4), "4": band_factor(10, 1, 4), "3": band_factor(10, 2, 4), "1": band_factor(10, 3, 4)}


@pytest.fixture
def standin(tmp_path):
    jobs = [job(i, limit_min=m, submit=int(NOW) - 600 + i) for i, m in ((1, 9), (2, 3), (3, 7), (4, 5))]
    jobs += [job(5, limit_min=1, reason="JobHeldUser"), job(6, limit_min=1, state="RUNNING", reason="None")]
    return mini_cluster(tmp_path, jobs)


def _steerer(standin, **opts) -> Steerer:
    state, bin_dir, db = standin
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=opts.pop("step", 10), guard_h=opts.pop("guard_h", None), **opts))
    s.start()
    return s


def _table(db: str, sql: str) -> pl.DataFrame:
    from metapilot.warehouse.db import connect, query_frame

    con = connect(db, read_only=True)
    try:
        return query_frame(con, sql)
    finally:
        con.close()


def test_one_cycle_sets_the_rule_order_in_one_scontrol_process(standin):
    state, _, db = standin
    s = _steerer(standin)
    out = s.cycle()
    assert out.row["status"] == "ok" and out.row["changed"] == 4
    assert site_factors(state) == SJF4  # SJF: 3, 5, 7, 9 min, a gap of 8 steps between ranks
    updates = [c for c in calls(state) if c["tool"] == "scontrol" and not c["argv"]]
    assert len(updates) == 1 and updates[0]["lines"] == 5  # four updates and `quit`
    steered = _table(db, "SELECT job_id FROM steered_jobs WHERE released_at IS NULL ORDER BY job_id")
    assert steered["job_id"].to_list() == ["1", "2", "3", "4"]  # never the held (5) or the running (6) job
    row = _table(db, "SELECT * FROM steer_cycles").row(0, named=True)
    assert row["objective"] == "SJF" and json.loads(row["rpc_counts"]) == {"REQUEST_UPDATE_JOB": 7}
    again = s.cycle()  # nothing moved: nothing sent
    assert again.row["changed"] == 0 and len([c for c in calls(state) if c["tool"] == "scontrol" and not c["argv"]]) == 1


def test_slurm_unreachable_or_unparsable_changes_nothing_and_the_loop_goes_on(standin):
    state, _, db = standin
    s = _steerer(standin)
    update_state(state, mode="down")
    out = s.cycle()
    assert out.row["status"] == "error" and "Unable to contact slurm controller" in out.row["message"]
    update_state(state, mode="garbage")
    out = s.cycle()
    assert out.row["status"] == "error" and "did not answer JSON" in out.line
    assert site_factors(state) == {}
    update_state(state, mode="ok")
    assert s.cycle().row["status"] == "ok" and site_factors(state)
    assert _table(db, "SELECT status FROM steer_cycles ORDER BY started_at")["status"].to_list()[-3:] == ["error", "error", "ok"]


def test_a_job_gone_before_the_update_is_reported_and_the_others_set(standin):
    state, _, db = standin
    update_state(state, vanish=[4])
    out = _steerer(standin).cycle()
    assert out.row["failed"] == 1 and "gone before the update" in out.line and "Invalid job id" in out.line
    assert site_factors(state) == {j: v for j, v in SJF4.items() if j != "4"}
    assert sorted(_table(db, "SELECT job_id FROM steered_jobs WHERE released_at IS NULL")["job_id"]) == ["1", "2", "3"]


def test_dry_run_changes_nothing_and_records_the_shadow(standin):
    state, _, db = standin
    out = _steerer(standin, dry_run=True).cycle()
    assert out.row["mode"] == "dry-run" and out.row["changed"] == 4
    assert site_factors(state) == {} and not [c for c in calls(state) if c["tool"] == "scontrol" and not c["argv"]]
    assert _table(db, "SELECT count(*) AS n FROM steered_jobs")["n"][0] == 0
    shadow = _table(db, "SELECT job_id, rank FROM steer_shadow ORDER BY rank")
    assert shadow["job_id"].to_list() == ["2", "4", "3", "1"]


def test_release_sets_every_factor_back_to_zero_and_the_next_start_after_a_crash_releases(standin):
    state, bin_dir, db = standin
    _steerer(standin).cycle()
    assert site_factors(state) == SJF4
    # a crash: the process is gone, its jobs are still recorded as set; the next start releases them
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"), SteerOptions("mini", step=10))
    said = s.start()
    assert any("without releasing" in x for x in said)
    assert set(site_factors(state).values()) == {0}
    assert _table(db, "SELECT count(*) AS n FROM steered_jobs WHERE released_at IS NULL")["n"][0] == 0
    s.cycle()
    out = s.release("--release")
    assert out.row["status"] == "released" and out.row["changed"] == 4 and set(site_factors(state).values()) == {0}


class _DiesAfterUpdate(SlurmCli):
    """Slurm applies the update, then the loop's process dies before its cycle is recorded (a SIGKILL
    between `scontrol` and the warehouse, simulated by an exception nothing in the loop catches)."""

    def update_site_factors(self, groups):
        super().update_site_factors(groups)
        raise SystemExit("killed")


class _UpdateUnreachable(SlurmCli):
    def update_site_factors(self, groups):
        raise SlurmUnreachable("scontrol: error: Unable to contact slurm controller (connect failure)")


def test_factors_set_just_before_a_crash_are_recorded_first_and_released_at_the_next_start(standin):
    state, bin_dir, db = standin
    s = Steerer(_DiesAfterUpdate(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10))
    s.start()
    with pytest.raises(SystemExit):
        s.cycle()
    assert site_factors(state) == SJF4  # set in Slurm, the cycle never recorded
    open_rows = _table(db, "SELECT job_id FROM steered_jobs WHERE released_at IS NULL ORDER BY job_id")
    assert open_rows["job_id"].to_list() == ["1", "2", "3", "4"]  # written ahead of the update
    said = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                   SteerOptions("mini", step=10)).start()
    assert any("without releasing" in x for x in said)
    assert set(site_factors(state).values()) == {0}
    assert _table(db, "SELECT count(*) AS n FROM steered_jobs WHERE released_at IS NULL")["n"][0] == 0


def test_an_update_that_fails_whole_records_nothing_as_set_and_the_next_cycle_sets_again(standin):
    state, bin_dir, db = standin
    s = _steerer(standin)
    assert s.cycle().row["changed"] == 4
    update_state(state, jobs=json.loads(state.read_text())["jobs"] + [job(7, limit_min=2, submit=int(NOW) - 100)])
    live = s.slurm
    s.slurm = _UpdateUnreachable(bin_dir=str(bin_dir))
    out = s.cycle()
    assert out.row["status"] == "error" and "read back from Slurm: 0 of 1 set, 1 not set" in out.row["message"]
    current = _table(db, "SELECT job_id, site_factor FROM steered_jobs WHERE released_at IS NULL")
    assert dict(zip(current["job_id"], current["site_factor"])) == SJF4  # as before it
    s.slurm = live
    assert s.cycle().row["changed"] == 1  # job 7 (2 min) goes on top; the others keep their places
    current = _table(db, "SELECT job_id, site_factor FROM steered_jobs WHERE released_at IS NULL")
    assert dict(zip(current["job_id"], current["site_factor"])) == {**SJF4, "7": SJF4["2"] + 80} == site_factors(state)


def test_live_tail_guard_releases_pauses_and_goes_on(standin):
    state, bin_dir, db = standin
    s = _steerer(standin)
    s.cycle()
    s.opts.guard_h = 0.1  # job 1 has waited ~10 min > 6 min
    out = s.cycle()
    assert out.row["status"] == "guard" and "past the limit" in out.line and set(site_factors(state).values()) == {0}
    assert out.row["guard_job"] == "1" and "then steering goes on" in out.line
    assert s.cycle().row["status"] == "paused" and set(site_factors(state).values()) == {0}  # within the pause
    runner = CliRunner()
    args = ["steer", "--cluster", "mini", "--slurm", "--policy", "SJF+EASY", "--once", "--slurm-bin", str(bin_dir),
            "--db", db, "--step", "10", "--guard-h", "0.1"]
    res = runner.invoke(app, args)
    assert res.exit_code == 3 and "paused steering until" in res.output, res.output
    res = runner.invoke(app, [*args, "--guard-pause", "1m"])  # a minute later, say: no one resumes by hand
    assert res.exit_code == 3 and "paused" in res.output


def test_published_decision_needs_approval(standin):
    state, bin_dir, db = standin
    from datetime import datetime, timezone

    from metapilot.warehouse.db import connect

    con = connect(db)
    con.execute("INSERT INTO published_policies (cluster, partition, policy_id, published_at, kind, recommendation, message) "
                "VALUES ('mini', '*', 'p1', ?, 'fixed', 'SAF+easy', 'Keep SAF+EASY')", [datetime.now(timezone.utc)])
    con.close()
    runner = CliRunner()
    args = ["steer", "--cluster", "mini", "--slurm", "--once", "--slurm-bin", str(bin_dir), "--db", db]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "not approved" in res.output and site_factors(state) == {}
    res = runner.invoke(app, ["approve", "SJF+EASY", "--cluster", "mini", "--db", db])
    assert res.exit_code == 2 and "is SAF+EASY, not SJF+EASY" in res.output
    res = runner.invoke(app, ["approve", "--cluster", "mini", "--db", db, "--note", "reviewed the shadow report"])
    assert res.exit_code == 0 and "approved for steering on mini: SAF+EASY" in res.output
    res = runner.invoke(app, args)
    assert res.exit_code == 0 and "steering mini by SAF+EASY" in res.output and site_factors(state)
    res = runner.invoke(app, ["steer", "explain", "2", "--cluster", "mini", "--db", db])
    assert "rank 1 of" in res.output and "objective SAF" in res.output and "sprio" in res.output
    res = runner.invoke(app, ["steer", "explain", "6", "--cluster", "mini", "--db", db])
    assert "never set its site factor" in res.output


def test_unknown_rule_is_refused():
    with pytest.raises(DecisionError, match="unknown rule"):
        named_rule("FASTEST+EASY")


def test_ten_thousand_pending_batched_and_only_moved_jobs_change(tmp_path):
    """10,000 pending jobs: a handful of scontrol processes (one per 5,000 lines), not one per job; the
    start of a group's first job changes no other job, nor does a new job at the top (only its own)."""
    import random

    rng = random.Random(0)
    jobs = [job(i, limit_min=rng.randint(1, 2880), cpus=rng.choice([1, 4, 16, 64]), submit=int(NOW) - rng.randint(0, 86400))
            for i in range(1, 10_001)]
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"jobs": jobs, "mode": "ok"}))
    s = Steerer(SlurmCli(bin_dir=str(make_bin(tmp_path / "bin", state))), warehouse_connector(str(tmp_path / "w.duckdb")),
                named_rule("SAF+EASY"), SteerOptions("mini", step=10, max_changes=20_000))
    s.start()
    first = s.cycle()
    assert first.row["changed"] == 10_000 and first.row["failed"] == 0
    updates = [c for c in calls(state) if c["tool"] == "scontrol" and not c["argv"]]
    assert len(updates) == 2 and sum(c["lines"] - 1 for c in updates) == 10_000
    top = first.set.sort("site_factor", descending=True)["target"][0]
    doc = json.loads(state.read_text())
    for j in doc["jobs"]:
        if str(j["job_id"]) == top:
            j["job_state"], j["state_reason"] = "RUNNING", "None"
    doc["jobs"].append(job(99_999, limit_min=1, cpus=1, submit=int(NOW)))
    state.write_text(json.dumps(doc))
    second = s.cycle()
    assert second.row["changed"] == 1 and second.set["target"].to_list() == ["99999"], second.line


def test_steer_report_compares_the_shadow_with_the_real_start_order(standin):
    from datetime import datetime, timedelta, timezone

    from metapilot.warehouse.db import connect

    state, _, db = standin
    _steerer(standin, dry_run=True).cycle()  # shadow: 2, 4, 3, 1
    con = connect(db)
    t = datetime.now(timezone.utc) + timedelta(minutes=1)
    for k, jid in enumerate(["2", "4", "1", "3"]):  # Slurm started 1 before 3
        con.execute("INSERT INTO jobs (cluster, job_id, source_format, source_file_id, submit_time, start_time, ingested_at) "
                    "VALUES ('mini', ?, 'sacct', 'f', ?, ?, ?)", [jid, t - timedelta(hours=1), t + timedelta(minutes=k), t])
    con.close()
    res = CliRunner().invoke(app, ["steer", "report", "--cluster", "mini", "--db", db])
    assert res.exit_code == 0, res.output
    assert "1 dry-run cycles, 1 rankings" in res.output and "median 0.67" in res.output and "100%" in res.output


def test_live_state_uses_advises_aggregates():
    from metapilot.models.steering.live_state import live_aggregates, live_state
    from metapilot.models.steering.squeue import parse_sinfo, parse_squeue
    from metapilot.transforms.state import AGGREGATES, StateConfig

    now = 1_800_000_000
    doc = {"meta": {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}, "errors": [],
           "jobs": [job(1, limit_min=10, cpus=4, submit=now - 100), job(2, limit_min=30, cpus=8, submit=now - 7200),
                    job(3, limit_min=5, cpus=16, state="RUNNING", reason="None", submit=now - 50)]}
    _, jobs = parse_squeue(json.dumps(doc))
    nodes = parse_sinfo(json.dumps({"meta": doc["meta"], "errors": [], "nodes": [
        {"name": "n", "state": "mixed", "cpus": 64, "alloc_cpus": 16, "real_memory": 1000, "alloc_memory": 0}]}))
    agg = live_aggregates(jobs, nodes, now, StateConfig())
    assert set(agg) == set(AGGREGATES)
    assert agg["used_cpu"] == 16 and agg["cap_cpu"] == 64 and agg["queue_len"] == 2 and agg["queued_cpu"] == 12
    assert agg["wait_max_s"] == 7200 and agg["arrivals"] == 2 and agg["req_mean_s"] == 1200
    base = live_state(jobs, nodes, now, StateConfig())
    assert base.shape[0] == 1
    # lookahead features from the planner's rollouts of the live view: one per objective and the floor
    ahead = live_state(jobs, nodes, now, StateConfig(lookahead_h=2))
    n_menu = len(StateConfig().menu)
    assert ahead.shape == (1, base.shape[1] + n_menu + 1) and np.array_equal(ahead[:, :base.shape[1]], base)
    assert np.isfinite(ahead).all() and (ahead[0, base.shape[1]:] >= 0).all()
    with pytest.raises(ValueError, match="forecast"):  # a persistence forecast needs jobs squeue no longer shows
        live_state(jobs, nodes, now, StateConfig(lookahead_h=2, lookahead_forecast_h=24))
