"""`metapilot export`: a fragment (never a whole file) that names its rule, says exact or approximate
and why, never zeroes the site's weights, and sizes bf_window from the longest time limit."""

from __future__ import annotations

from datetime import datetime, timezone

from typer.testing import CliRunner

from metapilot.cli.app import app
from metapilot.models.steering.export import SiteFacts, merge_scheduler_parameters, pbspro_fragment, slurm_fragment

SITE_WEIGHTS = ("PriorityWeightFairshare", "PriorityWeightQOS", "PriorityWeightPartition", "PriorityWeightAssoc",
                "PriorityWeightTRES")


def _settings(text: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in text.splitlines() if ln and not ln.startswith("#"))


def test_slurm_fragment_never_touches_site_weights_and_says_why():
    facts = SiteFacts("c", longest_timelimit_s=3 * 86400, longest_wait_s=10 * 86400)
    for rule in ("FCFS", "SJF", "SAF", "LAF", "F1", "WFP3", "UNICEF"):
        for bf in ("none", "easy", "conservative"):
            f = slurm_fragment(rule, bf, facts, decision=f"{rule}+{bf}")
            s = _settings(f.text)
            assert not [k for k in s if k in SITE_WEIGHTS], (rule, bf)
            assert all(v.strip() for v in s.values())  # nothing set to empty
            assert f"rule {rule}+{bf.upper()}" in f.text and "Include" in f.text and "# mapping: " in f.text
            assert s["SchedulerType"] == ("sched/builtin" if bf == "none" else "sched/backfill")
            assert not f.exact  # the site's other factors stay: never exactly the rule by config
            if bf != "none":
                assert "bf_window=4320" in f.text and "neither" not in f.text.split("mapping")[0]
    fcfs = _settings(slurm_fragment("FCFS", "easy", facts, decision="x").text)
    assert fcfs["PriorityWeightAge"].isdigit() and fcfs["PriorityMaxAge"] == "10-00"
    assert "PriorityWeightAge" not in _settings(slurm_fragment("SJF", "easy", facts, decision="x").text)


def test_bf_window_beyond_slurms_limit_says_what_backfill_cannot_see():
    f = slurm_fragment("SJF", "easy", SiteFacts("c", longest_timelimit_s=60 * 86400), decision="x")
    assert "bf_window=43200" in f.text and "cannot see" in f.text


def test_scheduler_parameters_merged_with_the_sites_own():
    assert merge_scheduler_parameters("bf_continue,bf_window=60,default_queue_depth=200", {"bf_window": "4320"}) == \
        "bf_continue,bf_window=4320,default_queue_depth=200"
    f = slurm_fragment("SJF", "conservative", SiteFacts("c", longest_timelimit_s=7200), decision="x",
                       site_conf="SchedulerType=sched/backfill\nSchedulerParameters=bf_continue,bf_interval=30\n")
    assert "SchedulerParameters=bf_continue,bf_interval=30,bf_window=120,bf_max_job_test=10000" in f.text


def test_pbspro_formulas():
    facts = SiteFacts("c")
    assert "job_sort_formula = '-walltime'" in pbspro_fragment("SJF", "easy", facts, decision="x").text
    assert pbspro_fragment("SJF", "easy", facts, decision="x").exact
    f1 = pbspro_fragment("F1", "easy", facts, decision="x")
    assert not f1.exact and "NOT EXPRESSIBLE" in f1.text
    assert "backfill_depth = 0" in pbspro_fragment("FCFS", "none", facts, decision="x").text


def test_export_command_reads_the_published_decision_and_the_warehouse(tmp_path):
    from metapilot.warehouse.db import connect

    db = str(tmp_path / "w.duckdb")
    con = connect(db)
    t = datetime(2024, 1, 1, tzinfo=timezone.utc)
    con.execute("INSERT INTO jobs (cluster, job_id, source_format, source_file_id, submit_time, timelimit_s, wait_s, "
                "ingested_at) VALUES ('c', '1', 'sacct', 'f', ?, 7200, 100, ?)", [t, t])
    con.execute("INSERT INTO published_policies (cluster, partition, policy_id, published_at, kind, recommendation, message) "
                "VALUES ('c', '*', 'p1', ?, 'fixed', 'SAF+easy', 'Keep SAF+EASY')", [datetime.now(timezone.utc)])
    con.close()
    res = CliRunner().invoke(app, ["export", "--scheduler", "slurm", "--cluster", "c", "--out", str(tmp_path / "o"),
                                   "--db", db])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "o" / "metapilot-SAF+easy.slurm.conf").read_text()
    assert "Keep SAF+EASY" in text and "bf_window=120" in text and "approximate" in res.output
    res = CliRunner().invoke(app, ["export", "--scheduler", "lsf", "--decision", "SJF", "--db", db])
    assert res.exit_code == 2
