#!/usr/bin/env bash
# Create .venv if missing and install exactly requirements.lock into it (every package at its locked
# version, checked against its hash; scripts/lock.sh writes the lock): torch first (the lock holds the
# CPU build that lies on this disk, by that wheel's hash; an unpinned torch would pull a multi-GB CUDA
# build), then the rest of the lock, then the project itself (editable, no dependencies of its own).
# Packages the lock no longer lists are removed. Re-running is cheap: pip is skipped while
# pyproject.toml, requirements.lock and this pip version are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP_VERSION=26.3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.metapilot-installed
want=$( (cat pyproject.toml requirements.lock; echo "pip==$PIP_VERSION") | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    pip=(.venv/bin/python -m pip install --quiet)
    "${pip[@]}" "pip==$PIP_VERSION"
    torch_lock=$(mktemp)
    trap 'rm -f "$torch_lock"' EXIT
    .venv/bin/python scripts/lockfile.py block torch requirements.lock > "$torch_lock"
    "${pip[@]}" --require-hashes --no-deps -r "$torch_lock"
    "${pip[@]}" --require-hashes --no-deps -r requirements.lock
    stale=$(.venv/bin/python scripts/lockfile.py extra requirements.lock)
    if [ -n "$stale" ]; then
        # shellcheck disable=SC2086
        .venv/bin/python -m pip uninstall --quiet --yes $stale
    fi
    # the project: its dependencies are all in the lock; its build backend (setuptools) is too
    "${pip[@]}" --no-deps --no-build-isolation -e .
    out=$(.venv/bin/python -m pip check) || { echo "$out" >&2; exit 1; }
    # compile the simulator's kernels now (numba caches them on disk), not on a user's first command
    .venv/bin/python -c "from metapilot.models.simulator import warm_up; warm_up()"
    echo "$want" > "$stamp"
fi
