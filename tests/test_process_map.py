"""`ground.pool.process_map`, which the tuning and the walk forward's judge spread their replays
with: the results of the calls in the order asked, in worker processes or here, and the same either
way; and where the walk forward's folds learn by default (`flows.backtest.local_fold_runner`)."""

from __future__ import annotations

import os
from datetime import datetime, timezone

from metapilot.ground.pool import process_map

_BASE = 0


def _set_base(v: int) -> None:
    global _BASE
    _BASE = v


def _pid_plus(x: int) -> tuple[int, int]:
    return os.getpid(), _BASE + x * x


def test_results_come_in_order_from_workers_or_here():
    here = process_map(_pid_plus, range(6), workers=1, initializer=_set_base, initargs=(100,))
    spread = process_map(_pid_plus, range(6), workers=2, initializer=_set_base, initargs=(100,))
    assert [v for _, v in here] == [v for _, v in spread] == [100 + x * x for x in range(6)]
    assert {p for p, _ in here} == {os.getpid()}
    assert os.getpid() not in {p for p, _ in spread}  # the initializer ran in each worker: the input reached them


def test_too_few_items_run_here():
    out = process_map(_pid_plus, [3], workers=2, initializer=_set_base, initargs=(1,))
    assert out == [(os.getpid(), 10)]


def test_folds_learn_side_by_side_only_when_more_than_one_is_new(tmp_path, monkeypatch):
    import json

    from metapilot.flows import backtest
    from metapilot.warehouse.db import connect

    monkeypatch.setattr(backtest, "fold_home", lambda db, cluster, t, steps: tmp_path / t.strftime("%Y-%m-%d"))
    origins = [datetime(2024, m, 1, tzinfo=timezone.utc) for m in (1, 2, 3)]
    monkeypatch.setenv("METAPILOT_WORKERS", "2")
    assert backtest.local_fold_runner(None, "c", origins, 10, relearn=False) == "local:2"
    for t in origins[:2]:  # learned by an earlier walk forward: reused, not learned again
        home = tmp_path / t.strftime("%Y-%m-%d")
        home.mkdir()
        connect(str(home / "warehouse.duckdb")).close()
        (home / "fold.json").write_text(json.dumps({"origin": t.isoformat(), "policy_id": None, "gate": "fixed"}))
    assert backtest.local_fold_runner(None, "c", origins, 10, relearn=False) is None
    assert backtest.local_fold_runner(None, "c", origins, 10, relearn=True) == "local:2"
    monkeypatch.setenv("METAPILOT_WORKERS", "1")
    assert backtest.local_fold_runner(None, "c", origins, 10, relearn=True) is None


def _pid_after(x: float) -> int:
    import time

    time.sleep(x)
    return os.getpid()


def test_pools_at_once_share_the_cores():
    """Two pools at once in one process (the walk forward's past replays beside a fold's tuning)
    get the cores between them, not the cores each (issue 54)."""
    import threading

    from metapilot.ground import pool

    got: dict[str, set[int]] = {}

    def run(name: str) -> None:
        got[name] = set(process_map(_pid_after, [1.5] * 4, workers=2))

    first = threading.Thread(target=run, args=("first",))
    first.start()
    import time

    end = time.monotonic() + 20
    while pool._BUSY[0] < 2 and time.monotonic() < end:
        time.sleep(0.05)
    run("second")  # the first holds both cores: this one runs here
    first.join()
    assert got["second"] == {os.getpid()} and os.getpid() not in got["first"]
    assert pool._BUSY[0] == 0
