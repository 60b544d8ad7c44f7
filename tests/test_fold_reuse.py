"""Issue 49 (14): a fold learned earlier is checked before the walk forward learns anything; one whose
warehouse is damaged (its fold.json intact) is learned again, and the log says so."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from metapilot.transforms.windows import week_start


def _learned(home: Path, policy_id: str | None = None) -> None:
    """A fold folder as an earlier walk forward leaves it: a warehouse and the record, written last."""
    from metapilot.warehouse.db import connect

    home.mkdir(parents=True)
    connect(str(home / "warehouse.duckdb")).close()
    home.joinpath("fold.json").write_text(json.dumps({"origin": "2024-01-01T00:00:00+00:00", "policy_id": policy_id,
                                                     "gate": "fixed", "note": "kept the rule"}) + "\n")


def test_an_intact_fold_is_reusable_and_each_damage_is_named(tmp_path):
    from metapilot.flows.backtest import reusable_fold

    home = tmp_path / "fold"
    _learned(home)
    fold, damage = reusable_fold(home)
    assert damage is None and fold.gate == "fixed" and fold.db == str(home / "warehouse.duckdb")

    (home / "warehouse.duckdb").write_bytes(b"not a duckdb file at all" * 100)  # fold.json intact
    fold, damage = reusable_fold(home)
    assert fold is None and "warehouse cannot be opened" in damage

    (home / "warehouse.duckdb").unlink()
    assert "warehouse.duckdb is missing" in reusable_fold(home)[1]

    other = tmp_path / "other"
    _learned(other, policy_id="p-gone")  # the record names a policy its warehouse does not hold
    assert "policy p-gone cannot be read" in reusable_fold(other)[1]


def test_a_damaged_fold_is_learned_again_and_said_so(monkeypatch, tmp_path, prefect_harness, caplog):
    from prefect import flow

    import metapilot.flows.backtest as bt
    from metapilot.warehouse.db import connect

    db = str(tmp_path / "w.duckdb")
    con = connect(db)
    con.execute("INSERT INTO capacity (cluster, partition, cores, gpus, mem_mib, valid_from, source) VALUES "
                "('c', '*', 16, 0, NULL, TIMESTAMPTZ '2000-01-01 00:00:00+00', 'config')")
    con.close()
    weeks = [week_start(1400 + i) for i in range(12)]
    learned = []

    def fake_learn(cluster, windows, db, **kw):
        learned.append(db)
        return {"policy_id": None, "published": {"kind": "fixed", "message": "kept the rule"}}

    monkeypatch.setattr(bt, "learn_flow", fake_learn)

    @flow
    def one() -> object:
        return bt.learn_fold(db, "c", weeks[0], weeks, weeks[8], 10)

    first = one()
    assert len(learned) == 1 and (Path(first.db).parent / "fold.json").exists()
    assert one().gate == "fixed" and len(learned) == 1  # intact: reused
    assert bt.local_fold_runner(db, "c", [weeks[8]], 10, relearn=False) is None  # nothing new to learn

    Path(first.db).write_bytes(b"\0garbage" * 512)  # damaged, its fold.json intact
    assert bt.reusable_fold(Path(first.db).parent)[1] is not None
    with caplog.at_level(logging.WARNING):
        again = one()
    assert len(learned) == 2 and again.gate == "fixed"
    assert "damaged" in caplog.text and "learned again" in caplog.text
    assert bt.reusable_fold(Path(again.db).parent)[1] is None  # learned again: whole
