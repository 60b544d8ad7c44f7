"""The code version recorded with every run and artifact: package version plus git commit when known;
and the versions of the libraries that decide results (`dependency_versions`), which `metapilot
--version` prints, the controller's model card keeps (`runtime`) and every `sim_runs` row stores."""

from __future__ import annotations

import functools
import hashlib
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
    """`0.1.0+<commit>`, and for a checkout with uncommitted changes `+<commit>-dirty.<digest of the
    changes>`: the stages' caches and the walk forward's folds are keyed on it, so two different
    uncommitted trees must not share a key (a site's local patch would reuse results of other code)."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
        if out.returncode == 0 and out.stdout.strip():
            tag = out.stdout.strip()
            return f"{__version__}+{tag}" + (f".{_changes_digest()}" if tag.endswith("-dirty") else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return __version__


def _changes_digest() -> str:
    """A short digest of what differs from the commit: the tracked changes, and the code and SQL files
    git does not track yet."""
    h = hashlib.sha256()
    h.update(subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=REPO_ROOT, capture_output=True,
                            timeout=30).stdout)
    others = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=30).stdout.split("\n")
    for name in sorted(n for n in others if n.endswith((".py", ".sql", ".toml"))):
        h.update(name.encode())
        try:
            h.update((REPO_ROOT / name).read_bytes())
        except OSError:
            continue
    return h.hexdigest()[:10]


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
