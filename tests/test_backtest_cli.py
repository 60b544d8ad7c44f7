"""`metapilot backtest` end to end, as an operator runs it, on a real short log (HPC2N's 8-week
subset: one origin by default): the decision learned from the past only, the JSON the issue asks
for, the warehouse's tables, the weekly report's section, `roi --backtest`, and the fold's own
warehouse kept apart from the operator's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metapilot.cli import app

from conftest import SHARED_DATA

HPC2N = SHARED_DATA / "swf" / "HPC2N-subset-3170jobs.swf"
CLUSTER = "HPC2N-subset-3170jobs"

pytestmark = [pytest.mark.usefixtures("prefect_harness"),
              pytest.mark.skipif(not HPC2N.exists(), reason="../shared/data is not beside the repository")]


@pytest.fixture(scope="module", autouse=True)
def one_code_version():
    """A fold is keyed by the code version, which a commit in the checkout changes while the module
    runs (`git describe --dirty`); it is held still here so that reuse is what is tested."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("metapilot.ground.version.code_version", lambda: "test-version")
        yield


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> tuple[Path, dict, str]:
    d = tmp_path_factory.mktemp("backtest")
    db = str(d / "w.duckdb")
    r = CliRunner().invoke(app, ["ingest", str(HPC2N), "--db", db])
    assert r.exit_code == 0, r.output
    out = d / "bt.json"
    r = CliRunner().invoke(app, ["backtest", "--db", db, "--steps", "50", "--json", str(out)])
    assert r.exit_code == 0, r.output
    return d, json.loads(out.read_text()), r.output


def test_the_json_has_every_field_the_issue_names(walked):
    _, doc, output = walked
    assert doc["cluster"] == CLUSTER and len(doc["span"]) == 2
    assert [p["from"][:10] for p in doc["periods"]] == ["2002-09-09"] and doc["periods"][0]["decision"]
    kinds = {c["kind"] for c in doc["contenders"]}
    assert {"metapilot", "fixed", "current", "as-run", "leader", "guarded-leader", "planner", "oracle"} <= kinds
    assert sum(c["kind"] == "fixed" for c in doc["contenders"]) == 21
    for c in doc["contenders"]:
        assert {"name", "kind", "wait_mean_s", "wait_p95_s", "wait_p99_s", "wait_max_s", "bsld_mean", "regret_bsld",
                "regret_wait_mean", "regret_bsld_any", "regret_wait_mean_any"} <= set(c)
    ref = next(c for c in doc["contenders"] if c["name"] == doc["reference"])
    assert ref["kind"] == "fixed" and ref["regret_bsld"] == 0.0 and ref["admissible"]
    assert "Walk forward on HPC2N" in output and "Bar (issue 38)" in output


def test_the_warehouse_holds_the_walk_forward_and_none_of_the_folds_learning(walked):
    from metapilot.warehouse.db import connect

    d, doc, _ = walked
    con = connect(str(d / "w.duckdb"), read_only=True)
    try:
        n_contenders, = con.execute("SELECT count(*) FROM backtests WHERE backtest_id = ?", [doc["backtest_id"]]).fetchone()
        periods = con.execute("SELECT period, fold_gate, fold_policy_id FROM backtest_periods WHERE backtest_id = ?",
                              [doc["backtest_id"]]).fetchall()
        per, = con.execute("SELECT count(*) FROM backtest_contender_periods WHERE backtest_id = ?",
                           [doc["backtest_id"]]).fetchone()
        policies, = con.execute("SELECT count(*) FROM policies").fetchone()
        replays, = con.execute("SELECT count(*) FROM heldout_replays").fetchone()
    finally:
        con.close()
    assert n_contenders == len(doc["contenders"]) and per == n_contenders
    assert len(periods) == 1 and periods[0][1] in ("controller", "fixed") and periods[0][2]
    # the fold trained a policy and replayed it in its own warehouse, kept for the next walk forward
    assert policies == 0 and replays == 0
    folds = list((d / "backtests" / "folds" / CLUSTER).glob("2002-09-09-*/fold.json"))
    assert len(folds) == 1 and json.loads(folds[0].read_text())["policy_id"] == periods[0][2]


def test_the_weekly_report_says_what_following_metapilot_would_have_done(walked):
    d, doc, _ = walked
    r = CliRunner().invoke(app, ["report", "--cluster", CLUSTER, "--db", str(d / "w.duckdb"), "--out", str(d / "rep")])
    assert r.exit_code == 0, r.output
    md = next((d / "rep").rglob("report.md")).read_text()
    section = md.split("## If you had followed MetaPilot", 1)[1].split("\n## ", 1)[0]
    assert doc["backtest_id"] in section and f"| {doc['reference']} | fixed (reference)" in section
    assert "| MetaPilot | metapilot |" in section and "2002-09-09 .. 2002-09-23: " in section
    assert "wait-hours" in section and "per researcher wait-hour" in section
    html = next((d / "rep").rglob("report.html")).read_text()
    assert "If you had followed MetaPilot</h2>" in html and "cumulative wait over the walk forward" in html


