#!/usr/bin/env bash
# In-model A/B on the GPU benchmark machine: this checkout (labelled base) and each .ab/NAME.tar.gz that
# scripts/prepare_ab.sh packed (unpacked here first), alternating, twice over, on the one warm GPU
# (scripts/ab_models.py), then each variant against base (the second round: the first warms the clocks and the
# pipeline caches). Run it after `source scripts/remote_setup.sh` (scripts/bench_remote.sh says how a call is laid
# out). AB_ARGS passes options to ab_models.py (e.g. AB_ARGS="--only det,rec").
# Usage: scripts/ab_remote.sh OUT_DIR NAME [NAME ...]
set -uo pipefail
out="${1:?usage: scripts/ab_remote.sh OUT_DIR NAME [NAME ...]}"
shift
[ $# -gt 0 ] || { echo "usage: scripts/ab_remote.sh OUT_DIR NAME [NAME ...]" >&2; exit 2; }
for name in "$@"; do
    if [ ! -d ".ab/$name" ] && [ -f ".ab/$name.tar.gz" ]; then
        mkdir -p ".ab/$name" && tar -xzf ".ab/$name.tar.gz" -C ".ab/$name"
    fi
    [ -d ".ab/$name" ] || { echo "ab_remote: no .ab/$name.tar.gz (scripts/prepare_ab.sh, and carry .ab)" >&2; exit 2; }
done
mkdir -p "$out"
for round in 1 2; do
    for name in base "$@"; do
        root=".ab/$name"
        [ "$name" = base ] && root=.
        # shellcheck disable=SC2086  # AB_ARGS is a list of options
        VKOCR_CHECKOUT="$root" python3 scripts/ab_models.py --label "$name" ${AB_ARGS:-} \
            --json "$out/ab-$name-$round.json" 2>&1 | grep -v "^bench"
    done
done
for name in "$@"; do
    python3 scripts/ab_models.py --compare "$out/ab-base-2.json" "$out/ab-$name-2.json" | tee "$out/ab-$name.txt"
done
python3 scripts/ab_models.py --compare "$out/ab-base-1.json" "$out/ab-base-2.json" | grep -v "^    " \
    | tee "$out/ab-base-rounds.txt"
