"""`metapilot advise`: the objective a published policy recommends now, at a time, or for a state.

Fast path: a verified TorchScript policy and one epoch's aggregates from the warehouse; it imports
neither d3rlpy nor Prefect.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def advise_cmd(
    policy: Annotated[str, typer.Option(help="Policy id (a folder under <db folder>/policies/).")],
    at: Annotated[Optional[str], typer.Option(help="Time to advise for (ISO, UTC), within the cluster's data; the state is read from the warehouse. Default: the latest epoch with data.")] = None,
    state_json: Annotated[Optional[str], typer.Option(help="JSON file with a state: a list of numbers, {\"features\": {...}} or {\"aggregates\": {...}}.")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="table or json.")] = OutputFormat.table,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Recommend an objective of the policy's menu, with its Q-values and the decision latency."""
    import json
    import sys
    import time

    from metapilot.models.controller.advice import Advisor, state_from_json
    from metapilot.models.controller.artifact import ArtifactIntegrityError
    from metapilot.warehouse.policy_store import registered_sums
    from metapilot.warehouse.publish_store import NO_DECISION, publication

    at_note = None
    if at is not None and state_json is not None:
        typer.echo("error: give --at or --state-json, not both", err=True)
        raise typer.Exit(2)
    t_start = time.perf_counter()
    con = None
    expected = None
    try:
        if state_json is None:
            from metapilot.warehouse.db import connect

            con = connect(db, read_only=True)
        else:
            from metapilot.ground.paths import db_path

            if db_path(db).exists():
                from metapilot.warehouse.db import connect

                con = connect(db, read_only=True)
        if con is not None:
            expected = registered_sums(con, policy)
        advisor = Advisor(policy, db, expected)
        if state_json is not None:
            with open(state_json) as f:
                state = state_from_json(json.load(f), advisor.policy)
            advice = advisor.decide(state)
        else:
            when, at_note = _advice_time(con, advisor, at)
            advice = advisor.advise_at(con, when)
        published = None if con is None else publication(con, advice.cluster, advice.policy_id)
    except ArtifactIntegrityError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(3)
    except (FileNotFoundError, ValueError, LookupError) as e:
        typer.echo(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", err=True)
        raise typer.Exit(2)
    finally:
        if con is not None:
            con.close()
    out = advice.to_dict()
    out["latency_ms"]["command"] = (time.perf_counter() - t_start) * 1e3
    if expected is None:
        out["note"] = "policy not found in the policies table: checked against the folder's SHA256SUMS only"
    if at_note:
        out["at_note"] = at_note
        typer.echo(f"note: {at_note}", err=True)
    if published is not None:
        out.update(published)
        if not published["published"]:  # the publish gate's word comes first: this advice is not what to run
            why = published["decision"] or NO_DECISION
            out["warning"] = f"this policy is not the published controller, so its advice is for comparison only: {why}"
            typer.echo(f"warning: {out['warning']}", err=True)
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    where = f"{advice.cluster}" + ("" if advice.partition == "*" else f"/{advice.partition}")
    console.print(f"[bold]{advice.objective}[/bold] — {advice.meaning}")
    console.print(f"policy {advice.policy_id} on {where}" + (f" at {advice.at}" if advice.at else " (given state)"))
    qt = Table(title="Q-values (reward units, higher is better)")
    qt.add_column("objective")
    qt.add_column("Q", justify="right")
    for name, v in advice.q_values.items():
        qt.add_row(("→ " if name == advice.objective else "  ") + name, f"{v:,.4g}")
    console.print(qt)
    st = Table(title="State")
    st.add_column("feature")
    st.add_column("value", justify="right")
    for name, v in advice.state.items():
        st.add_row(name, f"{v:.4g}")
    console.print(st)
    lat = out["latency_ms"]
    console.print(f"latency: decision {lat['decision']:.3f} ms, state {lat['state']:.1f} ms, command {lat['command']:.0f} ms")
    if "note" in out:
        console.print(f"[yellow]note:[/yellow] {out['note']}")


def _advice_time(con, advisor, at: str | None) -> tuple[str, str | None]:
    """The time to advise for: `at` if it lies within the cluster's data, else the latest epoch
    with data (and a note saying so). A time outside the data is refused with the data's range:
    the state there would be an empty cluster, not a question worth answering."""
    from datetime import datetime, timezone

    from metapilot.transforms.windows import parse_utc
    from metapilot.warehouse.asrun_queries import data_span

    part = None if advisor.partition == "*" else advisor.partition
    where = advisor.cluster + ("" if part is None else f"/{part}")
    span = data_span(con, advisor.cluster, part)
    if span is None:
        raise LookupError(f"the warehouse holds no jobs of {where}, the policy's cluster: ingest its logs first")
    first, last = span
    fmt = "%Y-%m-%dT%H:%M:%S"
    if at is None:
        epoch_s = int(advisor.policy.state_config.epoch_s)
        t = int(last.timestamp()) // epoch_s * epoch_s
        when = datetime.fromtimestamp(max(t, int(first.timestamp())), tz=timezone.utc)
        return when.isoformat(), (f"no --at given: advising for {when:{fmt}} UTC, the latest epoch with data of {where} "
                                  f"(data from {first:{fmt}} to {last:{fmt}} UTC)")
    try:
        when = parse_utc(at)
    except ValueError:
        raise ValueError(f"--at {at!r} is not an ISO date or date-time (e.g. 1997-05-02T10:00)") from None
    if not first <= when <= last:
        raise ValueError(f"--at {when:{fmt}} UTC is outside the data of {where} ({first:{fmt}} to {last:{fmt}} UTC): "
                         "give a time in that range, or leave out --at for the latest epoch with data")
    return when.isoformat(), None


def register(app: typer.Typer) -> None:
    app.command("advise")(advise_cmd)
