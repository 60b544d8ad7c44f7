#!/usr/bin/env bash
# Set everything up, then run the main job on the embedded default: the bundled real samples
# into warehouse/metapilot.duckdb, end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/metapilot pipeline "$@"
