"""Issue 37: a hostile new user's pass over the CLI. Every test runs the commands as a user does
(typer's CliRunner) on small crafted inputs, and checks that what is refused is quarantined or
reported with its reason, never dropped silently."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from cli_helpers import cli, pozidriv_lines, query

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
HPC_COST = REPO / "samples" / "logs" / "slurm" / "hpc-cost-simulator-sacct-output-v2.txt"


@pytest.fixture
def site_log(tmp_path) -> Path:
    """A site's own log: headerless sacct whose lines name their cluster (pozidriv)."""
    p = tmp_path / "site.log"
    p.write_text("\n".join(pozidriv_lines(30)) + "\n")
    return p


# 1. pipeline with no paths; --cluster never renames a log that names its cluster; forget


def test_cluster_option_never_renames_a_log_that_names_its_cluster(tmp_path, site_log):
    """...nor is it silently ignored (issue 54): another name is refused, naming both."""
    db = tmp_path / "m.duckdb"
    r = cli("ingest", site_log, "--cluster", "mysite", "--db", db)
    assert r.exit_code == 1 and "pozidriv" in r.output and "mysite" in r.output, r.output
    assert query(db, "SELECT count(*) FROM jobs") == [(0,)]
    assert cli("ingest", site_log, "--db", db).exit_code == 0
    assert query(db, "SELECT DISTINCT cluster FROM jobs") == [("pozidriv",)]


def test_pipeline_without_paths_learns_from_the_warehouse_not_the_samples(tmp_path, site_log, monkeypatch):
    """The issue's `ingest site.log --cluster mysite` then `pipeline --cluster mysite`: the bundled
    samples are not loaded into a warehouse that holds a site's jobs."""
    import contextlib

    import typer

    import metapilot.cli.batch as batch
    import metapilot.flows.pipeline as fp

    db = tmp_path / "m.duckdb"
    assert cli("ingest", site_log, "--db", db).exit_code == 0
    seen = {}

    def fake_flow(paths, **kw):
        seen.update(paths=list(paths), **kw)
        raise typer.Exit(0)

    monkeypatch.setattr(fp, "pipeline_flow", fake_flow)
    monkeypatch.setattr(batch, "prefect_session", lambda *a, **k: contextlib.nullcontext("http://fake"))
    r = cli("pipeline", "--cluster", "pozidriv", "--db", db)
    assert r.exit_code == 0, r.output
    assert seen["paths"] == [] and seen["cluster"] == "pozidriv" and seen["ingest_cluster"] is None
    assert "learning from the jobs" in r.stderr
    # an empty warehouse gets the samples, under their own names even with --cluster
    seen.clear()
    r = cli("pipeline", "--cluster", "mysite", "--db", tmp_path / "empty.duckdb")
    assert r.exit_code == 0, r.output
    assert len(seen["paths"]) == 1 and Path(seen["paths"][0]).name == "logs" and seen["ingest_cluster"] is None


def test_forget_undoes_a_load_with_its_counts_and_the_file_loads_again(tmp_path, site_log):
    db = tmp_path / "m.duckdb"
    swf = tmp_path / "other.swf"
    swf.write_text("; MaxProcs: 64\n1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n"
                   "2 50 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\nnot a job line\n")
    assert cli("ingest", site_log, "--db", db).exit_code == 0
    assert cli("ingest", swf, "--cluster", "mysite", "--db", db).exit_code == 0
    assert query(db, "SELECT cluster, count(*) FROM jobs GROUP BY ALL ORDER BY 1") == [("mysite", 2), ("pozidriv", 30)]
    r = cli("forget", swf, "--db", db)
    assert r.exit_code == 0, r.output
    assert "removed 2 jobs, 1 quarantined lines, 1 data-check runs" in r.stdout
    assert query(db, "SELECT DISTINCT cluster FROM jobs") == [("pozidriv",)]
    assert query(db, "SELECT count(*) FROM capacity WHERE cluster = 'mysite'") == [(0,)]  # its SWF header's capacity
    assert query(db, "SELECT count(*) FROM quarantine") == [(0,)]
    sha = query(db, "SELECT sha256 FROM ingest_files")[0][0]
    r = cli("forget", "--file-id", sha[:12], "--db", db)
    assert r.exit_code == 0 and "removed 30 jobs" in r.stdout, r.output
    assert query(db, "SELECT count(*) FROM jobs") == [(0,)] and query(db, "SELECT count(*) FROM ingest_files") == [(0,)]
    r = cli("forget", "--file-id", sha[:12], "--db", db)
    assert r.exit_code == 2 and "no load of file" in r.stderr
    r = cli("ingest", site_log, "--db", db)
    assert r.exit_code == 0 and query(db, "SELECT count(*) FROM jobs") == [(30,)]


