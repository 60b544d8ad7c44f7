"""Promote a policy to be its cluster's current one: a row in `published_policies` and a small
pointer file beside the artifacts (`policies/<cluster>.published.json`) that deployments read."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from metapilot.ground.files import safe_name
from metapilot.ground.paths import beside_db, sql_text
from metapilot.warehouse.db import has_table
from metapilot.warehouse.policy_store import policy_row


def promote(con: duckdb.DuckDBPyConnection, policy_id: str, heldout_id: str | None, verdict: str | None,
            db: str | Path | None = None, *, kind: str = "controller", recommendation: str | None = None,
            message: str | None = None, gate: dict | None = None, gate_training: dict | None = None,
            ope_passes: bool | None = None) -> Path:
    """Record the publish decision and write the pointer file; returns the pointer's path.

    `kind='controller'`: the policy passed the gate and is what the cluster should run;
    `kind='fixed'`: it did not, and `recommendation` (a fixed rule) is what to run. `gate`,
    `gate_training`: the gate's verdicts on the checkpoint window and the last training weeks;
    `ope_passes`: whether off-policy evaluation ranks the policy above the logged behaviour."""
    if kind not in ("controller", "fixed"):
        raise ValueError(f"kind must be 'controller' or 'fixed', not {kind!r}")
    policy = policy_row(con, policy_id)
    cluster, partition, path = policy["cluster"], policy["partition"], policy["path"]
    now = datetime.now(timezone.utc)
    # what to run, in the record and the pointer: a fixed decision without a rule (nothing waited, or no
    # checkpoint window) keeps what runs now, never the refused controller
    recommendation = recommendation or (f"MetaPilot controller {policy_id}" if kind == "controller"
                                        else "the scheduler's current policy")
    con.execute(sql_text("publish/record_decision.sql"), {
        "cluster": cluster, "partition": partition, "policy_id": policy_id, "heldout_id": heldout_id,
        "published_at": now, "verdict": verdict, "kind": kind, "recommendation": recommendation, "message": message,
        "gate": json.dumps(gate) if gate is not None else None,
        "gate_training": json.dumps(gate_training) if gate_training is not None else None, "ope_passes": ope_passes})
    pointer = beside_db(db, "policies") / f"{safe_name(cluster)}.published.json"
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.write_text(json.dumps({"cluster": cluster, "partition": partition, "kind": kind,
                                   "recommendation": recommendation, "message": message,
                                   "policy_id": policy_id if kind == "controller" else None,
                                   "path": path if kind == "controller" else None, "evaluated_policy_id": policy_id,
                                   "heldout_id": heldout_id, "published_at": now.isoformat(),
                                   "verdict": verdict, "gate": {"checkpoint_window": _passed(gate),
                                                                "training_weeks": _passed(gate_training),
                                                                "off_policy_evaluation": ope_passes}},
                                  indent=2) + "\n")
    return pointer


def _passed(verdict: dict | None) -> bool | None:
    """Whether the controller passed the gate on a window (None: not checked there)."""
    return None if verdict is None else bool(verdict.get("passes"))


def latest_decision(con: duckdb.DuckDBPyConnection, cluster: str) -> dict | None:
    """The cluster's latest publish decision (kind, recommendation, message, policy id), or None
    (none yet, or a warehouse older than the publish step)."""
    if not has_table(con, "published_policies"):
        return None
    cur = con.execute(sql_text("publish/latest_decision.sql"), {"cluster": cluster})
    rows = cur.fetchall()
    if not rows:
        return None
    r = dict(zip([c[0] for c in cur.description], rows[0], strict=True))
    loads = lambda v: json.loads(v) if v else None  # noqa: E731
    return {"policy_id": r["policy_id"], "kind": r.get("kind") or "controller",  # rows from before the gate
            "recommendation": r.get("recommendation"), "message": r.get("message"), "published_at": r["published_at"],
            "guard_h": r.get("guard_h"), "planner": loads(r.get("planner")), "backtest_id": r.get("backtest_id"),
            "record": loads(r.get("record"))}


def publish_walk_forward(con: duckdb.DuckDBPyConnection, cluster: str, ahead: dict, db: str | Path | None = None,
                         partition: str = "all") -> Path:
    """Publish the walk forward's decision for the next period (`run_backtest`'s `next`): what the
    evidence backs is what the cluster is told to run, with the walk-forward record as its reason.
    A rule (with its tail guard) is kind 'fixed', the planner kind 'planner'; returns the pointer."""
    planner = ahead.get("planner_settings")
    kind = "planner" if planner else "fixed"
    record = ahead.get("record") or {}
    message = f"{ahead['decision']}: {ahead.get('source', '')} — {record.get('words', '')}".strip(" —:")
    now = datetime.now(timezone.utc)
    row = {"cluster": cluster, "partition": partition, "published_at": now, "verdict": record.get("words"),
           "kind": kind, "recommendation": ahead["rule"] if kind == "fixed" else "planner", "message": message,
           "guard_h": ahead.get("guard_h"), "planner": json.dumps(planner) if planner else None,
           "backtest_id": ahead.get("backtest_id"), "record": json.dumps(record)}
    con.execute(sql_text("publish/record_walk_forward.sql"), row)
    pointer = beside_db(db, "policies") / f"{safe_name(cluster)}.published.json"
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.write_text(json.dumps({**row, "published_at": now.isoformat(), "planner": planner, "record": record,
                                   "policy_id": None}, indent=2) + "\n")
    return pointer


def publication(con: duckdb.DuckDBPyConnection, cluster: str, policy_id: str) -> dict:
    """Is `policy_id` what the cluster's latest publish decision says to run? {'published': bool,
    'decision': that decision's message, or None when there is none yet}."""
    d = latest_decision(con, cluster)
    return {"published": bool(d and d["kind"] == "controller" and d["policy_id"] == policy_id),
            "decision": d["message"] if d else None}


NO_DECISION = "no publish decision for this cluster yet (`metapilot pipeline` makes one)"


def not_published_note(decision: str | None) -> str:
    """What a controller's ROI means when it is not the published one (`decision`: the latest
    publish decision's message, None when there is none yet)."""
    why = decision or NO_DECISION
    return (f"this controller is not the published one ({why}); its ROI is what it would have been worth "
            "on these weeks, not a case for deploying it")


def current_policy(con: duckdb.DuckDBPyConnection, cluster: str) -> str | None:
    """The cluster's current controller's policy id, or None (none published, or the latest decision
    recommends a fixed rule instead)."""
    d = latest_decision(con, cluster)
    return d["policy_id"] if d and d["kind"] == "controller" else None
