"""The completion events to come: a heap on (end time, start order), as SPEC §6 orders equal times."""

from __future__ import annotations

from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.state import HEAP_N


@jit_inline
def _heap_less(st, a, b):
    return st.heap_t[a] < st.heap_t[b] or (st.heap_t[a] == st.heap_t[b] and st.heap_o[a] < st.heap_o[b])


@jit
def _heap_swap(st, a, b):
    st.heap_t[a], st.heap_t[b] = st.heap_t[b], st.heap_t[a]
    st.heap_o[a], st.heap_o[b] = st.heap_o[b], st.heap_o[a]
    st.heap_j[a], st.heap_j[b] = st.heap_j[b], st.heap_j[a]


@jit
def heap_push(st, t, o, j):
    """Job j, started as number o, completes at t."""
    i = st.ctr[HEAP_N]
    st.ctr[HEAP_N] = i + 1
    st.heap_t[i] = t
    st.heap_o[i] = o
    st.heap_j[i] = j
    while i > 0:
        parent = (i - 1) >> 1
        if not _heap_less(st, i, parent):
            break
        _heap_swap(st, i, parent)
        i = parent


@jit
def heap_pop(st):
    """Remove and return the job of the next completion."""
    j = st.heap_j[0]
    n = st.ctr[HEAP_N] - 1
    st.ctr[HEAP_N] = n
    if n > 0:
        _heap_swap(st, 0, n)
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and _heap_less(st, c + 1, c):
                c += 1
            if not _heap_less(st, c, i):
                break
            _heap_swap(st, i, c)
            i = c
    return j