def test_roi_prices_the_walk_forward(walked):
    d, doc, _ = walked
    r = CliRunner().invoke(app, ["roi", "--backtest", "latest", "--db", str(d / "w.duckdb"), "--value-per-wait-hour", "20"])
    assert r.exit_code == 0, r.output
    assert doc["backtest_id"] in r.output and "vs current" in r.output and "vs best admissible" in r.output
    assert "value of a researcher's wait-hour: 20 USD" in r.output
    r = CliRunner().invoke(app, ["roi", "--backtest", "bt-none", "--db", str(d / "w.duckdb")])
    assert r.exit_code == 2 and "no walk forward 'bt-none'" in r.output


def test_the_walk_forward_ends_with_the_decision_for_the_next_period_and_publishes_it_with_its_record(walked):
    """Decided at the span's end from all the past (as the monthly run will), with the walk-forward
    record as its reason; published, `approve` shows that record and `export` writes it."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import latest_decision, publish_walk_forward

    d, doc, _ = walked
    ahead = doc["next"]
    assert ahead["decided_at"][:19] == doc["span"][1][:19] and ahead["backtest_id"] == doc["backtest_id"]
    me = next(c for c in doc["contenders"] if c["name"] == "MetaPilot")
    rec = ahead["record"]
    assert rec["regret_bsld"] == me["regret_bsld"] and rec["gain_wait_mean"] == me["gain_wait_mean"]
    assert rec["reference"] == doc["reference"] and rec["bar_met"] == doc["bar"]["met"]
    assert f"regret against {doc['reference']}" in rec["words"] and "the current rule's" in rec["words"]
    kind = "planner" if ahead["planner_settings"] else "fixed"
    assert ahead["rule"] == ("planner" if kind == "planner" else ahead["rule"]) and ahead["source"]
    db = str(d / "w.duckdb")
    con = connect(db)
    try:
        publish_walk_forward(con, CLUSTER, ahead, db)
        pub = latest_decision(con, CLUSTER)
    finally:
        con.close()
    assert (pub["kind"], pub["recommendation"], pub["backtest_id"]) == (kind, ahead["rule"], doc["backtest_id"])
    assert pub["guard_h"] == ahead["guard_h"] and pub["planner"] == ahead["planner_settings"]
    assert pub["record"]["words"] == rec["words"] and rec["words"] in pub["message"]
    r = CliRunner().invoke(app, ["approve", "--cluster", CLUSTER, "--db", db, "--note", "test"])
    assert r.exit_code == 0, r.output
    label = "planner" if kind == "planner" else ahead["rule"]
    assert f"approved for steering on {CLUSTER}: {label}" in r.output and rec["words"][:60] in r.output
    r = CliRunner().invoke(app, ["export", "--scheduler", "slurm", "--cluster", CLUSTER, "--db", db,
                                 "--out", str(d / "export")])
    if kind == "planner":  # the planner replans every cycle: applied by steer alone
        assert r.exit_code == 2 and "steer --policy published` alone" in r.output
    else:
        assert r.exit_code == 0, r.output
        assert next((d / "export").glob("*.slurm.conf")).read_text().startswith(f"# MetaPilot: {ahead['rule']} (published ")


def test_pipeline_backtest_publishes_the_next_decision_and_says_it_first(walked):
    """The main job's first line is the walk forward's decision for the next period with its record,
    and the warehouse's latest publish decision is that one, backed by that walk forward."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import latest_decision

    d, _, _ = walked
    db = str(d / "w.duckdb")
    r = CliRunner().invoke(app, ["pipeline", "--backtest", "--db", db, "--steps", "50"])
    assert r.exit_code == 0, r.output
    first = next(line for line in r.output.splitlines() if line.strip() and not line.startswith("no logs named"))
    assert first.startswith(f"What to run on {CLUSTER} next: ") and "regret against" in r.output
    con = connect(db, read_only=True)
    try:
        pub = latest_decision(con, CLUSTER)
    finally:
        con.close()
    flat = " ".join(r.output.split())  # the console wraps long lines
    assert pub["backtest_id"] and pub["backtest_id"] in flat and " ".join(pub["record"]["words"].split()) in flat


def test_the_next_walk_forward_reuses_the_folds_whose_past_has_not_changed(walked):
    d, doc, _ = walked
    out = d / "again.json"
    r = CliRunner().invoke(app, ["backtest", "--db", str(d / "w.duckdb"), "--steps", "50", "--no-planner",
                                 "--json", str(out)])
    assert r.exit_code == 0, r.output
    again = json.loads(out.read_text())
    assert again["backtest_id"] != doc["backtest_id"]
    assert [p["decision"] for p in again["periods"]] == [p["decision"] for p in doc["periods"]]
    assert again["periods"][0]["fold_policy_id"] == doc["periods"][0]["fold_policy_id"]  # not learned again
    # (the last test of the module: "latest" is now this walk forward)


