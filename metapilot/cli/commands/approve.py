"""`metapilot approve --cluster C [DECISION]`: a person approves the cluster's published decision for
steering (publishing is not deploying: the monthly retrain publishes, `steer --policy published`
follows only what someone approved). Recorded with who and when in `steer_approvals`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def approve_cmd(
    cluster: Annotated[str, typer.Option(help="The cluster whose published decision is approved.")],
    decision: Annotated[Optional[str], typer.Argument(help="What you approve, as `steer` would show it (e.g. SAF+EASY): refused if the published decision is another.")] = None,
    note: Annotated[Optional[str], typer.Option(help="Why, for the record.")] = None,
    show: Annotated[bool, typer.Option("--show", help="Only show the published decision and the record behind it (the walk forward's regret, gain and max wait); approve nothing.")] = False,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Approve the cluster's published decision for `metapilot steer --policy published`."""
    from datetime import datetime, timezone

    from metapilot.models.steering.decision import DecisionError, named_rule, published
    from metapilot.models.steering.identity import current_operator
    from metapilot.warehouse.db import connect, require_warehouse
    from metapilot.warehouse.steer_store import record_approval

    require_warehouse(db)
    con = connect(db)
    try:
        d = published(con, cluster)
        if show:
            typer.echo(f"published for {cluster}: {d.label}"
                       + (f", oldest first once a job has waited {d.guard_h:g} h" if d.guard_h else "")
                       + f" ({d.source})")
            typer.echo(f"nothing approved: `metapilot approve --cluster {cluster} {d.label}` approves it")
            return
        if decision is not None:
            asked = decision.strip()
            same = asked == d.label or (d.kind == "fixed" and _same_rule(asked, d.label, named_rule))
            if not same:
                raise DecisionError(f"the published decision for {cluster} is {d.label}, not {asked}: nothing approved "
                                    f"(to steer by {asked} anyway, name it: `metapilot steer --policy {asked}`)")
        if d.kind == "controller":
            from metapilot.models.controller.artifact import find_policy, verify
            from metapilot.warehouse.policy_store import registered_sums

            from metapilot.models.controller.artifact import ArtifactIntegrityError

            try:
                verify(find_policy(d.policy_id, db), registered_sums(con, d.policy_id))
            except ArtifactIntegrityError as e:  # a refusal to approve a tampered file, not a bug
                raise DecisionError(f"the published controller's artifact does not match the warehouse: {e}") from None
        who = current_operator()  # the real uid, never only what $SUDO_USER says
        now = datetime.now(timezone.utc)
        record_approval(con, cluster=cluster, decision=d.label, kind=d.kind, policy_id=d.policy_id,
                        published_at=d.published_at, approved_by=who.account, approved_at=now, note=note,
                        claimed_by=who.claimed)
    finally:
        con.close()
    typer.echo(f"approved for steering on {cluster}: {d.label} ({d.source}), by {who} at {now:%Y-%m-%d %H:%M} UTC")


def _same_rule(a: str, b: str, named_rule) -> bool:
    try:
        return named_rule(a).label == b
    except ValueError:
        return False


def register(app: typer.Typer) -> None:
    app.command("approve")(approve_cmd)
