"""The controller's state vector (SPEC §7), defined once for the as-run history and the simulator.

Both paths reduce the cluster at an epoch boundary `t` to the same per-epoch *aggregates*
(`AGGREGATES`) and call `state_from_aggregates`, so a feature cannot mean one thing in the
logged tuples and another in the replay environment. The normalisation of every feature is
part of its definition (`FEATURES`) and is written into the policy's model card.

Aggregates at a boundary `t` (one value per epoch; arrays, or scalars for a single epoch):

- `epoch_start`: `t`, integer seconds since the Unix epoch (UTC).
- `used_cpu`, `used_gpu`, `used_mem`: cores, GPUs, MiB held by running jobs at `t`
  (a job runs at `t` when `start <= t < end`).
- `cap_cpu`, `cap_gpu`, `cap_mem`: the partition's capacity at `t` (0 where unknown/absent).
- `queue_len`: jobs queued at `t` (`submit <= t < start`, or never started and not yet gone; a job that
  ran at a time the log does not give, as SWF wait -1, is never counted: its wait is unknown).
- `queued_cpu`, `queued_gpu`, `queued_mem`: the queued jobs' summed requests.
- `wait_mean_s`, `wait_max_s`: mean and max of `t - submit` over the queued jobs (0 if none).
- `long_tail_share`: share of queued jobs with `t - submit > StateConfig.long_tail_s`.
- `req_mean_s`: mean requested time (the user's estimate) of the queued jobs (0 if none).
- `arrivals`: jobs submitted in `[t - epoch_s, t)`.

A job's size is the larger of its allocated and requested amounts where both are known (SPEC §6).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

import numpy as np

# Per-epoch inputs of `state_from_aggregates`, in the order the SQL and the simulator produce them.
AGGREGATES: tuple[str, ...] = (
    "epoch_start",
    "used_cpu", "used_gpu", "used_mem",
    "cap_cpu", "cap_gpu", "cap_mem",
    "queue_len", "queued_cpu", "queued_gpu", "queued_mem",
    "wait_mean_s", "wait_max_s", "long_tail_share", "req_mean_s",
    "arrivals",
)

RATIO_CLIP = 4.0  # used/queued fractions above this are clipped (inconsistent logs, huge backlogs)
LOG_TIME_SCALE = 6.0  # log10(1 + seconds) / 6: 1.0 at ~11.6 days
LOG_COUNT_SCALE = 3.0  # log10(1 + count) / 3: 1.0 at 999 jobs


@dataclass(frozen=True)
class Feature:
    """One state feature: its name, what it measures and how it is normalised."""

    name: str
    meaning: str
    normalisation: str


FEATURES: tuple[Feature, ...] = (
    Feature("used_cpu", "cores held by running jobs / core capacity", f"ratio, clipped to [0, {RATIO_CLIP:g}]"),
    Feature("used_gpu", "GPUs held by running jobs / GPU capacity (0 without GPUs)", f"ratio, clipped to [0, {RATIO_CLIP:g}]"),
    Feature("used_mem", "memory held by running jobs / memory capacity (0 if unknown)", f"ratio, clipped to [0, {RATIO_CLIP:g}]"),
    Feature("queue_len", "jobs in the queue", f"log10(1 + n) / {LOG_COUNT_SCALE:g}"),
    Feature("queued_cpu", "cores requested by queued jobs / core capacity", "ln(1 + ratio)"),
    Feature("queued_gpu", "GPUs requested by queued jobs / GPU capacity (0 without GPUs)", "ln(1 + ratio)"),
    Feature("queued_mem", "memory requested by queued jobs / memory capacity (0 if unknown)", "ln(1 + ratio)"),
    Feature("wait_mean", "mean current wait of queued jobs (s)", f"log10(1 + s) / {LOG_TIME_SCALE:g}"),
    Feature("wait_max", "max current wait of queued jobs (s)", f"log10(1 + s) / {LOG_TIME_SCALE:g}"),
    Feature("long_tail_share", "share of queued jobs waiting longer than long_tail_s", "fraction in [0, 1]"),
    Feature("req_mean", "mean requested time of queued jobs (s)", f"log10(1 + s) / {LOG_TIME_SCALE:g}"),
    Feature("arrivals", "jobs submitted during the previous epoch", f"log10(1 + n) / {LOG_COUNT_SCALE:g}"),
    Feature("hour_sin", "time of day at the epoch start, local time", "sin(2 pi seconds_of_day / 86400)"),
    Feature("hour_cos", "time of day at the epoch start, local time", "cos(2 pi seconds_of_day / 86400)"),
    Feature("dow_sin", "day of week at the epoch start (Monday = 0), local time", "sin(2 pi day / 7)"),
    Feature("dow_cos", "day of week at the epoch start (Monday = 0), local time", "cos(2 pi day / 7)"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in FEATURES)
N_FEATURES = len(FEATURES)


# The default objective menu (SPEC §7; `models.controller.objectives` defines each name).
DEFAULT_MENU: tuple[str, ...] = ("SJF", "SAF", "F1", "WFP3", "FCFS")


@dataclass(frozen=True)
class StateConfig:
    """The decision problem: how epochs are cut, what counts as a long-tail wait, and the menu of
    objectives an action picks from (so a tuple, a policy and its card all say what action i is).

    `timezone` is used only for the hour-of-day / day-of-week features: "UTC", a fixed offset
    ("+01:00") or an IANA name ("Europe/Stockholm"); users' daily rhythm follows local time.
    """

    epoch_s: int = 3600
    long_tail_s: int = 86_400
    timezone: str = "UTC"
    menu: tuple[str, ...] = DEFAULT_MENU
    # Lookahead features (SPEC §7 planner costs): each objective's cost over the next
    # `lookahead_h` hours (`A + lookahead_lam * G`, waits weighed by `lookahead_slowdown`), from a
    # rollout of the jobs queued and running at the boundary. 0 h: none (the 16 base features).
    lookahead_h: float = 0.0
    lookahead_lam: float = 0.0
    lookahead_slowdown: float = 0.0
    lookahead_forecast_h: float = 0.0  # > 0: the rollout also sees the arrivals forecast by persistence

    def __post_init__(self) -> None:
        object.__setattr__(self, "menu", tuple(self.menu))

    def to_dict(self) -> dict:
        return asdict(self)


LOOKAHEAD_SCALE = 4.0  # ln(1 + extra epochs' worth of waiting) / 4: 1.0 at ~54 job-epochs more
LOOKAHEAD_MIN_SCALE = 10.0


def lookahead_feature_list(config: StateConfig) -> tuple[Feature, ...]:
    """The lookahead features of a configuration: one per objective of the menu, and the best cost."""
    if config.lookahead_h <= 0:
        return ()
    arrivals = (f"the jobs submitted {config.lookahead_forecast_h:g} h earlier arriving again"
                if config.lookahead_forecast_h > 0 else "no arrivals")
    how = (f"rollout of the queued and running jobs over {config.lookahead_h:g} h (requested times, {arrivals}), "
           f"cost A + {config.lookahead_lam:g} G, waits weighed by slowdown {config.lookahead_slowdown:g}")
    per = tuple(Feature(f"la_{name}", f"how much more the {name} objective costs than the best one: {how}",
                        f"ln(1 + (cost - min cost) / epoch_s) / {LOOKAHEAD_SCALE:g}") for name in config.menu)
    return per + (Feature("la_min", f"the best objective's cost: {how}",
                          f"ln(1 + min cost / epoch_s) / {LOOKAHEAD_MIN_SCALE:g}"),)


def state_features(config: StateConfig) -> tuple[Feature, ...]:
    """Every feature of the state vector of a configuration: FEATURES, then the lookahead ones."""
    return FEATURES + lookahead_feature_list(config)


def n_features(config: StateConfig) -> int:
    return len(state_features(config))


def lookahead_features(costs: np.ndarray, epoch_s: float) -> np.ndarray:
    """The lookahead features (`lookahead_feature_list` order) of rollout costs `(n, n_objectives)`
    in job-seconds: pure, the same for the as-run history, the replay and the advice."""
    c = np.clip(np.nan_to_num(np.atleast_2d(np.asarray(costs, dtype=np.float64))), 0.0, None)
    lo = c.min(axis=1, keepdims=True)
    rel = np.log1p((c - lo) / float(epoch_s)) / LOOKAHEAD_SCALE
    return np.concatenate([rel, np.log1p(lo / float(epoch_s)) / LOOKAHEAD_MIN_SCALE], axis=1).astype(np.float32)


def feature_table(config: StateConfig | None = None) -> list[dict]:
    """The state's features as plain dicts (index, name, meaning, normalisation): for the model card."""
    feats = FEATURES if config is None else state_features(config)
    return [{"index": i, **asdict(f)} for i, f in enumerate(feats)]


