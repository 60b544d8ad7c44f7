"""The replay engine's public entry (SPEC §6): `Engine`, advanceable slice by slice, over the compiled loop.

Events are handled one at a time, each followed by a scheduling step of the job's pool. The
compiled parts, each in its module (all compiled with `jit.jit`, numba, cached on disk):

- `state`: the data (`Jobs`, `Pools`, `State`: flat numpy arrays, per-pool segments; nothing
  is allocated in the hot loop) and `build_state`;
- `event_loop`: `run_until`, the events in SPEC order and the step each triggers;
- `queues`: each pool's waiting jobs in priority order (`policies` scores them); `sorting`;
- `running`, `completions`: starting and completing jobs, running jobs by planned end, the
  completion heap;
- `easy`: the step without backfilling and with EASY;
- `conservative`, `resource_profile`: conservative reservations on the free-resource profile.

`fit_first` (the U objective of the controller) puts, at each scheduling step, the jobs that fit
the resources free when the step begins before the others, then the rule's order.

Everything importers used from this module is still importable from it.
"""

from __future__ import annotations

import math
import time

import numpy as np
from metapilot.models.simulator.capacity import Capacity
from metapilot.models.simulator.conservative import rebuild_profile
from metapilot.models.simulator.event_loop import (
    CONSERVATIVE,
    EASY,
    NONE,
    release_all_due,
    run_until,
)
from metapilot.models.simulator.policies import policy_code, static_scores
from metapilot.models.simulator.queues import reorder_queues
from metapilot.models.simulator.epoch_step import epoch_step
from metapilot.models.simulator.rollout import rollout_costs, view_rollout_costs
from metapilot.models.simulator.runnable import runnable
from metapilot.models.simulator.snapshot import ViewSpace, seed_planning_view, seed_view, view_space
from metapilot.models.simulator.switch import switch_setting
from metapilot.models.simulator.state import (
    DONE,
    EXCLUDED,
    FUTURE,
    HEAP_N,
    INF,
    NEXT_SUB,
    NOW,
    QUEUED,
    RUNNING,
    SEQ,
    UTIL_T,
    Jobs,
    Pools,
    State,
    build_state,
)
from metapilot.transforms.workload import Workload

__all__ = [
    "BACKFILL_CODES", "CONSERVATIVE", "DONE", "EASY", "EXCLUDED", "FUTURE", "HEAP_N", "INF", "NEXT_SUB", "NONE",
    "NOW", "QUEUED", "RUNNING", "SEQ", "UTIL_T", "Engine", "SeededView", "SettingCodes", "Jobs", "Pools", "State",
    "backfill_code", "build_state", "rebuild_profile", "release_all_due", "reorder_queues", "run_until",
    "warm_up_engine",
]

BACKFILL_CODES: dict[str, int] = {"none": NONE, "easy": EASY, "conservative": CONSERVATIVE}


def backfill_code(name: str | int) -> int:
    """Map 'none' / 'easy' / 'conservative' (or a code) to its code."""
    if isinstance(name, int):
        if name in (NONE, EASY, CONSERVATIVE):
            return name
        raise ValueError(f"unknown backfill code {name}")
    try:
        return BACKFILL_CODES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown backfill {name!r}; choose from none, easy, conservative") from None


def warm_up_engine() -> float:
    """Compile (or load from the cache) every mode on a tiny workload; returns seconds taken."""
    t0 = time.perf_counter()
    n = 4
    jobs = Jobs(
        submit=np.arange(n, dtype=np.float64), run=np.ones(n), req=np.full(n, 2.0),
        need=np.ones((n, 3)), pool=np.zeros(n, np.int64), static_key=np.zeros((n, 7)),
    )
    for policy in range(7):
        for backfill in (NONE, EASY, CONSERVATIVE):
            pools, st = build_state(jobs, np.array([[2.0, 2.0, 2.0]]), np.zeros(n, np.bool_))
            if backfill == CONSERVATIVE:
                rebuild_profile(jobs, pools, st, 0.0, policy, False)
            run_until(jobs, pools, st, math.inf, policy, backfill, policy == 0)
    release_all_due(jobs, pools, st, 0.0)
    from metapilot.models.simulator.horizon import horizon_cost_kernel

    horizon_cost_kernel(jobs.submit, jobs.req, np.zeros(0), 0.0, 1.0, 2, 1.0, 0.0)
    return time.perf_counter() - t0


