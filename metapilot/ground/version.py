"""The code version recorded with every run and artifact: package version plus git commit when known."""

from __future__ import annotations

import functools
import subprocess

from metapilot.ground.paths import REPO_ROOT

__version__ = "0.1.0"


@functools.cache
def code_version() -> str:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
        if out.returncode == 0 and out.stdout.strip():
            return f"{__version__}+{out.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__
