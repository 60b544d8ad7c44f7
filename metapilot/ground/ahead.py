"""`map(fn, items)` run ahead of its consumer in threads, results in the order of the items.

For work that releases the GIL (polars, hashlib, file reads): a file's chunks are parsed on every
core while the consumer takes them in order. At most `ahead` calls are pending or done and not yet
taken, so memory stays bounded by a few chunks. The items are drawn in the consumer's thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_ahead(fn: Callable[[T], R], items: Iterable[T], workers: int = 1, ahead: int | None = None,
              name: str = "ahead") -> Iterator[R]:
    """`fn(x)` for each item, in `workers` threads, at most `ahead` calls (default: as many as
    the workers, and at least 2) pending or not yet taken; results in item order. An exception re-raises in the consumer at its
    item; when the consumer stops early, calls not started are cancelled."""
    ahead = max(1, ahead or max(2, workers))
    pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix=name)
    pending: deque[Future] = deque()
    try:
        for x in items:
            pending.append(pool.submit(fn, x))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)
