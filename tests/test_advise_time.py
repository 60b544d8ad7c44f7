"""`metapilot advise` asks the warehouse only about times it has data for: without --at it answers
for the latest epoch with data and says which; a time outside the data is refused with the range."""

from __future__ import annotations

import json

import pytest
from controller_fixtures import CLUSTER, load_warehouse
from typer.testing import CliRunner

from metapilot.cli import app

TRAIN = ("1996-10-15T00:00:00", "1996-10-18T00:00:00")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A small policy trained on the KTH-SP2 slice, registered in a warehouse file with the jobs."""
    from metapilot.models.controller.artifact import publish
    from metapilot.models.controller.dataset import build_dataset
    from metapilot.models.controller.train import TrainConfig, train_policy
    from metapilot.warehouse.db import connect

    db = tmp_path_factory.mktemp("advise") / "w.duckdb"
    con = connect(db)
    load_warehouse(con)
    splits = build_dataset(con, CLUSTER, *TRAIN, store=False)
    result = train_policy(splits.train, splits.checkpoint,
                          TrainConfig(n_steps=200, n_steps_per_epoch=100, fqe_steps=100, show_progress=False,
                                      max_candidates=2, baselines=()))
    art = publish(result, splits, db=db, cluster=CLUSTER, con=con)
    span = con.execute("SELECT min(submit_time), max(greatest(submit_time, coalesce(start_time, submit_time), "
                       "coalesce(end_time, submit_time))) FROM jobs").fetchone()
    con.close()
    return db, art.policy_id, span


def advise(db, policy_id, *args):
    return CliRunner().invoke(app, ["advise", "--policy", policy_id, "--db", str(db), "--format", "json", *args])


def test_without_at_it_answers_for_the_latest_epoch_with_data_and_says_so(published):
    db, policy_id, (first, last) = published
    r = advise(db, policy_id)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    latest = last.replace(minute=0, second=0, microsecond=0)
    assert out["at"].startswith(latest.strftime("%Y-%m-%dT%H:00:00"))
    assert "latest epoch with data" in out["at_note"] and "latest epoch with data" in r.stderr
    assert any(v != 0 for k, v in out["state"].items() if not k.startswith(("hour_", "dow_")))  # not an empty cluster


@pytest.mark.parametrize("at", ["2030-01-01T00:00", "1990-01-01"])
def test_a_time_outside_the_data_is_refused_with_the_range(published, at):
    db, policy_id, (first, last) = published
    r = advise(db, policy_id, "--at", at)
    assert r.exit_code == 2
    assert "outside the data of" in r.stderr and first.strftime("%Y-%m-%dT%H:%M:%S") in r.stderr
    assert last.strftime("%Y-%m-%dT%H:%M:%S") in r.stderr
    assert r.stdout == ""


def test_a_time_inside_the_data_is_answered_for_that_time(published):
    db, policy_id, _ = published
    r = advise(db, policy_id, "--at", "1996-10-18T03:00:00")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["at"].startswith("1996-10-18T03:00:00") and "at_note" not in out


def test_advice_of_a_policy_the_gate_did_not_publish_says_it_is_for_comparison_only(published):
    """The publish gate's decision comes with the advice: a policy that is not the cluster's published
    controller is answered, with a warning that says so and what the decision was."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import promote

    db, policy_id, _ = published
    out = json.loads(advise(db, policy_id, "--at", "1996-10-18T03:00:00").stdout)
    assert out["published"] is False and out["decision"] is None and "no publish decision" in out["warning"]
    con = connect(db)
    try:
        promote(con, policy_id, None, None, db=db, kind="fixed", recommendation="SAF+easy",
                message="Keep SAF+EASY: the learned controller is worse on mean wait (+13.6 min)")
    finally:
        con.close()
    r = advise(db, policy_id, "--at", "1996-10-18T03:00:00")
    out = json.loads(r.stdout)
    assert out["published"] is False and out["decision"].startswith("Keep SAF+EASY")
    assert "for comparison only: Keep SAF+EASY" in out["warning"] and "for comparison only" in r.stderr
    con = connect(db)
    try:
        promote(con, policy_id, None, None, db=db)  # it passes and is published
    finally:
        con.close()
    out = json.loads(advise(db, policy_id, "--at", "1996-10-18T03:00:00").stdout)
    assert out["published"] is True and "warning" not in out


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_state_json_with_nan_or_infinity_is_refused_with_the_field_named(published, tmp_path, bad):
    """Issue 37: NaN and infinities used to give an answer (exit 0) and `--format json` printed NaN."""
    db, policy_id, _ = published
    names = list(json.loads(advise(db, policy_id).stdout)["state"])
    doc = {"features": {n: (bad if i == 1 else 0.0) for i, n in enumerate(names)}}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))  # Python writes NaN / Infinity, as a hostile or buggy client may
    r = advise(db, policy_id, "--state-json", str(path))
    assert r.exit_code == 2, r.output
    assert f"state field features.{names[1]} is {bad}" in r.stderr and "finite" in r.stderr