def test_current_conf_judges_every_contender_on_the_sites_slurm(walked, tmp_path):
    """`--current-conf` (issue 51): the current contender is the site's multifactor under its Slurm's
    backfill on its nodes, every contender is judged on that Slurm (the 21 rules are 7 orders there),
    and the replay's distance from the as-run history is said in the output, the JSON and the report;
    `--complete-s` gives the site's completing time to those replays (`site_conf`)."""
    d, doc, _ = walked
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=hpc2n\nPriorityType=priority/multifactor\nPriorityWeightAge=1000\n"
                    "PriorityWeightFairshare=10000\nNodeName=n[001-120] CPUs=2\n"
                    "PartitionName=batch Nodes=n[001-120] Default=YES MaxTime=INFINITE\n")
    out = d / "site.json"
    r = CliRunner().invoke(app, ["backtest", "--db", str(d / "w.duckdb"), "--steps", "50", "--no-planner",
                                 "--current-conf", str(conf), "--complete-s", "0.5", "--json", str(out)])
    assert r.exit_code == 0, r.output
    site = json.loads(out.read_text())
    assert site["current"] == "the site's Slurm (current)"
    names = {c["name"]: c["kind"] for c in site["contenders"]}
    assert names["the site's Slurm (current)"] == "current" and names["MetaPilot"] == "metapilot"
    assert sorted(n for n, k in names.items() if k == "fixed") == sorted(
        f"{p} on Slurm" for p in ("FCFS", "SJF", "SAF", "LAF", "WFP3", "UNICEF", "F1"))
    f = site["site_fidelity"]
    assert f["jobs"] > 1000 and -1.0 <= f["kendall_tau"] <= 1.0
    assert {"wait_mean_replay_s", "wait_mean_asrun_s", "wait_p95_replay_s", "wait_max_asrun_s"} <= set(f)
    assert "The site's Slurm replayed against the as-run history" in r.output
    assert "note: slurm.conf: no SelectType=: Slurm 22.05's default is select/linear" in " ".join(r.output.split())
    # the decisions, too, are made on the site's Slurm: the past's leader is one of the seven orders, and
    # each origin's fidelity check is the site's replay of the past against what it lived
    for p in site["periods"]:
        assert p["leader"].endswith("+EASY") and p["fidelity"]["jobs"] > 0
        assert "FCFS+EASY" not in p["why"] or "the site's own Slurm configuration" in p["why"]
    r = CliRunner().invoke(app, ["report", "--cluster", CLUSTER, "--db", str(d / "w.duckdb"), "--out", str(d / "rep2")])
    assert r.exit_code == 0, r.output
    md = next((d / "rep2").rglob("report.md")).read_text()
    assert "The site's Slurm (its slurm.conf) replayed against what it lived over the span" in md
    bad = CliRunner().invoke(app, ["backtest", "--db", str(d / "w.duckdb"), "--current-conf", str(tmp_path / "no.conf")])
    assert bad.exit_code == 2 and "no slurm.conf at" in bad.output
    tree = tmp_path / "shares.txt"
    tree.write_text("Account|User|RawShares\n root|root|1\n hpc||1\n")  # as `sshare -a -l -P` prints it
    for args, words in ((["--qos-priority", "normal=0"], "add --current-conf"),  # QOS priorities weigh in its multifactor
                        (["--current-conf", str(conf), "--qos-priority", "normal"], "name|priority"),
                        (["--complete-s", "1"], "add --current-conf"),  # the completing time is its Slurm's
                        (["--current-conf", str(conf), "--complete-s", "-1"], "0 or more"),
                        (["--shares", str(tree)], "add --current-conf"),  # the association tree is its Slurm's
                        (["--current-conf", str(conf), "--shares", str(tmp_path / "none.txt")], "sshare -a -l -P")):
        bad = CliRunner().invoke(app, ["backtest", "--db", str(d / "w.duckdb"), *args])
        assert bad.exit_code == 2 and words in bad.output, (args, bad.output)


def test_site_conf_is_the_slurm_conf_with_the_qos_and_the_completing_time(tmp_path):
    """What every replay of the walk forward's site Slurm reads: the slurm.conf's settings, the QOS
    priorities given and the completing time given; nothing without `--current-conf`."""
    from metapilot.flows.backtest import site_conf

    conf = tmp_path / "slurm.conf"
    conf.write_text("NodeName=n[1-4] CPUs=8\nPartitionName=batch Nodes=n[1-4] Default=YES\n"
                    "SchedulerParameters=bf_interval=5\n")
    site = site_conf(str(conf), {"high": 100}, 0.4)
    assert (site.sched.complete_s, site.sched.bf_interval, dict(site.priority.qos)) == (0.4, 5, {"high": 100})
    assert site_conf(str(conf)).sched.complete_s == 0.0 and site_conf(None) is None
