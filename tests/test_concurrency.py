"""Concurrent use of one warehouse file: queries answer while an ingest runs (it parses and stages
without holding the database, and commits in one short transaction), readers wait for a commit
instead of failing on DuckDB's lock, and two ingests started together both land (the second
waits for the first's commit, saying so)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from typer.testing import CliRunner

from metapilot.cli import app

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "logs"
POZIDRIV = SAMPLES / "slurm" / "pozidriv.log.gz"
KTH = SAMPLES / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"
PBS = SAMPLES / "pbs" / "xdmod-unit-accounting-logs.log"

# An ingest in its own process through the library path the flow uses (`ingest_file_to`), slowed
# down so that it is still running while the test queries: `stage_delay` seconds per parsed chunk,
# `commit_delay` seconds inside the commit (holding the writer lock and the database).
INGEST = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import metapilot.warehouse.ingest as ing
    import metapilot.warehouse.ingest_stage as stage
    from metapilot.warehouse.secret import load_site_key

    db, path, stage_delay, commit_delay = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    real_prepare, real_commit = stage._prepare, ing.commit_staged

    def slow_prepare(*a, **k):
        time.sleep(stage_delay)
        return real_prepare(*a, **k)

    def slow_commit(con, st):
        print("committing", flush=True)
        time.sleep(commit_delay)
        return real_commit(con, st)

    stage._prepare, ing.commit_staged = slow_prepare, slow_commit
    key = load_site_key(db, log=print)
    print("staging", flush=True)
    rep = ing.ingest_file_to(db, path, ing.IngestOptions(chunk_bytes=128 * 1024), key, log=print)
    print("outcome", rep.outcome, rep.message or "", flush=True)
    sys.exit(0 if rep.outcome == "loaded" else 1)
""")


# The same through the `metapilot ingest` command (a Prefect flow on a temporary API), parsing slowed.
CLI_INGEST = textwrap.dedent("""
    import sys, time
    import metapilot.warehouse.ingest_stage as stage

    db, path, stage_delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    real_prepare = stage._prepare

    def slow_prepare(*a, **k):
        print("parsing", flush=True)
        time.sleep(stage_delay)
        return real_prepare(*a, **k)

    real_parse = stage.iter_parse

    def small_chunks(path, popts):
        popts.chunk_bytes = 128 * 1024
        return real_parse(path, popts)

    stage._prepare, stage.iter_parse = slow_prepare, small_chunks
    from metapilot.cli import app

    sys.argv = ["metapilot", "ingest", path, "--db", db]
    app()
""")


def start_cli_ingest(db: Path, path: Path, stage_delay: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLI_INGEST, str(db), str(path), str(stage_delay)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def start_ingest(db: Path, path: Path, stage_delay: float = 0.0, commit_delay: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", INGEST, str(db), str(path), str(stage_delay), str(commit_delay)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for_line(p: subprocess.Popen, marker: str, timeout: float = 120) -> list[str]:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return seen
    raise AssertionError(f"no {marker!r} from the ingest: {''.join(seen)}")


def small_warehouse(tmp_path: Path) -> Path:
    """A warehouse file holding the PBS sample (so that queries have something to count)."""
    db = tmp_path / "m.duckdb"
    p = start_ingest(db, PBS)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    return db


def sql(db: Path, query: str):
    return CliRunner().invoke(app, ["sql", query, "--db", str(db), "--format", "csv"])


def test_queries_answer_during_a_long_ingest(tmp_path):
    db = small_warehouse(tmp_path)
    before = int(sql(db, "SELECT count(*) AS n FROM jobs").stdout.splitlines()[1])
    p = start_cli_ingest(db, POZIDRIV, stage_delay=0.25)  # ~32 chunks: some 8 s of parsing
    wait_for_line(p, "parsing")
    answered = 0
    try:
        while p.poll() is None:
            r = sql(db, "SELECT (SELECT count(*) FROM jobs) AS n, (SELECT count(*) FROM mart_daily_cluster) AS days")
            assert r.exit_code == 0, r.output
            from metapilot.warehouse.db import connect

            con = connect(db, read_only=True)  # what advise and report open
            con.execute("SELECT count(*) FROM mart_weekly").fetchall()
            con.close()
            answered += p.poll() is None
            time.sleep(0.2)
    finally:
        out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    assert answered >= 5, f"only {answered} queries while the ingest ran"
    after = int(sql(db, "SELECT count(*) AS n FROM jobs").stdout.splitlines()[1])
    assert after == before + 11704


def test_a_reader_waits_for_a_commit_and_says_so(tmp_path):
    db = small_warehouse(tmp_path)
    before = int(sql(db, "SELECT count(*) AS n FROM jobs").stdout.splitlines()[1])
    p = start_ingest(db, POZIDRIV, commit_delay=3.0)
    wait_for_line(p, "committing")
    time.sleep(0.3)  # the commit holds the database now
    t0 = time.monotonic()
    r = sql(db, "SELECT count(*) AS n FROM jobs")
    waited = time.monotonic() - t0
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, out
    assert r.exit_code == 0, r.output
    assert "waiting" in r.stderr and "in use by another MetaPilot process" in r.stderr
    assert waited > 1.0
    assert int(r.stdout.splitlines()[1]) == before + 11704  # after the commit, never half of it


def test_two_ingests_started_together_both_land(tmp_path):
    db = tmp_path / "m.duckdb"
    a = start_ingest(db, POZIDRIV, commit_delay=2.0)
    b = start_ingest(db, KTH, commit_delay=2.0)
    out_a, _ = a.communicate(timeout=300)
    out_b, _ = b.communicate(timeout=300)
    assert a.returncode == 0 and b.returncode == 0, out_a + out_b
    assert "waiting: another MetaPilot run is writing" in out_a + out_b  # the second one said so
    r = sql(db, "SELECT cluster, count(*) AS n FROM jobs GROUP BY 1 ORDER BY 1")
    assert r.stdout.splitlines()[1:] == ["KTH-SP2,28476", "pozidriv,11704"]
    keys = sql(db, "SELECT count(*) AS n FROM site_keys")
    assert keys.stdout.splitlines()[1] == "1"


def test_two_ingest_commands_started_together_both_land(tmp_path):
    db = tmp_path / "m.duckdb"
    a = start_cli_ingest(db, POZIDRIV)
    b = start_cli_ingest(db, KTH)
    out_a, _ = a.communicate(timeout=300)
    out_b, _ = b.communicate(timeout=300)
    assert a.returncode == 0 and b.returncode == 0, out_a + out_b
    r = sql(db, "SELECT cluster, count(*) AS n FROM jobs GROUP BY 1 ORDER BY 1")
    assert r.stdout.splitlines()[1:] == ["KTH-SP2,28476", "pozidriv,11704"]
