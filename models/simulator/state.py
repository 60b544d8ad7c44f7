"""The replay's data as flat numpy arrays (`Jobs`, `Pools`, `State`), shared by all compiled code.

State lives in plain numpy arrays grouped in NamedTuples so that the compiled functions can be
cached on disk and the Python `Engine` can read the state between calls to `advance`. Per-pool
lists (queue, running jobs, conservative profile) are segments of flat arrays, sized by the
number of jobs of the pool, so nothing is allocated in the hot loop.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from metapilot.models.simulator.jit import jit_inline

# Job status.
FUTURE, QUEUED, RUNNING, DONE, EXCLUDED = 0, 1, 2, 3, 4

# Slots of State.ctr.
NEXT_SUB, SEQ, HEAP_N, STAMP = 0, 1, 2, 3
# Slots of State.clock.
NOW, UTIL_T = 0, 1

INF = np.inf


class Jobs(NamedTuple):
    """Static job data, in submit order (ties by job id)."""

    submit: np.ndarray  # f8, seconds since the window start
    run: np.ndarray  # f8, clamped run time
    req: np.ndarray  # f8, requested time (planning)
    need: np.ndarray  # f8 (n, 3): cores, GPUs, memory
    pool: np.ndarray  # i8
    static_key: np.ndarray  # f8 (n, 7): score of each static rule (dynamic columns unused)


class Pools(NamedTuple):
    cap: np.ndarray  # f8 (P, 3)
    off: np.ndarray  # i8 (P,): start of the pool's segment in queue/running
    poff: np.ndarray  # i8 (P,): start of the pool's segment in the profile
    psize: np.ndarray  # i8 (P,): size of that profile segment
    least: np.ndarray  # f8 (P, 3): the smallest need of each resource among the pool's jobs (INF: none)


class State(NamedTuple):
    clock: np.ndarray  # f8 [now, time up to which `util` is integrated]
    ctr: np.ndarray  # i8 [next submission, start sequence, completion heap size, growth stamp]
    status: np.ndarray  # i1 (n,)
    start: np.ndarray  # f8 (n,)
    end: np.ndarray  # f8 (n,)
    res: np.ndarray  # f8 (n,): conservative reservation start
    order: np.ndarray  # i8 (n,): start sequence number
    released: np.ndarray  # b1 (n,): no longer holds resources in the planning view
    queue: np.ndarray  # i8 (n,) per-pool segments
    qlen: np.ndarray  # i8 (P,)
    qpos: np.ndarray  # i8 (n,): position of a queued job in its segment
    running: np.ndarray  # i8 (n,) per-pool segments, sorted by planned end
    rlen: np.ndarray  # i8 (P,)
    used: np.ndarray  # f8 (P, 3): planning holdings (running jobs with planned end > now)
    busy: np.ndarray  # f8 (P, 3): resources of started, not completed jobs
    util: np.ndarray  # f8 (P, 3): integral of busy since the last reset
    heap_t: np.ndarray  # f8 (n,) completion heap: end time
    heap_o: np.ndarray  # i8 (n,): start sequence (tie-break)
    heap_j: np.ndarray  # i8 (n,): job
    pt: np.ndarray  # f8 (S,) profile segment starts
    pf: np.ndarray  # f8 (S, 3) profile free resources
    plen: np.ndarray  # i8 (P,)
    phead: np.ndarray  # i8 (P,): where the profile begins in the pool's segment (pt[poff + phead])
    next_res: np.ndarray  # f8 (P,): earliest pending reservation
    scratch_j: np.ndarray  # i8 (n,)
    scratch_s: np.ndarray  # f8 (n,)
    # Conservative bookkeeping of where the profile gained free resources (see conservative.py):
    checked: np.ndarray  # i8 (n,): growth stamp when the job's reservation was last found earliest
    grown: np.ndarray  # f8 (S, 2) per-pool segments: column 0 the gains' starts kept as a stack of
    #                    suffix minima, column 1 their ends as a stack of suffix maxima
    grown_stamp: np.ndarray  # i8 (S, 2): the growth stamp of each stack entry
    grown_len: np.ndarray  # i8 (P, 2): the two stacks' heights
    pass_stamp: np.ndarray  # i8 (P,): growth stamp when the pool's last compression began
    pass_order: np.ndarray  # i8 (n,) per-pool segments: the waiting jobs in the last pass's order
    pass_len: np.ndarray  # i8 (P,): (then those submitted since; jobs started since are dropped lazily)
    pf_down: np.ndarray  # i8 (S,): next profile segment with fewer free cores (see pf_chains)
    pf_up: np.ndarray  # i8 (S,): next profile segment with more free cores
    pf_low: np.ndarray  # f8 (P, 3): least free of each resource over the profile
    pf_linked: np.ndarray  # b1 (P,): pf_down, pf_up and pf_low describe the profile as it is


@jit_inline
def fits(need, j, f0, f1, f2):
    """Job j fits the free cores, GPUs and memory (f0, f1, f2)."""
    return need[j, 0] <= f0 and need[j, 1] <= f1 and need[j, 2] <= f2


@jit_inline
def none_fits(P, p, f0, f1, f2):
    """No job of pool p fits (f0, f1, f2): one resource is below every job's need of it. A full
    machine with a long queue then skips the scan for a job to start or backfill."""
    return f0 < P.least[p, 0] or f1 < P.least[p, 1] or f2 < P.least[p, 2]


@jit_inline
def planned_end(J, st, j):
    """Start + requested time: until then a started job holds its resources in the planning view."""
    return st.start[j] + J.req[j]


def build_state(jobs: Jobs, cap: np.ndarray, excluded: np.ndarray) -> tuple[Pools, State]:
    """Allocate the pool layout and an empty state for these jobs."""
    n = jobs.submit.shape[0]
    npools = cap.shape[0]
    counts = np.bincount(jobs.pool[~excluded], minlength=npools).astype(np.int64) if n else np.zeros(npools, np.int64)
    off = np.zeros(npools, np.int64)
    off[1:] = np.cumsum(counts)[:-1]
    psize = 2 * counts + 4
    poff = np.zeros(npools, np.int64)
    poff[1:] = np.cumsum(psize)[:-1]
    # a lower bound of what the pool's jobs need (jobs that never fit included: it can only be lower)
    least = np.full((npools, 3), INF)
    for q in np.flatnonzero(counts):  # a few pools (column by column: 8x faster than axis=0 here)
        need = jobs.need if npools == 1 else jobs.need[jobs.pool == q]
        least[q] = [need[:, k].min() for k in range(3)]
    pools = Pools(cap=np.ascontiguousarray(cap, dtype=np.float64), off=off, poff=poff, psize=psize, least=least)
    total_p = int(psize.sum())
    # A planning view builds a state at every epoch boundary: the arrays come from a few blocks
    # (rows of each block are C-contiguous arrays of their own), ~12 allocations instead of ~40
    m = max(n, 1)
    f8 = np.empty((5, m))  # start, end, res, heap_t, scratch_s
    f8[0:2] = np.nan
    f8[2] = INF
    f8[3:5] = 0.0
    i8 = np.zeros((9, m), np.int64)  # order, queue, qpos, running, heap_o, heap_j, scratch_j, checked, pass_order
    i8[0] = -1
    flags = np.zeros((2, n), np.int8)  # status, released (as booleans)
    status = flags[0]
    status[excluded] = EXCLUDED
    per_pool = np.zeros((4, npools, 3))  # used, busy, util, pf_low
    counters = np.zeros((6, npools), np.int64)  # qlen, rlen, plen, phead, pass_stamp, pass_len
    counters[2] = 1
    pt = np.full(total_p, -INF)
    pf = np.zeros((total_p, 3))
    pf[poff] = pools.cap
    grown = np.zeros((total_p, 2))
    links = np.zeros((2, total_p), np.int64)  # pf_down, pf_up
    t0 = min(0.0, float(jobs.submit.min())) if n else 0.0
    st = State(
        clock=np.array([t0, t0]),
        ctr=np.zeros(4, np.int64),
        status=status,
        start=f8[0, :n],
        end=f8[1, :n],
        res=f8[2, :n],
        order=i8[0, :n],
        released=flags[1].view(np.bool_),
        queue=i8[1],
        qlen=counters[0],
        qpos=i8[2, :n],
        running=i8[3],
        rlen=counters[1],
        used=per_pool[0],
        busy=per_pool[1],
        util=per_pool[2],
        heap_t=f8[3],
        heap_o=i8[4],
        heap_j=i8[5],
        pt=pt,
        pf=pf,
        plen=counters[2],
        phead=counters[3],
        next_res=np.full(npools, INF),
        scratch_j=i8[6],
        scratch_s=f8[4],
        checked=i8[7, :n],
        grown=grown,
        grown_stamp=np.zeros((total_p, 2), np.int64),
        grown_len=np.zeros((npools, 2), np.int64),
        pass_stamp=counters[4],
        pass_order=i8[8],
        pass_len=counters[5],
        pf_down=links[0],
        pf_up=links[1],
        pf_low=per_pool[3],
        pf_linked=np.zeros(npools, np.bool_),
    )
    return pools, st
