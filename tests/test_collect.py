"""`metapilot collect`: sacct with Open XDMoD's flags, incremental from a cursor derived from the
data, through the normal ingest; a stand-in `sacct` on PATH answers from real pozidriv lines."""

from __future__ import annotations

import gzip
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
POZIDRIV = REPO / "samples" / "logs" / "slurm" / "pozidriv.log.gz"
STANDIN = Path(__file__).parent / "data" / "collect" / "sacct_standin.py"
N_JOBS = 400
T1 = datetime(2016, 12, 31, 12, 0, 0, tzinfo=timezone.utc)
T2 = datetime(2017, 1, 2, 0, 0, 0, tzinfo=timezone.utc)
XDMOD_FLAGS = ["--allusers", "--parsable2", "--noheader", "--allocations", "--duplicates"]

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _ts(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    """`sacct` on PATH answering from the first N_JOBS pozidriv jobs; returns (data lines, log path)."""
    with gzip.open(POZIDRIV, "rt") as f:
        lines = [next(f) for _ in range(N_JOBS)]
    data = tmp_path / "sacct-data.txt"
    data.write_text("".join(lines))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "sacct"
    exe.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = 'sacct'\n"
                   f"runpy.run_path({str(STANDIN)!r}, run_name='__main__')\n")
    exe.chmod(0o755)
    log = tmp_path / "sacct-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("SACCT_STANDIN_DATA", str(data))
    monkeypatch.setenv("SACCT_STANDIN_LOG", str(log))
    monkeypatch.delenv("SACCT_STANDIN_FAIL", raising=False)
    monkeypatch.delenv("METAPILOT_COLLECT_OVERLAP", raising=False)
    return [ln.rstrip("\n").split("|") for ln in lines], log


def _calls(log: Path) -> list[dict]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        argv = json.loads(line)["argv"]
        opts = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i] in ("--starttime", "--endtime", "--clusters", "--format")}
        out.append({"argv": argv, **opts, "tz": json.loads(line)["tz"]})
    return out


def _snapshot(db: str) -> list[tuple]:
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE jobs").fetchall()
                if r[0] not in ("ingested_at", "source_file_id", "source_line")]
        return con.execute(f"SELECT {', '.join(cols)} FROM jobs ORDER BY job_id, submit_time").fetchall()
    finally:
        con.close()


def _expected_cursor(rows: list[list[str]], at: datetime) -> datetime:
    """From the data as sacct showed it at `at`: the latest end, or the earliest start (submit) of
    a job not over yet, whichever is earlier."""
    ends, open_since = [], []
    for c in rows:
        submit = _ts(c[10])
        if submit > at:
            continue
        start = _ts(c[12]) if c[12] not in ("Unknown", "None") else None
        end = _ts(c[13]) if c[13] not in ("Unknown", "None") else None
        if start is None or start > at:
            open_since.append(submit)
        elif end is None or end > at:
            open_since.append(start)
        else:
            ends.append(end)
    return min(max(ends), min(open_since)) if open_since else max(ends)


def test_sacct_command_is_xdmods():
    from metapilot.transforms.sacct import XDMOD_FIELDS
    from metapilot.warehouse.collect import sacct_args

    args = sacct_args("/usr/bin/sacct", "pozidriv", T1, T2)
    assert args[:6] == ["/usr/bin/sacct", *XDMOD_FLAGS]
    i = args.index("--format")
    assert args[i + 1] == ",".join(XDMOD_FIELDS) and len(XDMOD_FIELDS) == 26
    assert args[args.index("--clusters") + 1] == "pozidriv"
    assert args[args.index("--starttime") + 1] == "2016-12-31T12:00:00"
    assert args[args.index("--endtime") + 1] == "2017-01-02T00:00:00"


