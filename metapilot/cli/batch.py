"""What the batch commands (ingest, pipeline, serve) share: result storage beside the warehouse,
the Prefect API their flows report to (`metapilot.flows.prefect_api`), and quiet failures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer

from metapilot.cli.errors import debug_enabled


def _say(msg: str) -> None:
    typer.echo(msg, err=True)


@contextmanager
def prefect_session(db: str | None, meanwhile: Callable[[], None] | None = None) -> Iterator[str]:
    """Run the body's flows against the configured Prefect server, else a temporary local API
    that is stopped on the way out (and dies with this process; `meanwhile` runs while it
    starts). Yields the API URL."""
    from metapilot.flows.common import configure_prefect_storage

    configure_prefect_storage(db)
    from metapilot.flows.prefect_api import prefect_api, quiet_prefect_tracebacks

    with prefect_api(log=_say, meanwhile=meanwhile) as url:
        if not debug_enabled():
            quiet_prefect_tracebacks()
        yield url
