"""`metapilot steer` against a real one-node Slurm (scripts/slurm.sh): with a fixed rule, queued jobs
that cannot backfill start in exactly the rule's order, their multifactor priority otherwise intact
(sprio: the site factor is the only change); --release puts every site factor back to 0; a held job,
a running job and a job in another partition tier are untouched; --dry-run changes nothing; SIGKILL
then the next start releases, SIGTERM releases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from slurm_fixtures import slurm, slurm_session, wait_until  # noqa: F401
from steer_standin import band_factor

SJF_ORDER_LIMITS = (9, 3, 7, 5)  # minutes, in submission order; SJF starts them 3, 5, 7, 9
STEP = 100_000


def _metapilot(slurm, db: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "metapilot.cli", *args, "--db", db], env=slurm.env,
                         capture_output=True, text=True, timeout=120)
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def _sprio(slurm) -> dict[str, dict[str, int]]:
    """job -> weighted factors (priority, site, age, fair-share, job size, partition, QOS, nice)."""
    out = slurm.run("sprio", "-h", "-o", "%i|%Y|%S|%A|%F|%J|%P|%Q|%N", check=False).stdout
    keys = ("priority", "site", "age", "fairshare", "jobsize", "partition", "qos", "nice")
    return {ln.split("|")[0].strip(): dict(zip(keys, (int(float(x)) for x in ln.split("|")[1:])))
            for ln in out.splitlines() if ln.strip()}


def _reasons(slurm) -> dict[str, str]:
    """job -> its state reason as squeue --json gives it (the text format shows a description instead)."""
    import json

    raw = subprocess.run(["squeue", "--json"], env=slurm.env, capture_output=True, check=True, timeout=60).stdout
    jobs = json.loads(raw.decode("utf-8", errors="replace"))["jobs"]  # a job's name may be any bytes
    return {str(j["job_id"]): j["state_reason"] for j in jobs
            if j["job_state"] in ("PENDING", "RUNNING", "COMPLETING")}  # --json also lists ended jobs


@pytest.fixture
def queue(slurm):
    """A running blocker holding the whole node, four whole-node jobs queued behind it (none can
    backfill), a held job, and a job alone in the higher-tier partition."""
    blocker = slurm.sbatch("-n", "64", "-t", "10", wrap="sleep 600")
    wait_until(lambda: _reasons(slurm).get(blocker) == "None" and slurm.run("squeue", "-h", "-j", blocker, "-o", "%t").stdout.strip() == "R",
          what="the blocker to run")
    queued = [slurm.sbatch("-n", "64", "-t", str(m), wrap="sleep 1") for m in SJF_ORDER_LIMITS]
    held = slurm.sbatch("-H", "-n", "64", "-t", "1", wrap="sleep 1")
    high = slurm.sbatch("-p", "high", "-n", "64", "-t", "2", wrap="sleep 1")
    wait_until(lambda: all(_reasons(slurm).get(j) in ("Priority", "Resources") for j in [*queued, high]),
          what="Slurm to evaluate the queue")
    return {"blocker": blocker, "queued": queued, "held": held, "high": high}


def _starts(slurm, ids: list[str]) -> list[str]:
    out = slurm.run("sacct", "-n", "-X", "-P", "-j", ",".join(ids), "-o", "jobid,start,state").stdout
    rows = [ln.split("|") for ln in out.splitlines() if ln.strip()]
    assert all(r[2] == "COMPLETED" for r in rows), rows
    return [r[0] for r in sorted(rows, key=lambda r: r[1])]


def test_once_applies_sjf_exactly_and_release_clears(tmp_path, slurm, queue):
    db = str(tmp_path / "w.duckdb")
    before = _sprio(slurm)
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--once",
                     "--step", str(STEP))
    assert "live ok: SJF" in res.stdout
    after = _sprio(slurm)
    q = queue["queued"]
    expect = {q[1]: band_factor(STEP, 0, 4), q[3]: band_factor(STEP, 1, 4), q[2]: band_factor(STEP, 2, 4),
              q[0]: band_factor(STEP, 3, 4)}  # 3, 5, 7, 9 minutes, in the band every group shares
    assert {j: after[j]["site"] for j in q} == expect
    for j in q:  # the site factor is the only change: every other factor as before
        for k in ("age", "fairshare", "jobsize", "partition", "qos", "nice"):
            assert after[j][k] == before[j][k], (j, k)
        assert after[j]["priority"] - before[j]["priority"] == after[j]["site"]
    assert after[queue["high"]]["site"] == band_factor(STEP, 0, 1)  # alone in its tier: the band's middle
    assert queue["held"] not in after or after[queue["held"]]["site"] == 0
    steered = _metapilot(slurm, db, "sql", "SELECT job_id FROM steered_jobs WHERE released_at IS NULL ORDER BY job_id",
                         "--format", "csv").stdout
    assert sorted(steered.split()[1:]) == sorted([*q, queue["high"]])  # not the held or the running job

    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release")
    assert "released" in res.stdout
    assert all(v["site"] == 0 for v in _sprio(slurm).values())

    _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--once",
               "--step", str(STEP))
    slurm.run("scancel", queue["blocker"])
    wait_until(lambda: not [j for j in q if j in _reasons(slurm)], timeout_s=90, what="the queued jobs to run")
    wait_until(lambda: len(_starts(slurm, q)) == 4, what="sacct to record the starts")
    assert _starts(slurm, q) == [q[1], q[3], q[2], q[0]]  # exactly SJF's order, not submission order


def test_dry_run_changes_nothing(tmp_path, slurm, queue):
    db = str(tmp_path / "w.duckdb")
    before = _sprio(slurm)
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SAF+EASY", "--dry-run",
                     "--once")
    assert "dry-run ok: SAF" in res.stdout and "would change" in res.stdout
    after = _sprio(slurm)
    assert {j: v["site"] for j, v in after.items()} == {j: 0 for j in before}
    assert {j: v["priority"] for j, v in after.items()} == {j: v["priority"] for j, v in before.items()}
    n = _metapilot(slurm, db, "sql", "SELECT count(*) AS n FROM steer_shadow", "--format", "csv").stdout.split()[1]
    assert int(n) == 5  # the four in debug and the one in high (ranked alone in its tier, at 0)


@pytest.mark.parametrize("kind", ["guarded rule", "planner"])
def test_a_published_walk_forward_decision_records_a_shadow_ranking_of_every_kind(tmp_path, slurm, queue, kind):
    """What the walk forward publishes (a rule with its tail guard, or the lookahead planner), approved,
    is what `steer --policy published --once --dry-run` ranks the real queue by; nothing is set."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import publish_walk_forward

    db = str(tmp_path / "w.duckdb")
    record = {"words": "followed over the walk forward: test", "span_from": "2026-01-01T00:00:00+00:00"}
    ahead = ({"rule": "SJF+EASY", "guard_h": 0.001, "planner_settings": None, "decision": "SJF+EASY, guarded"}
             if kind == "guarded rule" else
             {"rule": "planner", "guard_h": 48.0, "planner_settings": {"horizon_h": 6.0, "lam": 0.0},
              "decision": "the lookahead planner (6 h horizon, lambda 0)"})
    con = connect(db)
    try:
        publish_walk_forward(con, slurm.cluster, {**ahead, "source": "test", "backtest_id": "bt-test", "record": record},
                             db)
    finally:
        con.close()
    _metapilot(slurm, db, "approve", "--cluster", slurm.cluster)
    time.sleep(5)  # every queued job has now waited past the guarded rule's 3.6 s
    before = _sprio(slurm)
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "published", "--dry-run",
                     "--once")
    # a guard of 3.6 s has fired by now: oldest first for the whole queue, as the engine orders it
    expected = "FCFS" if kind == "guarded rule" else None
    assert "dry-run ok: " in res.stdout and (expected is None or "dry-run ok: FCFS" in res.stdout), res.stdout
    assert {j: v["site"] for j, v in _sprio(slurm).items()} == {j: 0 for j in before}
    rows = _metapilot(slurm, db, "sql", "SELECT count(*) AS n, min(objective) AS o FROM steer_shadow",
                      "--format", "csv").stdout.split()[1].split(",")
    assert int(rows[0]) == 5 and rows[1]
    decision = _metapilot(slurm, db, "sql", "SELECT decision FROM steer_cycles", "--format", "csv").stdout.split()[1]
    assert decision == ("SJF+EASY" if kind == "guarded rule" else "planner")


