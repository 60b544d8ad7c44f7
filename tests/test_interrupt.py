"""Ctrl-C reaches the process pools (issue 54, item 7): a pool's caller, in the main thread or in
another one, stops at once, its pending tasks cancelled and its worker processes ended, never
running the calls here instead; and a walk forward interrupted while its folds tune exits 130
within seconds, leaving no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from metapilot.ground import interrupt
from metapilot.ground.pool import process_map

REPO = Path(__file__).resolve().parents[1]
KTH = REPO / "samples" / "logs" / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"


def _slow(x: int) -> int:
    time.sleep(60)
    return x


def _pool_workers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "forkserver" in " ".join(p.cmdline())]


def test_interrupt_seen_by_a_pool_in_another_thread_cancels_it_and_ends_its_workers():
    got: list[BaseException] = []

    def run() -> None:
        try:
            process_map(_slow, range(8), workers=2)
        except BaseException as e:  # noqa: BLE001 - what the thread ended with
            got.append(e)

    t = threading.Thread(target=run)
    t.start()
    end = time.monotonic() + 30
    while len(_pool_workers()) < 3 and time.monotonic() < end:  # the forkserver and two workers
        time.sleep(0.2)
    busy = [p for p in _pool_workers() if p.ppid() != os.getpid()]
    assert len(busy) == 2
    interrupt.INTERRUPTED.set()
    try:
        t0 = time.monotonic()
        t.join(10)
        assert not t.is_alive() and time.monotonic() - t0 < 5
        assert len(got) == 1 and isinstance(got[0], KeyboardInterrupt)
        assert not [p for p in busy if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        with pytest.raises(KeyboardInterrupt):  # no new work once interrupted, not even here
            process_map(_slow, [1], workers=1)
    finally:
        interrupt.INTERRUPTED.clear()


def test_ctrl_c_in_the_main_thread_ends_the_workers_and_is_not_run_here_instead():
    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # not the command's
    timer = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with interrupt.stop_on_interrupt():
            process_map(_slow, range(4), workers=2)
    assert time.monotonic() - t0 < 10  # not 60 s of a replay, nor 4 x 60 s run here
    assert not interrupt.INTERRUPTED.is_set()  # cleared for what comes next
    end = time.monotonic() + 5
    while [p for p in _pool_workers() if p.ppid() != os.getpid()] and time.monotonic() < end:
        time.sleep(0.1)
    assert not [p for p in _pool_workers() if p.ppid() != os.getpid()]
    assert before.poll() is None  # what ran before stays
    before.kill()
    before.wait()


def _session(sid: int) -> list[int]:
    return [p.pid for p in psutil.process_iter() if _sid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE]


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


@pytest.mark.timeout(300)
def test_walk_forward_interrupted_while_its_folds_tune_exits_130_and_leaves_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("METAPILOT_") and k != "PREFECT_API_URL"}
    env["METAPILOT_WORKERS"] = "2"  # two folds side by side on Dask, and the past replays' pool
    env["PREFECT_LOGGING_LEVEL"] = "INFO"  # the stages said as they begin
    env["TMPDIR"] = str(tmp_path / "tmp")  # what the command leaves in the temporary folder, seen apart
    (tmp_path / "tmp").mkdir()
    metapilot = [sys.executable, "-m", "metapilot.cli"]
    subprocess.run([*metapilot, "ingest", str(KTH), "--db", "w.duckdb"], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=300)
    out = (tmp_path / "backtest.log").open("w")
    # its own session, as a terminal's command: Ctrl-C reaches the whole process group
    proc = subprocess.Popen([*metapilot, "backtest", "--cluster", "KTH-SP2", "--steps", "50", "--db", "w.duckdb"],
                            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        end = time.monotonic() + 240
        while "for flow 'tune'" not in (tmp_path / "backtest.log").read_text() and time.monotonic() < end:
            assert proc.poll() is None, (tmp_path / "backtest.log").read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(1.0)  # mid-tuning
        log = (tmp_path / "backtest.log").read_text()
        assert "for flow 'tune'" in log and "teacher:" not in log.split("for flow 'tune'")[-1], log[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        rc = proc.wait(timeout=60)
        took = time.monotonic() - t0
        time.sleep(1.0)
        left = _session(proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()
    assert rc == 130 and took < 20, (rc, took, (tmp_path / "backtest.log").read_text()[-2000:])
    assert left == [], [" ".join(psutil.Process(p).cmdline())[:120] for p in left if psutil.pid_exists(p)]
    # nor a temporary folder (a forkserver's socket was left); Dask keeps its scratch space there by design
    assert [p.name for p in (tmp_path / "tmp").iterdir() if p.name != "dask-scratch-space"] == []
