"""What a schedule costs over a horizon (SPEC §7 aligned reward, summed over the horizon's epochs):
the job-seconds of waiting in it, and how far the largest wait in it goes past a record. Compiled:
the lookahead planner asks it once per objective at every epoch boundary."""

from __future__ import annotations

import numpy as np

from metapilot.models.simulator.jit import jit


@jit
def horizon_cost_kernel(submit, start, weight, t0, epoch_s, n_epochs, lam, record):
    """See `models.controller.planner.horizon_cost` (`weight`: per job, or empty for 1)."""
    t_end = t0 + n_epochs * epoch_s
    total = 0.0
    longest = 0.0
    weighted = weight.shape[0] > 0
    for j in range(submit.shape[0]):
        s = submit[j]
        st = start[j]
        if st != st:  # never started: waits past the horizon
            st = np.inf
        if s >= t_end or st <= t0:
            continue
        acc = min(st, t_end) - max(s, t0)
        if acc > 0:
            total += acc * weight[j] if weighted else acc
        if lam > 0:
            if st <= t_end:  # started in the horizon: its whole wait
                w = st - s
            else:  # still queued at the last boundary
                w = t_end - s
            # queued at some boundary b (s <= b < st) counts b - s; the largest such b is the last
            # boundary before st (or the horizon's end); a start in the horizon counts st - s, larger
            if w > longest:
                longest = w
    if lam > 0:
        over = longest - record
        if over > 0:
            total += lam * over
    return total
