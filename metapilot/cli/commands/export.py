"""`metapilot export --scheduler slurm|pbspro`: the decision as the scheduler's own configuration, a
fragment to Include (never a whole file), saying which rule it implements and whether the mapping is
exact (models/steering/export.py says what a config can and cannot express)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def export_cmd(
    scheduler: Annotated[str, typer.Option(help="slurm or pbspro.")],
    cluster: Annotated[Optional[str], typer.Option(help="The cluster (its published decision, its longest time limit).")] = None,
    decision: Annotated[str, typer.Option(help="'published' (the cluster's latest publish decision) or a rule, e.g. SAF+EASY.")] = "published",
    out: Annotated[Optional[str], typer.Option(help="Folder to write into (default: export/<cluster>/ beside the warehouse).")] = None,
    site_conf: Annotated[Optional[str], typer.Option(help="Your slurm.conf: its SchedulerParameters line is merged with ours in the fragment.")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Write the decision as a Slurm or PBS Pro configuration fragment."""
    from metapilot.ground.files import safe_name
    from metapilot.ground.paths import beside_db
    from metapilot.models.steering.decision import named_rule, published
    from metapilot.models.steering.export import (
        SCHEDULERS,
        SiteFacts,
        check_cluster_name,
        controller_note,
        pbspro_fragment,
        slurm_fragment,
    )

    sched = scheduler.strip().lower()
    if sched not in SCHEDULERS:
        raise typer.BadParameter(f"--scheduler must be one of {', '.join(SCHEDULERS)}, not {scheduler!r}")
    if decision.strip().lower() == "published" and not cluster:
        raise typer.BadParameter("--decision published needs --cluster (whose decision?)")
    if cluster is not None:
        check_cluster_name(cluster)
    site_text = None
    if site_conf is not None:  # read as slurmctld reads it: a SchedulerParameters line in an Include counts
        from metapilot.models.simulator.slurm.conf import slurm_conf_lines

        try:
            site_text = "\n".join(slurm_conf_lines(site_conf))
        except (ValueError, OSError) as e:
            raise typer.BadParameter(f"{site_conf}: {e}", param_hint="--site-conf") from None
    facts = SiteFacts(cluster or "any")
    con = None
    if cluster or db is not None:
        # the cluster's time limits (bf_window) and decision are read from the warehouse: a mistyped
        # --db is refused, never a fragment written without them
        from metapilot.warehouse.db import connect, require_warehouse
        from metapilot.warehouse.steer_store import site_facts

        require_warehouse(db)
        con = connect(db, read_only=True)
        if cluster:
            facts = SiteFacts(cluster, **site_facts(con, cluster))
    try:
        if decision.strip().lower() == "published":
            d = published(con, cluster)
        else:
            d = named_rule(decision)
    finally:
        if con is not None:
            con.close()
    header = ""
    rules: list[tuple[str, str]]
    if d.kind == "planner":
        from metapilot.models.steering.decision import DecisionError

        raise DecisionError(f"the published decision for {cluster} is the lookahead planner, applied by `metapilot "
                            "steer --policy published` alone: it replans the queue's order every cycle from the "
                            f"live queue, which no scheduler configuration can say ({d.source})")
    if d.kind == "controller":
        from metapilot.models.steering.live_state import controller_menu

        menu = controller_menu(d.policy_id, db)
        header = controller_note(sched, d.policy_id, menu)
        rules = [("FCFS", "easy")]
        what = f"{d.label} ({d.source}): only the backfilling its objectives share"
    else:
        rules = [(d.priority_rule, d.backfill)]
        what = f"{d.label} ({d.source})"
    folder = Path(out) if out else beside_db(db, "export") / safe_name(cluster or "any")
    folder.mkdir(parents=True, exist_ok=True)
    for rule, bf in rules:
        guard = d.guard_h if d.kind == "fixed" else None
        f = (slurm_fragment(rule, bf, facts, decision=what, site_conf=site_text, guard_h=guard) if sched == "slurm"
             else pbspro_fragment(rule, bf, facts, decision=what, guard_h=guard))
        path = folder / f.name
        path.write_text(header + f.text)
        typer.echo(f"{path}: {'exact' if f.exact and not header else 'approximate'} mapping of {d.label}")
    typer.echo("nothing was applied: review the file, Include it (Slurm) or run its qmgr lines (PBS Pro); "
               "objective switches go through `metapilot steer`")


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)
