"""The numba decorators of the engine's compiled modules, with one on-disk cache stamp for all of them.

Every compiled function runs without numba's reference counting (`_nrt=False`, a numba option
its own test suite uses; it forbids allocating arrays): the loop allocates nothing (buffers are
preallocated in `State`, sorts are in place), and the atomic refcount updates on the many
arrays of the state cost ~10x the scheduling itself (measured: 2.4 us vs 0.25 us per event).

Numba's on-disk cache checks a compiled function against its own source file only, but a
compiled caller embeds its callees from the other modules: after an edit of, say, `easy.py`,
`event_loop.run_until` would load stale machine code. So every function compiled through `jit`
/ `jit_inline` is stamped with a digest of all of `KERNEL_MODULES` (and `policies.py`, whose
`score` the queue order inlines): an edit of any of them recompiles them all. A new module with
compiled engine code must be listed there (`jit` refuses a function from an unlisted file).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numba as nb

HERE = Path(__file__).resolve().parent

# The files whose compiled code ends up inside the engine's entry points.
KERNEL_MODULES: tuple[str, ...] = (
    "jit.py", "policies.py", "state.py", "sorting.py", "queues.py", "completions.py", "running.py",
    "easy.py", "resource_profile.py", "conservative.py", "event_loop.py", "snapshot.py", "horizon.py",
    "rollout.py", "switch.py", "epoch_step.py",
    # the replay of what Slurm does (issue 51), compiled with `jit_nrt`: it allocates its per-pass scratch
    "slurm/bits.py", "slurm/nodes.py", "slurm/node_space.py", "slurm/priority.py", "slurm/will_run_cache.py",
    "slurm/kernel.py",
)


def _sources_digest() -> bytes:
    h = hashlib.sha256()
    for name in KERNEL_MODULES:
        h.update(name.encode())
        h.update((HERE / name).read_bytes())
    return h.digest()


KERNEL_DIGEST = _sources_digest()


def _stamp(dispatcher):
    """Make the dispatcher's cache index stale whenever any kernel module changes (numba's own
    stamp covers only the function's file). Relies on numba internals; if they move, caching
    falls back to numba's per-file stamp."""
    py_file = Path(dispatcher.py_func.__code__.co_filename).resolve()
    if not py_file.is_relative_to(HERE) or py_file.relative_to(HERE).as_posix() not in KERNEL_MODULES:
        raise RuntimeError(f"{py_file}: add it to jit.KERNEL_MODULES to compile engine code there")
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    own = getattr(cache_file, "_source_stamp", None)
    if own is not None:
        cache_file._source_stamp = (own, KERNEL_DIGEST)
    return dispatcher


_njit = nb.njit(cache=True, _nrt=False)
_njit_nrt = nb.njit(cache=True, nogil=True)
_njit_inline = nb.njit(cache=True, _nrt=False, inline="always")


def jit(func):
    """Compile for the engine: cached, no reference counting."""
    return _stamp(_njit(func))


def jit_nrt(func):
    """As `jit`, with numba's reference counting, for kernels that allocate (the Slurm replay's passes),
    and without the GIL: a replay of hours runs in a thread of its own, so that Ctrl-C stops it
    (`ground.interrupt.stoppable`)."""
    return _stamp(_njit_nrt(func))


def jit_inline(func):
    """As `jit`, and inlined into every caller (numba IR inlining)."""
    return _stamp(_njit_inline(func))
