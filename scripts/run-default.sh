#!/usr/bin/env bash
# Set everything up, then run the main job on the embedded default: the bundled real samples
# into warehouse/metapilot.duckdb, then the walk forward on the longest history (KTH-SP2), its
# decision for the next period published with its record (fewer training steps than a site's
# monthly run, so that it ends in a few minutes on a fresh clone; `metapilot pipeline --backtest`
# with its defaults is the full run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/metapilot pipeline --backtest --steps 300 "$@"
