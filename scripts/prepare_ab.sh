#!/usr/bin/env bash
# Unpack other revisions' sources beside this checkout for an in-model A/B on the GPU benchmark machine
# (scripts/ab_models.py, scripts/ab_remote.sh): each NAME=REV becomes .ab/NAME, the folders vkocr imports (vk,
# shaders, agent, postproc, proto: ~4.3 MiB each). .ab/ is git-ignored, so a device call carries it only when named
# (carry ".ab" beside .whl-run and .gl: scripts/prepare_device.sh prints what those take of the 64 MiB).
# Usage: scripts/prepare_ab.sh NAME=REV [NAME=REV ...]     e.g. scripts/prepare_ab.sh taps=wip/taps-batched
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -gt 0 ] || { echo "usage: scripts/prepare_ab.sh NAME=REV [NAME=REV ...]" >&2; exit 2; }
for pair in "$@"; do
    name="${pair%%=*}" rev="${pair#*=}"
    [ "$name" != "$pair" ] || { echo "prepare_ab: NAME=REV, not '$pair'" >&2; exit 2; }
    case "$name" in "" | base | */* | .*) echo "prepare_ab: '$name' cannot name a variant" >&2; exit 2 ;; esac
    git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "prepare_ab: no revision '$rev'" >&2; exit 2; }
    rm -rf ".ab/$name" && mkdir -p ".ab/$name"
    git archive "$rev" vk shaders agent postproc proto | tar -x -C ".ab/$name"
    echo ".ab/$name: $(git rev-parse --short "$rev"), $(du -sh ".ab/$name" | cut -f1)"
done