def test_sigkill_then_next_start_releases_and_sigterm_releases(tmp_path, slurm, queue):
    db = str(tmp_path / "w.duckdb")
    args = [sys.executable, "-m", "metapilot.cli", "steer", "--cluster", slurm.cluster, "--slurm", "--policy",
            "SJF+EASY", "--every", "1s", "--step", str(STEP), "--db", db]
    loop = subprocess.Popen(args, env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: any(v["site"] > 0 for v in _sprio(slurm).values()), what="the loop to set factors")
    finally:
        os.kill(loop.pid, signal.SIGKILL)
        loop.wait(timeout=30)
    assert any(v["site"] > 0 for v in _sprio(slurm).values()), "SIGKILL leaves the factors set"
    loop = subprocess.Popen(args, env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        while True:
            line = loop.stdout.readline()
            lines.append(line)
            if "live ok" in line or not line:
                break
    finally:
        loop.send_signal(signal.SIGTERM)
        out, _ = loop.communicate(timeout=60)
    text = "".join(lines) + out
    assert "without releasing" in text, text  # the start after the crash released first
    assert "exit (SIGTERM)" in text and loop.returncode == 0, text
    assert all(v["site"] == 0 for v in _sprio(slurm).values())
    n = _metapilot(slurm, db, "sql", "SELECT count(*) AS n FROM steered_jobs WHERE released_at IS NULL",
                   "--format", "csv").stdout.split()[1]
    assert int(n) == 0


def test_a_job_named_with_bytes_that_are_not_utf8_does_not_stop_steering(tmp_path, slurm, queue):
    """Issue 49 (1): squeue --json passes a job's name, comment and output path through as raw bytes;
    every mode reads them (as U+FFFD) and steers on."""
    db = str(tmp_path / "w.duckdb")
    bad = os.fsdecode(b"bad\xff\xfe")  # sbatch gets the raw bytes
    named = slurm.sbatch("-J", bad, f"--comment={bad}", "-n", "64", "-t", "4", wrap="sleep 1")
    wait_until(lambda: _reasons(slurm).get(named) in ("Priority", "Resources"), what="Slurm to evaluate the job")
    assert b"\xff\xfe" in subprocess.run(["squeue", "--json"], env=slurm.env, capture_output=True).stdout
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--dry-run",
                     "--once")
    assert "dry-run ok: SJF" in res.stdout, res.stdout + res.stderr
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--once",
                     "--step", str(STEP))
    assert "live ok: SJF" in res.stdout, res.stdout + res.stderr
    assert _sprio(slurm)[named]["site"] > 0  # 4 min: ranked among the others
    _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release")
    assert all(v["site"] == 0 for v in _sprio(slurm).values())


