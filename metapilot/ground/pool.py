"""Independent CPU-bound calls (replays, mostly) spread over worker processes, or run here when
workers cannot help or cannot start: the same results either way, in the order asked.

Workers start by forkserver (spawn where there is none): a fork of a process holding Prefect's
client threads or DuckDB connections can hang. A daemon process (a Dask worker's) may have no
children, and no /dev/shm or a process limit makes the pool fail to start: then the calls run in
this process, and `log` says why."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def process_map(fn: Callable[..., T], items: Iterable[Any], *, workers: int | None = None, min_items: int = 2,
                initializer: Callable[..., None] | None = None, initargs: Sequence[Any] = (),
                log: Callable[[str], None] | None = None) -> list[T]:
    """`[fn(x) for x in items]`, in up to `workers` processes (default: `ground.cores.workers()`)
    when there are at least `min_items` (starting a worker costs ~1-2 s). `fn` and the items must
    pickle; `initializer(*initargs)` runs once in each worker (to hand every worker the same large
    input once) and, when the calls run here, once in this process."""
    from metapilot.ground.cores import workers as default_workers

    items = list(items)
    n = min(default_workers() if workers is None else workers, len(items))
    if n > 1 and len(items) >= min_items and not mp.current_process().daemon:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        try:
            with ProcessPoolExecutor(n, mp_context=mp.get_context(method), initializer=initializer,
                                     initargs=tuple(initargs)) as pool:
                return list(pool.map(fn, items))
        except (BrokenProcessPool, OSError) as e:
            if log:
                log(f"ran in one process: worker processes could not run ({e})")
    if initializer is not None:
        initializer(*initargs)
    return [fn(x) for x in items]
