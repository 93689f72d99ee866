#!/usr/bin/env bash
# Builds dist/pushreporter_VERSION_ARCH.deb (SPEC §13) and, beside it, the debug information of
# its binary as dist/pushreporter-dbgsym_VERSION_ARCH.ddeb (Debian's convention: the file under
# /usr/lib/debug/.build-id/ that gdb and debuginfod find by the binary's build id).
#
#   packaging/deb.sh BINARY    (make deb builds the release binary first)
#
# The binary is installed stripped; its Depends: come from dpkg-shlibdeps, which names the
# packages of the shared libraries it links (libcurl, libyaml, libsqlite3, libpq, glibc).
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:?usage: packaging/deb.sh BINARY}
[ -x "$binary" ] || { echo "deb: $binary is not an executable (make deb builds it)" >&2; exit 1; }
version=$("$binary" --version)
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
dbg=$work/dbgsym
mkdir -p dist

echo "deb: staging pushreporter $version ($arch)"
install -d "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/systemd/system" \
  "$root/usr/share/pushreporter/templates" "$root/usr/share/pushreporter/systemd" "$root/usr/share/pushreporter/examples" \
  "$root/usr/share/man/man1" "$root/usr/share/doc/pushreporter" \
  "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"

# The binary without its debug information, which goes to the -dbgsym package by build id.
build_id=$(readelf -n "$binary" | awk '/Build ID:/ { print $3; exit }')
install -m 0755 "$binary" "$root/usr/bin/pushreporter"
if [ -n "$build_id" ]; then
  debug_file=$dbg/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug
  install -d "$(dirname "$debug_file")"
  objcopy --only-keep-debug --compress-debug-sections "$binary" "$debug_file"
  chmod 0644 "$debug_file"
fi
strip --strip-debug --strip-unneeded --remove-section=.comment "$root/usr/bin/pushreporter"

sed 's#/usr/local/#/usr/#g' examples/pushreporter.service > "$root/usr/lib/systemd/system/pushreporter.service"
install -m 0644 examples/pushreporter-notify-reload.conf "$root/usr/share/pushreporter/systemd/notify-reload.conf"
install -m 0644 templates/*.yaml "$root/usr/share/pushreporter/templates/"
install -m 0644 examples/*.yaml "$root/usr/share/pushreporter/examples/"
# The schema of SPEC §14, once the binary has the command that prints it.
if "$binary" --help | grep -qE '^ +schema( |$)'; then
  "$binary" schema > "$root/usr/share/pushreporter/schema.json"
fi
gzip -9n < docs/pushreporter.1 > "$root/usr/share/man/man1/pushreporter.1.gz"
"$binary" --generate-completion-script bash > "$root/usr/share/bash-completion/completions/pushreporter"
"$binary" --generate-completion-script zsh > "$root/usr/share/zsh/vendor-completions/_pushreporter"
"$binary" --generate-completion-script fish > "$root/usr/share/fish/vendor_completions.d/pushreporter.fish"
cat > "$root/usr/share/doc/pushreporter/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: pushreporter
Files: *
Copyright: pushreporter authors
License: see the project's repository
EOF
find "$root/usr" -type f ! -path "$root/usr/bin/*" -exec chmod 0644 {} +

# Depends: from the libraries the binary links, as dpkg-shlibdeps reads them.
mkdir -p "$work/src/debian"
printf 'Source: pushreporter\n\nPackage: pushreporter\nArchitecture: any\n' > "$work/src/debian/control"
depends=$(cd "$work/src" && dpkg-shlibdeps -O "$root/usr/bin/pushreporter" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "deb: dpkg-shlibdeps found no dependencies of $binary" >&2; exit 1; }
installed_size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)

cat > "$root/DEBIAN/control" <<EOF
Package: pushreporter
Version: $version
Architecture: $arch
Maintainer: pushreporter maintainers <maintainers@pushreporter.invalid>
Installed-Size: $installed_size
Depends: $depends
Section: net
Priority: optional
Homepage: https://pushreporter.invalid/
Description: reports mobile push tokens from configuration
 A long-running agent, run by systemd, that loads YAML account configurations,
 expands %placeholder% templates into HTTP requests, reports every account's
 push tokens on start, retries each failure with backoff until it succeeds,
 and reports again when a token or an account changes. It serves Acrobits web
 services, Microsoft Customer Insights - Journeys, Firebase device groups and
 Adobe Campaign tracking.
EOF

# Maintainer scripts: systemd is told of the unit; nothing is enabled or started (an operator
# writes /etc/pushreporter first). /etc/pushreporter is the operator's: never removed while it
# holds anything, not even on purge. $DPKG_ROOT is dpkg's root when it installs elsewhere
# (dpkg --root, as packaging/check-deb.sh does): systemd is then not this root's to tell.
cat > "$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = "configure" ]; then
    mkdir -p "$DPKG_ROOT/etc/pushreporter"
    if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        systemctl daemon-reload >/dev/null 2>&1 || true
        # An upgrade restarts an agent that runs, so that the new binary takes over.
        if [ -n "$2" ] && systemctl is-active --quiet pushreporter.service; then
            systemctl try-restart pushreporter.service >/dev/null 2>&1 || true
        fi
    fi
fi
exit 0
EOF
cat > "$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = "remove" ] && [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl stop pushreporter.service >/dev/null 2>&1 || true
fi
exit 0
EOF
cat > "$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = "purge" ]; then
    # The configuration stays; only an empty directory goes.
    rmdir "$DPKG_ROOT/etc/pushreporter" 2>/dev/null || true
fi
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

deb=dist/pushreporter_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "deb: $deb ($(du -h "$deb" | cut -f1), installed $installed_size KiB)"

if [ -n "$build_id" ]; then
  install -d "$dbg/DEBIAN"
  cat > "$dbg/DEBIAN/control" <<EOF
Package: pushreporter-dbgsym
Version: $version
Architecture: $arch
Maintainer: pushreporter maintainers <maintainers@pushreporter.invalid>
Depends: pushreporter (= $version)
Section: debug
Priority: optional
Build-Ids: $build_id
Description: debug symbols for pushreporter
EOF
  ddeb=dist/pushreporter-dbgsym_${version}_${arch}.ddeb
  dpkg-deb --root-owner-group -Zxz --build "$dbg" "$ddeb" >/dev/null
  echo "deb: $ddeb ($(du -h "$ddeb" | cut -f1))"
fi
