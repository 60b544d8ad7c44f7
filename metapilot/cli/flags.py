"""Switches (boolean flags) as users read and type them (issue 37): the help shows no `<bool>`
type after a switch, which made `--keep-names true` look right; and a value typed after a switch
(`true`, `false`, ...), which the command line takes for the next argument, is refused naming the
switch rule instead of being read as a file name."""

from __future__ import annotations

from pathlib import Path

from typer.core import TyperOption

SWITCH_WORDS = frozenset({"true", "false", "yes", "no", "on", "off"})

_display_type_rich = TyperOption.display_type_rich


def _switch_without_type(self: TyperOption, ctx) -> str | None:
    """A switch takes no value: no type to show (Typer 0.29 shows `<bool>`)."""
    if getattr(self, "is_bool_flag", False) and self.metavar is None:
        return None
    return _display_type_rich(self, ctx)


TyperOption.display_type_rich = _switch_without_type


def refuse_switch_values(args: list[str], switches: str) -> None:
    """A positional argument that is a switch word (`true`, `no`, ...) and no existing file: the
    user typed a value after a switch. Refused before any work, saying how switches are written."""
    from metapilot.cli.options import OptionError

    for a in args:
        if a.lower() in SWITCH_WORDS and not Path(a).exists():
            raise OptionError(f"{a!r} is not a file: switches ({switches}) take no value: write the switch alone to turn "
                              "it on, and leave it out to keep it off", param_hint="PATHS")


__all__ = ["refuse_switch_values", "SWITCH_WORDS"]
