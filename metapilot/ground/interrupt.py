"""Ctrl-C ends a long command within seconds and leaves no process behind (issue 54).

A walk forward runs its folds on Dask workers, its past replays on a process pool in a thread,
and Prefect's API in a child process: the main thread's KeyboardInterrupt alone reaches none of
them. Within `stop_on_interrupt`, the first SIGINT (or SIGTERM) sets `INTERRUPTED`, which every
`ground.pool.process_map` in any thread of this process watches (it cancels its tasks and ends
its processes), raises KeyboardInterrupt in the main thread for the usual clean-up, and arms a
deadline: still running `grace_s` later, the command ends its child processes and exits 130. A
second Ctrl-C does that at once."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

INTERRUPTED = threading.Event()
GRACE_S = 5.0
EXIT_CODE = 130
_LAST_WORDS: list[Callable[[], None]] = []  # run before a hard exit (`at_hard_exit`)


def at_hard_exit(fn: Callable[[], None]) -> Callable[[], None]:
    """Run `fn` before the command ends itself after Ctrl-C (what no child's end can do: cancel the
    batch jobs that hold Dask workers, issue 52); returns the call that forgets it."""
    _LAST_WORDS.append(fn)

    def forget() -> None:
        if fn in _LAST_WORDS:
            _LAST_WORDS.remove(fn)

    return forget


def check_interrupted() -> None:
    """Raise KeyboardInterrupt when this process was interrupted: no new work after Ctrl-C."""
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt("interrupted")


def children() -> set[int]:
    """The pids of this process's descendants now."""
    import psutil

    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def end_children(timeout_s: float = 3.0, keep: set[int] = frozenset()) -> None:
    """End the descendants of this process, but those in `keep` and theirs (what ran before the
    command's work: a test harness's server, say): SIGTERM, then SIGKILL for those left after
    `timeout_s`. The whole tree is read first, so that grandchildren whose parent ends first are
    not missed."""
    import psutil

    try:
        kids = psutil.Process().children(recursive=True)
        spared = set(keep)
        for p in kids:
            if p.pid in keep:
                spared.update(c.pid for c in p.children(recursive=True))
        kids = [p for p in kids if p.pid not in spared]
    except psutil.Error:
        return
    for p in kids:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(kids, timeout=timeout_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=timeout_s)


def _exit_now(why: str, keep: set[int]) -> None:
    try:
        sys.stderr.write(f"interrupted: {why}; child processes ended\n")
        sys.stderr.flush()
    finally:
        for fn in list(_LAST_WORDS):
            try:
                fn()
            except Exception:  # noqa: BLE001 - the exit goes on whatever a last word says
                pass
        end_children(keep=keep)
        _remove_process_folder()
        os._exit(EXIT_CODE)


def _remove_process_folder() -> None:
    """multiprocessing's temporary folder of this process (a forkserver's socket, `ground.pool`): its
    exit hook removes it, and `os._exit` skips that hook."""
    import multiprocessing
    import shutil

    # where multiprocessing.util.get_temp_dir keeps it (no public accessor)
    folder = multiprocessing.current_process()._config.get("tempdir")  # noqa: SLF001
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def _deadline(grace_s: float, left: threading.Event, keep: set[int]) -> None:
    if not left.wait(grace_s):  # the command did not leave `stop_on_interrupt` in time
        _exit_now(f"stopped {grace_s:.0f} s after Ctrl-C (each stage commits whole: run the command again to go on)",
                  keep)


@contextmanager
def stop_on_interrupt(grace_s: float = GRACE_S) -> Iterator[None]:
    """Within: Ctrl-C (SIGINT) or SIGTERM reaches this process's pools and children (see the module
    docstring). Outside the main thread (where signals cannot be handled) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    left = threading.Event()
    keep = children()  # not the command's: left running

    def handler(signum, frame) -> None:
        if INTERRUPTED.is_set():
            _exit_now("a second Ctrl-C", keep)
        INTERRUPTED.set()
        threading.Thread(target=_deadline, args=(grace_s, left, keep), name="interrupt-deadline", daemon=True).start()
        raise KeyboardInterrupt

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, handler)
    try:
        yield
    finally:
        left.set()
        for s, h in previous.items():
            signal.signal(s, h)
        if INTERRUPTED.is_set():
            end_children(keep=keep)  # what the clean-up left running
            INTERRUPTED.clear()


def stoppable(call: Callable[[object], T], stop, tick: Callable[[], None] | None = None) -> T:
    """`call(stop)` in a thread of its own, this thread waiting: a compiled loop that releases the GIL and
    returns soon after `stop[0]` is set (an array) cannot see Ctrl-C, and while it runs in the main
    thread no signal handler runs either. Here the main thread takes the KeyboardInterrupt at once,
    sets `stop[0]`, waits for the loop to leave, and raises it. (It waits on an event, not on
    `Thread.join`: a join that Ctrl-C interrupts marks a thread still running as ended, CPython's
    bpo-45274 fix, and the next join returns at once.) `tick`, if given, is called every 0.2 s while
    the loop runs: where a command shows the loop's progress."""
    out: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            out["value"] = call(stop)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            out["error"] = e
        finally:
            done.set()

    threading.Thread(target=work, name="stoppable", daemon=True).start()
    try:
        while not done.wait(0.2):
            if tick is not None:
                tick()
    except BaseException:
        stop[0] = 1
        done.wait()
        raise
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]  # type: ignore[return-value]
