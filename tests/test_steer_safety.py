"""The steering loop against the cluster's own users (issue 49), on a stand-in Slurm
(tests/steer_standin.py) and on crafted answers: a job name that is not UTF-8, a mistyped --db,
bounded options, the clean exit of --once, who approves, the publish order, the cluster checked,
a batch that fails part-way, and the live tail guard counted from eligibility."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from steer_standin import band_factor, job, mini_cluster, site_factors, update_state
from typer.testing import CliRunner

from metapilot.cli.app import app
from metapilot.models.steering.decision import named_rule
from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
from metapilot.models.steering.slurm_cli import SlurmCli

NOW = time.time()
# the fixture's four jobs (9, 3, 7, 5 min) by SJF at step 10: 2, 4, 3, 1, every one in the band
SJF4 = {"2": band_factor(10, 0, 4), "4": band_factor(10, 1, 4), "3": band_factor(10, 2, 4), "1": band_factor(10, 3, 4)}
META = {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}


@pytest.fixture
def standin(tmp_path):
    jobs = [job(i, limit_min=m, submit=int(NOW) - 600 + i) for i, m in ((1, 9), (2, 3), (3, 7), (4, 5))]
    return mini_cluster(tmp_path, jobs)


def _raw_squeue(bin_dir: Path, answer: bytes) -> None:
    """Replace the stand-in's squeue by one that answers these exact bytes."""
    (bin_dir / "squeue.bytes").write_bytes(answer)
    exe = bin_dir / "squeue"
    exe.write_text(f"#!/bin/sh\ncat '{bin_dir / 'squeue.bytes'}'\n")
    exe.chmod(0o755)


def _squeue_bytes(jobs: list[dict], name: bytes) -> bytes:
    """squeue --json as Slurm writes it for a job named with raw bytes: the name passed through
    unescaped (`sbatch -J $'bad\\xff\\xfe'`)."""
    jobs = [{**j, "name": "@NAME@", "comment": "@NAME@", "standard_output": "/home/u/@NAME@.out"} for j in jobs]
    return json.dumps({"meta": META, "errors": [], "jobs": jobs}).encode().replace(b"@NAME@", name)


# --- item 1: one job name stops steering -----------------------------------------------------


@pytest.mark.parametrize("name", [b"bad\xff\xfe", b"caf\xe9", b"tab\tand\x01ctl", b"\xc3"])
def test_a_job_name_that_is_not_utf8_does_not_stop_steering(standin, name):
    state, bin_dir, db = standin
    _raw_squeue(bin_dir, _squeue_bytes(json.loads(state.read_text())["jobs"], name))
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10))
    s.start()
    out = s.cycle()
    assert out.row["status"] == "ok", out.line
    assert site_factors(state) == SJF4


def test_every_mode_reads_a_non_utf8_answer(standin):
    state, bin_dir, db = standin
    _raw_squeue(bin_dir, _squeue_bytes(json.loads(state.read_text())["jobs"], b"\xff\xfe"))
    base = ["steer", "--cluster", "mini", "--slurm", "--policy", "SJF+EASY", "--slurm-bin", str(bin_dir), "--db", db,
            "--step", "10"]
    for extra in (["--dry-run", "--once"], ["--once"], ["--release"]):
        res = CliRunner().invoke(app, [*base, *extra])
        assert res.exit_code == 0, (extra, res.output)
        assert "UnicodeDecodeError" not in res.output


def test_slurm_messages_that_are_not_utf8_are_still_reported(tmp_path):
    from metapilot.models.steering.slurm_cli import SlurmUnreachable

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "squeue"
    exe.write_bytes(b"#!/bin/sh\nprintf 'squeue: error: job \\377 invalid\\n' >&2\nexit 1\n")
    exe.chmod(0o755)
    with pytest.raises(SlurmUnreachable, match="invalid"):
        SlurmCli(bin_dir=str(bin_dir)).squeue_json()


# --- item 16: bounded options, clear errors, honest exit codes, a clean --once ------------------


def _args(bin_dir, db, *extra: str) -> list[str]:
    return ["steer", "--cluster", "mini", "--slurm", "--policy", "SJF+EASY", "--slurm-bin", str(bin_dir), "--db", db,
            *extra]


@pytest.mark.parametrize("extra", [["--step", "-100000"], ["--step", "0"], ["--step", "2147483646"],
                                   ["--every", "0s"], ["--every", "0.2"], ["--every", "142857143h"],
                                   ["--every", "1e400"]])