# 2. the inferred capacity follows the data


def _first_jobs(lines: list[str], n: int) -> int:
    """Index after the first `n` jobs (a job line and its steps)."""
    seen: list[str] = []
    for i, ln in enumerate(lines):
        jid = ln.split("|")[1].split(".")[0]
        if jid not in seen:
            if len(seen) == n:
                return i
            seen.append(jid)
    return len(lines)


def test_inferred_capacity_is_computed_again_as_data_arrives(tmp_path):
    lines = HPC_COST.read_text().splitlines()
    cut = _first_jobs(lines, 5)
    (tmp_path / "part1.txt").write_text("\n".join(lines[:cut]) + "\n")
    (tmp_path / "part2.txt").write_text("\n".join(lines[cut:]) + "\n")
    whole, parts = tmp_path / "whole.duckdb", tmp_path / "parts.duckdb"
    assert cli("ingest", HPC_COST, "--cluster", "hpc", "--db", whole).exit_code == 0
    for part in ("part1.txt", "part2.txt"):
        r = cli("ingest", tmp_path / part, "--cluster", "hpc", "--db", parts)
        assert r.exit_code == 0, r.output
    want = query(whole, "SELECT cores, source FROM capacity")
    assert want[0][0] > 3
    assert query(parts, "SELECT cores, source FROM capacity") == want
    # a configured capacity is never touched
    cfg = tmp_path / "clusters.toml"
    cluster = query(parts, "SELECT DISTINCT cluster FROM jobs")[0][0]
    cfg.write_text(f'[clusters."{cluster}"]\npartitions = [{{ nodes = 2, cores_per_node = 8 }}]\n')
    assert cli("capacity", "--config", cfg, "--db", parts).exit_code == 0
    assert cli("forget", tmp_path / "part2.txt", "--db", parts).exit_code == 0
    assert cli("ingest", tmp_path / "part2.txt", "--cluster", "hpc", "--db", parts).exit_code == 0
    assert query(parts, "SELECT cores, source FROM capacity") == [(16, "config")]


# 3. a load that quarantines every line


def test_a_load_that_quarantined_every_line_fails_and_blocks_no_reload(tmp_path, site_log):
    db = tmp_path / "m.duckdb"
    r = cli("ingest", site_log, "--format", "swf", "--db", db)
    assert r.exit_code == 1, r.output
    assert "nothing loaded: all 30 lines with data were quarantined as swf" in r.stdout
    assert query(db, "SELECT outcome, rows_quarantined FROM ingest_files") == [("quarantined", 30)]
    r = cli("ingest", site_log, "--db", db)
    assert r.exit_code == 0, r.output
    assert query(db, "SELECT outcome, format, rows_loaded FROM ingest_files") == [("loaded", "sacct", 30)]
    assert query(db, "SELECT count(*) FROM quarantine") == [(0,)]  # the earlier try's lines replaced
    r = cli("ingest", site_log, "--fields", "jobid,state", "--db", db)
    assert r.exit_code == 0
    assert "already ingested" in r.stdout and "metapilot forget" in r.stdout


# 4. a file name that is not UTF-8


