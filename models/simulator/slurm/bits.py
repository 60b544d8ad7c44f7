"""Sets of nodes as bit words (issue 51): node i is bit `i & 63` of word `i >> 6`.

The replay's node choice and backfill map work on sets of nodes (a partition's, those a reservation
leaves, those with free CPUs); as words, a set is narrowed 64 nodes at a time, and a walk over it
visits only its members: on a busy cluster of thousands of nodes the nodes with free CPUs are few.
"""

from __future__ import annotations

import numpy as np

from metapilot.models.simulator.jit import jit_nrt

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_ONE = np.uint64(1)
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
# the index of the bit (1 << i) * _DEBRUIJN >> 58 names (a de Bruijn sequence: the lowest set bit's index)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
for _i in range(64):
    _DEBRUIJN_INDEX[((1 << _i) * 0x03F79D71B4CB0A89 % (1 << 64)) >> 58] = _i


@jit_nrt
def node_bits(nodes, out):
    """`out` (words) = the nodes where the bool array `nodes` is set."""
    out[:] = 0
    for i in range(nodes.shape[0]):
        if nodes[i]:
            out[i >> 6] |= _ONE << np.uint64(i & 63)


@jit_nrt
def lowest(x):
    """The index of the lowest set bit of the word `x` (not 0)."""
    low = x & (~x + _ONE)
    return _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> np.uint64(58)]


@jit_nrt
def has(words, i):
    return (words[i >> 6] >> np.uint64(i & 63)) & _ONE != 0


@jit_nrt
def put(words, i, on):
    """Set (on) or clear node i's bit."""
    if on:
        words[i >> 6] |= _ONE << np.uint64(i & 63)
    else:
        words[i >> 6] &= ~(_ONE << np.uint64(i & 63))


_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@jit_nrt
def count(words):
    """How many nodes the set holds (a population count, a word at a time)."""
    n = 0
    for w in range(words.shape[0]):
        x = words[w]
        x = x - ((x >> _ONE) & _M1)
        x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
        x = (x + (x >> np.uint64(4))) & _M4
        n += np.int64((x * _H01) >> np.uint64(56))
    return n
