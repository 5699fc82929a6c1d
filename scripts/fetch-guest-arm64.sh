#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fetches Debian's stock arm64 guest (cloud) and nested-L1 (generic) kernels and an arm64 static busybox into the user cache, and builds the example guest initramfs.
#
# Usage: scripts/fetch-guest-arm64.sh [--force] [--no-nested]
#
# Nothing is installed: the packages are taken with `apt-get download` (after
# `dpkg --add-architecture arm64` and `apt-get update` when apt does not know
# them yet: that part needs root) and unpacked with `dpkg-deb -x`. Layout under
# ${CUBICLE_CACHE:-$HOME/.cache/cubicle}/guest/aarch64/:
#   vmlinuz  config  release  package  modules/   the L2 guest (cloud) kernel
#   busybox                                       arm64 static busybox
#   initramfs.cpio.gz                             the example guest initramfs
#                                                 (/init: tests/e2e/guest-init-arm64.sh)
#   nested/vmlinuz  config  release  package  modules/   the L1 (generic) kernel
#   (tests/e2e/nested/run-nested-arm64.sh builds nested/l1-initramfs.cpio.gz)
# Running it again skips whatever is already present (--force refetches).

set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cache=${CUBICLE_CACHE:-${HOME:?HOME is not set}/.cache/cubicle}
dest=$cache/guest/aarch64
force=0
nested=1

say() { printf 'fetch-guest-arm64: %s\n' "$*" >&2; }
die() { printf 'fetch-guest-arm64: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--force) force=1 ;;
	--no-nested) nested=0 ;;
	-h|--help) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (try --help)" ;;
	esac
	shift
done

for tool in apt-get apt-cache dpkg dpkg-deb; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found: this script needs a Debian-like host"
done

# apt must know arm64 packages: add the foreign architecture and refresh the
# lists at most once, and only when a package is unknown.
updated=0
known() { apt-cache show "$1" >/dev/null 2>&1; }
need() {
	known "$1" && return 0
	[ $updated = 1 ] && die "apt does not know '$1' even after apt-get update"
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		say "adding the arm64 architecture to dpkg"
		dpkg --add-architecture arm64 || die "dpkg --add-architecture arm64 failed (needs root)"
	fi
	say "apt does not know $1; running apt-get update"
	apt-get -o DPkg::Lock::Timeout=300 update >&2 || die "apt-get update failed"
	updated=1
	known "$1" || die "apt does not know '$1' even after apt-get update"
}

# The concrete unsigned kernel package a meta package points at:
# linux-image-cloud-arm64 -> linux-image-6.1.0-NN-cloud-arm64-unsigned:arm64.
resolve() {
	need "$1:arm64"
	pkg=$(apt-cache depends "$1:arm64" 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
	pkg=${pkg%:arm64}
	[ -n "$pkg" ] || die "cannot resolve $1:arm64 to a concrete kernel package"
	case $pkg in *-unsigned) ;; *) pkg=$pkg-unsigned ;; esac
	need "$pkg:arm64"
	echo "$pkg:arm64"
}

# download PACKAGE DIR: apt-get download into DIR, print the .deb's path.
download() {
	# As root, apt would drop to _apt, which cannot write into $HOME.
	sandbox=
	[ "$(id -u)" = 0 ] && sandbox="-o APT::Sandbox::User=root"
	(cd "$2" && apt-get $sandbox download "$1" >&2) || die "apt-get download $1 failed"
	deb=$(ls "$2"/*.deb 2>/dev/null | head -n 1)
	[ -n "$deb" ] || die "apt-get download $1 produced no .deb"
	echo "$deb"
}

# fetch PACKAGE DIR: unpack the package's vmlinuz (an arm64 Image), config
# and modules into DIR.
fetch() {
	pkg=$1 dir=$2
	mkdir -p "$dir"
	tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT INT TERM
	say "downloading $pkg"
	deb=$(download "$pkg" "$tmp")
	say "unpacking $(basename "$deb")"
	dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
	rel=$(ls "$tmp/root/lib/modules" 2>/dev/null | head -n 1)
	[ -n "$rel" ] || die "$pkg has no lib/modules/<release>"
	[ -f "$tmp/root/boot/vmlinuz-$rel" ] || die "$pkg has no boot/vmlinuz-$rel"
	rm -rf "$dir/modules"
	mv "$tmp/root/lib/modules/$rel" "$dir/modules"
	mv "$tmp/root/boot/vmlinuz-$rel" "$dir/vmlinuz.new"
	cp "$tmp/root/boot/config-$rel" "$dir/config" 2>/dev/null || true
	echo "$rel" >"$dir/release"
	mv "$dir/vmlinuz.new" "$dir/vmlinuz"
	echo "$pkg" >"$dir/package"
	rm -rf "$tmp"
	trap - EXIT INT TERM
	say "$pkg -> $dir (release $rel)"
}

# Skip apt entirely when the cache is already complete.
have() { [ -s "$1/vmlinuz" ] && [ -d "$1/modules" ] && [ -s "$1/package" ]; }

if [ $force = 1 ] || ! have "$dest"; then
	fetch "$(resolve linux-image-cloud-arm64)" "$dest"
else
	say "guest kernel $(cat "$dest/package") already in $dest"
fi

if [ $force = 1 ] || [ ! -s "$dest/busybox" ]; then
	need busybox-static:arm64
	tmp=$(mktemp -d "$dest/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT INT TERM
	deb=$(download busybox-static:arm64 "$tmp")
	dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
	[ -s "$tmp/root/bin/busybox" ] || die "$(basename "$deb") has no bin/busybox"
	mv "$tmp/root/bin/busybox" "$dest/busybox"
	chmod 755 "$dest/busybox"
	rm -rf "$tmp"
	trap - EXIT INT TERM
	say "busybox-static:arm64 -> $dest/busybox"
fi

# The example guest (examples/hello-arm64.cfg): the virtio-mmio disk stack.
# In the cloud flavour virtio and virtio_ring are modules as well.
ginit=$top/tests/e2e/guest-init-arm64.sh
out=$dest/initramfs.cpio.gz
if [ $force = 1 ] || [ ! -s "$out" ] || [ "$ginit" -nt "$out" ] ||
   [ "$here/build-initramfs.sh" -nt "$out" ]; then
	"$here/build-initramfs.sh" --busybox "$dest/busybox" --init "$ginit" \
		--modules "virtio virtio_ring virtio_mmio virtio_blk" \
		"$dest/modules" "$out" || die "building the guest initramfs failed"
fi

if [ $nested = 1 ]; then
	if [ $force = 1 ] || ! have "$dest/nested"; then
		# The generic flavour (unlike cloud) has 9p; KVM is built in.
		fetch "$(resolve linux-image-arm64)" "$dest/nested"
	else
		say "nested L1 kernel $(cat "$dest/nested/package") already in $dest/nested"
	fi
fi

say "done: $dest"
