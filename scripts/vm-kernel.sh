#!/usr/bin/env bash
# Unpacks Debian's cloud kernel for nearnative's VM platforms into
# nearnative's state directory, without installing it: nothing goes to
# /boot, no GRUB entry is made, the host's own kernel and boot order are
# untouched. The result is
#
#   $NEARNATIVE_HOME/kernel/VERSION/boot/vmlinuz-VERSION
#   $NEARNATIVE_HOME/kernel/VERSION/lib/modules/VERSION/   (with modules.dep)
#
# which is where nearnative looks for the guest kernel (NEARNATIVE_HOME
# defaults to /var/lib/nearnative). Idempotent: a second run with the same
# kernel version does nothing. Run as root; scripts/setup.sh calls it.
set -euo pipefail

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'vm-kernel: %s\n' "$*" >&2; exit 1; }

meta=linux-image-cloud-amd64
home=${NEARNATIVE_HOME:-/var/lib/nearnative}
dest=$home/kernel

# The versioned package the meta-package points to, e.g.
# linux-image-6.1.0-27-cloud-amd64 (Debian's signed build).
version_pkg() {
  apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
pkg=$(version_pkg)
if [ -z "$pkg" ]; then
  apt-get update -qq
  pkg=$(version_pkg)
fi
[ -n "$pkg" ] || die "apt-cache knows no $meta: is the Debian main archive in the apt sources?"
ver=${pkg#linux-image-}
ver=${ver%-unsigned}

if [ -f "$dest/$ver/boot/vmlinuz-$ver" ] && [ -s "$dest/$ver/lib/modules/$ver/modules.dep" ]; then
  say "VM kernel $ver already unpacked in $dest/$ver"
  exit 0
fi

say "unpacking $pkg into $dest/$ver (not installed: /boot is left alone)"
mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.unpack-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# apt-get download drops privileges to _apt, which must be able to write here.
chown _apt "$tmp" 2>/dev/null || true
if ! (cd "$tmp" && apt-get download -qq "$pkg" 2>/dev/null); then
  apt-get update -qq
  (cd "$tmp" && apt-get download -qq "$pkg") || die "apt-get download $pkg failed"
fi
deb=$(ls "$tmp"/*.deb)
mkdir "$tmp/tree"
dpkg-deb -x "$deb" "$tmp/tree"
[ -f "$tmp/tree/boot/vmlinuz-$ver" ] || die "$deb holds no boot/vmlinuz-$ver"
[ -d "$tmp/tree/lib/modules/$ver" ] || die "$deb holds no lib/modules/$ver"
# The package's postinst would run depmod; run it on the unpacked tree.
depmod -b "$tmp/tree" "$ver"
rm -rf "$dest/$ver"
mv "$tmp/tree" "$dest/$ver"

# Keep the two newest versions (a run in progress may still use the older).
ls -1d "$dest"/[0-9]* 2>/dev/null | sort -V | head -n -2 | while read -r old; do
  say "removing old VM kernel $old"
  rm -rf "$old"
done
say "VM kernel: $dest/$ver/boot/vmlinuz-$ver"