def test_a_cluster_other_than_the_slurm_reached_is_refused(tmp_path, slurm, queue):
    """Issue 49 (11): --cluster is checked against `scontrol show config`'s ClusterName."""
    db = str(tmp_path / "w.duckdb")
    for mode in (["--once", "--policy", "SJF+EASY"], ["--release"]):
        res = _metapilot(slurm, db, "steer", "--cluster", "elsewhere", "--slurm", *mode, check=False)
        assert res.returncode == 2 and f"is cluster {slurm.cluster}" in res.stderr and "--cluster elsewhere" in res.stderr, \
            res.stdout + res.stderr
    assert all(v["site"] == 0 for v in _sprio(slurm).values())


def test_a_held_job_released_after_the_guard_limit_does_not_trip_it(tmp_path, slurm):
    """Issue 49 (2): the guard counts from squeue's eligible_time, which Slurm sets when a held job is
    released: a job held past the limit does not halt steering the moment it becomes eligible."""
    db = str(tmp_path / "w.duckdb")
    blocker = slurm.sbatch("-n", "64", "-t", "10", wrap="sleep 600")
    held = slurm.sbatch("-H", "-n", "64", "-t", "2", wrap="sleep 1")
    time.sleep(40)  # held for longer than the guard's limit below (36 s)
    queued = [slurm.sbatch("-n", "64", "-t", str(m), wrap="sleep 1") for m in (5, 3)]
    slurm.run("scontrol", "release", held)
    wait_until(lambda: all(_reasons(slurm).get(j) in ("Priority", "Resources", "None") for j in [held, *queued])
          and _reasons(slurm).get(blocker) == "None", what="Slurm to evaluate the queue")
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--once",
                     "--step", str(STEP), "--guard-h", "0.01", check=False)
    assert res.returncode == 0 and "live ok: SJF" in res.stdout, res.stdout + res.stderr
    site = {j: v["site"] for j, v in _sprio(slurm).items()}
    assert [site[held], site[queued[1]], site[queued[0]]] == [band_factor(STEP, r, 3) for r in range(3)]  # 2, 3, 5 min
    _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release")


