"""Importing d3rlpy quietly: it pulls in `gym`, which prints a banner on stderr, and it logs
dataset info, parameters and per-epoch metrics through structlog at info level."""

from __future__ import annotations

import contextlib
import io


def import_d3rlpy(quiet: bool = True):
    """The d3rlpy module, without the banner; `quiet` keeps its structlog output to warnings."""
    import builtins

    shown = builtins.print  # Prefect's `log_prints` swaps print for a logger: silence that one too
    builtins.print = lambda *args, **kwargs: None
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            import d3rlpy
    finally:
        builtins.print = shown
    if quiet:
        import logging

        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    return d3rlpy
