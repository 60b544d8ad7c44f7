"""The `metapilot` command, the top layer: nothing else in the project imports it."""

from metapilot.cli.app import app

__all__ = ["app"]
