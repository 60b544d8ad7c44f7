"""`metapilot data-docs`: render the ingest's data checks as Great Expectations data docs
(static HTML beside the warehouse; warehouse/data_docs.py)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def data_docs_cmd(
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
) -> None:
    """Render the data docs of every ingested file not rendered yet, and print where they are."""
    from metapilot.cli.console import console
    from metapilot.warehouse.data_docs import (
        docs_dir_for,
        pending_runs,
        render_data_docs,
    )
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        site = docs_dir_for(con)
        n = len(pending_runs(con, site)) if site is not None else 0
        index = render_data_docs(con, site)
    finally:
        con.close()
    console.print(f"data docs: {index} ({n} new data-check result{'s' if n != 1 else ''} rendered)")


def register(app: typer.Typer) -> None:
    app.command("data-docs")(data_docs_cmd)
