# Sourced by scripts/fetch_glslang.sh and scripts/fetch_lavapipe.sh: `debian13_unpack DIR SUITES PACKAGE…`
# downloads Debian 13's packages (SUITES: space-separated, e.g. "trixie trixie-backports"; a package may name its
# suite as NAME/SUITE) with apt-get's own lists in a temporary folder, and unpacks them under DIR (installing
# nothing: the system's packages stay as they are). The tools run there under Debian 13's own C runtime.
debian13_unpack() {
    local root="$1" suites="$2" tmp suite deb
    shift 2
    tmp="$(mktemp -d)"
    mkdir -p "$tmp/lists/partial" "$tmp/cache" "$root"
    for suite in $suites; do
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
    done >"$tmp/sources.list"
    local apt_opts=(-oDir::Etc::SourceList="$tmp/sources.list" -oDir::Etc::SourceParts=/dev/null
                    -oDir::State::Lists="$tmp/lists" -oDir::Cache="$tmp/cache" -oAPT::Sandbox::User=root)
    apt-get "${apt_opts[@]}" update >/dev/null \
        && (cd "$tmp" && apt-get "${apt_opts[@]}" download "$@" >/dev/null) \
        && for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$root"; done
    local status=$?
    rm -rf "$tmp"
    return $status
}