class SettingCodes:
    """Engine settings (rule, backfilling mode, fit-first) as the code arrays `fork_costs` takes."""

    def __init__(self, settings) -> None:
        self.settings = tuple(settings)
        self.policies = np.array([policy_code(p) for p, _, _ in self.settings], np.int64)
        self.backfills = np.array([backfill_code(b) for _, b, _ in self.settings], np.int64)
        self.fit_firsts = np.array([bool(f) for _, _, f in self.settings], np.bool_)


class SeededView:
    """The scheduler's view at an engine's clock (what `Engine.planning_view()[0]` holds), seeded in
    the engine's buffers by one compiled call (`snapshot.seed_planning_view`), for `fork_costs`
    only: the planner's per-boundary view without ~40 numpy allocations and calls (they cost
    several times the view's scheduling). Valid until the engine, or a copy of it, seeds another."""

    def __init__(self, engine: "Engine", space: ViewSpace) -> None:
        self.space = space
        self.cap = engine.pools.cap
        self.policy, self.backfill, self.fit_first = engine.policy, engine.backfill, engine.fit_first
        self.now = engine.now
        self.n, self.total_p = seed_planning_view(engine.jobs, engine.pools, engine.state, engine.policy,
                                                  engine.backfill, engine.fit_first, space)

    @property
    def req(self) -> np.ndarray:
        """The view's jobs' requested times (running jobs in start order, then the queued ones)."""
        return self.space.req[:self.n]

    def fork_costs(self, settings: "SettingCodes", until: float, weight: np.ndarray, epoch_s: float, n_epochs: int,
                   lam: float, record: float) -> np.ndarray:
        """`Engine.fork_costs` of the view."""
        out = np.empty(len(settings.policies))
        view_rollout_costs(self.space, self.cap, self.n, self.total_p, self.policy, self.backfill, self.fit_first,
                           settings.policies, settings.backfills, settings.fit_firsts, float(until), weight, self.now,
                           float(epoch_s), int(n_epochs), float(lam), float(record), out)
        return out


