#!/bin/bash
# Refresh the lock files the set-up installs from (requirements/run.lock for ./run.sh, requirements/test.lock for
# ./test.sh): the newest versions pyproject.toml allows, for every platform, each pinned with its files' sha256.
# Then run ./test.sh and commit the locks with the code they were tested with. Extra arguments go to
# `uv pip compile` (e.g. `-c constraints.txt` to pin what a tested environment has).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pip install -q uv
# an argument that is a pipe (`-c <(pip freeze)`) can be read once, and each lock reads it: keep a copy to read twice
args=() copies=()
trap 'rm -f "${copies[@]}"' EXIT
for arg in "$@"; do
    if [ -p "$arg" ]; then
        copies+=("$(mktemp)")
        cat "$arg" >"${copies[-1]}"
        arg=${copies[-1]}
    fi
    args+=("$arg")
done
set -- "${args[@]}"
for mode in run test; do
    extra=()
    [ "$mode" = test ] && extra=(--extra test)
    .venv/bin/uv pip compile pyproject.toml "${extra[@]}" --universal --python-version 3.11 --generate-hashes \
        --upgrade --no-annotate --custom-compile-command "scripts/lock.sh" -o "requirements/$mode.lock" "$@"
done