def test_a_factor_cleared_behind_the_loops_back_is_set_again(tmp_path, slurm, queue):
    """Issue 49 (8): each cycle reads the site factors back (sprio); one cleared by another admin (or a
    slurmctld restarted from an older state) is set again, the others are not sent."""
    db = str(tmp_path / "w.duckdb")
    args = ("steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--once", "--step", str(STEP))
    _metapilot(slurm, db, *args)
    q = queue["queued"]
    set_before = {j: _sprio(slurm)[j]["site"] for j in q}
    slurm.run("scontrol", "update", f"job={q[1]}", "SiteFactor=0")  # behind the loop's back
    assert _sprio(slurm)[q[1]]["site"] == 0
    res = _metapilot(slurm, db, *args)
    assert "live ok: SJF" in res.stdout and "1 changed" in res.stdout, res.stdout
    assert "1 site factors not as the loop set them" in res.stdout and f"{q[1]} " in res.stdout, res.stdout
    assert {j: _sprio(slurm)[j]["site"] for j in q} == set_before
    _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release")


def test_a_second_loop_on_the_cluster_is_refused_naming_the_first(tmp_path, slurm, queue):
    """Issue 49 (9): one loop per cluster. A second (another rule, another operator's shell) is refused
    with the holder named, and changes nothing; once the first ends (SIGTERM: released), it may start."""
    db = str(tmp_path / "w.duckdb")
    first = subprocess.Popen([sys.executable, "-m", "metapilot.cli", "steer", "--cluster", slurm.cluster, "--slurm",
                              "--policy", "SJF+EASY", "--every", "1s", "--step", str(STEP), "--db", db], env=slurm.env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: any(v["site"] > 0 for v in _sprio(slurm).values()), what="the first loop to set factors")
        sjf = {j: v["site"] for j, v in _sprio(slurm).items()}
        res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "LAF+EASY", "--once",
                         "--step", str(STEP), check=False)
        assert res.returncode == 3 and "is held by" in res.stderr and f"pid {first.pid}" in res.stderr, \
            res.stdout + res.stderr
        res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release", check=False)
        assert res.returncode == 3 and "one loop per cluster" in res.stderr, res.stdout + res.stderr
        assert {j: v["site"] for j, v in _sprio(slurm).items()} == sjf  # nothing flipped, nothing released
    finally:
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=60)
    assert "exit (SIGTERM)" in out and first.returncode == 0, out
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "LAF+EASY", "--once",
                     "--step", str(STEP))
    assert "live ok: LAF" in res.stdout and "without releasing" not in res.stdout, res.stdout
    _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release")