class Engine:
    """A replay that can be advanced slice by slice (the objective-switching env drives it)
    or run to the end. Jobs that can never fit their pool are excluded up front and listed in
    `cannot_fit` (job indices)."""

    def __init__(
        self, workload: Workload, capacity: Capacity, policy: str | int = "FCFS", backfill: str | int = "easy",
        fit_first: bool = False,
    ) -> None:
        self.workload = workload
        self.capacity = capacity
        need = np.stack([workload.cores, workload.gpus, workload.mem], axis=1).astype(np.float64)
        cap = capacity.matrix
        pool = capacity.pool_index(workload.partitions)[workload.partition]
        fits = runnable(workload, capacity)
        self.cannot_fit = np.flatnonzero(~fits)
        pool = np.where(fits, pool, 0).astype(np.int64)
        submit = np.ascontiguousarray(workload.submit, dtype=np.float64)
        req = np.ascontiguousarray(workload.req_time, dtype=np.float64)
        self.jobs = Jobs(
            submit=submit, run=np.ascontiguousarray(workload.run, dtype=np.float64), req=req,
            need=np.ascontiguousarray(need), pool=pool,
            static_key=static_scores(submit, req, np.ascontiguousarray(need[:, 0])),
        )
        self.pools, self.state = build_state(self.jobs, cap, ~fits)
        self.policy = policy_code(policy)
        self.fit_first = bool(fit_first)
        self.backfill = NONE
        self._set_backfill(backfill_code(backfill))
        self._util_t = float(self.state.clock[NOW])
        self.is_view = False  # a planning view (`view`): the planner rolls it forward as it is

    # -- driving ---------------------------------------------------------------------------

    def _set_backfill(self, code: int) -> None:
        if code == self.backfill:
            return
        if code == CONSERVATIVE:
            rebuild_profile(self.jobs, self.pools, self.state, self.now, self.policy, self.fit_first)
        elif self.backfill == CONSERVATIVE:
            self.state.next_res[:] = INF  # waiting jobs drop their reservations
        self.backfill = code

    def advance(
        self, until_t: float, policy: str | int | None = None, backfill: str | int | None = None,
        fit_first: bool | None = None,
    ) -> int:
        """Handle every event at or before `until_t` under the given rule, backfilling mode and
        fit-first flag (default: those in force); the clock then stands at `until_t`.

        `fit_first`: at each scheduling step, the jobs that fit the resources free when the step
        begins go first (then the rule's order) -- the U objective's "keep the free resources
        filled". Returns the number of events handled."""
        new_policy = self.policy if policy is None else policy_code(policy)
        new_backfill = self.backfill if backfill is None else backfill_code(backfill)
        new_fit_first = self.fit_first if fit_first is None else bool(fit_first)
        if new_policy != self.policy or new_backfill != self.backfill:
            switch_setting(self.jobs, self.pools, self.state, self.policy, self.backfill, new_policy, new_backfill,
                           new_fit_first)
        self.policy, self.backfill, self.fit_first = new_policy, new_backfill, new_fit_first
        return int(run_until(self.jobs, self.pools, self.state, float(until_t), self.policy, self.backfill,
                             self.fit_first))

    def advance_epoch(self, t0: float, until: float, policy: int, backfill: int, fit_first: bool, queued0: np.ndarray,
                      arrival_idx: np.ndarray, arrival_times: np.ndarray, sums: np.ndarray) -> int:
        """`advance(until, policy, backfill, fit_first)` (codes) from the boundary `t0`, then
        `take_utilisation()`, in one compiled call that also adds up the epoch's waiting into
        `sums` (`epoch_step.epoch_step`, `EpochReplay.advance`)."""
        events = epoch_step(self.jobs, self.pools, self.state, self.policy, self.backfill, self.fit_first, policy,
                            backfill, fit_first, float(t0), float(until), queued0, arrival_idx, arrival_times, sums)
        self.policy, self.backfill, self.fit_first = policy, backfill, fit_first
        self._util_t = self.now
        return int(events)

    def run(self) -> int:
        """Run to the end under the rule and mode in force."""
        return self.advance(INF)

    # -- snapshots (SPEC §7) -----------------------------------------------------------------

    def copy(self) -> Engine:
        """An exact snapshot: the copy, continued, gives the same schedule job for job as this
        engine continued (the static job data is shared, the state is copied)."""
        other = object.__new__(Engine)
        other.__dict__.update(self.__dict__)
        other.state = State(*(a.copy() for a in self.state))
        return other

    def fork_costs(self, settings: "SettingCodes", until: float, weight: np.ndarray, epoch_s: float, n_epochs: int,
                   lam: float, record: float) -> np.ndarray:
        """Per setting, the horizon cost (`horizon_cost_kernel` from the clock over `n_epochs`) of a
        fork of this engine switched to it and run to `until`: `copy()` then `advance(until, ...)`
        for each, in one compiled call (`rollout.rollout_costs`); this engine is left as it was."""
        scratch = getattr(self, "_scratch", None)  # kept: the oracle forks the whole trace's state at every
        if scratch is None:  # boundary, and fresh pages each time cost as much as the forks (measured: 81 s vs 40 s)
            scratch = self._scratch = State(*(np.empty_like(a) for a in self.state))
        out = np.empty(len(settings.policies))
        rollout_costs(self.jobs, self.pools, self.state, scratch, self.policy, self.backfill, self.fit_first,
                      settings.policies, settings.backfills, settings.fit_firsts, float(until), weight, self.now,
                      float(epoch_s), int(n_epochs), float(lam), float(record), out)
        return out

    def seeded_view(self) -> SeededView:
        """`planning_view()` (no forecast) for the planner's forks, in one compiled call (`SeededView`)."""
        space = getattr(self, "_space", None)
        if space is None:
            space = self._space = view_space(len(self.jobs.submit), self.pools.cap, self.jobs.static_key.shape[1])
        return SeededView(self, space)

    def planning_view(self, forecast_s: float = 0.0, span_s: float = 0.0,
                      arrivals: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Engine, np.ndarray]:
        """What the scheduler knows now, as a small engine: only the running jobs (in start order)
        and the queued ones, requested times as run times, no future arrivals (the lookahead
        planner's snapshot; with `forecast_s` or `arrivals`, the forecast arrivals of `view`).
        Returns it and, per job of the view, the job's index here."""
        st = self.state
        running = np.flatnonzero(st.status == RUNNING)
        running = running[np.argsort(st.order[running], kind="stable")]
        return self.view(running, st.start[running], np.flatnonzero(st.status == QUEUED), self.now,
                         forecast_s=forecast_s, span_s=span_s, arrivals=arrivals)

    def view(self, running: np.ndarray, running_start: np.ndarray, queued: np.ndarray,
             now: float, run: np.ndarray | None = None, forecast_s: float = 0.0,
             span_s: float = 0.0, arrivals: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Engine, np.ndarray]:
        """The planning view of any moment of this engine's jobs (the as-run history's too): jobs
        `running` (in start order) since `running_start`, jobs `queued`, the clock at `now`;
        requested times as run times, or `run` (per job of this engine: what a run-time predictor
        would give; the benchmarks' what-if passes the true ones). With `forecast_s` > 0, arrivals
        to come are forecast by persistence: the jobs submitted `forecast_s` earlier, over the next
        `span_s` (never past `now`: only jobs already seen), arrive again shifted by `forecast_s`.
        Any other forecast passes `arrivals`: jobs of this engine (indices, repeats allowed) and the
        times they arrive at in the view. Returns it and, per job of the view, the job's index here."""
        running, queued = np.asarray(running, np.int64), np.asarray(queued, np.int64)
        j = self.jobs
        if arrivals is None and forecast_s > 0 and span_s > 0:
            lo, hi = now - forecast_s, min(now - forecast_s + span_s, now)
            fc = np.flatnonzero((j.submit >= lo) & (j.submit < hi) & (self.state.status != EXCLUDED))
            arrivals = fc, j.submit[fc] + forecast_s
        fc, fc_submit = (np.zeros(0, np.int64), np.zeros(0)) if arrivals is None else (
            np.asarray(arrivals[0], np.int64), np.asarray(arrivals[1], np.float64))
        order = np.argsort(fc_submit, kind="stable")  # arrivals in time order (ties: as given)
        fc, fc_submit = fc[order], fc_submit[order]
        alive = np.r_[running, queued, fc]
        req = j.req[alive]
        runs = req if run is None else np.ascontiguousarray(np.asarray(run, np.float64)[alive])
        submit = j.submit[alive]
        need = np.ascontiguousarray(j.need[alive])
        key = np.ascontiguousarray(j.static_key[alive])
        if fc.size:  # forecast arrivals: the rules keyed on the submit time (FCFS, F1) rank them at it
            submit = submit.copy()
            submit[len(running) + len(queued):] = fc_submit
            key = static_scores(submit, req, np.ascontiguousarray(need[:, 0]))
        jobs = Jobs(submit=submit, run=runs, req=req, need=need, pool=j.pool[alive], static_key=key)
        view = object.__new__(Engine)
        view.workload, view.capacity = self.workload, self.capacity
        view.cannot_fit = np.zeros(0, np.int64)
        view.jobs = jobs
        view.pools, view.state = build_state(jobs, self.pools.cap, np.zeros(len(alive), np.bool_))
        view.policy, view.fit_first, view.backfill = self.policy, self.fit_first, NONE
        seed_view(jobs, view.pools, view.state, len(running), len(running) + len(queued),
                  np.ascontiguousarray(running_start, dtype=np.float64), float(now), self.policy)
        view._util_t = float(now)
        view._set_backfill(self.backfill)
        view.is_view = True
        return view, alive

    # -- what a gym env reads at an epoch boundary -------------------------------------------

    @property
    def now(self) -> float:
        return float(self.state.clock[NOW])

    @property
    def done(self) -> bool:
        """True when every job has been submitted and completed."""
        st = self.state
        return bool(st.ctr[NEXT_SUB] >= len(self.jobs.submit) and st.ctr[HEAP_N] == 0 and not st.qlen.any())

    def next_event_time(self) -> float:
        """Time of the next submission or completion (inf when none); pending conservative
        reservation starts are not included."""
        st = self.state
        status = st.status
        ns = int(st.ctr[NEXT_SUB])
        while ns < len(status) and status[ns] == EXCLUDED:
            ns += 1
        t_sub = float(self.jobs.submit[ns]) if ns < len(status) else INF
        t_comp = float(st.heap_t[0]) if st.ctr[HEAP_N] > 0 else INF
        return min(t_sub, t_comp)

    def queued(self) -> np.ndarray:
        """Indices of the waiting jobs, in job order."""
        return np.flatnonzero(self.state.status == QUEUED)

    def running(self) -> np.ndarray:
        """Indices of the running jobs, in job order."""
        return np.flatnonzero(self.state.status == RUNNING)

    def queue_view(self) -> dict[str, np.ndarray]:
        """Waiting jobs' submit time, current wait, requested time, cores, GPUs, memory, pool."""
        q = self.queued()
        j = self.jobs
        return {"job": q, "submit": j.submit[q], "wait": self.now - j.submit[q], "req": j.req[q],
                "cores": j.need[q, 0], "gpus": j.need[q, 1], "mem": j.need[q, 2], "pool": j.pool[q]}

    def running_view(self) -> dict[str, np.ndarray]:
        """Running jobs' start, planned end (start + requested time), cores, GPUs, memory, pool."""
        r = self.running()
        j = self.jobs
        return {"job": r, "start": self.state.start[r], "planned_end": self.state.start[r] + j.req[r],
                "cores": j.need[r, 0], "gpus": j.need[r, 1], "mem": j.need[r, 2], "pool": j.pool[r]}

    def used(self) -> np.ndarray:
        """(pools, 3) cores, GPUs, memory held by running jobs now."""
        return self.state.busy.copy()

    def planned_used(self) -> np.ndarray:
        """(pools, 3) what the scheduler counts as held now (running jobs planned past now)."""
        release_all_due(self.jobs, self.pools, self.state, self.now)
        return self.state.used.copy()

    def take_utilisation(self) -> tuple[np.ndarray, float]:
        """Resource-seconds used per pool and resource since the last call, and the seconds that
        covers; divide by capacity x seconds for the utilisation of the slice. Resets the integral."""
        integral = self.state.util.copy()
        self.state.util[:] = 0.0
        seconds = self.now - self._util_t
        self._util_t = self.now
        return integral, seconds

    # -- outcome -------------------------------------------------------------------------------

    @property
    def start(self) -> np.ndarray:
        """Start time of every job so far (NaN: not started); a live view of the state."""
        return self.state.start

    @property
    def end(self) -> np.ndarray:
        """End time of every job so far (NaN: not ended); a live view of the state."""
        return self.state.end
