"""The orchestration under Prefect's test harness: flows run, schedules load, caches skip work,
transient failures are retried with the warehouse left consistent, sweeps run on Dask."""

from __future__ import annotations

import json

import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "samples" / "logs"
KTH = LOGS / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"
POZIDRIV = LOGS / "slurm" / "pozidriv.log.gz"

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def kth_db(tmp_path_factory):
    """A warehouse holding KTH-SP2, ingested through the flow once for the module."""
    from metapilot.flows.ingest import ingest_flow

    db = str(tmp_path_factory.mktemp("kth") / "m.duckdb")
    reports = ingest_flow([str(KTH)], db=db)
    assert [r["outcome"] for r in reports] == ["loaded"]
    return db


def test_ingest_flow_second_run_skips_what_the_first_loaded(tmp_path):
    from metapilot.flows.ingest import ingest_flow
    from metapilot.warehouse.db import connect

    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(POZIDRIV, landing)
    db = str(tmp_path / "m.duckdb")
    first = ingest_flow([str(landing)], db=db)
    shutil.copy(KTH, landing)
    second = ingest_flow([str(landing)], db=db)
    assert [r["outcome"] for r in first if r["path"] != "(all clusters)"] == ["loaded"]
    assert sorted(r["outcome"] for r in second if r["path"] != "(all clusters)") == ["loaded", "skipped"]
    con = connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM jobs").fetchall()[0][0] == 11704 + 28476
    con.close()


def test_transient_failure_is_retried_and_the_warehouse_stays_consistent(tmp_path, monkeypatch):
    import metapilot.warehouse.ingest as ing
    from metapilot.flows.ingest import ingest_flow
    from metapilot.warehouse.db import connect

    real = ing.ingest_file_to
    calls = {"n": 0}

    def flaky(db, path, opts, key, log=None):
        calls["n"] += 1
        if calls["n"] == 1:
            con = connect(db)
            con.execute("BEGIN TRANSACTION")
            con.execute("INSERT INTO quarantine (file_sha256, path, line_no, raw, reason, quarantined_at) VALUES ('x', 'x', 1, 'x', 'x', now())")
            con.execute("ROLLBACK")
            con.close()
            raise OSError("IO Error: Could not set lock on file: Conflicting lock is held")
        return real(db, path, opts, key, log=log)

    monkeypatch.setattr("metapilot.flows.ingest.ingest_file_to", flaky)
    db = str(tmp_path / "m.duckdb")
    reports = ingest_flow([str(POZIDRIV)], db=db)
    assert calls["n"] == 2 and reports[0]["outcome"] == "loaded"
    con = connect(db, read_only=True)
    assert con.execute("SELECT count(*), count(DISTINCT job_id) FROM jobs").fetchall()[0] == (11704, 11704)
    assert con.execute("SELECT count(*) FROM quarantine").fetchall()[0][0] == 0
    con.close()


def test_schedules_load_from_code_and_prefect_yaml():
    from metapilot.flows.deployments import deployments

    deps = {d.name: d for d in deployments("/tmp/landing")}
    assert {n: d.schedules[0].schedule.cron for n, d in deps.items()} == {
        "daily-ingest": "15 2 * * *", "hourly-collect": "5 * * * *", "weekly-report": "0 7 * * 1",
        "monthly-retrain": "0 3 1 * *", "monthly-backtest": "0 3 2 * *"}
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    import importlib

    for d in spec["deployments"]:
        module, name = d["entrypoint"].removesuffix(".py").replace("/", ".").split(":")
        assert callable(getattr(importlib.import_module(module.replace(".py", "")), name))
        assert d["schedules"][0]["cron"] == deps[d["name"]].schedules[0].schedule.cron


def test_dataset_flow_is_cached_by_input(kth_db, monkeypatch):
    from datetime import datetime, timezone

    import metapilot.models.controller.dataset as ds
    from metapilot.flows.stages import build_dataset_flow

    real = ds.build_dataset
    calls = []
    monkeypatch.setattr(ds, "build_dataset", lambda *a, **k: calls.append(1) or real(*a, **k))
    utc = timezone.utc
    train = (datetime(1996, 10, 7, tzinfo=utc), datetime(1996, 10, 21, tzinfo=utc))
    valid = (datetime(1996, 10, 21, tzinfo=utc), datetime(1996, 10, 28, tzinfo=utc))
    first = build_dataset_flow("KTH-SP2", train, valid, db=kth_db, sources=("as-run",))
    second = build_dataset_flow("KTH-SP2", train, valid, db=kth_db, sources=("as-run",))
    assert len(calls) == 1 and first == second and first["train"]["tuples"] == 14 * 24