def test_collect_twice_gives_every_job_once_and_asks_from_the_cursor(tmp_path, standin):
    from metapilot.flows.collect import collect_flow
    from metapilot.warehouse.collect import DEFAULT_OVERLAP, EARLIEST, collect_cursor, sacct_time
    from metapilot.warehouse.db import connect

    rows, log = standin
    db = str(tmp_path / "m.duckdb")

    first = collect_flow("pozidriv", db=db, until=T1)
    assert first["outcome"] == "loaded" and first["cursor"] is None
    (call1,) = _calls(log)
    assert call1["--starttime"] == sacct_time(EARLIEST) and call1["--endtime"] == sacct_time(T1)
    assert call1["tz"] == "UTC" and all(f in call1["argv"] for f in XDMOD_FLAGS)
    con = connect(db, read_only=True)
    cursor = collect_cursor(con, "pozidriv")
    running = con.execute("SELECT count(*) FROM jobs WHERE state IN ('RUNNING', 'PENDING')").fetchall()[0][0]
    con.close()
    assert running > 0  # jobs still running at T1: the cursor goes back to the earliest start
    assert cursor == _expected_cursor(rows, T1) < T1

    second = collect_flow("pozidriv", db=db, until=T2)
    calls = _calls(log)
    # from the cursor less the safety margin (issue 54), not from scratch
    assert len(calls) == 2 and calls[1]["--starttime"] == sacct_time(cursor - DEFAULT_OVERLAP)
    assert second["outcome"] == "loaded" and second["cursor"] == sacct_time(cursor)

    con = connect(db, read_only=True)
    total, distinct, open_jobs = con.execute(
        "SELECT count(*), count(DISTINCT (job_id, submit_time)), count(*) FILTER (WHERE state IN ('RUNNING', 'PENDING')) "
        "FROM jobs").fetchall()[0]
    got = dict(con.execute("SELECT job_id, state FROM jobs").fetchall())
    sources = con.execute("SELECT DISTINCT source_format, cluster FROM jobs").fetchall()
    files = con.execute("SELECT count(*) FROM ingest_files WHERE outcome = 'loaded'").fetchall()[0][0]
    con.close()
    assert total == distinct == len(rows) and open_jobs == 0  # every job exactly once, all ended by T2
    assert got == {c[0]: c[16].split(" ")[0] for c in rows}
    assert sources == [("sacct", "pozidriv")] and files == 2

    # Re-running changes nothing; a clock behind the data (replayed or late) asks sacct for nothing.
    before = _snapshot(db)
    third = collect_flow("pozidriv", db=db, until=T2)
    assert third["outcome"] in ("loaded", "skipped")
    assert _snapshot(db) == before
    n_calls = len(_calls(log))
    late = collect_flow("pozidriv", db=db, until=T1)
    assert late["outcome"] == "nothing" and "nothing to collect" in late["message"]
    assert len(_calls(log)) == n_calls and _snapshot(db) == before


def test_sacct_failure_gives_its_message_and_leaves_the_warehouse_as_it_was(tmp_path, standin, monkeypatch):
    from metapilot.flows.collect import collect_flow
    from metapilot.warehouse.collect import SacctError
    from metapilot.warehouse.db import connect

    db = str(tmp_path / "m.duckdb")
    collect_flow("pozidriv", db=db, until=T1)
    before = _snapshot(db)
    monkeypatch.setenv("SACCT_STANDIN_FAIL", "1")
    with pytest.raises(SacctError, match="Connection refused") as e:
        collect_flow("pozidriv", db=db, until=T2)
    assert "exited with status 1" in str(e.value) and "warehouse is as it was" in str(e.value)
    assert _snapshot(db) == before
    con = connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM ingest_files").fetchall()[0][0] == 1
    con.close()
    leftovers = [p.name for p in (tmp_path / "collect").rglob("*") if p.is_file()]
    assert len(leftovers) == 1 and not any(n.endswith(".part") for n in leftovers)  # only the first run's file


