"""The `metapilot` command. Each sub-command lives in `metapilot/commands/<name>.py`; heavy
imports happen inside the commands so that `metapilot sql` answers in about a second."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="MetaPilot: learn from your HPC job logs.")


@app.callback()
def main() -> None:
    """MetaPilot: learn from your HPC job logs."""


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
