"""`metapilot capacity`: show each cluster's capacity and where it comes from; load a config."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def capacity_cmd(
    config: Annotated[Optional[str], typer.Option(help="clusters.toml to load (replaces those clusters' rows).")] = None,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file.")] = None,
) -> None:
    """Show cluster capacity (config, SWF header or inferred peak), optionally loading a config first."""
    from metapilot.cli.console import print_frame
    from metapilot.warehouse.capacity import capacity_listing
    from metapilot.warehouse.db import connect

    if config:
        from metapilot.warehouse.capacity import (
            read_capacity_config,
            store_capacity_config,
        )

        rows = read_capacity_config(config)  # refused whole, naming the file and entry, before the warehouse is touched
        con = connect(db)
        n = store_capacity_config(con, rows)
        typer.echo(f"loaded {n} capacity rows from {config}")
        from metapilot.warehouse.oversize import oversize_warnings

        for w in oversize_warnings(con, sorted({r["cluster"] for r in rows})):
            typer.echo(f"warning: {w}", err=True)
    else:
        con = connect(db, read_only=True)
    print_frame(capacity_listing(con), title="Capacity")


def register(app: typer.Typer) -> None:
    app.command("capacity")(capacity_cmd)
