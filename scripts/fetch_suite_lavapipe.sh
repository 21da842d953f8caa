#!/usr/bin/env bash
# The lavapipe the test suite runs on (./test.sh): Debian 12's backported Mesa 25.0 (bookworm-backports, built for
# this system's C runtime and LLVM 15) with the libdrm it needs, unpacked into build/tools/lavapipe-suite
# (git-ignored; nothing of the system changes), and an ICD file for it. On this 2-core build machine it runs our
# kernels about 2.5x faster than Debian 12's Mesa 22.3 (GPU time of det 1x3x736x1024: 8.5 s against 21.0; of rec
# 3x3x48x320: 3.6 s against 8.2), and the suite is mostly that time. It lists no cooperative matrix, so Debian 12's
# validation layer (1.3.239) knows everything it is asked. (scripts/fetch_lavapipe.sh's Mesa 26, which has them,
# needs Debian 13's C runtime: only a program started under it can load it, never the agents a test starts.)
#   scripts/fetch_suite_lavapipe.sh          install unless build/tools/lavapipe-suite already loads
#   scripts/fetch_suite_lavapipe.sh --env    print the exports of VK_DRIVER_FILES and LD_LIBRARY_PATH for it
#                                            (for eval: this lavapipe in place of the system's, every other
#                                            driver kept); exit 1, printing nothing, when it is not installed
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target="build/tools/lavapipe-suite"
here="$PWD/$target"
say() { printf '[setup] %s\n' "$*" >&2; }

drivers() {  # this lavapipe, then every system ICD file that is not a lavapipe's
    local files="$here/lvp_icd.json" dir f
    for dir in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d /usr/local/etc/vulkan/icd.d; do
        for f in "$dir"/*.json; do
            [ -e "$f" ] && ! grep -q 'libvulkan_lvp' "$f" && files="$files:$f"
        done
    done
    printf '%s' "$files"
}

loads() {  # the unpacked lavapipe is a device the loader lists
    [ -e "$here/lvp_icd.json" ] && [ -x .venv/bin/python ] \
        && VK_DRIVER_FILES="$here/lvp_icd.json" LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            .venv/bin/python - <<'PY' 2>/dev/null
import sys
from vkocr.engine.instance import Instance
from vkocr.engine.devices import list_devices
with Instance(validation=False) as instance:
    sys.exit(0 if any("llvmpipe" in d.name for d in list_devices(instance)) else 1)
PY
}

if [ "${1:-}" = --env ]; then
    loads || exit 1
    printf 'export VK_DRIVER_FILES=%q\nexport LD_LIBRARY_PATH=%q\n' "$(drivers)" "$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    exit 0
fi
loads && exit 0
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] && grep -q '^VERSION_CODENAME=bookworm' /etc/os-release \
    || { say "suite lavapipe: only Debian 12 on amd64 is set up by this script"; exit 1; }

say "installing Mesa 25.0's lavapipe from bookworm-backports into $target (unpacked), for the test suite"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=scripts/debian13.sh
source scripts/debian13.sh  # (its unpacker takes any Debian suite)
debian13_unpack "$tmp/root" "bookworm-backports" mesa-vulkan-drivers/bookworm-backports \
    libdrm2/bookworm-backports libdrm-amdgpu1/bookworm-backports
rm -rf "$target"
mkdir -p "$target/lib"
cp -a "$tmp/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" "$tmp/root/usr/lib/x86_64-linux-gnu/"libdrm*.so* \
    "$target/lib/"
cat >"$target/lvp_icd.json" <<JSON
{"file_format_version": "1.0.0", "ICD": {"library_path": "$here/lib/libvulkan_lvp.so", "api_version": "1.4.0"}}
JSON
loads || { say "suite lavapipe: $target does not load (Debian 12's lavapipe will run the suite)"; exit 1; }
say "suite lavapipe: $(zcat "$tmp/root/usr/share/doc/mesa-vulkan-drivers/changelog.Debian.gz" 2>/dev/null \
    | head -n 1 | cut -d';' -f1) in $target"
