# Sourced by bench/run.sh and bench/compare.sh: what the benchmarks need besides the build.

# Installs Debian's curl and nginx-light with apt-get when they are missing (the log goes to
# $1/apt.log); returns non-zero when they cannot be installed.
install_bench_tools() {
    local out=$1 missing=() sudo
    command -v curl >/dev/null || missing+=(curl)
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
    [ ${#missing[@]} -eq 0 ] && return 0
    printf '== installing %s (apt-get)\n' "${missing[*]}"
    sudo=$( [ "$(id -u)" = 0 ] || echo sudo )
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$out/apt.log" 2>&1 || true
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$out/apt.log" 2>&1
}