_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")


def local_seconds(epoch_start: np.ndarray, timezone: str = "UTC") -> np.ndarray:
    """Seconds since 1970-01-01 00:00 *local* wall-clock time for UTC epoch seconds."""
    ts = np.asarray(epoch_start, dtype=np.int64)
    if timezone in ("UTC", "Z", "utc"):
        return ts
    m = _OFFSET.match(timezone)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return ts + sign * (int(m.group(2)) * 3600 + int(m.group(3)) * 60)
    import polars as pl  # IANA zones with DST: let polars do the calendar

    s = pl.Series("t", ts * 1_000_000).cast(pl.Datetime("us", "UTC"))
    local = s.dt.convert_time_zone(timezone).dt.replace_time_zone(None).cast(pl.Int64)
    return (local.to_numpy() // 1_000_000).astype(np.int64)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.nan_to_num(np.asarray(num, dtype=np.float64))
    den = np.nan_to_num(np.asarray(den, dtype=np.float64))
    with np.errstate(over="ignore"):
        out = np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)
    return np.clip(out, 0.0, RATIO_CLIP)


def _log_time(seconds: np.ndarray) -> np.ndarray:
    s = np.clip(np.nan_to_num(np.asarray(seconds, dtype=np.float64)), 0.0, None)
    return np.log10(1.0 + s) / LOG_TIME_SCALE


