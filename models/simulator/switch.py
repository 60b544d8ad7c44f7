"""Changing a running engine's rule, backfilling mode and fit-first flag at an instant (SPEC §6, §7:
an objective switch at an epoch boundary): the one compiled definition `Engine.advance`, the
planner's forks (`rollout.rollout_costs`) and the epoch step (`epoch_step.epoch_step`) all use."""

from __future__ import annotations

from metapilot.models.simulator.conservative import rebuild_profile
from metapilot.models.simulator.event_loop import CONSERVATIVE
from metapilot.models.simulator.jit import jit
from metapilot.models.simulator.queues import reorder_queues
from metapilot.models.simulator.state import INF, NOW


@jit
def switch_setting(J, P, st, policy, backfill, new_policy, new_backfill, new_fit_first):
    """From (`policy`, `backfill`) to the new setting: the queues reordered under a new rule; entering
    conservative backfilling builds the profile and every waiting job's reservation (under the new
    rule and fit-first flag), leaving it drops the reservations."""
    if new_policy != policy:
        reorder_queues(J, P, st, new_policy)
    if new_backfill != backfill:
        if new_backfill == CONSERVATIVE:
            rebuild_profile(J, P, st, st.clock[NOW], new_policy, new_fit_first)
        elif backfill == CONSERVATIVE:
            for p in range(st.next_res.shape[0]):  # waiting jobs drop their reservations
                st.next_res[p] = INF
