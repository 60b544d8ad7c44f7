"""Advice from a published policy: the recommended objective for a moment or a given state.

The hot path: verified TorchScript policy (loaded once), the state of one epoch boundary from the
warehouse (`warehouse.asrun_queries.aggregates_at`, the same SQL as the training tuples), one
forward pass. No d3rlpy, no Prefect.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import duckdb
import numpy as np
from metapilot.models.controller.artifact import (
    ScriptedPolicy,
    find_policy,
    load_policy,
)
from metapilot.models.controller.objectives import Menu
from metapilot.transforms.state import (
    AGGREGATES,
    lookahead_features,
    state_from_aggregates,
)


@dataclass
class Advice:
    policy_id: str
    cluster: str
    partition: str
    at: str | None
    action: int
    objective: str
    meaning: str
    q_values: dict[str, float]
    state: dict[str, float]
    latency_ms: dict[str, float]

    def to_dict(self) -> dict:
        return asdict(self)


def _refuse_non_finite(doc: object, where: str = "") -> None:
    """JSON as Python reads it admits NaN and +-Infinity: a state made of them gives an answer from
    nothing (and `--format json` would print non-JSON), so the field is named instead."""
    import math

    if isinstance(doc, dict):
        for k, v in doc.items():
            _refuse_non_finite(v, f"{where}.{k}" if where else str(k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            _refuse_non_finite(v, f"{where}[{i}]")
    elif isinstance(doc, float) and not math.isfinite(doc):
        raise ValueError(f"state field {where or 'value'} is {doc}: every number of a state must be finite")


def state_from_json(doc: dict | list, policy: ScriptedPolicy) -> np.ndarray:
    """A state from JSON: a list of the policy's n_features numbers, {"features": {name: value}},
    or {"aggregates": {name: value}} (turned into features by transforms.state; a policy with
    lookahead features also needs "lookahead_costs": one rollout cost per objective, job-seconds)."""
    names = policy.feature_names
    _refuse_non_finite(doc)
    if isinstance(doc, list) or (isinstance(doc, dict) and "state" in doc):
        vec = np.asarray(doc if isinstance(doc, list) else doc["state"], dtype=np.float32)
        if vec.shape != (len(names),):
            raise ValueError(f"a state of this policy has {len(names)} numbers in this order: {', '.join(names)}")
        return vec.reshape(1, -1)
    if "features" in doc:
        missing = [n for n in names if n not in doc["features"]]
        if missing:
            raise ValueError(f"features missing: {missing}")
        return np.asarray([[doc["features"][n] for n in names]], dtype=np.float32)
    if "aggregates" in doc:
        agg = doc["aggregates"]
        missing = [n for n in AGGREGATES if n not in agg]
        if missing:
            raise ValueError(f"aggregates missing: {missing}")
        s = state_from_aggregates(**{k: agg[k] for k in AGGREGATES}, config=policy.state_config)
        sc = policy.state_config
        if sc.lookahead_h > 0:
            costs = doc.get("lookahead_costs")
            if costs is None or len(costs) != len(sc.menu):
                raise ValueError(f"this policy also reads lookahead features: give \"lookahead_costs\", one "
                                 f"rollout cost per objective ({', '.join(sc.menu)}), or ask for a moment (--at)")
            s = np.concatenate([s, lookahead_features(np.asarray(costs, dtype=np.float64), sc.epoch_s)], axis=1)
        return s
    raise ValueError('expected a list of numbers, {"features": {...}} or {"aggregates": {...}}')


class Advisor:
    """A policy loaded once (verified), answering many questions (warm process)."""

    def __init__(self, policy_id: str, db: str | Path | None = None, expected_sums_sha256: str | None = None) -> None:
        self.policy: ScriptedPolicy = load_policy(find_policy(policy_id, db), expected_sums_sha256)
        self.card = self.policy.card
        self.cluster: str = self.card["cluster"]
        self.partition: str = self.card["partition"]
        self.menu = Menu.of(self.policy.state_config)

    def state_at(self, con, at) -> np.ndarray:
        """The state of the policy's cluster at `at` (the as-run aggregates of that boundary)."""
        from metapilot.models.controller.lookahead import asrun_states
        from metapilot.transforms.asrun_state import to_epoch_s
        from metapilot.warehouse.asrun_queries import aggregates_at

        part = None if self.partition == "*" else self.partition
        sc = self.policy.state_config
        agg = aggregates_at(con, self.cluster, np.array([to_epoch_s(at)]), partition=part, config=sc)
        return asrun_states(con, self.cluster, agg, partition=part, state=sc)

    def decide(self, state: np.ndarray, at: str | None = None, state_ms: float = 0.0) -> Advice:
        t0 = time.perf_counter()
        q = self.policy.q_values(state)[0]
        decision_ms = (time.perf_counter() - t0) * 1e3
        a = int(np.argmax(q))
        return Advice(
            policy_id=self.policy.policy_id, cluster=self.cluster, partition=self.partition, at=at,
            action=a, objective=self.menu.names[a], meaning=self.menu.meanings()[a],
            q_values={self.menu.names[i]: float(v) for i, v in enumerate(q)},
            state={n: float(v) for n, v in zip(self.policy.feature_names, np.asarray(state).reshape(-1))},
            latency_ms={"state": state_ms, "decision": decision_ms, "total": state_ms + decision_ms},
        )

    def advise_at(self, con, at) -> Advice:
        t0 = time.perf_counter()
        s = self.state_at(con, at)
        state_ms = (time.perf_counter() - t0) * 1e3
        return self.decide(s, at=str(at), state_ms=state_ms)


def score_recommendations(con: duckdb.DuckDBPyConnection, policy_id: str, week: str, *,
                          db: str | Path | None = None) -> int:
    """Score every epoch of the week with a published policy on the observed (as-run) state and
    store the recommended objectives (`recommendations`); returns the rows written. The loader
    verifies the artifact's checksums against the `policies` row first."""
    from datetime import timedelta

    import polars as pl
    from metapilot.models.controller.lookahead import asrun_states
    from metapilot.ground.weeks import parse_week
    from metapilot.warehouse.asrun_queries import asrun_aggregates
    from metapilot.warehouse.policy_store import policy_row
    from metapilot.warehouse.heldout_store import store_recommendations

    row = policy_row(con, policy_id)
    folder = Path(row["path"]) if row.get("path") and Path(row["path"]).is_dir() else find_policy(policy_id, db)
    policy = load_policy(folder, row.get("sums_sha256"))
    cfg = policy.state_config
    start = parse_week(week)
    partition = None if row["partition"] in (None, "*") else row["partition"]
    agg = asrun_aggregates(con, row["cluster"], start, start + timedelta(days=7), partition=partition, config=cfg)
    agg = agg.head(agg.height - 1)  # the closing boundary belongs to the next week
    states = asrun_states(con, row["cluster"], agg, partition=partition, state=cfg)
    q = policy.q_values(states)
    actions = np.argmax(q, axis=1)
    frame = pl.DataFrame({
        "cluster": row["cluster"], "partition": row["partition"] or "*",
        "epoch_start": (pl.Series(agg["epoch_start"].to_numpy().astype(np.int64)) * 1_000_000).cast(pl.Datetime("us", "UTC")),
        "epoch_s": int(cfg.epoch_s), "policy_id": policy_id, "action": actions.astype(np.int32),
        "objective": [cfg.menu[a] for a in actions], "q_values": [list(map(float, r)) for r in q],
    })
    return store_recommendations(con, frame)