def test_bad_steer_options_are_usage_errors(standin, extra):
    state, bin_dir, db = standin
    res = CliRunner().invoke(app, _args(bin_dir, db, "--once", *extra))
    assert res.exit_code == 2 and "Invalid value" in res.output and "bug" not in res.output, res.output
    assert site_factors(state) == {}


def test_a_step_below_one_is_refused_by_the_loop_itself(standin):
    _, bin_dir, db = standin
    for step in (0, -100_000):
        with pytest.raises(ValueError, match="step must be 1 to"):
            Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                    SteerOptions("mini", step=step))


def _publish_controller(db: str) -> None:
    from datetime import datetime, timezone

    from metapilot.warehouse.db import connect

    at = datetime.now(timezone.utc)
    con = connect(db)
    con.execute("INSERT INTO published_policies (cluster, partition, policy_id, published_at, kind, recommendation, message) "
                "VALUES ('mini', '*', 'p1', ?, 'controller', 'MetaPilot controller p1', 'promoted')", [at])
    con.execute("INSERT INTO steer_approvals (cluster, decision, kind, policy_id, published_at, approved_by, approved_at) "
                "VALUES ('mini', 'controller p1', 'controller', 'p1', ?, 'alice', ?)", [at, at])
    con.close()


def test_a_tampered_artifact_is_a_clear_user_error(standin, monkeypatch):
    import metapilot.models.controller.advice as advice
    from metapilot.models.controller.artifact import ArtifactIntegrityError

    state, bin_dir, db = standin
    _publish_controller(db)

    def tampered(*a, **k):
        raise ArtifactIntegrityError("policy.npz: expected sha256 aaa, found bbb. The artifact was modified")

    monkeypatch.setattr(advice, "Advisor", tampered)
    res = CliRunner().invoke(app, ["steer", "--cluster", "mini", "--slurm", "--once", "--slurm-bin", str(bin_dir),
                                   "--db", db])
    assert res.exit_code == 2, res.output
    assert "artifact does not match" in res.output and "policy.npz" in res.output and "bug" not in res.output
    assert site_factors(state) == {}


def test_the_loop_exits_non_zero_when_its_release_fails(standin, monkeypatch):
    """The loop's exit releases; a release that fails leaves factors set: never exit 0."""
    state, bin_dir, db = standin
    monkeypatch.setattr(Steerer, "cycle", _down_then_interrupt(state, Steerer.cycle))
    res = CliRunner().invoke(app, _args(bin_dir, db, "--step", "10", "--every", "1s"))
    assert "release error" in res.output and res.exit_code == 2, res.output
    assert site_factors(state) == SJF4  # still set: the next start releases them
    res = CliRunner().invoke(app, _args(bin_dir, db, "--release"))  # Slurm still away
    assert res.exit_code == 2 and ("release error" in res.output or "Unable to contact" in res.output), res.output
    update_state(state, mode="ok")
    res = CliRunner().invoke(app, _args(bin_dir, db, "--release"))
    assert res.exit_code == 0 and set(site_factors(state).values()) == {0}


def _down_then_interrupt(state: Path, cycle):
    """The first cycle as it is; then Slurm goes away and the operator presses Ctrl-C."""
    done = []

    def once_then_stop(self):
        if done:
            update_state(state, mode="down")
            raise KeyboardInterrupt
        done.append(True)
        return cycle(self)

    return once_then_stop


def test_consecutive_once_runs_carry_on_instead_of_releasing_as_a_crash(standin):
    from steer_standin import calls

    state, bin_dir, db = standin
    args = _args(bin_dir, db, "--once", "--step", "10")
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0 and site_factors(state) == SJF4, first.output
    n_updates = len([c for c in calls(state) if c["tool"] == "scontrol" and not c["argv"]])
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "without releasing" not in second.output and "crash" not in second.output
    assert "keep the site factors an earlier --once set" in second.output and "0 changed" in second.output
    assert len([c for c in calls(state) if c["tool"] == "scontrol" and not c["argv"]]) == n_updates  # nothing sent
    assert site_factors(state) == SJF4
    # a crash after a clean --once is still a crash: the next start releases
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10))
    s.start()  # carries on (the last exit was clean) ...
    s.cycle()  # ... and dies here, without `keep`
    said = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                   SteerOptions("mini", step=10)).start()
    assert any("without releasing" in x for x in said) and set(site_factors(state).values()) == {0}


def test_once_after_an_error_cycle_exits_non_zero(standin):
    state, bin_dir, db = standin
    update_state(state, mode="garbage")
    res = CliRunner().invoke(app, _args(bin_dir, db, "--once", "--step", "10"))
    assert res.exit_code == 2 and "live error" in res.output, res.output


