#!/usr/bin/env bash
# glslang ≥ 14, for regenerating the SPIR-V of kernels that use GL_KHR_cooperative_matrix (shaders/build.py
# uses it for those only; every other kernel compiles with Debian 12's glslc). Debian 12's glslang (11.13)
# rejects the extension, so we take Debian 13's glslang-tools 15 with the C and C++ runtime it was built
# against, unpack them into build/tools/glslang (git-ignored) and run the binary through that runtime's own
# loader, so nothing of the system changes. A developer tool: boards run the shipped SPIR-V.
#   scripts/fetch_glslang.sh              install unless build/tools/glslang/glslang already runs (quiet then)
#   scripts/fetch_glslang.sh --installed  exit 0 if it does, 1 if not; installs nothing
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target="build/tools/glslang"
suite="trixie"
packages=(glslang-tools libc6 libstdc++6 libgcc-s1)

say() { printf '[setup] %s\n' "$*"; }
installed() { [ -x "$target/glslang" ] && "$target/glslang" --version 2>/dev/null | grep -q 'glslang Khronos. 1[4-9]'; }

if [ "${1:-}" = --installed ]; then
    installed
    exit
fi
installed && exit 0
[ "$(dpkg --print-architecture)" = amd64 ] || { say "glslang: only amd64 is set up by this script"; exit 1; }

say "installing glslang 15 into $target (Debian $suite's glslang-tools and its runtime, unpacked, not installed)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=scripts/debian13.sh
source scripts/debian13.sh
debian13_unpack "$tmp/root" "$suite" "${packages[@]}"
rm -rf "$target"
mkdir -p "$target"
cp -a "$tmp/root/usr/lib/x86_64-linux-gnu" "$target/lib"
cp "$tmp/root/usr/bin/glslang" "$target/glslang.bin"
cat >"$target/glslang" <<'SH'
#!/bin/sh
# glslang 15 from Debian 13, run through the runtime it was built against (scripts/fetch_glslang.sh)
here="$(dirname "$(readlink -f "$0")")"
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/glslang.bin" "$@"
SH
chmod +x "$target/glslang"
installed || { say "glslang: $target/glslang does not run"; exit 1; }
say "glslang: $("$target/glslang" --version | head -n 1)"