def test_an_array_with_a_task_running_keeps_the_middle(tmp_path, slurm):
    """Issue 49 (12): what the loop cannot rank (here the pending rest of an array whose first task
    runs: set through the array's id, which touches the running task too) keeps the band's middle,
    among the ranked jobs, not 0 under them."""
    db = str(tmp_path / "w.duckdb")
    blocker = slurm.sbatch("-n", "32", "-t", "10", wrap="sleep 600")
    array = slurm.sbatch("-n", "32", "-t", "5", "--array=1-3", wrap="sleep 600")
    short, long_ = (slurm.sbatch("-n", "64", "-t", str(m), wrap="sleep 1") for m in (2, 9))
    wait_until(lambda: f"{array}_1" in slurm.run("squeue", "-h", "-t", "R", "-o", "%i").stdout.split()
          and _reasons(slurm).get(blocker) == "None"
          and all(_reasons(slurm).get(j) in ("Priority", "Resources") for j in (short, long_, array)),
          what="the array's first task to run and Slurm to evaluate the queue")
    res = _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--once",
                     "--step", str(STEP))
    assert "live ok: SJF" in res.stdout, res.stdout + res.stderr
    site = {j: v["site"] for j, v in _sprio(slurm).items()}
    middle = band_factor(STEP, 0, 1)
    assert site[array] == middle, site  # the array's pending rest, through its id
    assert site[short] > middle > site[long_] > 0, site  # ranked around it: 2 min above, 9 min below
    _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release")
    assert all(v["site"] == 0 for v in _sprio(slurm).values())


@pytest.fixture
def cluster_user(slurm):
    """An ordinary account made for the test (`useradd`), submitting through `runuser`; removed after."""
    import pwd

    if os.geteuid() != 0:
        pytest.skip("making a user needs root")
    name = "mp49user"
    made = False
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-M", name], check=True, capture_output=True)
        made = True
    yield name
    slurm.cancel_all()
    if made:
        subprocess.run(["userdel", name], capture_output=True)


def _as(slurm, user: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", "env", f"SLURM_CONF={slurm.conf}", *args], env=slurm.env,
                          capture_output=True, text=True, timeout=60)


def test_a_user_moving_a_steered_job_to_another_partition_is_named_and_placed_afresh(tmp_path, slurm, cluster_user):
    """Issue 49 (4): an ordinary user moves their steered job to the other partition
    (`scontrol update jobid=X partition=high`): the next cycle names it and places it in its new group,
    where it carries the band's middle (alone there), not the factor it earned among four."""
    db = str(tmp_path / "w.duckdb")
    blocker = slurm.sbatch("-n", "64", "-t", "10", wrap="sleep 600")
    mine = []
    for m in (3, 5, 7, 9):
        res = _as(slurm, cluster_user, "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "-n", "64", "-t",
                  str(m), "--wrap", "sleep 1")
        assert res.returncode == 0, res.stderr
        mine.append(res.stdout.strip().split(";")[0])
    wait_until(lambda: _reasons(slurm).get(blocker) == "None"
          and all(_reasons(slurm).get(j) in ("Priority", "Resources") for j in mine), what="Slurm to evaluate the queue")
    args = ("steer", "--cluster", slurm.cluster, "--slurm", "--policy", "SJF+EASY", "--once", "--step", str(STEP))
    _metapilot(slurm, db, *args)
    assert _sprio(slurm)[mine[0]]["site"] == band_factor(STEP, 0, 4)
    res = _as(slurm, cluster_user, "scontrol", "update", f"jobid={mine[0]}", "partition=high")
    assert res.returncode == 0, res.stderr
    wait_until(lambda: slurm.run("squeue", "-h", "-j", mine[0], "-o", "%P").stdout.strip() == "high",
          what="the job to move")
    res = _metapilot(slurm, db, *args)
    assert f"moved to another partition while carrying a site factor ({mine[0]}: debug|tier 1 -> high|tier 2)" \
        in res.stdout, res.stdout
    assert _sprio(slurm)[mine[0]]["site"] == band_factor(STEP, 0, 1)  # alone in high: the band's middle
    _metapilot(slurm, db, "steer", "--cluster", slurm.cluster, "--slurm", "--release")
