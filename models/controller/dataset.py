"""The MDP dataset (SPEC §7): logged tuples from every source, split strictly by time.

Sources are functions registered in `SOURCES` (`register_source`): 'as-run' is built in; the
replay rollouts of the simulator add 'replay'. A source returns a frame of `TUPLE_COLUMNS`
(most simply via `tuples_from_aggregates`), one row per epoch per trajectory. Tuples are stored
in `mdp_transitions` (sql/ddl/010_mdp.sql), exported to Parquet, and turned into a d3rlpy
`MDPDataset` for training. The training set of a window mixes in a share (default 10%) of tuples
from older windows, so a retrained policy does not forget earlier regimes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import duckdb
import numpy as np
import polars as pl
from metapilot.models.controller.asrun import asrun_tuples
from metapilot.models.controller.planner import PlannerConfig
from metapilot.models.controller.tuples import (  # noqa: F401  (re-exported: the dataset's vocabulary)
    KEY_COLS,
    NS_COLS,
    S_COLS,
    TRAJECTORY_KEYS,
    TUPLE_COLUMNS,
    TUPLE_SCHEMA,
    UTC,
    as_utc,
    conform_exprs,
    conform_tuples,
    state_matrix,
    state_spec,
    tuples_from_aggregates,
)
from metapilot.transforms.asrun_state import TimeLike, to_epoch_s
from metapilot.transforms.reward import ControllerRewardConfig
from metapilot.transforms.state import StateConfig
from metapilot.warehouse.jobs_store import last_submit
from metapilot.warehouse.mdp_store import load_transitions, replace_transitions

# --- sources ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TupleRequest:
    """What a source is asked for: the tuples of one window of one cluster (or partition)."""

    cluster: str
    partition: str | None
    window_from: datetime
    window_to: datetime
    state: StateConfig = StateConfig()
    reward: ControllerRewardConfig = ControllerRewardConfig()
    seed: int = 0
    planner: PlannerConfig = PlannerConfig()  # the teacher of the 'planner' source


class TupleSource(Protocol):
    def __call__(self, con: duckdb.DuckDBPyConnection, request: TupleRequest) -> pl.DataFrame: ...


def _asrun_source(con: duckdb.DuckDBPyConnection, request: TupleRequest) -> pl.DataFrame:
    return asrun_tuples(con, request.cluster, request.window_from, request.window_to,
                        partition=request.partition, state_config=request.state, reward_config=request.reward)


SOURCES: dict[str, TupleSource] = {"as-run": _asrun_source}
# Sources living in other packages: importing the module must call `register_source(name, fn)`.
SOURCE_MODULES: dict[str, str] = {"replay": "metapilot.models.controller.rollouts",
                                  "planner": "metapilot.models.controller.teacher"}


def register_source(name: str, source: TupleSource) -> None:
    """Make a tuple source available to `build_dataset` (e.g. 'replay' from the simulator)."""
    SOURCES[name] = source


def build_tuples(con: duckdb.DuckDBPyConnection, request: TupleRequest, sources: tuple[str, ...] = ("as-run",)) -> pl.DataFrame:
    """The tuples of every requested source for one window, conformed and checked."""
    frames = []
    for name in sources:
        if name not in SOURCES and name in SOURCE_MODULES:
            import importlib

            try:
                importlib.import_module(SOURCE_MODULES[name])
            except ModuleNotFoundError as e:
                raise KeyError(f"tuple source {name!r} is not available yet ({e.name} not found)") from None
        if name not in SOURCES:
            raise KeyError(f"unknown tuple source {name!r}; registered: {sorted(SOURCES)}")
        frames.append(conform_tuples(SOURCES[name](con, request)))
    out = pl.concat(frames) if frames else pl.DataFrame(schema=TUPLE_SCHEMA)
    lo, hi = as_utc(request.window_from), as_utc(request.window_to)
    bad = out.filter((pl.col("epoch_start") < lo) | (pl.col("epoch_start") >= hi)).height
    if bad:
        raise ValueError(f"{bad} tuples outside the window {lo} .. {hi}: a source leaked across the time split")
    return out


# --- stored tuples (warehouse/mdp_store.py) ------------------------------------------------------


def load_tuples(
    con: duckdb.DuckDBPyConnection,
    cluster: str,
    epochs_from: TimeLike | None,
    epochs_to: TimeLike | None,
    *,
    partition: str | None = None,
    spec: str | None = None,
    sources: tuple[str, ...] | None = None,
    window: tuple[datetime, datetime] | None = None,
) -> pl.DataFrame:
    """Stored tuples of a cluster whose epoch starts in `[epochs_from, epochs_to)` (either end open);
    with `window`, only those built for exactly that window."""
    return conform_tuples(load_transitions(
        con, cluster, partition or "*", window=(as_utc(window[0]), as_utc(window[1])) if window else None,
        epochs_from=as_utc(epochs_from) if epochs_from is not None else None,
        epochs_to=as_utc(epochs_to) if epochs_to is not None else None, spec=spec, sources=sources))


# --- splits ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetConfig:
    """Which sources, how the time split is made, and how much of the past is replayed."""

    state: StateConfig = StateConfig()
    reward: ControllerRewardConfig = ControllerRewardConfig()
    sources: tuple[str, ...] = ("as-run",)
    planner: PlannerConfig = PlannerConfig()  # the teacher of the 'planner' source (tuned on the training window)
    lookahead: bool = True  # with a tuning: the state gains the tuned planner's lookahead features
    older_fraction: float = 0.1  # share of the training set drawn from windows older than train_from
    checkpoint_share: float = 0.25  # default checkpoint window length, as a share of the train window
    seed: int = 0


@dataclass
class DatasetSplits:
    """Train (new window + older mix-in) and checkpoint tuples, never overlapping in time."""

    train: pl.DataFrame
    checkpoint: pl.DataFrame
    train_window: tuple[datetime, datetime]
    checkpoint_window: tuple[datetime, datetime] | None
    older_mixed: int = 0
    spec: str = ""
    notes: list[str] = field(default_factory=list)
    state: StateConfig = StateConfig()
    reward: ControllerRewardConfig = ControllerRewardConfig()
    planner: PlannerConfig = PlannerConfig()

    def summary(self) -> dict:
        def counts(df: pl.DataFrame) -> dict:
            if df.height == 0:
                return {"tuples": 0}
            acts = df["action"].value_counts().sort("action")
            return {
                "tuples": df.height,
                "by_source": {r[0]: r[1] for r in df.group_by("source").len().sort("source").iter_rows()},
                "actions": {self.state.menu[a]: c for a, c in acts.iter_rows()},
                "reward_mean": float(df["reward"].mean()),
            }

        return {
            "train_window": [t.isoformat() for t in self.train_window],
            "checkpoint_window": [t.isoformat() for t in self.checkpoint_window] if self.checkpoint_window else None,
            "train": counts(self.train),
            "checkpoint": counts(self.checkpoint),
            "older_mixed": self.older_mixed,
            "state_spec": self.spec,
            "notes": self.notes,
        }


def default_checkpoint_window(
    con: duckdb.DuckDBPyConnection, cluster: str, train_from: TimeLike, train_to: TimeLike, share: float, epoch_s: int
) -> tuple[datetime, datetime] | None:
    """The window right after training, `share` of its length, cut at the last submitted job."""
    t0, t1 = to_epoch_s(train_from), to_epoch_s(train_to)
    length = max(epoch_s, int(round((t1 - t0) * share / epoch_s)) * epoch_s)
    last = last_submit(con, cluster)
    end = t1 + length if last is None else min(t1 + length, to_epoch_s(last) + 1)
    if end - t1 < epoch_s:
        return None
    end = t1 + ((end - t1) // epoch_s) * epoch_s
    return as_utc(t1), as_utc(end)


def build_dataset(
    con: duckdb.DuckDBPyConnection,
    cluster: str,
    train_from: TimeLike,
    train_to: TimeLike,
    valid_from: TimeLike | None = None,
    valid_to: TimeLike | None = None,
    *,
    partition: str | None = None,
    config: DatasetConfig = DatasetConfig(),
    store: bool = True,
    reuse: bool = False,
) -> DatasetSplits:
    """Build (and store) the tuples of the train and checkpoint windows; mix in older tuples.

    The checkpoint window must start at or after the end of training (strict time split); by
    default it follows training for `checkpoint_share` of its length. With `reuse`, a window whose
    tuples of every source are already stored (same spec) is read back instead of rebuilt (tuples
    are deterministic: training right after `metapilot dataset` does not pay for them twice).
    """
    spec = state_spec(config.state, config.reward)
    notes: list[str] = []
    train_w = (as_utc(train_from), as_utc(train_to))
    if valid_from is None and valid_to is None:
        valid_w = default_checkpoint_window(con, cluster, train_from, train_to, config.checkpoint_share, config.state.epoch_s)
        if valid_w is None:
            notes.append("no data after the training window: the checkpoint falls back to the training tuples")
    else:
        if valid_from is None or valid_to is None:
            raise ValueError("give both --valid-from and --valid-to, or neither")
        valid_w = (as_utc(valid_from), as_utc(valid_to))
        if valid_w[0] < train_w[1]:
            raise ValueError(f"checkpoint window starts {valid_w[0]} before training ends {train_w[1]}: the split must be by time")

    def window(w: tuple[datetime, datetime]) -> pl.DataFrame:
        if reuse:
            stored = load_tuples(con, cluster, None, None, partition=partition, spec=spec, sources=config.sources,
                                 window=w)
            if stored.height and set(stored["source"].unique()) == set(config.sources):
                return stored
        req = TupleRequest(cluster, partition, w[0], w[1], config.state, config.reward, config.seed, config.planner)
        frame = build_tuples(con, req, config.sources)
        if store:
            replace_transitions(con, frame)
        return frame

    train_new = window(train_w)
    valid = window(valid_w) if valid_w else pl.DataFrame(schema=TUPLE_SCHEMA)

    older = load_tuples(con, cluster, None, train_w[0], partition=partition, spec=spec, sources=config.sources)
    n_old = 0
    if older.height and config.older_fraction > 0:
        want = int(round(config.older_fraction / (1.0 - config.older_fraction) * train_new.height))
        n_old = min(want, older.height)
        older = older.sample(n=n_old, seed=config.seed, shuffle=False)
    train = pl.concat([train_new, older]) if n_old else train_new
    return DatasetSplits(train, valid, train_w, valid_w, n_old, spec, notes, config.state, config.reward, config.planner)


def export_parquet(splits: DatasetSplits, folder: str | Path) -> dict[str, Path]:
    """Write train/checkpoint tuples (with a `split` column) and a JSON summary to `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, df in (("train", splits.train), ("checkpoint", splits.checkpoint)):
        p = folder / f"{name}.parquet"
        df.with_columns(pl.lit(name).alias("split")).write_parquet(p)
        out[name] = p
    (folder / "summary.json").write_text(json.dumps(splits.summary() | {"dataset_sha256": dataset_hash(splits.train)}, indent=2))
    out["summary"] = folder / "summary.json"
    return out


def dataset_hash(frame: pl.DataFrame) -> str:
    """SHA-256 of a tuple frame's content, independent of row order and storage format."""
    df = conform_tuples(frame).sort(["source", "behaviour_policy", "seed", "window_from", "epoch_start"], nulls_last=True)
    h = hashlib.sha256()
    for c in TUPLE_COLUMNS:
        s = df[c]
        if s.dtype in (pl.Utf8,):
            h.update("\x1f".join("" if v is None else v for v in s.to_list()).encode())
        elif isinstance(s.dtype, pl.List):  # the lookahead features: lengths, then the values
            h.update(s.list.len().fill_null(-1).to_numpy().tobytes())
            h.update(s.explode().fill_null(-1).to_numpy().tobytes())
        else:
            h.update(s.cast(pl.Int64 if s.dtype == UTC else s.dtype).fill_null(-1 if s.dtype != pl.Boolean else False).to_numpy().tobytes())
    return h.hexdigest()


# --- d3rlpy ------------------------------------------------------------------------------------


@dataclass
class Episodes:
    """Tuples laid out as d3rlpy episodes: observations with one extra closing row per episode."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    timeouts: np.ndarray
    n_transitions: int
    n_episodes: int


def to_episodes(frame: pl.DataFrame) -> Episodes:
    """Chain tuples into episodes: consecutive epochs of one trajectory whose ns == next s.

    d3rlpy derives next observations from the following row, so each episode gets its closing
    state `ns` as an extra row (dummy action/reward, timeout flag); a terminal tuple ends its
    episode without one. Any tuple set works: a lone tuple is a one-transition episode.
    """
    df = conform_tuples(frame).sort(list(TRAJECTORY_KEYS) + ["epoch_start"], nulls_last=True)
    n = df.height
    if n == 0:
        raise ValueError("no tuples")
    s = state_matrix(df)
    ns = state_matrix(df, next_state=True)
    a = df["action"].to_numpy().astype(np.int64)
    r = df["reward"].to_numpy().astype(np.float32)
    term = df["terminal"].to_numpy().astype(bool)
    key = df.select(pl.concat_str([pl.col(k).cast(pl.Utf8).fill_null("~") for k in TRAJECTORY_KEYS], separator="|")).to_series().to_numpy()
    t_us = df["epoch_start"].cast(pl.Int64).to_numpy()
    step = df["epoch_s"].to_numpy() * 1_000_000
    cont = np.zeros(n, dtype=bool)
    if n > 1:
        cont[:-1] = (key[:-1] == key[1:]) & (t_us[1:] - t_us[:-1] == step[:-1]) & np.all(ns[:-1] == s[1:], axis=1) & ~term[:-1]
    ends = ~cont  # the last tuple of each episode
    closing = ends & ~term  # episodes that need their closing state appended
    reps = np.where(closing, 2, 1)
    idx = np.repeat(np.arange(n), reps)
    is_extra = np.zeros(len(idx), dtype=bool)
    is_extra[np.cumsum(reps)[closing] - 1] = True
    obs = np.where(is_extra[:, None], ns[idx], s[idx]).astype(np.float32)
    acts = np.where(is_extra, 0, a[idx])
    rews = np.where(is_extra, 0.0, r[idx]).astype(np.float32)
    terminals = (~is_extra & term[idx] & ends[idx]).astype(np.float32)
    timeouts = is_extra.astype(np.float32)
    return Episodes(obs, acts, rews, terminals, timeouts, n, int(ends.sum()))


def to_mdp_dataset(frame: pl.DataFrame, n_actions: int, fast_sampling: bool = True):
    """A d3rlpy `MDPDataset` of the tuples (discrete actions, `n_actions` of them: the menu's size).

    With `fast_sampling`, mini-batches are drawn uniformly over tuples with numpy fancy indexing
    instead of d3rlpy's per-transition Python loop (same distribution, ~3 ms less per step on
    2 cores; the global numpy RNG that `d3rlpy.seed` sets drives it).
    """
    from metapilot.models.controller.d3 import import_d3rlpy

    import_d3rlpy()
    from d3rlpy.constants import ActionSpace
    from d3rlpy.dataset import MDPDataset, TransitionMiniBatch

    ep = to_episodes(frame)
    kwargs = dict(
        observations=ep.observations, actions=ep.actions, rewards=ep.rewards,
        terminals=ep.terminals, timeouts=ep.timeouts,
        action_space=ActionSpace.DISCRETE, action_size=int(n_actions),
    )
    if not fast_sampling:
        return MDPDataset(**kwargs)

    df = conform_tuples(frame).sort(list(TRAJECTORY_KEYS) + ["epoch_start"], nulls_last=True)
    n = df.height
    obs = state_matrix(df)
    nobs = state_matrix(df, next_state=True)
    act = df["action"].to_numpy().astype(np.float32).reshape(-1, 1)
    rew = df["reward"].to_numpy().astype(np.float32).reshape(-1, 1)
    term = df["terminal"].to_numpy().astype(np.float32).reshape(-1, 1)
    # next action: the following tuple's, where it continues the same episode (as d3rlpy does)
    real = ep.timeouts == 0
    nxt_act = np.zeros((n, 1), dtype=np.float32)
    follows = np.r_[ep.timeouts[1:] == 0, False] & np.r_[ep.terminals == 0]
    nxt_act[:, 0] = np.where(follows, np.r_[ep.actions[1:], 0], 0)[real].astype(np.float32)
    ones = np.ones((n, 1), dtype=np.float32)

    class TupleDataset(MDPDataset):
        def sample_transition_batch(self, batch_size: int) -> TransitionMiniBatch:
            idx = np.random.randint(n, size=batch_size)
            return TransitionMiniBatch(
                observations=obs[idx], actions=act[idx], rewards=rew[idx], next_observations=nobs[idx],
                next_actions=nxt_act[idx], terminals=term[idx], intervals=ones[idx], transitions=[],
            )

    return TupleDataset(**kwargs)


def observations(frame: pl.DataFrame) -> np.ndarray:
    """The states of a tuple frame, (n, n_features) float32 (lookahead features included)."""
    return state_matrix(frame)


def window_days(w: tuple[datetime, datetime]) -> float:
    return (w[1] - w[0]) / timedelta(days=1)
