#!/usr/bin/env bash
# Would the newest releases that pyproject.toml's ranges allow still pass? Builds a throwaway venv
# (never .venv) with them (torch held at scripts/torch-cpu.txt, the CPU build on this disk), lists
# every package whose version differs from requirements.lock, runs the tests (tests/, the fast ones;
# benchmarks live in bench/), and when some fail, puts each differing package back at its locked
# version in turn and reruns the failures: "duckdb 2.0.1 -> 2.1.0 broke tests/test_x.py::test_y".
# Exit 0: the newest releases pass (move the lock: bash scripts/lock.sh --upgrade); 1: some failed.
#
#   bash scripts/upgrade-check.sh [--keep] [pytest args...]   # --keep: leave the venv for a look
#   METAPILOT_LOCK=other.lock: compare with another lock (the default: requirements.lock)
#
# Weekly, by cron (README: Dependencies):
#   0 5 * * 1  cd /path/to/metapilot && bash scripts/upgrade-check.sh > /var/log/metapilot-upgrade-check.log 2>&1
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" scripts/upgrade_check.py "$@"
