"""The code version recorded with every run and artifact: package version plus git commit when known;
and the versions of the libraries that decide results (`dependency_versions`), which `metapilot
--version` prints, the controller's model card keeps (`runtime`) and every `sim_runs` row stores."""

from __future__ import annotations

import functools
import json
import platform
import subprocess
from importlib import metadata

from metapilot.ground.paths import REPO_ROOT

__version__ = "0.1.0"

# What an operator pastes into a bug report, besides the code version (README: Versions).
DEPENDENCIES = ("duckdb", "polars", "prefect", "great-expectations", "d3rlpy", "torch")


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


@functools.cache
def dependency_versions() -> dict[str, str]:
    """{name: installed version} of DEPENDENCIES, read from the installed distributions' metadata
    (nothing is imported); "not installed" for one that is missing."""
    out = {}
    for name in DEPENDENCIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def dependency_versions_json() -> str:
    """`dependency_versions()` with the Python version, as the JSON a run record stores."""
    return json.dumps({"python": platform.python_version(), **dependency_versions()})


def version_report() -> str:
    """`metapilot --version`: one `name version` line each, the project first."""
    rows = [("metapilot", code_version()), ("python", platform.python_version()), *dependency_versions().items()]
    return "\n".join(f"{name} {version}" for name, version in rows)