def test_a_non_utf8_file_name_does_not_stop_the_batch(tmp_path):
    d = tmp_path / "landing"
    d.mkdir()
    bad = Path(os.fsdecode(bytes(d) + b"/site\xff\xfe.log"))
    bad.write_text("\n".join(pozidriv_lines(5)) + "\n")
    (d / "z-good.log").write_text("\n".join(pozidriv_lines(5, start=10)) + "\n")
    db = tmp_path / "m.duckdb"
    r = cli("ingest", d, "--db", db)
    assert r.exit_code == 0, r.output
    rows = query(db, "SELECT path, outcome, rows_loaded FROM ingest_files ORDER BY path")
    assert [(Path(p).name, o, n) for p, o, n in rows] == [("site\\xff\\xfe.log", "loaded", 5), ("z-good.log", "loaded", 5)]
    assert query(db, "SELECT count(*) FROM jobs") == [(10,)]
    r = cli("ingest", d, "--db", db)  # the next run of the folder: both skipped, no error
    assert r.exit_code == 0 and r.stdout.count("already ingested") == 2, r.output


# 5. absurd times and sizes are quarantined with the reason


SACCT_HEADER = "JobID|Cluster|Partition|State|Submit|Start|End|Elapsed|NCPUS|NNodes|Timelimit"


def sacct_line(jid: int, submit: str, start: str, end: str, elapsed: str = "00:10:00", ncpus: str = "4",
               cluster: str = "absurd") -> str:
    return f"{jid}|{cluster}|p|COMPLETED|{submit}|{start}|{end}|{elapsed}|{ncpus}|1|01:00:00"


def test_absurd_times_and_sizes_are_quarantined_and_simulate_stays_quick(tmp_path):
    lines = [SACCT_HEADER]
    for i in range(20):
        h = 10 + i // 6
        m = (i % 6) * 10
        lines.append(sacct_line(100 + i, f"2024-01-15T{h:02d}:{m:02d}:00", f"2024-01-15T{h:02d}:{m:02d}:30",
                                f"2024-01-15T{h:02d}:{m + 5:02d}:30", "00:05:00"))
    lines += [
        sacct_line(900, "9999-12-31T00:00:00", "9999-12-31T00:01:00", "9999-12-31T00:11:00"),
        sacct_line(901, "1970-01-01T00:00:00", "2024-01-15T10:00:00", "2024-01-15T10:10:00"),
        sacct_line(902, "2024-01-15T10:00:00", "2024-01-15T10:00:00", "2030-01-14T10:10:00"),
        sacct_line(903, "2024-01-15T10:00:00", "2024-01-15T10:00:00", "2024-01-15T10:10:00", ncpus="1000000000000"),
    ]
    log = tmp_path / "absurd.log"
    log.write_text("\n".join(lines) + "\n")
    db = tmp_path / "m.duckdb"
    r = cli("ingest", log, "--db", db)
    assert r.exit_code == 0, r.output
    assert query(db, "SELECT count(*), max(submit_time) < '2025-01-01', max(run_s) FROM jobs") == [(20, True, 300)]
    reasons = dict(query(db, "SELECT line_no, reason FROM quarantine ORDER BY line_no"))
    assert sorted(reasons) == [22, 23, 24, 25]
    assert "submit_time 9999-12-31 00:00:00 is after the ingest time" in reasons[22]
    assert "submit_time 1970-01-01 00:00:00 is before 1980-01-01" in reasons[23]
    assert "disagrees with Elapsed (600 s)" in reasons[24]
    assert "alloc_cpus 1000000000000 is more than any machine has" in reasons[25]
    assert query(db, "SELECT rows_loaded, rows_quarantined, lines_read FROM ingest_files") == [(20, 4, 25)]
    r = cli("simulate", "--cluster", "absurd", "--policy", "FCFS", "--db", db)
    assert r.exit_code == 0, r.output