# --- item 13: who approves ------------------------------------------------------------------------


def _publish_fixed(db: str, at=None, recommendation: str = "SAF+easy", message: str = "Keep SAF+EASY") -> None:
    from datetime import datetime, timezone

    from metapilot.warehouse.db import connect

    con = connect(db)
    con.execute("INSERT INTO published_policies (cluster, partition, policy_id, published_at, kind, recommendation, message) "
                "VALUES ('mini', '*', 'p1', ?, 'fixed', ?, ?)", [at or datetime.now(timezone.utc), recommendation, message])
    con.close()


def _rows(db: str, sql: str) -> list[tuple]:
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_approve_records_the_real_uid_and_the_sudo_user_only_as_a_claim(standin, monkeypatch):
    import os
    import pwd

    _, bin_dir, db = standin
    _publish_fixed(db)
    me = pwd.getpwuid(os.getuid()).pw_name
    for var in ("SUDO_USER", "USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.setenv(var, "mallory")
    res = CliRunner().invoke(app, ["approve", "--cluster", "mini", "--db", db])
    assert res.exit_code == 0, res.output
    assert f"by {me} (sudo user mallory, as the environment claims)" in res.output
    assert _rows(db, "SELECT approved_by, claimed_by FROM steer_approvals") == [(me, "mallory")]
    res = CliRunner().invoke(app, _args(bin_dir, db, "--policy", "published", "--dry-run", "--once"))
    assert res.exit_code == 0 and f"approved by {me} (sudo user mallory, as the environment claims)" in res.output
    monkeypatch.delenv("SUDO_USER")
    res = CliRunner().invoke(app, ["approve", "--cluster", "mini", "--db", db])
    assert res.exit_code == 0 and f"by {me} at" in res.output
    assert _rows(db, "SELECT approved_by, claimed_by FROM steer_approvals ORDER BY approved_at")[-1] == (me, None)


def test_a_warehouse_from_before_the_claim_column_is_migrated(tmp_path):
    import duckdb

    from metapilot.warehouse.db import connect

    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE steer_approvals (cluster VARCHAR NOT NULL, decision VARCHAR NOT NULL, kind VARCHAR NOT NULL, "
                "policy_id VARCHAR, published_at TIMESTAMPTZ, approved_by VARCHAR NOT NULL, "
                "approved_at TIMESTAMPTZ NOT NULL, note VARCHAR)")
    con.close()
    con = connect(str(db))
    try:
        assert "claimed_by" in [r[0] for r in con.execute("DESCRIBE steer_approvals").fetchall()]
    finally:
        con.close()


# --- item 10: the publish order, clock skew, an old decision --------------------------------------


def test_a_future_dated_publish_hides_no_later_one_and_is_refused_when_latest(standin):
    from datetime import datetime, timedelta, timezone

    state, bin_dir, db = standin
    now = datetime.now(timezone.utc)
    _publish_fixed(db, at=now + timedelta(days=365), recommendation="LAF+easy", message="from a clock a year ahead")
    res = CliRunner().invoke(app, ["approve", "--cluster", "mini", "--db", db])
    assert res.exit_code == 2 and "after this host's clock" in res.output and "bug" not in res.output, res.output
    _publish_fixed(db, at=now, recommendation="SJF+easy", message="Keep SJF+EASY")  # written later: the latest
    res = CliRunner().invoke(app, ["approve", "SJF+EASY", "--cluster", "mini", "--db", db])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, _args(bin_dir, db, "--policy", "published", "--once", "--step", "10"))
    assert res.exit_code == 0 and "steering mini by SJF+EASY" in res.output, res.output
    assert site_factors(state) == SJF4


def test_an_old_decision_warns_and_max_age_refuses_it(standin):
    from datetime import datetime, timedelta, timezone

    state, bin_dir, db = standin
    _publish_fixed(db, at=datetime.now(timezone.utc) - timedelta(days=60))
    assert CliRunner().invoke(app, ["approve", "--cluster", "mini", "--db", db]).exit_code == 0
    res = CliRunner().invoke(app, _args(bin_dir, db, "--policy", "published", "--dry-run", "--once"))
    assert res.exit_code == 0 and "60 days old" in res.output and "warning" in res.output, res.output
    res = CliRunner().invoke(app, _args(bin_dir, db, "--policy", "published", "--once", "--max-age", "30d"))
    assert res.exit_code == 2 and "beyond --max-age (30 days)" in res.output and site_factors(state) == {}, res.output
    res = CliRunner().invoke(app, _args(bin_dir, db, "--policy", "published", "--dry-run", "--once", "--max-age", "9w"))
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, _args(bin_dir, db, "--once", "--max-age", "soon"))
    assert res.exit_code == 2 and "Invalid value" in res.output


