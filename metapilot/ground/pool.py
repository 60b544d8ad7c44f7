"""Independent CPU-bound calls (replays, mostly) spread over worker processes, or run here when
workers cannot help or cannot start: the same results either way, in the order asked.

Workers start by forkserver (spawn where there is none): a fork of a process holding Prefect's
client threads or DuckDB connections can hang. A daemon process (a Dask worker's) may have no
children, and no /dev/shm or a process limit makes the pool fail to start: then the calls run in
this process, and `log` says why.

An interrupt stops the pool, whichever thread waits on it (issue 54): workers ignore SIGINT (a
terminal's Ctrl-C reaches the whole process group; the caller decides) and die with the process
that forked them; on KeyboardInterrupt in the caller, or `ground.interrupt.INTERRUPTED` set by the
command's handler, the pending tasks are cancelled and the workers killed, and the calls are never
run here instead."""

from __future__ import annotations

import multiprocessing as mp
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from metapilot.ground.interrupt import INTERRUPTED, check_interrupted

T = TypeVar("T")
POLL_S = 0.2  # how often a waiting caller looks at INTERRUPTED
_BUSY = [0]  # worker processes of this process's pools now running (`_claim`)
_BUSY_LOCK = threading.Lock()


def _claim(wanted: int, cores: int) -> int:
    """Workers for a new pool: what the other pools of this process (other threads) leave of
    `cores`, so that two pools at once do not put twice the cores' processes to work (issue 54)."""
    with _BUSY_LOCK:
        n = max(0, min(wanted, cores - _BUSY[0]))
        _BUSY[0] += n
        return n


def _release(n: int) -> None:
    with _BUSY_LOCK:
        _BUSY[0] -= n


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the one that forked it ends (prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import os

    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent ended before the prctl
        os._exit(1)


def _start_worker(initializer: Callable[..., None] | None, initargs: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    if initializer is not None:
        initializer(*initargs)


def _end(pool, procs: list) -> None:
    """Cancel what has not started, kill the workers (a replay may run for minutes), reap them."""
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(5)


def _results(futures: list) -> list:
    """The futures' results in order, waiting in short steps so that an interrupt is seen."""
    from concurrent.futures import FIRST_EXCEPTION, wait

    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_EXCEPTION)
        check_interrupted()
        for f in done:
            if f.exception() is not None:
                raise f.exception()
    return [f.result() for f in futures]


def process_map(fn: Callable[..., T], items: Iterable[Any], *, workers: int | None = None, min_items: int = 2,
                initializer: Callable[..., None] | None = None, initargs: Sequence[Any] = (),
                log: Callable[[str], None] | None = None) -> list[T]:
    """`[fn(x) for x in items]`, in up to `workers` processes (default: `ground.cores.workers()`)
    when there are at least `min_items` (starting a worker costs ~1-2 s). `fn` and the items must
    pickle; `initializer(*initargs)` runs once in each worker (to hand every worker the same large
    input once) and, when the calls run here, once in this process."""
    from metapilot.ground.cores import workers as default_workers

    check_interrupted()
    items = list(items)
    cores = default_workers() if workers is None else workers
    n = min(cores, len(items))
    if n > 1 and len(items) >= min_items and not mp.current_process().daemon:
        n = _claim(n, cores)
        try:
            if n > 1:
                return _in_pool(fn, items, n, initializer, initargs, log)
        except _CouldNotRun:
            pass
        finally:
            _release(n)
    if initializer is not None:
        initializer(*initargs)
    out = []
    for x in items:
        check_interrupted()
        out.append(fn(x))
    return out


class _CouldNotRun(Exception):
    """The pool could not start its workers: the calls run here instead."""


def _in_pool(fn: Callable[..., T], items: list, n: int, initializer: Callable[..., None] | None,
             initargs: Sequence[Any], log: Callable[[str], None] | None) -> list[T]:
    """The calls in a pool of `n` workers; _CouldNotRun when the workers cannot run."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    pool, procs = None, []
    try:
        pool = ProcessPoolExecutor(n, mp_context=mp.get_context(method), initializer=_start_worker,
                                   initargs=(initializer, tuple(initargs)))
        futures = [pool.submit(fn, x) for x in items]
        procs = list(pool._processes.values())
        out = _results(futures)
        pool.shutdown(wait=True)
        return out
    except (BrokenProcessPool, OSError) as e:
        if pool is not None:
            _end(pool, procs)
        check_interrupted()
        if any(p.exitcode is not None and p.exitcode < 0 for p in procs):
            raise  # a worker killed by a signal: not a pool that could not start
        if log:
            log(f"ran in one process: worker processes could not run ({e})")
        raise _CouldNotRun from e
    except BaseException:
        if pool is not None:
            _end(pool, procs)
        raise