def _log_count(n: np.ndarray) -> np.ndarray:
    n = np.clip(np.nan_to_num(np.asarray(n, dtype=np.float64)), 0.0, None)
    return np.log10(1.0 + n) / LOG_COUNT_SCALE


def state_from_aggregates(
    *,
    epoch_start: np.ndarray | int,
    used_cpu: np.ndarray | float,
    used_gpu: np.ndarray | float,
    used_mem: np.ndarray | float,
    cap_cpu: np.ndarray | float,
    cap_gpu: np.ndarray | float,
    cap_mem: np.ndarray | float,
    queue_len: np.ndarray | float,
    queued_cpu: np.ndarray | float,
    queued_gpu: np.ndarray | float,
    queued_mem: np.ndarray | float,
    wait_mean_s: np.ndarray | float,
    wait_max_s: np.ndarray | float,
    long_tail_share: np.ndarray | float,
    req_mean_s: np.ndarray | float,
    arrivals: np.ndarray | float,
    config: StateConfig = StateConfig(),
) -> np.ndarray:
    """The normalised state matrix, shape `(n_epochs, N_FEATURES)`, float32, columns = FEATURES.

    Pure and vectorised: the as-run path passes whole columns, the simulator's env one epoch's
    scalars (broadcast to one row). NaN/None inputs count as 0 (an empty queue has no waits).
    """
    t = np.atleast_1d(np.asarray(epoch_start, dtype=np.int64))
    n = t.shape[0]

    def col(x: np.ndarray | float) -> np.ndarray:
        a = np.atleast_1d(np.asarray(x, dtype=np.float64))
        return np.broadcast_to(a, (n,)) if a.shape[0] == 1 else a

    local = local_seconds(t, config.timezone)
    sod = np.mod(local, 86_400).astype(np.float64)
    dow = np.mod(np.floor_divide(local, 86_400) + 3, 7).astype(np.float64)  # 1970-01-01 was a Thursday
    day_angle = 2.0 * math.pi * sod / 86_400.0
    week_angle = 2.0 * math.pi * dow / 7.0

    qn = col(queue_len)
    cols = [
        _ratio(col(used_cpu), col(cap_cpu)),
        _ratio(col(used_gpu), col(cap_gpu)),
        _ratio(col(used_mem), col(cap_mem)),
        _log_count(qn),
        np.log1p(_ratio(col(queued_cpu), col(cap_cpu))),
        np.log1p(_ratio(col(queued_gpu), col(cap_gpu))),
        np.log1p(_ratio(col(queued_mem), col(cap_mem))),
        _log_time(col(wait_mean_s)),
        _log_time(col(wait_max_s)),
        np.clip(np.nan_to_num(col(long_tail_share)), 0.0, 1.0),
        _log_time(col(req_mean_s)),
        _log_count(col(arrivals)),
        np.sin(day_angle),
        np.cos(day_angle),
        np.sin(week_angle),
        np.cos(week_angle),
    ]
    out = np.stack(cols, axis=1).astype(np.float32)
    # An empty queue has no waits, demand or requested time, whatever the caller passed.
    empty = np.nan_to_num(qn) <= 0
    if empty.any():
        out[np.ix_(empty, [3, 4, 5, 6, 7, 8, 9, 10])] = 0.0
    return out


def state_from_frame(frame, config: StateConfig = StateConfig()) -> np.ndarray:
    """`state_from_aggregates` on a polars frame (or dict of arrays) with the AGGREGATES columns."""
    missing = [c for c in AGGREGATES if c not in frame.columns] if hasattr(frame, "columns") else [
        c for c in AGGREGATES if c not in frame
    ]
    if missing:
        raise KeyError(f"aggregates missing: {missing}")
    kwargs = {}
    for c in AGGREGATES:
        v = frame[c]
        kwargs[c] = v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v)
    return state_from_aggregates(**kwargs, config=config)
