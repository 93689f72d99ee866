#!/usr/bin/env bash
# Checks dist/pushreporter_*.deb as SPEC §13 asks: its contents and fields, then install,
# upgrade (the same package again, as dpkg upgrades), remove and purge, each into a scratch
# root of its own (dpkg --root, maintainer scripts run outside a chroot), so the machine's own
# dpkg database and /usr are untouched.
#
#   packaging/check-deb.sh [DEB]    (make deb-check builds the package first)
set -euo pipefail
cd "$(dirname "$0")/.."

deb=${1:-$(ls -t dist/pushreporter_*.deb 2>/dev/null | head -1)}
[ -n "$deb" ] && [ -f "$deb" ] || { echo "check-deb: no package in dist/ (make deb)" >&2; exit 1; }
fail() { echo "check-deb: FAIL: $*" >&2; exit 1; }
echo "check-deb: $deb"

contents=$(dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's#^\./#/#')
for path in /usr/bin/pushreporter /usr/lib/systemd/system/pushreporter.service \
    /usr/share/pushreporter/systemd/notify-reload.conf /usr/share/man/man1/pushreporter.1.gz \
    /usr/share/pushreporter/templates/acrobits-json.yaml /usr/share/pushreporter/schema.json \
    /usr/share/bash-completion/completions/pushreporter \
    /usr/share/zsh/vendor-completions/_pushreporter /usr/share/fish/vendor_completions.d/pushreporter.fish; do
  grep -qx "$path" <<<"$contents" || fail "$path is not in the package"
done
grep -q '^/etc/' <<<"$contents" && fail "the package ships files in /etc (the operator's)"
depends=$(dpkg-deb -f "$deb" Depends)
for library in libcurl libyaml libsqlite3 libpq libc6; do
  grep -q "$library" <<<"$depends" || fail "Depends: does not name $library ($depends)"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/extracted"
binary=$work/extracted/usr/bin/pushreporter
file_out=$(readelf -S "$binary")
grep -q '\.debug_info' <<<"$file_out" && fail "/usr/bin/pushreporter still has its debug information"
grep -q '/usr/bin/pushreporter run' "$work/extracted/usr/lib/systemd/system/pushreporter.service" \
  || fail "the unit does not start /usr/bin/pushreporter"
grep -q '/usr/local\|\$(PREFIX)' "$work/extracted/usr/lib/systemd/system/pushreporter.service" \
  && fail "the unit still names /usr/local or \$(PREFIX)"
if command -v systemd-analyze >/dev/null; then
  # The unit as systemd reads it, with its ExecStart= pointing at the packaged binary.
  sed "s#/usr/bin/pushreporter#$binary#" "$work/extracted/usr/lib/systemd/system/pushreporter.service" > "$work/pushreporter.service"
  systemd-analyze verify --man=no "$work/pushreporter.service" 2>"$work/verify.log" \
    || { cat "$work/verify.log" >&2; fail "systemd-analyze verify refused the unit"; }
fi
"$binary" --version >/dev/null || fail "the packaged binary does not run"

# A scratch dpkg root: its own database, its own /usr.
scratch() {
  local root=$1
  mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc" "$root/usr/bin"
  : > "$root/var/lib/dpkg/status"
  : > "$root/var/lib/dpkg/available"
}
# The scratch root has none of the Depends: (checked above), so dpkg is told to go on without
# them; what it says goes to a log, shown when a step fails.
dpkg_in() {
  local root=$1; shift
  dpkg --root="$root" --force-script-chrootless --force-not-root --force-depends --force-bad-path \
    --log=/dev/null "$@" >>"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; return 1; }
}
root=$work/root
scratch "$root"
dpkg_in "$root" -i "$deb" || fail "dpkg -i failed"
[ -x "$root/usr/bin/pushreporter" ] || fail "the binary was not installed"
[ -d "$root/etc/pushreporter" ] || fail "postinst did not make /etc/pushreporter"
dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}\n' pushreporter | grep -q 'install ok installed' \
  || fail "dpkg does not say the package is installed"
echo "check-deb: installs"

# An upgrade: the package over itself, as a new version would go (prerm upgrade, postinst configure VERSION).
dpkg_in "$root" -i "$deb" || fail "upgrading over the installed package failed"
echo "check-deb: upgrades"

# The operator's configuration survives removal and purge.
echo "accounts: []" > "$root/etc/pushreporter/site.yaml"
dpkg_in "$root" -r pushreporter || fail "dpkg -r failed"
[ -e "$root/usr/bin/pushreporter" ] && fail "dpkg -r left the binary"
[ -e "$root/usr/lib/systemd/system/pushreporter.service" ] && fail "dpkg -r left the unit"
[ -f "$root/etc/pushreporter/site.yaml" ] || fail "dpkg -r removed /etc/pushreporter"
dpkg_in "$root" -P pushreporter || fail "dpkg -P failed"
[ -f "$root/etc/pushreporter/site.yaml" ] || fail "dpkg -P removed the operator's configuration"
leftover=$(find "$root/usr" -type f 2>/dev/null | head -5 || true)
[ -z "$leftover" ] || fail "files left after purge: $leftover"
echo "check-deb: removes and purges, keeping /etc/pushreporter"

# Purge of an empty /etc/pushreporter takes the directory too.
root2=$work/root2
scratch "$root2"
dpkg_in "$root2" -i "$deb" >/dev/null && dpkg_in "$root2" -P pushreporter || fail "install then purge failed"
[ -e "$root2/etc/pushreporter" ] && fail "purge left an empty /etc/pushreporter"
echo "check-deb: all checks passed"
