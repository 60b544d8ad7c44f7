"""One decision epoch of a replay in one compiled call (SPEC §7's epoch `[t0, t1)`): the switch to
the epoch's setting, the events up to `t1`, and what the epoch added up (`EpochReplay.advance`).

In Python, an epoch cost ~85 us of calls around the scheduling (the queue at `t0` read, the rule
switched, the utilisation integral taken and reset, two binary searches, the waiting summed),
more than the scheduling of a typical hour; a walk forward replays ~200,000 epochs per fold."""

from __future__ import annotations

from metapilot.models.simulator.event_loop import run_until
from metapilot.models.simulator.jit import jit, jit_inline
from metapilot.models.simulator.switch import switch_setting


@jit_inline
def _first_at_or_after(times, t):
    """The first index of the sorted `times` with times[i] >= t (`searchsorted(side="left")`)."""
    lo, hi = 0, times.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


@jit
def epoch_step(J, P, st, policy, backfill, fit_first, new_policy, new_backfill, new_fit_first, t0, t1, queued0,
               arrival_idx, arrival_times, sums):
    """From the boundary `t0` (the engine's clock, under `policy`, `backfill`, `fit_first`), switch to the new
    setting and handle every event up to `t1`; returns the number of events. Into `sums`
    (`epoch_replay.EPOCH_SUMS`): the resource-seconds used in the epoch (the utilisation integral,
    then reset), the job-seconds queued within it (the jobs queued at `t0` and submitted before it,
    and the arrivals `arrival_idx` of `[t0, t1)`, each until its start or `t1`), and the largest
    wait of those that started by `t1` (0 if none). `queued0`: a buffer of one slot per job."""
    nq = 0
    for p in range(P.cap.shape[0]):  # queued at t0 (those submitted at t0 count as arrivals)
        o = P.off[p]
        for i in range(st.qlen[p]):
            j = st.queue[o + i]
            if J.submit[j] < t0:
                queued0[nq] = j
                nq += 1
    switch_setting(J, P, st, policy, backfill, new_policy, new_backfill, new_fit_first)
    events = run_until(J, P, st, t1, new_policy, new_backfill, new_fit_first)
    for r in range(3):
        used = 0.0
        for p in range(st.util.shape[0]):
            used += st.util[p, r]
            st.util[p, r] = 0.0
        sums[r] = used
    acc = 0.0
    longest = 0.0
    for i in range(nq):
        j = queued0[i]
        s = st.start[j]
        acc += (t1 if not s <= t1 else s) - t0
        if s <= t1 and s - J.submit[j] > longest:
            longest = s - J.submit[j]
    for i in range(_first_at_or_after(arrival_times, t0), _first_at_or_after(arrival_times, t1)):
        j = arrival_idx[i]
        s = st.start[j]
        e = t1 if not s <= t1 else s
        if e > J.submit[j]:
            acc += e - J.submit[j]
        if s <= t1 and s - J.submit[j] > longest:
            longest = s - J.submit[j]
    sums[3] = acc
    sums[4] = longest
    return events
