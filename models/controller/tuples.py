"""One row per epoch of a trajectory (SPEC §7): the tuple schema, and tuples from the aggregates
at epoch boundaries. Every source (as-run, replay rollouts, the planner) builds its rows here."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import numpy as np
import polars as pl
from metapilot.transforms.asrun_state import TimeLike, to_epoch_s
from metapilot.transforms.reward import RewardConfig, reward_from_frame
from metapilot.transforms.state import (
    FEATURE_NAMES,
    FEATURES,
    StateConfig,
    state_from_frame,
)

UTC = pl.Datetime("us", "UTC")
S_COLS: tuple[str, ...] = tuple(f"s_{n}" for n in FEATURE_NAMES)
NS_COLS: tuple[str, ...] = tuple(f"ns_{n}" for n in FEATURE_NAMES)
KEY_COLS: tuple[str, ...] = ("cluster", "partition", "window_from", "window_to", "epoch_start", "epoch_s",
                             "source", "behaviour_policy", "seed", "state_spec")
TUPLE_SCHEMA: dict[str, pl.DataType] = (
    {"cluster": pl.Utf8, "partition": pl.Utf8, "window_from": UTC, "window_to": UTC, "epoch_start": UTC,
     "epoch_s": pl.Int64, "source": pl.Utf8, "behaviour_policy": pl.Utf8, "seed": pl.Int64, "state_spec": pl.Utf8}
    | {c: pl.Float32 for c in S_COLS}
    | {"action": pl.Int32, "reward": pl.Float64}
    | {c: pl.Float32 for c in NS_COLS}
    | {"terminal": pl.Boolean}
)
TUPLE_COLUMNS: tuple[str, ...] = tuple(TUPLE_SCHEMA)
TRAJECTORY_KEYS: tuple[str, ...] = ("cluster", "partition", "window_from", "source", "behaviour_policy", "seed")


def state_spec(state_config: StateConfig, reward_config: RewardConfig) -> str:
    """Short hash of what a tuple's numbers mean: features, their normalisation, configs, actions."""
    doc = {
        "features": [[f.name, f.normalisation] for f in FEATURES],
        "state": state_config.to_dict(),
        "reward": reward_config.to_dict(),
        "actions": list(state_config.menu),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def as_utc(t: TimeLike) -> datetime:
    """A time as an aware UTC datetime (whole seconds)."""
    return datetime.fromtimestamp(to_epoch_s(t), tz=timezone.utc)


def tuples_from_aggregates(
    aggregates: pl.DataFrame,
    actions: np.ndarray,
    *,
    cluster: str,
    partition: str | None,
    window_from: TimeLike,
    window_to: TimeLike,
    source: str,
    behaviour_policy: str,
    seed: int | None,
    state_config: StateConfig = StateConfig(),
    reward_config: RewardConfig = RewardConfig(),
    terminal_last: bool = False,
) -> pl.DataFrame:
    """Tuples of one trajectory from its aggregates at n + 1 consecutive boundaries and n actions.

    Row k: s = state(boundary k), action k, reward of epoch k (queue at boundary k + 1, utilisation
    `u_*` of row k), ns = state(boundary k + 1). The env's rollouts call this with the aggregates
    they track, exactly as the as-run path does.
    """
    n = aggregates.height - 1
    actions = np.asarray(actions, dtype=np.int64)
    if n < 1 or actions.shape != (n,):
        raise ValueError(f"need n + 1 boundaries for n actions: got {aggregates.height} boundaries, {actions.shape} actions")
    menu = state_config.menu
    if actions.min() < 0 or actions.max() >= len(menu):
        raise ValueError(f"actions must be indices into the menu {menu}")
    states = state_from_frame(aggregates, state_config)
    cur = aggregates.head(n)
    rewards = reward_from_frame(aggregates, reward_config)
    terminal = np.zeros(n, dtype=bool)
    terminal[-1] = terminal_last
    frame = pl.DataFrame(
        {
            "epoch_start": (cur["epoch_start"].to_numpy().astype(np.int64) * 1_000_000),
            **{c: states[:n, i] for i, c in enumerate(S_COLS)},
            "action": actions.astype(np.int32),
            "reward": rewards,
            **{c: states[1:, i] for i, c in enumerate(NS_COLS)},
            "terminal": terminal,
        }
    ).with_columns(pl.col("epoch_start").cast(UTC))
    return frame.with_columns(
        pl.lit(cluster).alias("cluster"),
        pl.lit(partition or "*").alias("partition"),
        pl.lit(as_utc(window_from)).cast(UTC).alias("window_from"),
        pl.lit(as_utc(window_to)).cast(UTC).alias("window_to"),
        pl.lit(int(state_config.epoch_s)).cast(pl.Int64).alias("epoch_s"),
        pl.lit(source).alias("source"),
        pl.lit(behaviour_policy).alias("behaviour_policy"),
        pl.lit(seed, dtype=pl.Int64).alias("seed"),
        pl.lit(state_spec(state_config, reward_config)).alias("state_spec"),
    ).select(conform_exprs())


def conform_exprs() -> list[pl.Expr]:
    return [pl.col(c).cast(t) for c, t in TUPLE_SCHEMA.items()]


def conform_tuples(frame: pl.DataFrame) -> pl.DataFrame:
    """Check a source's frame has every tuple column, and cast/order it."""
    missing = [c for c in TUPLE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"tuple frame lacks columns {missing}")
    return frame.select(conform_exprs())
