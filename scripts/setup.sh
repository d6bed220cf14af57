#!/usr/bin/env bash
# Creates .venv with every Groundwire package (editable), the export extras and the
# test tools. Idempotent: skips pip when nothing it depends on changed.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
stamp=.venv/.groundwire-installed
inputs=(constraints.txt requirements-dev.txt libs/core/pyproject.toml cli/pyproject.toml services/*/pyproject.toml clients/*/pyproject.toml)

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$python" -m venv .venv
fi
if [ -f "$stamp" ] && [ -z "$(find "${inputs[@]}" -newer "$stamp")" ]; then
  exit 0
fi
echo "== installing packages into .venv (first run: a few minutes)"
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
# torch first, pinned: anything that pulls it unpinned brings GBs of CUDA packages.
.venv/bin/python -m pip install -q -c constraints.txt torch==2.13.0 2>&1 | grep -v "is ignored" || true
.venv/bin/python -m pip install -q -c constraints.txt -r requirements-dev.txt 2>&1 | grep -v "is ignored" || true
.venv/bin/python -m pip check
touch "$stamp"
