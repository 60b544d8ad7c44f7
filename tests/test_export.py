"""`metapilot export`: a fragment (never a whole file) that names its rule, says exact or approximate
and why, never zeroes the site's weights, and sizes bf_window from the longest time limit."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from metapilot.cli.app import app
from metapilot.models.simulator.slurm.conf import parse_slurm_conf, slurm_conf_settings
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


def test_the_sites_settings_are_read_as_the_replay_reads_them():
    """One reader of slurm.conf's plain settings (`slurm_conf_settings`) for the export and the replay: the
    last line of a name wins, a commented line is not a setting, node and partition lines are not settings."""
    site = ("SchedulerParameters=bf_interval=5\n# SchedulerParameters=bf_window=1\n"
            "PartitionName=p Nodes=n1 SchedulerParameters=x\nNodeName=n1 CPUs=4\n"
            "SchedulerParameters=bf_continue,default_queue_depth=200  # the site's\n")
    f = slurm_fragment("SJF", "conservative", SiteFacts("c", longest_timelimit_s=7200), decision="x", site_conf=site)
    assert "\nSchedulerParameters=bf_continue,default_queue_depth=200,bf_window=120,bf_max_job_test=10000" in f.text
    assert parse_slurm_conf(site).sched.default_queue_depth == 200
    assert "nodename" not in slurm_conf_settings(["NodeName=n1 CPUs=4", "Include x.conf"])


def test_the_sites_scheduler_parameters_are_read_through_its_includes(tmp_path):
    """`export --site-conf`: slurmctld reads a SchedulerParameters line in an included file, so the merge
    does too; a line written from ours alone and included at the end would drop the site's options. A
    missing include is an error naming it, not a fragment merged with nothing."""
    (tmp_path / "sched.conf").write_text("SchedulerParameters=bf_continue,bf_max_job_user=20 # the site's\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n#SchedulerParameters=bf_interval=5\nInclude sched.conf\n")
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["export", "--scheduler", "slurm", "--decision", "SJF+CONSERVATIVE", "--site-conf",
                                 str(conf), "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = next(out.glob("*.slurm.conf")).read_text()
    assert "\nSchedulerParameters=bf_continue,bf_max_job_user=20,bf_max_job_test=10000" in text
    conf.write_text("ClusterName=c\nInclude gone.conf\n")
    r = CliRunner().invoke(app, ["export", "--scheduler", "slurm", "--decision", "SJF+CONSERVATIVE", "--site-conf",
                                 str(conf), "--out", str(tmp_path / "out2")])
    said = "".join(r.output.replace("│", "").split())  # the error box breaks long paths anywhere
    assert r.exit_code == 2 and "gone.confisnotthere" in said, r.output
    assert not (tmp_path / "out2").exists()


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


# every way a text can end a line for slurm.conf's reader (fgets: \n) or a stricter one (str.splitlines)
BREAKERS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\x1b\u200e"
EVIL = "Keep SAF+EASY\nPriorityWeightFairshare=0\r\nSlurmUser=root\u2028SchedulerType=sched/builtin\x85X=1"


def _live_lines(text: str) -> list[str]:
    """The lines a configuration reader would act on: split as Slurm does (on \\n) and as the
    strictest reader would (every Unicode line break), comments and blank lines dropped."""
    out = []
    for lines in (text.split("\n"), text.splitlines()):
        out += [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    return out


def test_free_text_never_reaches_the_fragment_outside_a_comment():
    """Issue 49 (5): a newline in the decision's message or the cluster's name became a live
    slurm.conf line. Every non-comment line of the fragment is one export means to write."""
    from metapilot.models.steering.export import controller_note, one_line

    facts = SiteFacts("c", longest_timelimit_s=7200, longest_wait_s=86400)
    evil_facts = SiteFacts("c\nPriorityWeightQOS=0" + BREAKERS, longest_timelimit_s=7200, longest_wait_s=86400)
    for rule in ("FCFS", "SJF", "SAF", "WFP3"):
        for bf in ("none", "easy", "conservative"):
            clean = slurm_fragment(rule, bf, facts, decision="x", site_conf="SchedulerParameters=bf_continue\n")
            evil = slurm_fragment(rule, bf, evil_facts, decision=EVIL + BREAKERS, site_conf="SchedulerParameters=bf_continue\n")
            assert _live_lines(evil.text) == _live_lines(clean.text), (rule, bf)
            assert "\\x0a" in evil.text and "\\u2028" in evil.text  # what was there stays readable
            clean_pbs = pbspro_fragment(rule, bf, facts, decision="x")
            evil_pbs = pbspro_fragment(rule, bf, evil_facts, decision=EVIL + BREAKERS)
            assert _live_lines(evil_pbs.text) == _live_lines(clean_pbs.text), (rule, bf)
    note = controller_note("slurm", "p1\nSchedulerType=x", ["SJF\rX=1"])
    assert _live_lines(note) == []
    assert all(len(one_line(ch)) > 1 for ch in BREAKERS) and one_line("SAF+EASY (Keep: ok)") == "SAF+EASY (Keep: ok)"


def _warehouse_with_decision(tmp_path, message: str) -> str:
    from metapilot.warehouse.db import connect

    db = str(tmp_path / "w.duckdb")
    con = connect(db)
    con.execute("INSERT INTO published_policies (cluster, partition, policy_id, published_at, kind, recommendation, message) "
                "VALUES ('c', '*', 'p1', ?, 'fixed', 'SAF+easy', ?)", [datetime.now(timezone.utc), message])
    con.close()
    return db


def test_export_command_escapes_the_published_message_and_refuses_a_bad_cluster_name(tmp_path):
    db = _warehouse_with_decision(tmp_path, EVIL + BREAKERS)
    for sched in ("slurm", "pbspro"):
        res = CliRunner().invoke(app, ["export", "--scheduler", sched, "--cluster", "c", "--out", str(tmp_path / "o"),
                                       "--db", db])
        assert res.exit_code == 0, res.output
    conf = (tmp_path / "o" / "metapilot-SAF+easy.slurm.conf").read_text()
    assert [ln.split("=")[0] for ln in _live_lines(conf)] == ["SchedulerType", "PriorityType", "PriorityWeightJobSize",
                                                            "PriorityFavorSmall"] * 2
    assert "Keep SAF+EASY\\x0aPriorityWeightFairshare=0" in conf
    pbs = (tmp_path / "o" / "metapilot-SAF+easy.pbspro.txt").read_text()
    assert all(ln.startswith("qmgr -c ") for ln in _live_lines(pbs))
    for bad in ("c\nPriorityWeightFairshare=0", "c\r", "c\u2028x", " c", "x" * 129):
        res = CliRunner().invoke(app, ["export", "--scheduler", "slurm", "--cluster", bad, "--decision", "SJF",
                                       "--out", str(tmp_path / "bad"), "--db", db])
        assert res.exit_code == 2 and "cannot be written into a configuration file" in res.output, (bad, res.output)
        assert "bug" not in res.output and not (tmp_path / "bad").exists()
    from metapilot.models.steering.export import ExportNameError

    with pytest.raises(ExportNameError, match="control character"):
        slurm_fragment("SJF", "easy", SiteFacts("c", longest_timelimit_s=60), decision="x",
                       site_conf="SchedulerParameters=bf_continue,\x00x\n")
