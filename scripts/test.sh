#!/usr/bin/env bash
# Set everything up, then run the test suite (fast tests; benchmarks live in bench/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
