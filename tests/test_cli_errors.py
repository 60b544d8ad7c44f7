"""Errors a user can cause end in one or two lines that say what happened and what to do, with a
non-zero exit; the traceback only with `metapilot --debug`. (The corrupt key: test_site_key.py; an
unreachable Prefect API: test_prefect_api.py; nothing to ingest: here.)"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from metapilot.cli import app

REPO = Path(__file__).resolve().parents[1]
KTH = REPO / "samples" / "logs" / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"


def error_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.mark.parametrize("cluster", [None, "SP2 test"])
def test_pipeline_on_a_short_history_is_two_lines_at_most(tmp_path, cluster):
    """The issue's 30-line traceback around "only 36 days of history", through the real command;
    `--cluster` names the SWF log's cluster (an SWF file carries no name) rather than failing to find it."""
    short = tmp_path / "kth-36-days.swf"
    with gzip.open(KTH, "rt") as f:
        lines = [ln for ln in f if ln.startswith(";") or (ln.split() and int(ln.split()[1]) < 36 * 86400)]
    short.write_text("".join(lines))
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "METAPILOT_DEBUG")}
    p = subprocess.run([sys.executable, "-m", "metapilot.cli", "pipeline", str(short), "--db", str(tmp_path / "m.duckdb"),
                        *(["--cluster", cluster] if cluster else [])],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr and "╭" not in p.stderr
    tail = error_lines(p.stderr)[-1]
    assert tail.startswith("error: only 29 days of history: at least six weeks are needed"), p.stderr
    assert "ingest a longer history" in tail
    assert len([ln for ln in error_lines(p.stderr) if ln.startswith("error")]) == 1
    from metapilot.flows.pipeline import choose_cluster

    assert choose_cluster(str(tmp_path / "m.duckdb"), None)[0] == (cluster or "kth-36-days")
    with pytest.raises(LookupError, match=f"no jobs for cluster 'other': the warehouse holds {cluster or 'kth-36-days'} "):
        choose_cluster(str(tmp_path / "m.duckdb"), "other")


HOLD = textwrap.dedent("""
    import sys, time
    from metapilot.warehouse.db import connect
    con = connect(sys.argv[1])
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
""")


@pytest.mark.parametrize("command", [["sql", "SELECT count(*) FROM jobs"], ["capacity"]])
def test_a_warehouse_held_too_long_by_another_process_is_one_line(tmp_path, monkeypatch, command):
    db = tmp_path / "m.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), "30"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        monkeypatch.setenv("METAPILOT_DB_WAIT_S", "1")
        r = CliRunner().invoke(app, [*command, "--db", str(db)])
    finally:
        holder.kill()
        holder.wait()
    assert r.exit_code == 2, r.output
    lines = error_lines(r.stderr)
    assert lines[0].startswith("waiting: the warehouse") and lines[-1].startswith("error: the warehouse")
    assert "stayed busy for 1 s" in lines[-1] and "METAPILOT_DB_WAIT_S" in lines[-1]
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_an_unexpected_error_is_two_lines_and_debug_shows_the_traceback(tmp_path, monkeypatch):
    import metapilot.warehouse.db as wdb

    def broken(*a, **k):
        raise RuntimeError("something inside broke")

    monkeypatch.setattr(wdb, "connect_sandboxed", broken)
    (tmp_path / "m.duckdb").touch()
    r = CliRunner().invoke(app, ["sql", "SELECT 1", "--db", str(tmp_path / "m.duckdb")])
    assert r.exit_code == 1
    assert error_lines(r.stderr) == ["error: unexpected RuntimeError: something inside broke",
                                     "this is a MetaPilot bug: re-run with `metapilot --debug ...` for the traceback and report it"]
    d = CliRunner().invoke(app, ["--debug", "sql", "SELECT 1", "--db", str(tmp_path / "m.duckdb")])
    assert isinstance(d.exception, RuntimeError)  # the traceback is the user's when asked for


@pytest.mark.parametrize("make", ["empty-dir", "glob", "missing"])
def test_nothing_to_ingest_is_an_error(tmp_path, make):
    empty = tmp_path / "logs"
    empty.mkdir()
    target = {"empty-dir": str(empty), "glob": str(empty / "*.log"), "missing": str(tmp_path / "nope.log")}[make]
    r = CliRunner().invoke(app, ["ingest", target, "--db", str(tmp_path / "m.duckdb")])
    assert r.exit_code == 2
    assert error_lines(r.stderr) and error_lines(r.stderr)[-1].startswith(f"error: nothing to ingest: {target}")
    assert not (tmp_path / "m.duckdb").exists() and not (tmp_path / "secret.key").exists()


def test_nothing_to_ingest_names_what_is_empty_beside_what_loads(tmp_path):
    from metapilot.warehouse.ingest import expand_paths_checked

    empty = tmp_path / "empty"
    empty.mkdir()
    files, problems = expand_paths_checked([str(KTH), str(empty)])
    assert files == [KTH] and [p.outcome for p in problems] == ["failed"]
    assert "holds no log files" in problems[0].message


def test_tables_show_durations_and_shares_with_units():
    from metapilot.cli.console import fmt_cell, fmt_duration

    assert [fmt_duration(s) for s in (0, 59, 600, 4611, 70_825, 681_785)] == ["0 s", "59 s", "10.0 min", "1.3 h",
                                                                                "19.7 h", "7.9 d"]
    assert fmt_cell(0.6994, "%") == "69.9%" and fmt_cell(28467) == "28,467" and fmt_cell(1.234e-7) == "0.000000123"
    assert "e" not in fmt_cell(123456789.0) and fmt_cell(None, "s") == ""


@pytest.mark.parametrize("args", [["backtest", "--every", "x"], ["forget"], ["roi"], ["backtest", "--every", "142857143w"],
                                  ["backtest", "--every", "0w"], ["backtest", "--warmup", "99999999999w"]])
def test_a_usage_error_raised_by_a_command_is_a_usage_error_not_a_bug(tmp_path, args):
    """Typer 0.2x vendors its own click: a `typer.BadParameter` a command raises was reported as
    "unexpected BadParameter ... a MetaPilot bug" with exit 1; it is click's usage error, exit 2."""
    r = CliRunner().invoke(app, [*args, "--db", str(tmp_path / "m.duckdb")])
    assert r.exit_code == 2, r.output
    assert "bug" not in r.output and "Invalid value" in r.output


READ_OR_RELEASE = [
    ["steer", "--cluster", "c", "--slurm", "--release"],
    ["steer", "--cluster", "c", "--slurm", "--resume", "--policy", "SJF+EASY"],
    ["steer", "--cluster", "c", "--slurm", "--policy", "published", "--once"],
    ["steer", "--cluster", "c", "--slurm", "--policy", "published", "--dry-run"],
    ["steer", "explain", "1", "--cluster", "c"],
    ["steer", "report", "--cluster", "c"],
    ["approve", "--cluster", "c"],
    ["export", "--scheduler", "slurm", "--cluster", "c"],
    ["export", "--scheduler", "slurm", "--cluster", "c", "--decision", "SJF+EASY"],
    ["export", "--scheduler", "pbspro", "--decision", "SJF+EASY"],
    ["sql", "SELECT 1"],
    ["report", "--cluster", "c"],
    ["capacity"],
    ["data-docs"],
    ["forget", "--file-id", "abc"],
    ["simulate", "--cluster", "c"],
    ["backtest", "--cluster", "c"],
]


@pytest.mark.parametrize("command", READ_OR_RELEASE, ids=lambda c: " ".join(c[:3]))
def test_a_command_that_only_reads_or_releases_refuses_a_mistyped_db(tmp_path, command):
    """Issue 49 (7): `steer --release --db <typo>` made a new warehouse and reported success. Every
    command that only reads (or undoes) what a warehouse holds refuses one that does not exist: one
    error line, a non-zero exit, nothing created."""
    typo = tmp_path / "metapilto.duckdb"
    r = CliRunner().invoke(app, [*command, "--db", str(typo)])
    assert r.exit_code != 0, r.output
    errors = [ln for ln in error_lines(r.output) if "error" in ln.lower()]
    assert errors and "no warehouse at" in errors[-1] and str(typo) in errors[-1], r.output
    assert "bug" not in r.output and "Traceback" not in r.output
    assert not typo.exists() and not (tmp_path / "secret.key").exists() and sorted(tmp_path.iterdir()) == []


def test_the_progress_bar_shows_on_a_terminal_only_and_only_for_a_long_loop():
    """SPEC §10: long steps show progress. A whole log's Slurm replay takes minutes: `simulate` shows a bar
    on the terminal; a pipe or a log file gets nothing, and a loop done within `after_s` shows nothing."""
    import io

    from rich.console import Console

    from metapilot.cli.console import progress_bar

    term = io.StringIO()
    with progress_bar("replaying X: jobs started", after_s=0.0,
                      err=Console(file=term, force_terminal=True, width=100)) as update:
        update(5, 10)
        update(7, 10)
    assert "replaying X: jobs started" in term.getvalue() and "7/10" in term.getvalue()
    pipe = io.StringIO()
    with progress_bar("replaying X", after_s=0.0, err=Console(file=pipe, force_terminal=False)) as update:
        update(5, 10)
    assert pipe.getvalue() == ""
    quick = io.StringIO()
    with progress_bar("replaying X", after_s=60.0, err=Console(file=quick, force_terminal=True)) as update:
        update(5, 10)
        update(10, 10)
    assert quick.getvalue() == ""
