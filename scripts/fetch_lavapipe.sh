#!/usr/bin/env bash
# A lavapipe with cooperative matrices, to run the coopmat kernels here (issue 36): Debian 12's Mesa 22.3 has
# none, Mesa 26's lavapipe lists VK_KHR_cooperative_matrix at 8×8×8 (fp16 inputs, fp16 or fp32 accumulators).
# We take Debian 13's backported mesa-vulkan-drivers with the LLVM and the C and C++ runtime it was built
# against, unpack them into build/tools/lavapipe (git-ignored; nothing of the system changes), and write an ICD
# file for it and `run`, which starts a program (an ELF binary: the venv's python) under that runtime with this
# lavapipe as the only Vulkan driver:
#   build/tools/lavapipe/run .venv/bin/python -m pytest -q tests/engine/kernels/test_conv_coopmat.py
#   build/tools/lavapipe/run .venv/bin/python scripts/check_coopmat.py --device llvmpipe --small
# Debian 12's validation layer (1.3.239) predates the extension: leave VKOCR_VALIDATION unset under it.
#   scripts/fetch_lavapipe.sh              install unless build/tools/lavapipe already lists the matrices
#   scripts/fetch_lavapipe.sh --installed  exit 0 if it does, 1 if not; installs nothing
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target="build/tools/lavapipe"
say() { printf '[setup] %s\n' "$*"; }
installed() {
    [ -x "$target/run" ] && [ -x .venv/bin/python ] && "$target/run" .venv/bin/python - <<'PY' 2>/dev/null
import sys
from vkocr.engine.instance import Instance
from vkocr.engine.devices import list_devices
with Instance(validation=False) as instance:
    sys.exit(0 if any(d.coopmat_shapes for d in list_devices(instance)) else 1)
PY
}

if [ "${1:-}" = --installed ]; then
    installed
    exit
fi
installed && exit 0
[ "$(dpkg --print-architecture)" = amd64 ] || { say "lavapipe: only amd64 is set up by this script"; exit 1; }

say "installing Mesa's lavapipe with cooperative matrices into $target (Debian 13 backports, unpacked)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=scripts/debian13.sh
source scripts/debian13.sh
# lavapipe's own needs beyond what Debian 12 has: LLVM 19, libdisplay-info 2, and the C/C++ runtime (glibc ≥ 2.39)
debian13_unpack "$tmp/root" "trixie trixie-backports" mesa-vulkan-drivers/trixie-backports libllvm19 \
    libdisplay-info2 libc6 libstdc++6 libgcc-s1
rm -rf "$target"
mkdir -p "$target/lib"
cp -a "$tmp/root/usr/lib/x86_64-linux-gnu/." "$target/lib/"
here="$(cd "$target" && pwd)"
cat >"$target/lvp_icd.json" <<JSON
{"file_format_version": "1.0.0", "ICD": {"library_path": "$here/lib/libvulkan_lvp.so", "api_version": "1.4.0"}}
JSON
cat >"$target/run" <<'SH'
#!/bin/sh
# Run an ELF program under Debian 13's C runtime with Mesa's newer lavapipe as the only Vulkan driver
# (scripts/fetch_lavapipe.sh); the rest of its libraries come from the system.
here="$(dirname "$(readlink -f "$0")")"
export VK_DRIVER_FILES="$here/lvp_icd.json" VK_ICD_FILENAMES="$here/lvp_icd.json"
exec "$here/lib/ld-linux-x86-64.so.2" \
    --library-path "$here/lib:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu" "$@"
SH
chmod +x "$target/run"
installed || { say "lavapipe: $target/run lists no cooperative matrix"; exit 1; }
say "lavapipe: $(zcat "$tmp/root/usr/share/doc/mesa-vulkan-drivers/changelog.Debian.gz" 2>/dev/null | head -n 1 \
    | cut -d';' -f1) in $target"