def test_a_pbs_end_in_2326_is_quarantined(tmp_path):
    src = (DATA / "pbs" / "accounting-logs.log").read_text().splitlines()
    i = max(k for k, ln in enumerate(src) if ";E;" in ln and " end=" in ln)
    src[i] = src[i].replace(" end=", " end=11234567890 old_end=", 1)
    log = tmp_path / "20091221"
    log.write_text("\n".join(src) + "\n")
    db = tmp_path / "m.duckdb"
    r = cli("ingest", log, "--cluster", "pbs", "--db", db)
    assert r.exit_code == 0, r.output
    assert query(db, "SELECT count(*) FROM jobs WHERE end_time > now()") == [(0,)]
    assert any("is after the ingest time" in reason for _, reason in query(db, "SELECT line_no, reason FROM quarantine"))


# 6. daylight-saving fall-back, with Elapsed


def test_fall_back_times_are_resolved_with_elapsed_and_a_gap_time_says_so(tmp_path):
    lines = [SACCT_HEADER,
             sacct_line(1, "2024-11-03T01:00:00", "2024-11-03T01:40:00", "2024-11-03T01:50:00", "01:10:00", cluster="ny"),
             sacct_line(2, "2024-11-03T01:00:00", "2024-11-03T01:40:00", "2024-11-03T01:20:00", "00:40:00", cluster="ny"),
             sacct_line(3, "2024-03-10T02:30:00", "2024-03-10T03:10:00", "2024-03-10T03:20:00", "00:10:00", cluster="ny")]
    log = tmp_path / "ny.log"
    log.write_text("\n".join(lines) + "\n")
    db = tmp_path / "m.duckdb"
    r = cli("ingest", log, "--timezone", "America/New_York", "--db", db)
    assert r.exit_code == 0, r.output
    assert query(db, "SELECT job_id, run_s FROM jobs ORDER BY job_id") == [("1", 4200), ("2", 2400)]
    (reason,) = query(db, "SELECT reason FROM quarantine")[0]
    assert "submit time '2024-03-10T02:30:00' does not exist in time zone America/New_York" in reason


# 8. Ctrl-C during a file's load


def test_ctrl_c_inside_a_load_stops_the_batch_with_130_and_records_no_failure(tmp_path, site_log, monkeypatch):
    import metapilot.warehouse.ingest as wi

    other = tmp_path / "z-other.log"
    other.write_text("\n".join(pozidriv_lines(5, start=40)) + "\n")
    real = wi.record_loaded

    def interrupted(*a, **k):  # what DuckDB raises when SIGINT lands inside a statement
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(wi, "record_loaded", interrupted)
    db = tmp_path / "m.duckdb"
    r = cli("ingest", site_log, other, "--db", db)
    assert r.exit_code == 130, r.output
    assert "interrupted" in r.stderr and "bug" not in r.output
    assert query(db, "SELECT count(*) FROM ingest_files") == [(0,)] and query(db, "SELECT count(*) FROM jobs") == [(0,)]
    monkeypatch.setattr(wi, "record_loaded", real)
    r = cli("ingest", site_log, other, "--db", db)
    assert r.exit_code == 0 and query(db, "SELECT count(*) FROM jobs") == [(35,)]


# 10-12. options checked before work starts; a mistyped --db; a corrupt warehouse


@pytest.fixture
def small_db(tmp_path, site_log) -> Path:
    db = tmp_path / "m.duckdb"
    assert cli("ingest", site_log, "--db", db).exit_code == 0
    return db


@pytest.mark.parametrize("args, says", [
    (["--from", "yesterday"], "'yesterday' is not a date"),
    (["--from", "2017-01-01", "--to", "2016-01-01"], "is not after --from"),
    (["--partition", "nope"], "has no partition 'nope': its jobs ran in"),
    (["--jobs-out", "j.txt"], "name a .parquet or .csv file"),
])
def test_simulate_options_are_checked_before_the_replay(small_db, args, says):
    r = cli("simulate", "--cluster", "pozidriv", "--db", small_db, *args)
    assert r.exit_code == 2, r.output
    assert says in r.output
    assert query(small_db, "SELECT count(*) FROM sim_runs") == [(0,)]


