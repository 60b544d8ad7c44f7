"""Errors a user can cause end in one or two lines (what happened, what to do) and a non-zero exit;
the traceback only with `metapilot --debug ...` (or METAPILOT_DEBUG=1).

Exit codes: 2 for errors in what was asked or in the environment (bad input, a missing key, a busy
warehouse, no Prefect API), 1 for anything unexpected (a bug: re-run with --debug and report it),
130 for Ctrl-C.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import click
import typer

_DEBUG = {"on": False}


def set_debug(on: bool) -> None:
    _DEBUG["on"] = bool(on)


def debug_enabled() -> bool:
    return _DEBUG["on"] or os.environ.get("METAPILOT_DEBUG", "") not in ("", "0", "false", "no")


def _first_line(text: str, limit: int = 600) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types whose message is already written for the user."""
    from metapilot.flows.prefect_api import PrefectStartError
    from metapilot.warehouse.db import CorruptWarehouseError, WarehouseBusyError
    from metapilot.warehouse.ingest import IngestError, NothingToIngestError
    from metapilot.warehouse.secret import SiteKeyError

    return (SiteKeyError, NothingToIngestError, IngestError, WarehouseBusyError, CorruptWarehouseError, PrefectStartError,
            FileNotFoundError, PermissionError, IsADirectoryError, LookupError, ValueError, TimeoutError)


def explain(e: BaseException) -> tuple[list[str], int]:
    """The lines to print for an exception and the exit code."""
    import duckdb

    from metapilot.warehouse.db import is_lock_error

    if is_lock_error(e):
        return ([f"error: the warehouse is locked by another process: {_first_line(e)}",
                 "wait for the other MetaPilot command to finish and run this one again"], 2)
    try:
        user = _user_error_types()
    except ImportError:  # a layer failed to import: report the original error as unexpected
        user = (FileNotFoundError, PermissionError, LookupError, ValueError)
    if isinstance(e, user):
        msg = _first_line(e.args[0] if isinstance(e, KeyError) and e.args else e) or type(e).__name__
        return [f"error: {msg}"], 2
    from metapilot.warehouse.db import _unreadable_database

    if _unreadable_database(e):  # damage found while reading, after the file opened
        return ([f"error: the warehouse is not readable: {_first_line(e)}",
                 "restore it from your backup, together with its site key (secret.key beside it), or pass the right --db"], 2)
    if isinstance(e, duckdb.Error):
        return ([f"error: the warehouse refused the operation: {_first_line(e)}",
                 "re-run with --debug for the details, and report it if the database should have allowed it"], 1)
    if isinstance(e, OSError):
        return [f"error: {_first_line(e)}", "check the path, permissions and free disk space, then run it again"], 2
    return ([f"error: unexpected {type(e).__name__}: {_first_line(e)}",
             "this is a MetaPilot bug: re-run with `metapilot --debug ...` for the traceback and report it"], 1)


def _click_exits() -> tuple[type[BaseException], ...]:
    """The exceptions click and Typer end a command with themselves (a usage error, an exit): Typer
    0.2x vendors its own copy of click, whose classes are not `click`'s."""
    kinds: set[type[BaseException]] = {typer.Exit, typer.Abort, click.exceptions.ClickException,
                                       click.exceptions.Exit, SystemExit}
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == "ClickException":
            kinds.add(cls)
    return tuple(kinds)


_CLICK_EXITS = _click_exits()


def guarded(fn: Callable) -> Callable:
    """Wrap a command: known errors become one or two lines and an exit code (not with --debug)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _CLICK_EXITS:
            raise
        except KeyboardInterrupt as e:
            if debug_enabled():
                raise
            if str(e):
                typer.echo(f"interrupted: {e}", err=True)
            typer.echo("interrupted: nothing half-done was kept (each file and each stage commits whole); "
                       "run the command again to finish", err=True)
            raise typer.Exit(130) from None
        except Exception as e:  # noqa: BLE001 - the point: one clear message instead of a traceback
            if debug_enabled():
                raise
            lines, code = explain(e)
            for line in lines:
                typer.echo(line, err=True)
            raise typer.Exit(code) from None

    return run

