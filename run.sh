#!/usr/bin/env bash
# Set up (idempotent) and run vkocr's main job. Until the gRPC agent exists, that is `vkocr devices`.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh run
exec .venv/bin/vkocr devices "$@"
