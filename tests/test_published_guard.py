"""A walk forward's decision, published (issue 50): a rule with its tail guard or the planner, what
`steer` ranks by each cycle (the engine's guard: oldest first while a job has waited past it), what
`export` writes for the guard, and the planner refused where no configuration can say it."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from metapilot.cli import app
from metapilot.models.evaluation.walk_forward import RuleDecider
from metapilot.models.simulator.rules import TAIL_RULE, parse_rule
from metapilot.models.steering.decision import published
from metapilot.warehouse.db import connect
from metapilot.warehouse.publish_store import latest_decision, publish_walk_forward

RECORD = {"reference": "SJF+EASY", "current": "FCFS+EASY", "bar_met": True, "regret_bsld": -0.05,
          "regret_bsld_ci": [-0.1, -0.01], "regret_wait_mean": -0.02, "regret_wait_mean_ci": [-0.05, 0.01],
          "gain_bsld": 0.4, "gain_wait_mean": 0.3, "max_wait_ratio": 0.97, "words": "followed over the walk forward: x"}


def ahead(**kw) -> dict:
    base = {"rule": "SJF+EASY", "guard_h": 30.0, "policy_id": None, "source": "the guarded leader: leads",
            "planner": None, "guard_fired": 4, "planner_settings": None,
            "decision": "SJF+EASY, oldest first once a job has waited 30 h", "decided_at": "2024-03-01T00:00:00+00:00",
            "backtest_id": "bt-1", "record": RECORD}
    return {**base, **kw}


@pytest.fixture()
def db(tmp_path):
    path = str(tmp_path / "w.duckdb")
    con = connect(path)
    t = datetime(2024, 1, 1, tzinfo=timezone.utc)
    con.execute("INSERT INTO jobs (cluster, job_id, source_format, source_file_id, submit_time, timelimit_s, wait_s, "
                "ingested_at) VALUES ('c', '1', 'sacct', 'f', ?, 7200, 100, ?)", [t, t])
    con.close()
    return path


def test_a_guarded_rule_is_published_and_steered_as_the_engine_orders_it(db):
    con = connect(db)
    try:
        publish_walk_forward(con, "c", ahead(), db)
        assert latest_decision(con, "c")["guard_h"] == 30.0
        d = published(con, "c")
    finally:
        con.close()
    assert (d.kind, d.label, d.guard_h, d.backtest_id) == ("fixed", "SJF+EASY", 30.0, "bt-1")
    assert RECORD["words"] in d.source
    # the engine's guard (RuleDecider): the base rule until the oldest queued job has waited past the
    # guard, then TAIL_RULE for the whole queue; steer's objective is the same function of the same wait
    engine = RuleDecider("SJF+EASY", 30.0)
    for wait_h in (0.0, 29.9, 30.0, 30.1, 200.0):
        agg = [0.0] * 64
        from metapilot.models.evaluation.walk_forward import WAIT_MAX

        agg[WAIT_MAX] = wait_h * 3600.0
        expected = parse_rule(TAIL_RULE)[0] if engine.setting(None, agg) == engine.tail else "SJF"
        assert d.objective(wait_h * 3600.0) == expected


def test_export_writes_the_guard_where_the_scheduler_can_say_it_marked_approximate(db, tmp_path):
    con = connect(db)
    try:
        publish_walk_forward(con, "c", ahead(), db)
    finally:
        con.close()
    r = CliRunner().invoke(app, ["export", "--scheduler", "slurm", "--cluster", "c", "--db", db, "--out", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "s" / "metapilot-SJF+easy.slurm.conf").read_text()
    assert "PriorityMaxAge=1-06:00:00" in text or "PriorityMaxAge=" in text
    assert "tail guard (30 h" in text and "APPROXIMATE" in text and "approximate" in r.output
    r = CliRunner().invoke(app, ["export", "--scheduler", "pbspro", "--cluster", "c", "--db", db, "--out", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "p" / "metapilot-SJF+easy.pbspro.txt").read_text()
    assert "eligible_time / 108000" in text and "APPROXIMATE" in text


def test_a_published_planner_is_applied_by_steer_alone(db, tmp_path):
    con = connect(db)
    try:
        publish_walk_forward(con, "c", ahead(rule="planner", planner_settings={"horizon_h": 12.0, "lam": 0.0},
                                             decision="the lookahead planner (12 h horizon, lambda 0)"), db)
        d = published(con, "c")
    finally:
        con.close()
    assert (d.kind, d.planner["horizon_h"], d.guard_h) == ("planner", 12.0, 30.0)
    r = CliRunner().invoke(app, ["export", "--scheduler", "slurm", "--cluster", "c", "--db", db, "--out", str(tmp_path / "s")])
    assert r.exit_code == 2 and "applied by `metapilot steer --policy published` alone" in r.output


def test_approve_shows_the_record_before_anyone_approves(db):
    con = connect(db)
    try:
        publish_walk_forward(con, "c", ahead(), db)
    finally:
        con.close()
    r = CliRunner().invoke(app, ["approve", "--cluster", "c", "--db", db, "--show"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "published for c: SJF+EASY, oldest first once a job has waited 30 h" in flat and RECORD["words"] in flat
    assert "nothing approved" in flat
    con = connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM steer_approvals").fetchone()[0] == 0
    finally:
        con.close()
