#!/usr/bin/env bash
# Set up (idempotent), check lint and types (scripts/lint.sh: ruff, mypy), then run the whole test suite, once,
# with the Khronos validation layer on: any validation message fails the test that caused it. Extra arguments
# go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
scripts/lint.sh
export VKOCR_VALIDATION=1
exec .venv/bin/python -m pytest "$@"
