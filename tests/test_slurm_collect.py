"""`metapilot collect` against the real sacct of a one-node Slurm: every job of a small workload
loaded exactly once over two incremental runs, the second asking from the cursor in the data."""

from __future__ import annotations

import time

import pytest
from slurm_fixtures import slurm, slurm_session  # noqa: F401

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _wait_done(slurm, ids: list[str], timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        out = slurm.run("sacct", "-n", "-X", "-P", "-j", ",".join(ids), "-o", "jobid,state").stdout.split()
        done = [ln for ln in out if ln.split("|")[1] in ("COMPLETED", "FAILED", "CANCELLED")]
        if len(done) == len(ids):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {ids} did not end: {out}")


def _wait_visible(slurm, ids: list[str], timeout_s: float = 90.0) -> None:
    """Until sacct's windowed query (what collect asks: from the earliest time to now) lists every
    job: a job's record can reach slurmdbd's time index a little after `sacct -j` shows it ended."""
    from datetime import datetime, timezone

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        out = slurm.run("sacct", "-X", "-P", "-n", "--allusers", "-o", "jobid", "--starttime", "1970-01-02T00:00:00",
                        "--endtime", now, check=False).stdout.split()
        if set(ids) <= set(out):
            time.sleep(1.1)  # sacct's window has whole seconds
            return
        time.sleep(1.0)
    raise AssertionError(f"sacct's windowed query never listed {ids}: {out}")


def _loaded(db: str, cluster: str) -> list[str]:
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT job_id FROM jobs WHERE cluster = ? ORDER BY job_id", [cluster]).fetchall()]
    finally:
        con.close()


def _ours(ids: list[str], first_of_ours: str) -> list[str]:
    """The jobs this test submitted: the session's one Slurm keeps the accounting of the modules that
    ran before it (collect loads those too, once each), and Slurm numbers jobs in submission order."""
    return [i for i in ids if int(i) >= int(first_of_ours)]


def _less_overlap(cursor: str) -> str:
    """Where a window from `cursor` starts: the default safety margin before it (issue 54)."""
    from datetime import datetime, timezone

    from metapilot.warehouse.collect import DEFAULT_OVERLAP, EARLIEST, sacct_time

    t = datetime.strptime(cursor, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return sacct_time(max(t - DEFAULT_OVERLAP, EARLIEST))


def test_collect_twice_loads_every_real_job_once(tmp_path, slurm):
    from metapilot.flows.collect import collect_flow

    db = str(tmp_path / "m.duckdb")
    first = [slurm.sbatch("-n", str(n), "-t", "1", wrap="sleep 1") for n in (1, 2, 4, 8, 16)]
    _wait_done(slurm, first)
    _wait_visible(slurm, first)
    out1 = collect_flow(slurm.cluster, db=db)
    assert out1["outcome"] == "loaded" and out1["cursor"] is None, (out1["message"], out1["lines"], out1["reports"])
    loaded = _loaded(db, slurm.cluster)
    assert sorted(_ours(loaded, first[0])) == sorted(first)
    assert len(loaded) == len(set(loaded))

    second = [slurm.sbatch("-n", "4", "-t", "1", wrap="sleep 1") for _ in range(3)]
    running = slurm.sbatch("-n", "2", "-t", "5", wrap="sleep 20")  # still running at the second collect
    _wait_done(slurm, second)
    _wait_visible(slurm, second + [running])
    out2 = collect_flow(slurm.cluster, db=db)
    seen = slurm.run("sacct", "-X", "-P", "-n", "-o", "jobid,submit,start,end,state", "--starttime", out2["start"],
                     "--endtime", out2["end"], check=False).stdout  # what sacct said, for the message
    assert out2["cursor"] is not None and out2["start"] == _less_overlap(out2["cursor"]), "from the cursor less the overlap"
    assert out2["start"] > out1["start"]
    ids = _loaded(db, slurm.cluster)
    assert sorted(_ours(ids, first[0])) == sorted(first + second + [running]), f"each job exactly once: {out2['start']}..{out2['end']} {out2['reports']}; sacct now: {seen}"
    assert len(ids) == len(set(ids)) and set(loaded) <= set(ids)

    out3 = collect_flow(slurm.cluster, db=db)  # nothing new: still each job once
    assert sorted(_loaded(db, slurm.cluster)) == sorted(ids)
    assert out3["start"] <= out2["end"]


def test_a_job_the_first_collect_missed_is_collected_through_the_overlap(tmp_path, slurm, monkeypatch):
    """Issue 54, item 2, against the real sacct: a job whose record reaches sacct after the collect
    that should have seen it (here the first collect runs the real sacct through a filter that
    holds that job's line back) and that ended before the cursor is collected by the next run,
    whose window opens the overlap before the cursor; with no overlap sacct does not list it."""
    import shutil

    from metapilot.flows.collect import collect_flow

    monkeypatch.delenv("METAPILOT_COLLECT_OVERLAP", raising=False)
    db = str(tmp_path / "m.duckdb")
    late = slurm.sbatch("-n", "1", "-t", "1", wrap="sleep 1")
    _wait_done(slurm, [late])
    last = slurm.sbatch("-n", "1", "-t", "1", wrap="sleep 3")  # ends later: the cursor
    _wait_done(slurm, [last])
    _wait_visible(slurm, [late, last])
    real = shutil.which("sacct", path=slurm.env.get("PATH"))
    behind = tmp_path / "sacct-behind"  # the real sacct before the late record reached it
    behind.write_text(f"#!/bin/bash\nset -o pipefail\n{real} \"$@\" | awk -F'|' '$1 != \"{late}\"'\n")
    behind.chmod(0o755)
    first = collect_flow(slurm.cluster, db=db, sacct=str(behind))
    ids = _loaded(db, slurm.cluster)
    assert first["outcome"] == "loaded" and last in ids and late not in ids

    none = collect_flow(slurm.cluster, db=db, overlap="0")
    assert none["start"] == none["cursor"] and late not in _loaded(db, slurm.cluster), "lost without the overlap"
    out = collect_flow(slurm.cluster, db=db)
    assert out["start"] == _less_overlap(out["cursor"]) and out["overlap_s"] == 3600
    ids = _loaded(db, slurm.cluster)
    assert ids.count(late) == 1 and ids.count(last) == 1 and len(ids) == len(set(ids))