def test_baseline_sweep_on_a_local_dask_cluster_of_two_workers(kth_db):
    from datetime import datetime, timezone

    from metapilot.flows.sweep import run_sweep
    from metapilot.warehouse.db import connect

    utc = timezone.utc
    ids = run_sweep("KTH-SP2", db=kth_db, dask="local:2", start=datetime(1996, 10, 7, tzinfo=utc),
                    end=datetime(1996, 10, 21, tzinfo=utc))
    assert len(ids) == 21
    con = connect(kth_db, read_only=True)
    rows = con.execute("SELECT policy, backfill, count(*) FROM sim_runs WHERE run_id IN (SELECT unnest(?)) GROUP BY ALL", [ids]).fetchall()
    # the replay alone (engine_s) is recorded apart from the whole call (wall_s)
    times = con.execute("SELECT engine_s, wall_s FROM sim_runs WHERE run_id IN (SELECT unnest(?))", [ids]).fetchall()
    # both slowdown means are stored: over every job, and over the jobs that ran a minute or more
    bsld = con.execute("SELECT bsld_mean, bsld_mean_1min FROM sim_metrics WHERE scope = 'overall' "
                       "AND run_id IN (SELECT unnest(?))", [ids]).fetchall()
    con.close()
    assert len(rows) == 21
    assert all(e is not None and 0 < e <= w for e, w in times)
    assert len(bsld) == 21 and all(a >= 1 and b >= 1 for a, b in bsld)


def test_pipeline_end_to_end_on_a_small_history(tmp_path):
    """Every stage on real data (one KTH-SP2 quarter), with few training steps."""
    import gzip

    from metapilot.flows.pipeline import pipeline_flow
    from metapilot.warehouse.db import connect

    small = tmp_path / "kth-quarter.swf"
    with gzip.open(KTH, "rt") as f:
        lines = [ln for ln in f if ln.startswith(";") or (ln.split() and int(ln.split()[1]) < 100 * 86400)]
    small.write_text("".join(lines))
    db = str(tmp_path / "w" / "m.duckdb")
    out = pipeline_flow([str(small)], db=db, steps=200, baselines=(), sources=("as-run", "planner"))
    assert out["cluster"] == "kth-quarter"
    con = connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM policies").fetchall()[0][0] == 1
    assert con.execute("SELECT count(DISTINCT contender) FROM heldout_replays WHERE heldout_id = ?",
                       [out["heldout_id"]]).fetchall()[0][0] >= 22
    # the publish gate decided, on the checkpoint window, and said so in words
    (pid, kind, rec, msg, gate_ck, gate_tr, ope_ok, held_out), = con.execute(
        "SELECT policy_id, kind, recommendation, message, gate, gate_training, ope_passes, verdict FROM published_policies").fetchall()
    by_source = dict(con.execute("SELECT source, count(*) FROM mdp_transitions GROUP BY 1").fetchall())
    con.close()
    assert pid == out["policy_id"] and kind == out["published"]["kind"] in ("controller", "fixed") and msg
    assert (kind == "fixed") == msg.startswith("Keep ") and (rec is not None) == (kind == "fixed")
    assert by_source["planner"] == 3 * by_source["as-run"]  # the teacher and two epsilon-teachers per window
    assert Path(out["report"]["files"]["html"]).exists() and Path(out["published"]["pointer"]).exists()
    # both windows' verdicts are kept with the decision, and the pointer says which passed
    pointer = json.loads(Path(out["published"]["pointer"]).read_text())
    assert pointer["gate"] == {"checkpoint_window": json.loads(gate_ck)["passes"],
                               "training_weeks": json.loads(gate_tr)["passes"], "off_policy_evaluation": ope_ok}
    assert isinstance(ope_ok, bool) and (kind == "controller") == all(pointer["gate"].values())
    # with the held-out verdict in words, as `metapilot heldout` prints it
    assert pointer["verdict"] == held_out and held_out.startswith("MetaPilot is significantly better than every fixed rule on ")
    md = Path(out["report"]["files"]["md"]).read_text()
    assert md.splitlines()[0] == f"**What to run:** {msg}"
    # a refused controller's ROI says what it is not
    assert ("its ROI is what it would have been worth on these weeks" in md) == (kind == "fixed")


def test_ingest_command_with_fields_in_another_order_and_a_multibyte_delimiter(tmp_path):
    """`metapilot ingest --delimiter D --fields ...` on real pozidriv lines re-ordered and re-joined."""
    import gzip

    from metapilot.warehouse.db import connect
    from typer.testing import CliRunner

    from metapilot.cli import app

    names = ("jobid,jobidraw,cluster,partition,qos,account,group,gid,user,uid,submit,eligible,start,end,elapsed,"
             "exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqtres,alloctres,timelimit,nodelist,jobname").split(",")
    order = [16, 0, 10, 12, 13, 18, 17, 3, 23, 20, 8, 1, 2, 4, 5, 6, 7, 9, 11, 14, 15, 19, 21, 22, 24, 25]
    with gzip.open(POZIDRIV, "rt") as f:
        rows = [next(f).rstrip("\n").split("|") for _ in range(200)]
    log = tmp_path / "reordered.txt"
    log.write_text("".join("¦".join(r[i] for i in order) + "\n" for r in rows), encoding="utf-8")
    db = str(tmp_path / "m.duckdb")
    res = CliRunner().invoke(app, ["ingest", str(log), "--delimiter", "¦", "--fields", ",".join(names[i] for i in order),
                                   "--db", db])
    assert res.exit_code == 0, res.output
    con = connect(db, read_only=True)
    got = con.execute("SELECT job_id, state, alloc_cpus, partition FROM jobs ORDER BY source_line").fetchall()
    con.close()
    assert got == [(r[0], r[16].split(" ")[0], int(r[18]) if r[24] != "None assigned" else None, r[3]) for r in rows]


