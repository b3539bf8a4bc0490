#!/usr/bin/env bash
# Regenerate the golden lowered programs in tests/lowering/golden/ after an intended recipe change.
# Review the diff by hand against ../shared/seeds/002_*.txt before committing it.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PLDEMU_REGEN_GOLDEN=1 "${PYTHON:-.venv/bin/python}" -m pytest -q tests/lowering -k golden
git --no-pager diff --stat -- tests/lowering/golden
PLDEMU_REGEN_GOLDEN=1 "${PYTHON:-.venv/bin/python}" -m pytest -q tests/tile -k golden
git --no-pager diff --stat -- tests/tile/golden
PLDEMU_REGEN_GOLDEN=1 "${PYTHON:-.venv/bin/python}" -m pytest -q tests/mx -k golden
git --no-pager diff --stat -- tests/mx/golden
