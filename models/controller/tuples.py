"""One row per epoch of a trajectory (SPEC §7): the tuple schema, and tuples from the aggregates
at epoch boundaries. Every source (as-run, replay rollouts, the planner) builds its rows here."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import numpy as np
import polars as pl
from metapilot.transforms.asrun_state import TimeLike, to_epoch_s
from metapilot.transforms.reward import ControllerRewardConfig, reward_from_frame
from metapilot.transforms.state import (
    FEATURE_NAMES,
    StateConfig,
    lookahead_features,
    state_features,
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
    | {"s_lookahead": pl.List(pl.Float32)}
    | {"action": pl.Int32, "reward": pl.Float64}
    | {c: pl.Float32 for c in NS_COLS}
    | {"ns_lookahead": pl.List(pl.Float32)}
    | {"terminal": pl.Boolean}
)
LOOKAHEAD_COLS: tuple[str, str] = ("s_lookahead", "ns_lookahead")  # the lookahead features (empty without)
TUPLE_COLUMNS: tuple[str, ...] = tuple(TUPLE_SCHEMA)
TRAJECTORY_KEYS: tuple[str, ...] = ("cluster", "partition", "window_from", "source", "behaviour_policy", "seed")


def state_spec(state_config: StateConfig, reward_config: ControllerRewardConfig) -> str:
    """Short hash of what a tuple's numbers mean: features, their normalisation, configs, actions."""
    doc = {
        "features": [[f.name, f.normalisation] for f in state_features(state_config)],
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
    reward_config: ControllerRewardConfig = ControllerRewardConfig(),
    terminal_last: bool = False,
    lookahead_costs: np.ndarray | None = None,
) -> pl.DataFrame:
    """Tuples of one trajectory from its aggregates at n + 1 consecutive boundaries and n actions.

    Row k: s = state(boundary k), action k, reward of epoch k (queue at boundary k + 1, utilisation
    `u_*` of row k), ns = state(boundary k + 1). The env's rollouts call this with the aggregates
    they track, exactly as the as-run path does. `lookahead_costs`: the n + 1 boundaries' rollout
    costs per objective, required when the state config has lookahead features.
    """
    n = aggregates.height - 1
    actions = np.asarray(actions, dtype=np.int64)
    if n < 1 or actions.shape != (n,):
        raise ValueError(f"need n + 1 boundaries for n actions: got {aggregates.height} boundaries, {actions.shape} actions")
    menu = state_config.menu
    if actions.min() < 0 or actions.max() >= len(menu):
        raise ValueError(f"actions must be indices into the menu {menu}")
    states = state_from_frame(aggregates, state_config)
    if state_config.lookahead_h > 0:
        if lookahead_costs is None or np.shape(lookahead_costs) != (n + 1, len(menu)):
            raise ValueError(f"the state has lookahead features: need ({n + 1}, {len(menu)}) rollout costs, "
                             f"got {None if lookahead_costs is None else np.shape(lookahead_costs)}")
        la = lookahead_features(lookahead_costs, state_config.epoch_s)
    else:
        la = np.zeros((n + 1, 0), np.float32)
    cur = aggregates.head(n)
    rewards = reward_from_frame(aggregates, reward_config)
    terminal = np.zeros(n, dtype=bool)
    terminal[-1] = terminal_last
    frame = pl.DataFrame(
        {
            "epoch_start": (cur["epoch_start"].to_numpy().astype(np.int64) * 1_000_000),
            **{c: states[:n, i] for i, c in enumerate(S_COLS)},
            "s_lookahead": list(la[:n]),
            "action": actions.astype(np.int32),
            "reward": rewards,
            **{c: states[1:, i] for i, c in enumerate(NS_COLS)},
            "ns_lookahead": list(la[1:]),
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


def state_matrix(frame: pl.DataFrame, next_state: bool = False) -> np.ndarray:
    """The full states of tuples `(n, n_features)` float32: the base features, then the lookahead ones."""
    cols, la = (NS_COLS, "ns_lookahead") if next_state else (S_COLS, "s_lookahead")
    base = frame.select(cols).to_numpy().astype(np.float32)
    if la not in frame.columns or frame.height == 0:
        return base
    widths = frame[la].list.len()
    w = int(widths.max() or 0)
    if w == 0:
        return base
    if int(widths.min()) != w:
        raise ValueError("tuples with different lookahead widths are mixed (another state configuration)")
    extra = np.asarray(frame[la].explode().to_numpy(), dtype=np.float32).reshape(-1, w)
    return np.concatenate([base, extra], axis=1)


def conform_exprs() -> list[pl.Expr]:
    return [pl.col(c).cast(t) for c, t in TUPLE_SCHEMA.items()]


def conform_tuples(frame: pl.DataFrame) -> pl.DataFrame:
    """Check a source's frame has every tuple column, and cast/order it."""
    missing = [c for c in TUPLE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"tuple frame lacks columns {missing}")
    return frame.select(conform_exprs())
