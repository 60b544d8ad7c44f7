"""The replay engine advanced one decision epoch at a time, read as the §7 aggregates (SPEC §6, §7).

Each epoch runs under one objective (engine settings, `models.simulator.objectives`), chosen by
the caller: the controller's env (`models.controller.env`), its replay (`models.controller.replay`)
and the rollouts (`models.controller.rollouts`) all drive the cluster through `EpochReplay`.

One reading of the cluster, three users. `EpochReplay` drives an `Engine` epoch by epoch and
turns its state at each boundary into the per-epoch *aggregates* of `transforms.state`
(`AGGREGATES`, one numba pass over the engine's queue arrays: `boundary_aggregates`). The env,
the controller replay (`models.controller.replay`) and the rollouts (`models.controller.rollouts`)
all read the cluster through it, and the aggregates mean exactly what the as-run SQL
(`sql/mdp/asrun_epoch_aggregates.sql`) means on a log, so a feature cannot differ between the
logged tuples, the simulated tuples and the env:

- running at `t`: started at or before `t`, not yet ended (`start <= t < end`): the engine's
  `busy` after every event at or before `t` is handled;
- queued at `t`: submitted at or before `t`, not started (`submit <= t < start`);
- arrivals: jobs submitted in `[t - epoch_s, t)`;
- utilisation of the epoch `[t, t + epoch_s)`: resource-seconds used in it / (capacity x epoch_s);
- accrued wait of the epoch: job-seconds spent queued within `[t, t + epoch_s)` (the aligned
  reward's A), summed over the jobs queued at `t` and those submitted in the epoch; and the
  largest wait of the jobs that started in the epoch (with the largest current wait at the
  boundaries, the record the aligned reward's G grows: over a window, the max wait).

The replay covers the jobs of the workload (a window of submissions) from an empty cluster; jobs
that can never fit their pool are not replayed (`Engine.cannot_fit`) and are counted nowhere.
Epoch `k` is `[k * epoch_s, (k + 1) * epoch_s)` since the window start; its objective handles
every event in `(k * epoch_s, (k + 1) * epoch_s]` (epoch 0 also those at the window start, so
the boundary-0 observation is taken before the first instant is handled: a job submitted exactly
at the window start shows in the arrivals of boundary 1, not in the queue of boundary 0).

Speed: the env's observation and reward are computed by `StateEncoder` / `epoch_reward`, scalar
paths that give bit-for-bit what `transforms.state.state_from_aggregates` and
`transforms.reward.reward_from_aggregates` give (those are vectorised for whole frames; on one
row their numpy overhead is ~0.4 ms, ~50x an engine epoch). They are checked against the
definitions on probe rows when first used; on any difference the env falls back to calling the
definitions, with a warning, so the definitions stay the only authority.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numba as nb
import numpy as np
import polars as pl
from metapilot.models.simulator.capacity import WHOLE_CLUSTER, Capacity
from metapilot.models.simulator.engine import EXCLUDED, Engine, backfill_code
from metapilot.models.simulator.objectives import DEFAULT_OBJECTIVES, Objective, Setting, user_first_index
from metapilot.models.simulator.policies import policy_code
from metapilot.transforms.asrun_state import to_epoch_s
from metapilot.transforms.reward import (
    ControllerRewardConfig,
    reward_from_aggregates,
    utilisation,
)
from metapilot.transforms.state import (
    AGGREGATES,
    LOG_COUNT_SCALE,
    LOG_TIME_SCALE,
    N_FEATURES,
    RATIO_CLIP,
    StateConfig,
    state_from_aggregates,
)
from metapilot.transforms.workload import Workload

# Index of each aggregate in the vectors `boundary_aggregates` returns (AGGREGATES order).
A = {name: i for i, name in enumerate(AGGREGATES)}
N_AGG = len(AGGREGATES)
USED_S = ("used_cpu_s", "used_gpu_s", "used_mem_s")
UTIL = ("u_cpu", "u_gpu", "u_mem")
# What an epoch adds up, in `EpochReplay.advance`'s vector: resource-seconds used, then job-seconds queued.
EPOCH_SUMS = (*USED_S, "wait_accrued_s", "wait_started_max_s")
N_SUMS = len(EPOCH_SUMS)


def capacity_totals(capacity: Capacity, partition: str | None = None) -> np.ndarray:
    """(cores, GPUs, MiB) the state divides by, chosen as the as-run path does
    (`transforms.asrun_state.capacity_at`): the partition's own pool, else the whole cluster's
    `'*'`; no partition: `'*'`, else the sum over pools. Unknown memory (inf) counts as 0."""
    pools = list(capacity.pools)
    if partition is not None and partition in pools:
        idx = [pools.index(partition)]
    elif WHOLE_CLUSTER in pools:
        idx = [pools.index(WHOLE_CLUSTER)]
    else:
        idx = list(range(len(pools)))
    m = capacity.matrix[idx]
    m = np.where(np.isfinite(m), m, 0.0)
    return m.sum(axis=0).astype(np.float64)


@nb.njit(cache=True)
def _boundary_kernel(queue, qlen, off, submit, req, need, busy, arrival_times, now, origin_s, epoch_s,
                     long_tail_s, cap, out):
    """Fill `out` (AGGREGATES order) from the engine's arrays at time `now` (window seconds).
    Walks the queue segments only (O(queued jobs)); arrivals by binary search."""
    n = 0
    qc = 0.0
    qg = 0.0
    qm = 0.0
    wsum = 0.0
    wmax = 0.0
    tail = 0
    rsum = 0.0
    for p in range(qlen.shape[0]):
        o = off[p]
        for i in range(qlen[p]):
            j = queue[o + i]
            w = now - submit[j]
            n += 1
            qc += need[j, 0]
            qg += need[j, 1]
            qm += need[j, 2]
            wsum += w
            if w > wmax or n == 1:
                wmax = w
            if w > long_tail_s:
                tail += 1
            rsum += req[j]
    uc = 0.0
    ug = 0.0
    um = 0.0
    for p in range(busy.shape[0]):
        uc += busy[p, 0]
        ug += busy[p, 1]
        um += busy[p, 2]
    out[0] = origin_s + now
    out[1] = uc
    out[2] = ug
    out[3] = um
    out[4] = cap[0]
    out[5] = cap[1]
    out[6] = cap[2]
    out[7] = n
    out[8] = qc
    out[9] = qg
    out[10] = qm
    out[11] = wsum / n if n else 0.0
    out[12] = wmax if n else 0.0
    out[13] = tail / n if n else 0.0
    out[14] = rsum / n if n else 0.0
    hi = np.searchsorted(arrival_times, now, side="left")
    lo = np.searchsorted(arrival_times, now - epoch_s, side="left")
    out[15] = hi - lo


class EpochReplay:
    """An `Engine` advanced one decision epoch at a time under the objective of each epoch, read
    at every boundary as the aggregates of `transforms.state` (the shared path of the env, the
    controller replay and the rollouts)."""

    def __init__(self, workload: Workload, capacity: Capacity, *, epoch_s: int = 3600,
                 long_tail_s: float = 86_400, partition: str | None = None,
                 objectives: Sequence[Objective] | None = None, settings: Sequence[Setting] | None = None) -> None:
        """`objectives`: what action i runs (the default menu's by default); `settings`: raw engine
        settings (rule code, backfill code, fit-first) per action instead, for what-if benchmarks.
        The replay starts under the user-first (FCFS-like) objective, as real schedulers do."""
        if epoch_s <= 0:
            raise ValueError("epoch_s must be positive")
        objectives = tuple(objectives) if objectives is not None else DEFAULT_OBJECTIVES
        self.settings = tuple(settings) if settings is not None else tuple(o.setting for o in objectives)
        self._start = min(user_first_index(objectives), len(self.settings) - 1)
        self.workload = workload
        self.capacity = capacity
        self.epoch_s = int(epoch_s)
        self.long_tail_s = float(long_tail_s)
        self.cap = capacity_totals(capacity, partition)
        self.origin_s = to_epoch_s(workload.window_start)  # as the as-run epoch grid counts it
        self.engine: Engine = self._new_engine()
        # submit times of the replayed jobs (sorted: a Workload is in submit order)
        self.arrival_idx = np.flatnonzero(self.engine.state.status != EXCLUDED)
        self.arrival_times = np.ascontiguousarray(self.engine.jobs.submit[self.arrival_idx])
        self.k = 0
        self.events = 0
        self._out = np.zeros(N_AGG)
        self._codes = [(policy_code(p), backfill_code(b), bool(f)) for p, b, f in self.settings]
        self._queued0 = np.empty(max(len(self.engine.jobs.submit), 1), np.int64)  # `Engine.advance_epoch`'s buffer

    def _new_engine(self) -> Engine:
        policy, backfill, fit_first = self.settings[self._start]
        return Engine(self.workload, self.capacity, policy, backfill, fit_first=fit_first)

    def reset(self) -> np.ndarray:
        """Back to the window start (nothing handled yet); the aggregates of boundary 0."""
        if self.k or self.events:
            self.engine = self._new_engine()
        self.k = 0
        self.events = 0
        self.engine.take_utilisation()
        return self.aggregates()

    @property
    def now(self) -> float:
        """The current boundary, seconds since the window start."""
        return float(self.k * self.epoch_s)

    @property
    def done(self) -> bool:
        """Every replayed job has been submitted and has finished."""
        return self.engine.done

    def aggregates(self) -> np.ndarray:
        """The aggregates of the current boundary, float64 in AGGREGATES order (a new array)."""
        e, st = self.engine, self.engine.state
        _boundary_kernel(st.queue, st.qlen, e.pools.off, e.jobs.submit, e.jobs.req, e.jobs.need, st.busy,
                         self.arrival_times, self.now, float(self.origin_s), float(self.epoch_s),
                         self.long_tail_s, self.cap, self._out)
        return self._out.copy()

    def advance(self, action: int) -> np.ndarray:
        """Run the next epoch under objective `action`; returns what it added up (`EPOCH_SUMS`):
        the resource-seconds (cores, GPUs, MiB) used during it over all pools, and the
        job-seconds its queue accrued."""
        policy, backfill, fit_first = self._codes[action]
        t0, t1 = self.now, float((self.k + 1) * self.epoch_s)
        self.k += 1
        out = np.empty(N_SUMS)
        self.events += self.engine.advance_epoch(t0, t1, policy, backfill, fit_first, self._queued0, self.arrival_idx,
                                                 self.arrival_times, out)
        return out

    def hold(self, action: int, epochs: int) -> None:
        """Run the next `epochs` epochs under objective `action` in one go (no epoch sums): the
        same schedule as `epochs` calls of `advance`, for a caller that knows no decision can
        change before then (a rule whose tail guard cannot fire yet)."""
        policy, backfill, fit_first = self.settings[action]
        self.k += int(epochs)
        self.events += self.engine.advance(float(self.k * self.epoch_s), policy, backfill, fit_first)
        self.engine.take_utilisation()


def aggregates_dict(agg: np.ndarray) -> dict[str, float]:
    """One boundary's aggregate vector as {name: value} (epoch_start and counts as int)."""
    d = dict(zip(AGGREGATES, agg.tolist(), strict=True))
    d["epoch_start"] = int(d["epoch_start"])
    d["queue_len"] = int(d["queue_len"])
    d["arrivals"] = int(d["arrivals"])
    return d


def aggregates_frame(boundaries: np.ndarray, sums: np.ndarray, epoch_s: int) -> pl.DataFrame:
    """Frame of n + 1 boundaries (AGGREGATES columns, as the as-run path gives them) with what
    the epoch each boundary opens added up (`EPOCH_SUMS`) and its utilisation `u_*` (the last
    boundary's epoch was not run: null)."""
    b = np.asarray(boundaries, dtype=np.float64).reshape(-1, N_AGG)
    u = np.asarray(sums, dtype=np.float64).reshape(-1, N_SUMS)
    if u.shape[0] not in (b.shape[0], b.shape[0] - 1):
        raise ValueError(f"{b.shape[0]} boundaries need {b.shape[0] - 1} epochs of use, got {u.shape[0]}")
    cols: dict[str, Any] = {name: b[:, i] for i, name in enumerate(AGGREGATES)}
    cols["epoch_start"] = b[:, 0].astype(np.int64)
    cols["queue_len"] = b[:, A["queue_len"]].astype(np.int64)
    cols["arrivals"] = b[:, A["arrivals"]].astype(np.int64)
    frame = pl.DataFrame(cols)
    pad = b.shape[0] - u.shape[0]
    caps = (b[: u.shape[0], A["cap_cpu"]], b[: u.shape[0], A["cap_gpu"]], b[: u.shape[0], A["cap_mem"]])
    extra = {}
    for i, (name_s, name_u) in enumerate(zip(USED_S, UTIL, strict=True)):
        extra[name_s] = pl.Series(name_s, np.r_[u[:, i], np.full(pad, np.nan)]).fill_nan(None)
        extra[name_u] = pl.Series(name_u, np.r_[utilisation(u[:, i], caps[i], epoch_s), np.full(pad, np.nan)]).fill_nan(None)
    for i, name in ((3, "wait_accrued_s"), (4, "wait_started_max_s")):
        extra[name] = pl.Series(name, np.r_[u[:, i], np.full(pad, np.nan)]).fill_nan(None)
    return frame.with_columns(**extra)


# --- observation and reward of one epoch ---------------------------------------------------------


@nb.njit(cache=True)
def _state_pre(a, logs, ratios, ratio_clip):
    """Arguments of the logarithms of one state row (as `transforms.state` forms them)."""
    logs[0] = 1.0 + max(a[7], 0.0)    # queue_len
    logs[1] = 1.0 + max(a[11], 0.0)   # wait_mean_s
    logs[2] = 1.0 + max(a[12], 0.0)   # wait_max_s
    logs[3] = 1.0 + max(a[14], 0.0)   # req_mean_s
    logs[4] = 1.0 + max(a[15], 0.0)   # arrivals
    for r in range(3):
        num = a[8 + r]
        den = a[4 + r]
        x = num / den if den > 0 else 0.0
        ratios[r] = min(max(x, 0.0), ratio_clip)


@nb.njit(cache=True)
def _state_post(a, lg, l1p, time4, ratio_clip, count_scale, time_scale, out):
    """The state row from the logarithms (the constants are arguments: numba's disk cache would
    not notice a change to transforms.state)."""
    for r in range(3):
        num = a[1 + r]
        den = a[4 + r]
        x = num / den if den > 0 else 0.0
        out[r] = min(max(x, 0.0), ratio_clip)
    empty = a[7] <= 0
    out[3] = lg[0] / count_scale
    out[4] = l1p[0]
    out[5] = l1p[1]
    out[6] = l1p[2]
    out[7] = lg[1] / time_scale
    out[8] = lg[2] / time_scale
    out[9] = min(max(a[13], 0.0), 1.0)
    out[10] = lg[3] / time_scale
    if empty:
        for i in range(3, 11):
            out[i] = 0.0
    out[11] = lg[4] / count_scale
    for i in range(4):
        out[12 + i] = time4[i]


def _probe_aggregates(rng: np.random.Generator, n: int, origin_s: int, epoch_s: int) -> np.ndarray:
    """Aggregate rows of the kind the engine produces (finite, >= 0), edge cases included."""
    a = np.zeros((n, N_AGG))
    a[:, 0] = origin_s + epoch_s * rng.integers(0, 20_000, n)
    caps = rng.choice([0.0, 1.0, 100.0, 93_312.0, 1e6], size=(n, 3))
    a[:, 4:7] = caps
    a[:, 1:4] = caps * rng.uniform(0, 1.2, (n, 3)) * rng.integers(0, 2, (n, 3))
    a[:, 7] = np.floor(np.exp(rng.uniform(-1, 10, n))) * rng.integers(0, 2, n)
    a[:, 8:11] = np.exp(rng.uniform(-2, 15, (n, 3))) * (a[:, 7:8] > 0)
    a[:, 11] = np.exp(rng.uniform(0, 16, n)) * (a[:, 7] > 0)
    a[:, 12] = a[:, 11] * rng.uniform(1, 30, n)
    a[:, 13] = rng.choice([0.0, 0.25, 1.0, 1 / 3], n) * (a[:, 7] > 0)
    a[:, 14] = np.exp(rng.uniform(0, 14, n)) * (a[:, 7] > 0)
    a[:, 15] = np.floor(np.exp(rng.uniform(-1, 8, n)))
    return a


def _definition_state(agg: np.ndarray, config: StateConfig) -> np.ndarray:
    """`state_from_aggregates` (the definition) on rows of aggregate vectors."""
    agg = np.atleast_2d(agg)
    kw = {name: agg[:, i] for i, name in enumerate(AGGREGATES)}
    kw["epoch_start"] = agg[:, 0].astype(np.int64)
    return state_from_aggregates(**kw, config=config)


_CHECKED: dict[tuple, bool] = {}


class StateEncoder:
    """Observation of one boundary, bit-for-bit `state_from_aggregates`, in a few microseconds.

    The hour/day columns are computed by the definition itself for blocks of boundaries ahead
    (they depend on the time only); the rest mirrors the definition's arithmetic, with numpy's
    own `log10` / `log1p` (so the same rounding). Checked against the definition on probe rows
    once per configuration and process: `exact` is False after a mismatch (then every row goes
    through the definition)."""

    BLOCK = 4096

    def __init__(self, config: StateConfig, origin_s: int, epoch_s: int | None = None) -> None:
        self.config = config
        self.origin_s = int(origin_s)
        self.epoch_s = int(epoch_s or config.epoch_s)
        self._time = np.zeros((0, 4))
        self._logs = np.zeros(5)
        self._ratios = np.zeros(3)
        key = (config.timezone, config.long_tail_s, self.epoch_s)
        if key not in _CHECKED:
            _CHECKED[key] = self._self_check()
            if not _CHECKED[key]:
                warnings.warn("StateEncoder differs from transforms.state.state_from_aggregates on probe rows: "
                              "the env falls back to the definition (slower)", RuntimeWarning, stacklevel=2)
        self.fast = _CHECKED[key]

    def _time_cols(self, k: int) -> np.ndarray:
        if k >= self._time.shape[0]:
            hi = (k // self.BLOCK + 1) * self.BLOCK
            t = self.origin_s + self.epoch_s * np.arange(hi, dtype=np.int64)
            z = np.zeros(hi)
            self._time = state_from_aggregates(
                epoch_start=t, **{n: z for n in AGGREGATES[1:]}, config=self.config)[:, 12:16].astype(np.float64)
        return self._time[k]

    def _fast(self, agg: np.ndarray, time4: np.ndarray) -> np.ndarray:
        _state_pre(agg, self._logs, self._ratios, RATIO_CLIP)
        out = np.empty(N_FEATURES, np.float64)
        _state_post(agg, np.log10(self._logs), np.log1p(self._ratios), time4, RATIO_CLIP, LOG_COUNT_SCALE,
                    LOG_TIME_SCALE, out)
        return out.astype(np.float32)

    def __call__(self, agg: np.ndarray, k: int | None = None) -> np.ndarray:
        """State (float32, (N_FEATURES,)) of the aggregates `agg` of boundary `k` (default: from
        its epoch_start)."""
        if not self.fast or not np.isfinite(agg).all():  # (the mirror assumes the engine's finite values)
            return _definition_state(agg, self.config)[0]
        if k is None:
            k = int(agg[0] - self.origin_s) // self.epoch_s
        if k < 0 or self.origin_s + k * self.epoch_s != int(agg[0]):
            return _definition_state(agg, self.config)[0]  # off the grid: let the definition do it
        return self._fast(agg, self._time_cols(k))

    def _self_check(self, n: int = 512) -> bool:
        rng = np.random.default_rng(20240601)
        probes = _probe_aggregates(rng, n, self.origin_s, self.epoch_s)
        want = _definition_state(probes, self.config)
        got = np.stack([self._fast(p, self._time_cols(int(p[0] - self.origin_s) // self.epoch_s)) for p in probes])
        return bool(np.array_equal(got, want))


def epoch_reward(agg_start: np.ndarray, agg_end: np.ndarray, sums: np.ndarray, epoch_s: float,
                 config: ControllerRewardConfig, record: float) -> tuple[float, np.ndarray]:
    """Reward of one epoch (`transforms.reward.reward_from_aggregates`, same arithmetic, scalar)
    from the aggregates at its two boundaries, what it added up (`EPOCH_SUMS`) and the record of
    the largest wait up to its start; also its utilisation. For the engine's finite values (the
    definition also maps NaN to 0)."""
    cc, cg, cm = float(agg_start[4]), float(agg_start[5]), float(agg_start[6])
    u = [float(x) / (c * float(epoch_s)) if c > 0 else 0.0 for x, c in zip(sums[:3].tolist(), (cc, cg, cm), strict=True)]
    gpu_on = (cg > 0) if config.use_gpu is None else bool(config.use_gpu)
    if config.kind == "aligned":
        cost = (float(sums[3]) + config.lam * max(max(float(agg_end[12]), float(sums[4])) - float(record), 0.0)) / (
            config.scale_jobs * float(epoch_s))
        util = config.mu * (u[0] + (u[1] if gpu_on else 0.0))
        return -cost + (util if agg_start[7] > 0 else 0.0), np.array(u)
    if agg_end[7] <= 0:
        return float(config.empty_queue_reward), np.array(u)
    mem_on = (cm > 0) if config.use_mem is None else bool(config.use_mem)
    alpha = float(config.alpha) if config.alpha is not None else (config.alpha_gpu if cg > 0 else config.alpha_cpu)
    r = -float(agg_end[11]) / alpha + u[0] + (u[1] if gpu_on else 0.0) + (u[2] if mem_on else 0.0)
    return r, np.array(u)


def definition_reward(agg_start: np.ndarray, agg_end: np.ndarray, sums: np.ndarray, epoch_s: float,
                      config: ControllerRewardConfig, record: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Rewards and utilisation of epochs through the definitions (`utilisation`,
    `reward_from_aggregates`); rows of start and end aggregates, epoch sums and wait records."""
    agg_start, agg_end, sums = np.atleast_2d(agg_start), np.atleast_2d(agg_end), np.atleast_2d(sums)
    u = utilisation(sums[:, :3], agg_start[:, 4:7], epoch_s)
    r = reward_from_aggregates(
        queue_len_end=agg_end[:, 7], wait_mean_end_s=agg_end[:, 11], u_cpu=u[:, 0], u_gpu=u[:, 1], u_mem=u[:, 2],
        cap_gpu=agg_start[:, 5], cap_mem=agg_start[:, 6], queue_len_start=agg_start[:, 7],
        wait_record_s=record, wait_max_end_s=agg_end[:, 12], wait_accrued_s=sums[:, 3], wait_started_max_s=sums[:, 4],
        epoch_s=epoch_s, config=config)
    return r, u


_REWARD_CHECKED: dict[tuple, bool] = {}


def fast_reward_ok(config: ControllerRewardConfig, epoch_s: int) -> bool:
    """Whether `epoch_reward` equals the definition bit for bit on probe epochs (once per
    configuration and process; a mismatch is warned about and the env uses the definition)."""
    key = (config, int(epoch_s))
    if key not in _REWARD_CHECKED:
        rng = np.random.default_rng(20240602)
        start = _probe_aggregates(rng, 512, 0, int(epoch_s))
        end = _probe_aggregates(rng, 512, int(epoch_s), int(epoch_s))
        end[:, 4:7] = start[:, 4:7]
        sums = np.c_[start[:, 4:7] * epoch_s * rng.uniform(0, 1.1, (len(start), 3)),
                     start[:, 7] * epoch_s * rng.uniform(0, 1.2, len(start)),
                     start[:, 12] * rng.choice([0.0, 0.5, 2.0], len(start))]
        record = start[:, 12] * rng.choice([1.0, 1.0, 1.5, 3.0], len(start))
        want_r, want_u = definition_reward(start, end, sums, epoch_s, config, record)
        got = [epoch_reward(a, b, x, epoch_s, config, r) for a, b, x, r in zip(start, end, sums, record, strict=True)]
        ok = bool(np.array_equal([g[0] for g in got], want_r) and np.array_equal(np.stack([g[1] for g in got]), want_u))
        if not ok:
            warnings.warn("epoch_reward differs from transforms.reward on probe epochs: the env falls back to the "
                          "definition (slower)", RuntimeWarning, stacklevel=2)
        _REWARD_CHECKED[key] = ok
    return _REWARD_CHECKED[key]


__all__ = [
    "EpochReplay", "StateEncoder", "aggregates_dict", "aggregates_frame", "capacity_totals", "definition_reward",
    "epoch_reward", "fast_reward_ok",
]
