#!/usr/bin/env bash
# Regenerate requirements.lock, the exact versions (every transitive dependency, with hashes) that
# scripts/setup.sh, and so the README's two commands and .ci/run, install. pip-tools' pip-compile
# resolves pyproject.toml's ranges (with the dev extra) and torch held at scripts/torch-cpu.txt,
# through this machine's pip configuration (PyPI, plus the wheels on local disk).
#
#   bash scripts/lock.sh                          # keep every pin the lock has; add what is new
#   bash scripts/lock.sh --upgrade                # move every package to the newest release allowed
#   bash scripts/lock.sh --upgrade-package duckdb # move one (repeatable); also 'duckdb==2.1.0'
#
# Run `bash scripts/upgrade-check.sh` first to see whether the newest releases pass the tests.
# pip-tools lives in its own throwaway venv (METAPILOT_PIP_TOOLS, default under /tmp), never in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TOOLS=${METAPILOT_PIP_TOOLS:-${TMPDIR:-/tmp}/metapilot-pip-tools}
if [ ! -x "$TOOLS/bin/pip-compile" ]; then
    "$PY" -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install --quiet "pip==$(sed -n 's/^PIP_VERSION=//p' scripts/setup.sh)" "pip-tools==7.6.2"
fi
# No index or find-links lines in the lock: pip's own configuration on the machine says where to look.
CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" "$TOOLS/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras --extra dev \
    --no-emit-index-url --no-emit-find-links --constraint scripts/torch-cpu.txt \
    --output-file requirements.lock "$@" pyproject.toml
echo "requirements.lock: $(grep -c '^[A-Za-z0-9]' requirements.lock) packages"
