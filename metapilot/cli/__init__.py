"""The `metapilot` command, the top layer: nothing else in the project imports it."""

import metapilot.cli.flags  # noqa: F401 - switches show no `<bool>` in help (before any command is built)
from metapilot.cli.app import app

__all__ = ["app"]
