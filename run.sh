#!/usr/bin/env bash
# Set up (idempotent) and run vkocr's main job: the gRPC agent on loopback (127.0.0.1:50051) with the default
# models, served from the local model store as a bundle signed with the development key (config/dev.toml).
# It prints the command that sends it an image; Ctrl-C (or SIGTERM) drains and stops it. Extra arguments go to
# `vkocr serve` (e.g. --listen 127.0.0.1:6000, --device cpu).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh run
exec .venv/bin/vkocr serve --config config/dev.toml "$@"