# --- item 11: --cluster checked against the Slurm being steered ---------------------------------


@pytest.mark.parametrize("mode", [["--once"], ["--dry-run", "--once"], ["--release"]])
def test_a_cluster_that_is_not_the_slurm_reached_is_refused_naming_both(standin, mode):
    state, bin_dir, db = standin
    assert CliRunner().invoke(app, _args(bin_dir, db, "--once", "--step", "10")).exit_code == 0
    before = site_factors(state)
    update_state(state, cluster="other")
    res = CliRunner().invoke(app, _args(bin_dir, db, *mode, "--step", "10"))
    assert res.exit_code == 2 and "--cluster mini" in res.output and "is cluster other" in res.output, res.output
    assert "bug" not in res.output and site_factors(state) == before  # not released either: other's ids are other jobs


def test_the_cluster_name_is_read_from_scontrol_show_config():
    from metapilot.models.steering.squeue import parse_cluster_name

    text = "Configuration data as of 2026-12-05T01:08:31\nAccountingStorageType   = accounting_storage/slurmdbd\n" \
           "ClusterName             = mini\nCompleteWait            = 0 sec\n"
    assert parse_cluster_name(text) == "mini" and parse_cluster_name("PreemptType = preempt/none\n") is None


# --- item 6: a batch of updates that fails part-way --------------------------------------------


class _SecondCallFails(SlurmCli):
    """One scontrol process per line; the second update process fails (slurmctld restarted between
    them, say), after the first applied its line."""

    def __init__(self, **kw):
        super().__init__(lines_per_call=1, **kw)
        self.updates = 0

    def _run(self, args, stdin=None, ok_codes=(0,)):
        from metapilot.models.steering.slurm_cli import SlurmUnreachable

        if args == ["scontrol"] and stdin and stdin.startswith("update"):
            self.updates += 1
            if self.updates == 2:
                raise SlurmUnreachable("scontrol did not answer within 30 s")
        return super()._run(args, stdin, ok_codes)


def _open_rows(db: str) -> dict[str, int]:
    rows = _rows(db, "SELECT job_id, site_factor FROM steered_jobs WHERE released_at IS NULL "
                     "QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY set_at DESC) = 1")
    return dict(rows)


def test_a_batch_that_fails_part_way_keeps_what_was_applied_recorded(standin):
    state, bin_dir, db = standin
    s = Steerer(_SecondCallFails(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10))
    s.start()
    out = s.cycle()
    applied = site_factors(state)
    assert out.row["status"] == "error" and len(applied) == 1, out.line  # the first line went through
    assert "read back from Slurm: 1 of 4 set, 3 not set" in out.row["message"]
    assert _open_rows(db) == applied  # what Slurm carries is recorded; nothing else
    s.slurm.updates = 10  # Slurm answers again
    again = s.cycle()
    assert again.row["status"] == "ok" and again.row["changed"] == 3, again.line
    assert site_factors(state) == SJF4 == _open_rows(db)


def test_factors_that_cannot_be_read_back_stay_recorded_and_are_sent_again(standin):
    state, bin_dir, db = standin

    class _NoReadBack(_SecondCallFails):
        def site_factors(self):
            from metapilot.models.steering.slurm_cli import SlurmUnreachable

            raise SlurmUnreachable("sprio failed (exit 1): Unable to contact slurm controller")

    s = Steerer(_NoReadBack(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10))
    s.start()
    out = s.cycle()
    assert "0 of 4 set, 0 not set, 4 unknown" in out.row["message"]
    assert _open_rows(db) == SJF4  # recorded: an exit or the next start releases them
    s.slurm.updates = 10
    again = s.cycle()
    assert again.row["changed"] == 4 and site_factors(state) == SJF4  # all sent again
    assert s.release("test").row["changed"] == 4 and set(site_factors(state).values()) == {0} and _open_rows(db) == {}


