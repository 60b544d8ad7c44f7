#!/usr/bin/env bash
# Create .venv if missing and install MetaPilot into it: torch==2.13.0 first (the CPU build on
# this disk; an unpinned torch would pull a multi-GB CUDA build), then the project with its test
# extras. Re-running is cheap: pip is skipped while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.metapilot-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet torch==2.13.0
    .venv/bin/python -m pip install --quiet -e '.[dev]'
    # compile the simulator's kernels now (numba caches them on disk), not on a user's first command
    .venv/bin/python -c "from metapilot.models.simulator import warm_up; warm_up()"
    echo "$want" > "$stamp"
fi
