#!/usr/bin/env bash
# Set up (idempotent), check lint and types (scripts/lint.sh: ruff, mypy), run the cooperative-matrix kernels on
# a lavapipe that has them (scripts/fetch_lavapipe.sh: Debian 12's has none; skipped, saying so, when it cannot be
# fetched), then the whole test suite, once, with the Khronos validation layer on: any validation message fails
# the test that caused it. The suite runs on Debian 12's backported lavapipe, 2.5x faster than its own
# (scripts/fetch_suite_lavapipe.sh; on the system's, saying so, when it cannot be fetched). Extra arguments go to
# pytest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
scripts/lint.sh
if [ $# -eq 0 ]; then
    if scripts/fetch_lavapipe.sh; then
        # Debian 12's validation layer predates VK_KHR_cooperative_matrix: this one run goes without it
        build/tools/lavapipe/run .venv/bin/python -m pytest -q -p no:cacheprovider tests/engine/kernels/test_conv_coopmat.py \
            tests/engine/kernels/test_pointwise_coopmat.py tests/engine/kernels/test_pointwise_staged.py \
            tests/engine/kernels/test_conv_taps.py tests/engine/test_matrix_ceiling.py
    else
        echo "[test] no lavapipe with cooperative matrices could be fetched: their kernel runs on NVIDIA only here"
    fi
fi
if scripts/fetch_suite_lavapipe.sh && suite_env="$(scripts/fetch_suite_lavapipe.sh --env)"; then
    eval "$suite_env"
else
    echo "[test] the backported lavapipe could not be fetched: the system's lavapipe runs the suite (slower)"
fi
export VKOCR_VALIDATION=1
exec .venv/bin/python -m pytest "$@"