def test_once_exits_non_zero_after_a_failed_update_and_the_next_start_releases(standin, monkeypatch):
    import metapilot.models.steering.slurm_cli as slurm_cli

    state, bin_dir, db = standin
    monkeypatch.setattr(slurm_cli, "SlurmCli", _SecondCallFails)
    res = CliRunner().invoke(app, _args(bin_dir, db, "--once", "--step", "10"))
    assert res.exit_code == 2 and "live error" in res.output and "1 of 4 set" in res.output, res.output
    monkeypatch.undo()
    res = CliRunner().invoke(app, _args(bin_dir, db, "--once", "--step", "10"))
    assert res.exit_code == 0 and "without releasing" in res.output, res.output  # not a clean exit: released first


# --- item 2: the live tail guard counts from eligibility, and is no off switch -------------------


def test_a_job_held_for_days_does_not_trip_the_guard_when_released(standin):
    state, bin_dir, db = standin
    jobs = json.loads(state.read_text())["jobs"]
    # held (or --begin, or dependent) since three days; released a minute ago: eligible from then
    jobs.append(job(7, limit_min=2, submit=int(NOW) - 3 * 86400, eligible_time=int(NOW) - 60))
    update_state(state, jobs=jobs)
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10, guard_h=1.0))
    s.start()
    out = s.cycle()
    assert out.row["status"] == "ok", out.line
    assert site_factors(state)["7"] == band_factor(10, 0, 5)  # steered like any other (2 min: first)
    jobs[-1]["eligible_time"] = 0  # Slurm knows no eligible time: the submit time counts
    update_state(state, jobs=jobs)
    assert s.cycle().row["status"] == "guard"


def test_the_guard_pauses_once_logs_the_job_and_steering_goes_on_with_it_first(standin):
    state, bin_dir, db = standin
    clock = [NOW]
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10, guard_h=0.1, guard_pause_s=3600), clock=lambda: clock[0])
    s.start()
    out = s.cycle()  # job 1 has waited ~10 min > 6 min
    assert out.row["status"] == "guard" and out.row["guard_job"] == "1" and site_factors(state) == {}
    jobs = json.loads(state.read_text())["jobs"]
    jobs.append(job(8, limit_min=1, submit=int(NOW) - 7200))  # another late job, during the pause
    update_state(state, jobs=jobs)
    clock[0] = NOW + 600
    out = s.cycle()
    assert out.row["status"] == "paused" and site_factors(state) == {}  # no second trip within the pause
    clock[0] = NOW + 3700  # the pause is over: steering goes on by itself; job 8 trips it (once)
    _fresh(state, clock[0], "2", "3", "4")
    assert s.cycle().row["guard_job"] == "8"
    clock[0] = NOW + 7400
    _fresh(state, clock[0], "2", "3", "4")
    out = s.cycle()
    assert out.row["status"] == "ok", out.line  # the jobs that tripped it trip it no more ...
    f = site_factors(state)
    assert f["1"] == f["8"] > max(f[j] for j in ("2", "3", "4"))  # ... they go ahead of their group
    guard = _rows(db, "SELECT guard_job, message FROM steer_cycles WHERE status = 'guard' ORDER BY rowid")
    assert [g[0] for g in guard] == ["1", "8"] and "since it became eligible" in guard[0][1]
    assert _rows(db, "SELECT count(*) FROM steer_cycles WHERE status IN ('halted')") == [(0,)]


def _fresh(state: Path, now: float, *ids: str) -> None:
    """These jobs became eligible a minute before `now` (released from a hold, say)."""
    jobs = json.loads(state.read_text())["jobs"]
    for j in jobs:
        if str(j["job_id"]) in ids:
            j["eligible_time"] = int(now) - 60
    update_state(state, jobs=jobs)


def test_waits_count_from_eligible_time_in_squeue_json():
    from metapilot.models.steering.squeue import parse_squeue

    now = 1_800_000_000
    doc = {"meta": META, "errors": [], "jobs": [
        job(1, limit_min=5, submit=now - 86400, eligible_time=now - 30),  # held for a day, released
        job(2, limit_min=5, submit=now - 600, eligible_time=0),  # Slurm: Unknown
        job(3, limit_min=5, submit=now - 86400, eligible_time=now + 3600, reason="BeginTime")]}
    _, jobs = parse_squeue(json.dumps(doc))
    s = Steerer(None, None, named_rule("SJF+EASY"), SteerOptions("mini", step=10, guard_h=1.0))
    w = s.waits(jobs, now)
    assert dict(zip(w["job_id"], w["wait"])) == {"1": 30, "2": 600}  # the --begin job is not waiting yet
    assert s.guard(jobs, pl_empty_nodes(), now) is None


def pl_empty_nodes():
    import polars as pl

    from metapilot.models.steering.squeue import NODE_SCHEMA

    return pl.DataFrame(schema=NODE_SCHEMA)