def test_collect_command(tmp_path, standin):
    from typer.testing import CliRunner

    from metapilot.cli import app

    db = str(tmp_path / "m.duckdb")
    res = CliRunner().invoke(app, ["collect", "--cluster", "pozidriv", "--until", "2016-12-31T12:00:00", "--db", db])
    assert res.exit_code == 0, res.output
    assert "asked sacct for 1970-01-02T00:00:00 .. 2016-12-31T12:00:00" in res.output and "loaded" in res.output
    res = CliRunner().invoke(app, ["collect", "--cluster", "pozidriv", "--db", db, "--sacct", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "sacct not found" in res.output


def test_hourly_deployment(monkeypatch):
    from metapilot.flows.collect import clusters_to_collect
    from metapilot.flows.deployments import deployments

    dep = {d.name: d for d in deployments("/tmp/landing", collect_clusters=("pozidriv", "other"))}["hourly-collect"]
    assert dep.schedules[0].schedule.cron == "5 * * * *" and dep.parameters["clusters"] == ["pozidriv", "other"]
    monkeypatch.setenv("METAPILOT_COLLECT_CLUSTERS", "a, b,")
    assert clusters_to_collect(None) == ["a", "b"] and clusters_to_collect(["c"]) == ["c"]


def test_collect_all_runs_every_cluster_and_reports_failures(tmp_path, standin, monkeypatch):
    from metapilot.flows.collect import collect_all_flow

    db = str(tmp_path / "m.duckdb")
    monkeypatch.setenv("SACCT_STANDIN_FAIL", "1")
    with pytest.raises(RuntimeError, match="collect failed for pozidriv: sacct exited with status 1"):
        collect_all_flow(["pozidriv"], db=db)
    monkeypatch.delenv("SACCT_STANDIN_FAIL")
    assert collect_all_flow([], db=db) == []


def test_cursor_view_and_its_fallback(mem_con):
    from metapilot.warehouse.collect import collect_cursor

    rows = [("c", "1", "COMPLETED", "2020-01-01 00:00:00", "2020-01-01 01:00:00", "2020-01-02 00:00:00"),
            ("c", "2", "RUNNING", "2020-01-01 00:00:00", "2020-01-01 12:00:00", None),
            ("c", "3", "REQUEUED", "2019-12-01 00:00:00", "2019-12-01 01:00:00", "2019-12-01 02:00:00"),
            ("d", "4", "PENDING", "2020-02-01 00:00:00", None, None)]
    for c, j, st, sub, start, end in rows:
        mem_con.execute("INSERT INTO jobs (cluster, job_id, source_format, source_file_id, state, submit_time, start_time, "
                        "end_time, ingested_at) VALUES (?, ?, 'sacct', 'x', ?, ?::TIMESTAMPTZ, ?::TIMESTAMPTZ, "
                        "?::TIMESTAMPTZ, now())", [c, j, st, sub, start, end])
    want = {"c": datetime(2020, 1, 1, 12, tzinfo=timezone.utc), "d": datetime(2020, 2, 1, tzinfo=timezone.utc)}
    assert {c: collect_cursor(mem_con, c) for c in "cd"} == want and collect_cursor(mem_con, "e") is None
    got = dict(mem_con.execute("SELECT cluster, cursor FROM collect_cursor").fetchall())
    assert {k: v.astimezone(timezone.utc) for k, v in got.items()} == want
    mem_con.execute("DROP VIEW collect_cursor")  # a warehouse from before the view, opened read-only
    assert {c: collect_cursor(mem_con, c) for c in "cd"} == want


def test_a_failing_collect_is_one_error_line_without_prefects_echo(tmp_path, standin, monkeypatch, capfd):
    """Issue 37: Prefect's four lines about the failed task and flow are not printed before the
    command's own one-line error."""
    from typer.testing import CliRunner

    from metapilot.cli import app

    monkeypatch.setenv("SACCT_STANDIN_FAIL", "1")
    res = CliRunner().invoke(app, ["collect", "--cluster", "pozidriv", "--db", str(tmp_path / "m.duckdb")])
    out = res.output + "".join(capfd.readouterr())
    assert res.exit_code == 2, out
    assert out.count("sacct exited with status 1") == 1, out
    assert "| ERROR" not in out and "Finished in state Failed" not in out, out


def _late_record(rows: list[list[str]]) -> tuple[list[list[str]], list[str]]:
    """The jobs over by T1, and among them one that ended within the hour before the last end: its
    record reaches sacct only after the first collect (slurmdbd wrote it late)."""
    done = [c for c in rows if c[13] not in ("Unknown", "None") and _ts(c[13]) <= T1]
    last = max(_ts(c[13]) for c in done)
    late = next(c for c in sorted(done, key=lambda c: _ts(c[13]), reverse=True)
                if last - timedelta(hours=1) <= _ts(c[13]) < last)
    return done, late


@pytest.mark.parametrize("overlap, collected", [(None, True), ("0", False), ("2h", True)])
def test_a_record_that_reaches_sacct_late_is_collected_by_the_overlap(tmp_path, standin, monkeypatch, overlap, collected):
    """Issue 54, item 2: the window opens a margin before the cursor, so a job that ended before
    the cursor but whose record arrived after the collect that should have seen it is collected;
    with no margin (`--overlap 0`) it is lost for good, as before."""
    from metapilot.flows.collect import collect_flow
    from metapilot.warehouse.collect import collect_cursor
    from metapilot.warehouse.db import connect

    rows, log = standin
    done, late = _late_record(rows)
    data = tmp_path / "sacct-data.txt"
    data.write_text("".join("|".join(c) + "\n" for c in done if c is not late))
    db = str(tmp_path / "m.duckdb")
    collect_flow("pozidriv", db=db, until=T1, overlap=overlap)
    con = connect(db, read_only=True)
    cursor = collect_cursor(con, "pozidriv")
    con.close()
    assert _ts(late[13]) < cursor  # ended before the cursor: a window from the cursor misses it
    data.write_text("".join("|".join(c) + "\n" for c in done))  # the late record has arrived
    second = collect_flow("pozidriv", db=db, until=T2, overlap=overlap)
    assert second["outcome"] == "loaded" or not collected
    con = connect(db, read_only=True)
    got = con.execute("SELECT count(*) FROM jobs WHERE job_id = ?", [late[0]]).fetchall()[0][0]
    total, distinct = con.execute("SELECT count(*), count(DISTINCT (job_id, submit_time)) FROM jobs").fetchall()[0]
    con.close()
    assert got == (1 if collected else 0)
    assert total == distinct == len(done) - (0 if collected else 1)  # the overlap's jobs merged, never doubled


def test_overlap_option_and_environment(monkeypatch):
    from metapilot.warehouse.collect import DEFAULT_OVERLAP, collect_overlap, parse_overlap

    assert parse_overlap("90m") == timedelta(minutes=90) and parse_overlap("0") == timedelta(0)
    assert parse_overlap("3600") == timedelta(hours=1) and parse_overlap(" 1d ") == timedelta(days=1)
    with pytest.raises(ValueError, match="30m, 2h or 1d"):
        parse_overlap("an hour")
    monkeypatch.delenv("METAPILOT_COLLECT_OVERLAP", raising=False)
    assert collect_overlap() == DEFAULT_OVERLAP == timedelta(hours=1)
    monkeypatch.setenv("METAPILOT_COLLECT_OVERLAP", "2h")
    assert collect_overlap() == timedelta(hours=2) and collect_overlap("5m") == timedelta(minutes=5)


def test_plan_window_opens_before_the_cursor_only(tmp_path, standin):
    from metapilot.flows.collect import collect_flow
    from metapilot.warehouse.collect import EARLIEST, plan_window

    db = str(tmp_path / "m.duckdb")
    fresh = plan_window(db, "pozidriv", until=T1, overlap=timedelta(hours=3))
    assert fresh.start == EARLIEST and fresh.overlap == timedelta(0)  # no data: nothing to overlap
    collect_flow("pozidriv", db=db, until=T1)
    w = plan_window(db, "pozidriv", until=T2, overlap=timedelta(hours=3))
    assert w.start == w.cursor - timedelta(hours=3) and w.overlap == timedelta(hours=3)
    since = datetime(2016, 12, 1, tzinfo=timezone.utc)
    assert plan_window(db, "pozidriv", since=since, until=T2, overlap=timedelta(hours=3)).start == since  # --since is exact
