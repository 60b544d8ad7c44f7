"""The `metapilot` command. Each sub-command lives in `metapilot/commands/<name>.py`; heavy
imports happen inside the commands so that `metapilot sql` answers in about a second.

Every command runs guarded (`metapilot.cli.errors`): an error a user can cause ends in one or
two lines and a non-zero exit; `metapilot --debug COMMAND ...` shows the traceback instead."""

from __future__ import annotations

from typing import Annotated

import typer

from metapilot.cli.errors import guarded, set_debug


class _GuardedTyper(typer.Typer):
    """A Typer app whose commands are wrapped by `guarded`."""

    def command(self, *args, **kwargs):
        register = super().command(*args, **kwargs)

        def decorator(fn):
            register(guarded(fn))
            return fn

        return decorator


app = _GuardedTyper(no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False,
                    help="MetaPilot: learn from your HPC job logs.")


def _version(value: bool) -> None:
    if value:
        from metapilot.ground.version import version_report

        typer.echo(version_report())
        raise typer.Exit()


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show the full traceback of an error (also METAPILOT_DEBUG=1).")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version (and git commit), and those of Python, duckdb, polars, prefect, "
                                               "great-expectations, d3rlpy and torch, and exit.")] = False,
) -> None:
    """MetaPilot: learn from your HPC job logs."""
    set_debug(debug)


def _register() -> None:
    import importlib
    import pkgutil

    from metapilot.cli import commands

    for mod in pkgutil.iter_modules(commands.__path__):
        m = importlib.import_module(f"metapilot.cli.commands.{mod.name}")
        register = getattr(m, "register", None)
        if register is not None:
            register(app)


_register()

if __name__ == "__main__":
    app()
