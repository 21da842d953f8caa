#!/usr/bin/env bash
# Unpack other revisions' sources beside this checkout for an in-model A/B on the GPU benchmark machine
# (scripts/ab_models.py, scripts/ab_remote.sh): each NAME=REV becomes .ab/NAME.tar.gz, the folders vkocr imports
# (vk, shaders, agent, postproc, proto: ~4.3 MiB unpacked, ~1.1 MiB packed; scripts/ab_remote.sh unpacks them on
# the machine). .ab/ is git-ignored, so a device call carries it only when named (carry ".ab" beside .whl-run and
# .gl: scripts/prepare_device.sh prints what those take of the 64 MiB).
# Usage: scripts/prepare_ab.sh NAME=REV [NAME=REV ...]     e.g. scripts/prepare_ab.sh taps=wip/taps-batched
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -gt 0 ] || { echo "usage: scripts/prepare_ab.sh NAME=REV [NAME=REV ...]" >&2; exit 2; }
for pair in "$@"; do
    name="${pair%%=*}" rev="${pair#*=}"
    [ "$name" != "$pair" ] || { echo "prepare_ab: NAME=REV, not '$pair'" >&2; exit 2; }
    case "$name" in "" | base | */* | .*) echo "prepare_ab: '$name' cannot name a variant" >&2; exit 2 ;; esac
    git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "prepare_ab: no revision '$rev'" >&2; exit 2; }
    mkdir -p .ab && rm -rf ".ab/$name" ".ab/$name.tar.gz"
    git archive --format=tar.gz -o ".ab/$name.tar.gz" "$rev" vk shaders agent postproc proto
    echo ".ab/$name.tar.gz: $(git rev-parse --short "$rev"), $(du -sh ".ab/$name.tar.gz" | cut -f1)"
done
