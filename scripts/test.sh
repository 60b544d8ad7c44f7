#!/usr/bin/env bash
# Set everything up, then run the test suite (fast tests; benchmarks live in bench/): in two
# processes (pytest-xdist; a test module's tests in one worker, the real-Slurm modules all in one:
# --dist loadfile, scheduled by tests/conftest.py), with the 25 slowest tests listed at the end.
# Extra arguments go to pytest (`-n 0`: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider -n 2 --dist loadfile --durations=25 "$@"