def test_simulate_jobs_out_csv_is_csv(small_db, tmp_path):
    out = tmp_path / "j.csv"
    r = cli("simulate", "--cluster", "pozidriv", "--db", small_db, "--jobs-out", out)
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("job_id,submit_time")


@pytest.mark.parametrize("args, says", [
    (["--n-boot", "0"], "--n-boot"),
    (["--epoch-s", "-3600"], "--epoch-s"),
    (["--from", "2017-01-01", "--to", "2016-01-01"], "is not after --from"),
])
def test_heldout_options_are_checked_before_the_replay(small_db, args, says):
    r = cli("heldout", "--policy", "nope", "--db", small_db, *args)
    assert r.exit_code == 2, r.output
    assert says in r.output
    assert query(small_db, "SELECT count(*) FROM heldout_replays") == [(0,)]


def test_an_unknown_timezone_is_refused_before_any_file_is_recorded(tmp_path, site_log):
    db = tmp_path / "m.duckdb"
    r = cli("ingest", site_log, "--timezone", "Mars/Olympus", "--db", db)
    assert r.exit_code == 2 and "'Mars/Olympus' is not a time zone" in r.output, r.output
    assert "bug" not in r.output and not db.exists()


@pytest.mark.parametrize("toml, says", [
    ('[clusters.c]\npartitions = [{ nodes = 2, cores_per_node = -8 }]\n', "`cores_per_node = -8` must be a whole number >= 1"),
    ('[clusters.c]\npartitions = [{ nodes = 2, cores_per_nodes = 8 }]\n', "unknown key cores_per_nodes"),
    ('[clustres.c]\npartitions = [{ nodes = 2, cores_per_node = 8 }]\n', "unknown table clustres"),
    ('[clusters.c\npartitions = 1\n', "not valid TOML"),
])
def test_a_bad_capacity_config_is_refused_naming_the_file(tmp_path, toml, says):
    cfg = tmp_path / "clusters.toml"
    cfg.write_text(toml)
    db = tmp_path / "m.duckdb"
    r = cli("capacity", "--config", cfg, "--db", db)
    assert r.exit_code == 2, r.output
    assert says in r.stderr and str(cfg) in r.stderr


@pytest.mark.parametrize("command", [["simulate", "--cluster", "c"], ["heldout", "--policy", "p"],
                                     ["dataset", "--cluster", "c", "--train-from", "2020-01-01", "--train-to", "2020-03-01"]])
def test_a_mistyped_db_creates_no_warehouse(tmp_path, command):
    db = tmp_path / "typo.duckdb"
    r = cli(*command, "--db", db)
    assert r.exit_code == 2, r.output
    assert "no warehouse at" in r.stderr and not db.exists()


def test_a_corrupt_warehouse_says_restore_the_backup(tmp_path):
    db = tmp_path / "m.duckdb"
    db.write_bytes(b"this is not a database " * 400)
    for command in (["sql", "SELECT 1"], ["capacity"], ["simulate", "--cluster", "c"]):
        r = cli(*command, "--db", db)
        assert r.exit_code == 2, r.output
        assert "not a readable MetaPilot warehouse" in r.stderr and "backup" in r.stderr and "secret.key" in r.stderr
        assert "report it" not in r.stderr


# 7. a hostile file name in the HTML the project writes


def test_a_hostile_file_name_is_escaped_in_every_html_page(tmp_path):
    evil = "<svg onload=alert(3)>"
    d = tmp_path / "logs"
    d.mkdir()
    log = d / f"{evil}.log"
    log.write_text("\n".join(pozidriv_lines(20)) + "\nnot a sacct line at all\n")
    db = tmp_path / "m.duckdb"
    assert cli("ingest", log, "--db", db).exit_code == 0
    r = cli("data-docs", "--db", db)
    assert r.exit_code == 0, r.output
    pages = list(tmp_path.rglob("*.html"))
    assert len(pages) >= 2
    for page in pages:
        text = page.read_text(errors="replace")
        assert "<svg" not in text and "onload=alert" not in text.replace("onload=alert(3)&gt;", ""), page


