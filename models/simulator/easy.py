"""The scheduling step without backfilling and with EASY backfilling (SPEC §6).

The EASY pass sorts only the jobs that fit now (free resources only shrink during a pass, so a
job that does not fit at its start never will), so no step re-sorts the whole queue; and when no
job of the pool can fit what is free (a full machine), the step looks at no queued job at all.
"""

from __future__ import annotations

from metapilot.models.simulator.jit import jit
from metapilot.models.simulator.queues import q_best, q_remove, sort_by_priority
from metapilot.models.simulator.running import release_due, start_job
from metapilot.models.simulator.state import INF, fits, none_fits, planned_end


@jit
def step_list(J, P, st, p, now, policy, easy, fit_first):
    """Start jobs in queue order while the first fits; with EASY, then backfill behind the head."""
    release_due(J, P, st, p, now)
    f0 = P.cap[p, 0] - st.used[p, 0]
    f1 = P.cap[p, 1] - st.used[p, 1]
    f2 = P.cap[p, 2] - st.used[p, 2]
    s0, s1, s2 = f0, f1, f2  # free when the step began (fit-first ordering)
    head = -1
    while st.qlen[p] > 0 and not none_fits(P, p, f0, f1, f2):
        j = q_best(J, P, st, p, policy, now, fit_first, s0, s1, s2)
        if not fits(J.need, j, f0, f1, f2):
            head = j
            break
        q_remove(J, P, st, p, j, policy)
        start_job(J, P, st, p, j, now)
        f0 -= J.need[j, 0]
        f1 -= J.need[j, 1]
        f2 -= J.need[j, 2]
    if easy and head >= 0 and st.qlen[p] > 1:
        _easy_backfill(J, P, st, p, now, policy, head, f0, f1, f2)


@jit
def _shadow(J, P, st, p, head, f0, f1, f2):
    """Earliest time the head fits in the planning profile, and what it leaves free then."""
    off = P.off[p]
    n = st.rlen[p]
    k = 0
    while k < n:
        j = st.running[off + k]
        f0 += J.need[j, 0]
        f1 += J.need[j, 1]
        f2 += J.need[j, 2]
        k += 1
        if fits(J.need, head, f0, f1, f2):
            shadow = planned_end(J, st, j)
            while k < n:  # everything ending at the same instant is free at the shadow time
                j = st.running[off + k]
                if planned_end(J, st, j) != shadow:
                    break
                f0 += J.need[j, 0]
                f1 += J.need[j, 1]
                f2 += J.need[j, 2]
                k += 1
            return shadow, f0 - J.need[head, 0], f1 - J.need[head, 1], f2 - J.need[head, 2]
    return INF, 0.0, 0.0, 0.0  # unreachable for jobs that fit the pool


@jit
def _easy_backfill(J, P, st, p, now, policy, head, f0, f1, f2):
    shadow, x0, x1, x2 = _shadow(J, P, st, p, head, f0, f1, f2)
    # Candidates, in queue order: queued jobs (not the head) that fit now and either end by the
    # shadow time or fit the extra. Free resources and extra only shrink during the pass, so
    # the jobs left out here could not start anyway; sorting only the rest keeps steps cheap.
    off = P.off[p]
    k = 0
    for i in range(st.qlen[p]):
        j = st.queue[off + i]
        if j != head and fits(J.need, j, f0, f1, f2) and (
                now + J.req[j] <= shadow or fits(J.need, j, x0, x1, x2)):
            st.scratch_j[k] = j
            k += 1
    if k == 0:
        return
    sort_by_priority(J, st.scratch_j, st.scratch_s, k, policy, now)
    for i in range(k):
        j = st.scratch_j[i]
        if not fits(J.need, j, f0, f1, f2):
            continue
        if now + J.req[j] <= shadow:
            pass  # done (planned) by the shadow time: cannot delay the head
        elif fits(J.need, j, x0, x1, x2):
            x0 -= J.need[j, 0]  # runs past the shadow time on resources the head leaves free
            x1 -= J.need[j, 1]
            x2 -= J.need[j, 2]
        else:
            continue
        q_remove(J, P, st, p, j, policy)
        start_job(J, P, st, p, j, now)
        f0 -= J.need[j, 0]
        f1 -= J.need[j, 1]
        f2 -= J.need[j, 2]
