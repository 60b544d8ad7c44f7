"""Seeding the planner's view of a replay (SPEC §7): a small state holding only the jobs queued
and running at an instant, so a lookahead costs what the queue holds, not what the trace holds."""

from __future__ import annotations

from metapilot.models.simulator.jit import jit
from metapilot.models.simulator.queues import q_push
from metapilot.models.simulator.running import release_due, start_job
from metapilot.models.simulator.state import NEXT_SUB, NOW, QUEUED, UTIL_T


@jit
def seed_view(J, P, st, n_running, n_seeded, running_start, now, policy):
    """Jobs 0 .. n_running - 1 of `J` run since `running_start` (in their start order), jobs up to
    n_seeded - 1 wait, the rest (a forecast of arrivals, in submit order) are still to come; the
    clock stands at `now`."""
    for j in range(n_running):
        start_job(J, P, st, J.pool[j], j, running_start[j])
    for j in range(n_running, n_seeded):
        st.status[j] = QUEUED
        q_push(J, P, st, J.pool[j], j, policy)
    st.ctr[NEXT_SUB] = n_seeded
    st.clock[NOW] = now
    st.clock[UTIL_T] = now
    for p in range(P.cap.shape[0]):
        release_due(J, P, st, p, now)
