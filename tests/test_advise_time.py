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
    result = train_policy(splits.train, splits.validation,
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
