"""Issue 49 against the stand-in Slurm: what Slurm holds is read back each cycle and a factor cleared
behind the loop's back is set again (8); one loop per cluster, a second refused naming the holder, a
stale holder taken over (9); the updates a cycle may send are bounded (3)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
from steer_standin import band_factor, calls, job, make_bin, mini_cluster, site_factors, update_state
from typer.testing import CliRunner

from metapilot.cli.app import app
from metapilot.models.steering.decision import named_rule
from metapilot.models.steering.lock import SteerLocked
from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
from metapilot.models.steering.slurm_cli import SlurmCli

NOW = time.time()
SJF4 = {"2": band_factor(10, 0, 4), "4": band_factor(10, 1, 4), "3": band_factor(10, 2, 4), "1": band_factor(10, 3, 4)}


@pytest.fixture
def standin(tmp_path):
    jobs = [job(i, limit_min=m, submit=int(NOW) - 600 + i) for i, m in ((1, 9), (2, 3), (3, 7), (4, 5))]
    return mini_cluster(tmp_path, jobs)


def _steerer(standin, **opts) -> Steerer:
    _, bin_dir, db = standin
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10, guard_h=None, **opts))
    s.start()
    return s


def _updates(state) -> list[dict]:
    return [c for c in calls(state) if c["tool"] == "scontrol" and not c["argv"]]


def _args(bin_dir, db, *extra) -> list[str]:
    return ["steer", "--cluster", "mini", "--slurm", "--policy", "SJF+EASY", "--slurm-bin", str(bin_dir), "--db", db,
            "--step", "10", *extra]


# --- item 8: read back what Slurm holds ------------------------------------------------------------

def test_factors_cleared_or_changed_behind_the_loops_back_are_set_again(standin):
    state, _, _ = standin
    s = _steerer(standin)
    assert s.cycle().row["changed"] == 4 and site_factors(state) == SJF4
    quiet = s.cycle()  # Slurm holds what the loop set: one sprio read, nothing sent
    assert quiet.row["changed"] == 0 and len(_updates(state)) == 1
    assert [c["tool"] for c in calls(state)].count("sprio") == 2  # the start's look, then the second cycle's
    factors = site_factors(state)
    factors["2"], factors["3"] = 0, 0  # slurmctld restarted from an older state, say
    factors["4"] = 5  # another admin
    update_state(state, site_factors=factors)
    out = s.cycle()
    assert out.row["status"] == "ok" and out.row["changed"] == 3, out.line
    assert "3 site factors not as the loop set them" in out.row["message"] and "set again" in out.row["message"]
    assert site_factors(state) == SJF4
    assert len(_updates(state)) == 2 and s.cycle().row["changed"] == 0  # agreed again: nothing more


def test_a_dry_run_reads_nothing_back(standin):
    state, _, _ = standin
    s = _steerer(standin, dry_run=True)
    s.cycle()
    s.cycle()
    assert "sprio" not in [c["tool"] for c in calls(state)]


# --- item 3: the updates a cycle sends are bounded --------------------------------------------------

def test_a_cycle_sends_at_most_max_changes_updates_and_the_rest_follow(tmp_path):
    state = tmp_path / "s.json"
    state.write_text(json.dumps({"jobs": [job(i, limit_min=i) for i in range(1, 61)], "mode": "ok"}))
    s = Steerer(SlurmCli(bin_dir=str(make_bin(tmp_path / "bin", state))), warehouse_connector(str(tmp_path / "w.duckdb")),
                named_rule("SJF+EASY"), SteerOptions("mini", step=10, max_changes=25))
    s.start()
    sent = []
    for _ in range(4):
        s.cycle()
        sent.append(sum(c["lines"] - 1 for c in _updates(state)) - sum(sent))
    assert sent == [25, 25, 10, 0]
    f = site_factors(state)
    assert [f[str(i)] for i in range(1, 61)] == sorted(f.values(), reverse=True)  # SJF: 1 min first


# --- item 9: one loop per cluster -------------------------------------------------------------------

def test_a_second_loop_is_refused_naming_the_holder(standin):
    state, bin_dir, db = standin
    first = _steerer(standin)
    first.take_lock("live", "alice")
    first.cycle()
    second = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("LAF+EASY"),
                     SteerOptions("mini", step=10))
    with pytest.raises(SteerLocked, match=f"held by alice@{socket.gethostname()} \\(pid {os.getpid()}, live\\)"):
        second.take_lock("live", "bob")
    for extra in (["--once"], ["--release"], []):
        res = CliRunner().invoke(app, _args(bin_dir, db, *extra))
        assert res.exit_code == 3 and "held by alice@" in res.output and "one loop per cluster" in res.output, res.output
    assert site_factors(state) == SJF4  # nothing released, nothing flipped
    res = CliRunner().invoke(app, _args(bin_dir, db, "--dry-run", "--once"))
    assert res.exit_code == 0, res.output  # a dry run changes nothing: no lock needed
    first.free_lock()
    res = CliRunner().invoke(app, _args(bin_dir, db, "--once"))
    assert res.exit_code == 0 and "live ok" in res.output, res.output
    res = CliRunner().invoke(app, _args(bin_dir, db, "--once"))  # --once let the lock go
    assert res.exit_code == 0, res.output


def _plant(db: str, host: str, pid: int, beat_ago_s: float) -> None:
    from metapilot.warehouse import steer_store as store
    from metapilot.warehouse.db import connect

    at = datetime.now(timezone.utc) - timedelta(seconds=beat_ago_s)
    con = connect(db)
    try:
        store.take_lock(con, "mini", token="t-old", holder="carol", host=host, pid=pid, mode="live", at=at)
    finally:
        con.close()


def test_a_stale_holder_is_taken_over_and_said_so(standin):
    _, bin_dir, db = standin
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _plant(db, socket.gethostname(), dead.pid, beat_ago_s=5)  # this host, its process gone
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"), SteerOptions("mini", step=10))
    said = s.take_lock("live", "dave")
    assert said and "took over the steering lock of carol@" in said[0] and f"process {dead.pid}" in said[0]
    s.free_lock()
    _plant(db, "elsewhere.example", 4242, beat_ago_s=30)  # another host, beating: held
    with pytest.raises(SteerLocked, match="carol@elsewhere.example"):
        s.take_lock("live", "dave")
    _plant(db, "elsewhere.example", 4242, beat_ago_s=3600)  # another host, silent for an hour: gone
    assert "no heartbeat for" in s.take_lock("live", "dave")[0]
    s.free_lock()


def test_a_loop_whose_lock_was_taken_over_stops_without_releasing(standin):
    state, bin_dir, db = standin
    first = _steerer(standin)
    first.take_lock("live", "alice")
    first.cycle()
    clock = [time.time() + 3600]  # an hour on, the first loop silent all that while (suspended, say)
    second = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                     SteerOptions("mini", step=10), clock=lambda: clock[0])
    assert "no heartbeat" in second.take_lock("live", "bob")[0]
    out = first.cycle()
    assert out.row["status"] == "error" and "took the steering lock over" in out.row["message"] and first.lost_lock
    first.free_lock()  # not its own any more: left alone
    assert site_factors(state) == SJF4
    with pytest.raises(SteerLocked, match="held by bob@"):
        Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10)).take_lock("live", "eve")


# --- item 4: a job moved to another partition -------------------------------------------------------

def test_a_job_moved_to_another_partition_is_seen_between_cycles_and_placed_first(standin):
    state, _, _ = standin
    s = _steerer(standin)
    s.cycle()
    assert s.moved_jobs() == []
    jobs = json.loads(state.read_text())["jobs"]
    jobs[1]["partition"] = "high"  # job 2, the debug group's first, moved by its user
    update_state(state, jobs=jobs)
    assert s.moved_jobs() == ["2"]  # one small squeue read, between cycles
    out = s.cycle()
    assert "1 jobs moved to another partition while carrying a site factor (2: debug|tier 1 -> high|tier 2)" \
        in out.row["message"], out.line
    assert site_factors(state)["2"] == band_factor(10, 0, 1)  # alone in its new group: the band's middle
    assert s.moved_jobs() == []


def test_factors_this_warehouse_never_set_are_said_at_the_start(standin, tmp_path):
    """A loop on another warehouse holds another lock: what Slurm shows of it is said at the start."""
    state, bin_dir, _ = standin
    _steerer(standin).cycle()  # the first loop, on w.duckdb
    other = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(str(tmp_path / "other.duckdb")),
                    named_rule("LAF+EASY"), SteerOptions("mini", step=10))
    said = other.start()
    assert any("4 pending jobs carry site factors this warehouse never set (1, 2, 3, 4)" in x for x in said), said
    assert not any("never set" in x for x in _steerer(standin).start())  # its own: nothing to say