def test_pages_written_before_names_were_escaped_are_rendered_again(tmp_path):
    from metapilot.warehouse.data_docs import MANIFEST, _rendered

    site = tmp_path / "data_docs"
    (site / "validations").mkdir(parents=True)
    (site / "validations" / "old.html").write_text("<svg onload=alert(3)>")
    (site / MANIFEST).write_text("run-1\n")
    assert _rendered(site) == set() and not (site / "validations").exists()


# 13. smaller ones


def test_keep_names_on_a_pseudonymised_warehouse_is_refused_unless_mixed(small_db, tmp_path):
    other = tmp_path / "more.log"
    other.write_text("\n".join(pozidriv_lines(5, start=50)) + "\n")
    r = cli("ingest", other, "--keep-names", "--db", small_db)
    assert r.exit_code == 2 and "holds pseudonymised names" in r.stderr and "--mix-names" in r.stderr, r.output
    assert query(small_db, "SELECT count(*) FROM jobs") == [(30,)]
    r = cli("ingest", other, "--keep-names", "--mix-names", "--db", small_db)
    assert r.exit_code == 0 and query(small_db, "SELECT count(*) FROM jobs") == [(35,)]


def test_an_swf_file_with_a_nan_token_is_recognised_by_its_header(tmp_path):
    swf = tmp_path / "small.swf"
    swf.write_text("; Version: 2.2\n; MaxProcs: 64\n1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n"
                   "2 NaN 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n")
    db = tmp_path / "m.duckdb"
    r = cli("ingest", swf, "--db", db)
    assert r.exit_code == 0, r.output
    assert query(db, "SELECT format, rows_loaded, rows_quarantined FROM ingest_files") == [("swf", 1, 1)]


def test_an_empty_file_and_binary_junk_get_only_the_hints_that_apply(tmp_path):
    empty, junk = tmp_path / "empty.log", tmp_path / "junk.log"
    empty.write_bytes(b"")
    junk.write_bytes(bytes((i * 97 + 13) % 256 for i in range(4000)))  # no text, no line structure
    r = cli("ingest", empty, junk, "--db", tmp_path / "m.duckdb")
    assert r.exit_code == 1, r.output
    said = " ".join(r.output.split())
    assert "empty.log: the file is empty (no line with content): nothing to load" in said, said
    assert "junk.log: the file is binary data, not a text log" in said, said
    messages = [m for m in said.split("error: ") if m.startswith(str(tmp_path))]
    assert len(messages) == 2, said
    for message in messages:
        message = message.split("warehouse:", 1)[0]
        assert "--encoding" not in message and "sacct" not in message and "--fields" not in message, message


def test_switches_show_no_type_in_help_and_a_value_after_one_is_refused(tmp_path, site_log):
    r = cli("ingest", "--help", env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "--keep-names" in r.output and "<bool>" not in r.output, r.output
    db = tmp_path / "m.duckdb"
    r = cli("ingest", "--keep-names", "true", site_log, "--db", db)
    assert r.exit_code == 2, r.output
    assert "'true' is not a file: switches (--keep-names" in " ".join(r.output.split()) and "take no value" in r.output
    assert not db.exists()


def test_sql_limit_below_zero_is_refused_and_the_remaining_rows_are_counted_right(small_db):
    r = cli("sql", "SELECT * FROM jobs", "--limit", "-1", "--db", small_db)
    assert r.exit_code == 2 and "--limit -1: give the number of rows to show (0 or more" in r.output, r.output
    r = cli("sql", "SELECT * FROM jobs", "--limit", "10", "--db", small_db)
    assert r.exit_code == 0 and "... 20 more rows" in r.output, r.output