def test_placement_training_on_a_local_dask_cluster_matches_inline(tmp_path):
    """PPO rollouts as tasks on two Dask workers: the same weights (hence the same policy id) as inline."""
    from metapilot.flows.placement import run_placement_training
    from metapilot.warehouse.db import connect
    from placement_fixtures import openb_warehouse

    db = str(openb_warehouse(tmp_path))
    cfg = {"seed": 4, "total_steps": 160, "rollout_steps": 80, "n_rollouts": 2, "epochs": 2, "minibatch": 64,
           "episode_nodes": 10, "time_pods": 30, "hidden": 16}
    on_dask = run_placement_training("ob", db, cfg, dask="local:2")
    inline = run_placement_training("ob", db, cfg)
    assert on_dask["policy_id"] == inline["policy_id"]
    assert on_dask["training"]["rollouts"] == "Dask/threads" and inline["training"]["rollouts"] == "inline"
    con = connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM policies WHERE algorithm = 'PPO'").fetchall()[0][0] == 1
        assert con.execute("SELECT count(*) FROM placement_runs").fetchall()[0][0] == 4
    finally:
        con.close()


def test_the_monthly_retrain_learns_as_pipeline_does(monkeypatch):
    """The scheduled retrain runs the stages of `pipeline` after its ingest, with its defaults: more
    seeds would give the publish gate more candidates to pass by luck (README, Evidence)."""
    import inspect

    from metapilot.flows.deployments import retrain_flow
    from metapilot.flows.pipeline import learn_flow, pipeline_flow

    def defaults(f):
        return {k: p.default for k, p in inspect.signature(f.fn).parameters.items() if p.default is not inspect.Parameter.empty}

    retrain, learn, pipeline = defaults(retrain_flow), defaults(learn_flow), defaults(pipeline_flow)
    for k in ("seeds", "steps", "dask"):
        assert retrain[k] == learn[k] == pipeline[k]
    assert learn["baselines"] == pipeline["baselines"] and learn["sources"] == pipeline["sources"]
    calls = []
    windows = object()
    monkeypatch.setattr("metapilot.flows.deployments.plan_windows", lambda db, cluster: (cluster, windows))
    monkeypatch.setattr("metapilot.flows.deployments.learn_flow",
                        lambda *a, **kw: calls.append((a, kw)) or {"policy_id": "p"})
    assert retrain_flow.fn(cluster="c", db="w.duckdb") == {"policy_id": "p"}
    assert calls == [(("c", windows), {"db": "w.duckdb", "seeds": (0,), "steps": learn["steps"], "dask": None})]


def test_learn_flow_learns_only_from_the_windows_it_is_handed(monkeypatch, prefect_harness):
    """A fold of the walk forward hands windows that end at its cut-off: every stage gets exactly
    those, and nothing reads the rest of the history to choose others."""
    from datetime import datetime, timezone

    import metapilot.flows.pipeline as pipeline
    from metapilot.transforms.windows import LearningWindows

    def t(d):
        return datetime.fromisoformat(d).replace(tzinfo=timezone.utc)

    windows = LearningWindows((t("1996-10-07"), t("1996-12-02")), (t("1996-12-02"), t("1996-12-16")),
                              (t("1996-12-16"), t("1997-01-06")))
    seen = {}

    def record(name, result):
        def stage(*a, **kw):
            seen[name] = (a, kw)
            return result
        return stage

    monkeypatch.setattr(pipeline, "choose_cluster", lambda *a, **kw: pytest.fail("learn_flow chose its own windows"))
    monkeypatch.setattr(pipeline, "tune_flow", record("tune", {"tuned": True}))
    monkeypatch.setattr(pipeline, "build_dataset_flow", record("dataset", {"rows": 1}))
    monkeypatch.setattr(pipeline, "with_runner", lambda f, dask, db=None: record("train", "pol-1"))
    monkeypatch.setattr(pipeline, "heldout_flow", record("held_out", "val-1"))
    monkeypatch.setattr(pipeline, "publish_flow", record("publish", {"kind": "rule"}))
    out = pipeline.learn_flow("KTH-SP2", windows, db="w.duckdb")
    assert seen["tune"][0] == ("KTH-SP2", windows.train)
    assert seen["dataset"][0] == ("KTH-SP2", windows.train, windows.checkpoint)
    assert seen["train"][0] == ("KTH-SP2", windows.train, windows.checkpoint)
    assert seen["held_out"][1]["start"] == windows.held_out[0] and seen["held_out"][1]["end"] == windows.held_out[1]
    assert out["windows"] == windows.to_dict() and out["policy_id"] == "pol-1"
