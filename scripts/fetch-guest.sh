#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fetches Debian's stock x86_64 guest (cloud) and nested-L1 (generic) kernels into the user cache, and builds their initramfs images.
#
# Usage: scripts/fetch-guest.sh [--force] [--no-nested]
#
# Nothing is installed: each kernel package is taken with `apt-get download`
# and unpacked with `dpkg-deb -x`. Layout under
# ${CUBICLE_CACHE:-$HOME/.cache/cubicle}/guest/x86_64/:
#   vmlinuz  config  release  package  modules/   the L2 guest (cloud) kernel
#   initramfs.cpio.gz                             the example guest initramfs
#   nested/vmlinuz  config  release  package  modules/  l1-initramfs.cpio.gz
# Running it again skips whatever is already present (--force refetches).

set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cache=${CUBICLE_CACHE:-${HOME:?HOME is not set}/.cache/cubicle}
dest=$cache/guest/x86_64
force=0
nested=1

say() { printf 'fetch-guest: %s\n' "$*" >&2; }
die() { printf 'fetch-guest: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--force) force=1 ;;
	--no-nested) nested=0 ;;
	-h|--help) sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (try --help)" ;;
	esac
	shift
done

for tool in apt-get apt-cache dpkg-deb; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found: this script needs a Debian-like host"
done

# The concrete package a meta package (linux-image-cloud-amd64) points at.
# apt-get update runs at most once, and only if apt does not know the package.
updated=0
resolve() {
	meta=$1
	if ! apt-cache show "$meta" >/dev/null 2>&1; then
		[ $updated = 1 ] && die "apt does not know '$meta' even after apt-get update"
		say "apt does not know $meta; running apt-get update"
		apt-get update >&2 || die "apt-get update failed"
		updated=1
	fi
	apt-cache depends "$meta" 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1
}

# fetch PACKAGE DIR: unpack the package's vmlinuz, config and modules into DIR.
fetch() {
	pkg=$1 dir=$2
	if [ $force = 0 ] && [ -s "$dir/vmlinuz" ] && [ -d "$dir/modules" ] &&
	   [ "$(cat "$dir/package" 2>/dev/null)" = "$pkg" ]; then
		say "$pkg already in $dir"
		return 0
	fi
	mkdir -p "$dir"
	tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT INT TERM
	say "downloading $pkg"
	# As root, apt would drop to _apt, which cannot write into $HOME.
	sandbox=
	[ "$(id -u)" = 0 ] && sandbox="-o APT::Sandbox::User=root"
	(cd "$tmp" && apt-get $sandbox download "$pkg" >&2) || die "apt-get download $pkg failed"
	deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
	[ -n "$deb" ] || die "apt-get download $pkg produced no .deb"
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
	pkg=$(resolve linux-image-cloud-amd64)
	[ -n "$pkg" ] || die "cannot resolve linux-image-cloud-amd64 to a concrete kernel package"
	fetch "$pkg" "$dest"
else
	say "guest kernel $(cat "$dest/package") already in $dest"
fi

if [ $force = 1 ] || [ ! -s "$dest/initramfs.cpio.gz" ] ||
   [ "$top/scripts/build-initramfs.sh" -nt "$dest/initramfs.cpio.gz" ]; then
	"$here/build-initramfs.sh" "$dest/modules" "$dest/initramfs.cpio.gz" ||
		die "building the guest initramfs failed"
fi

if [ $nested = 1 ]; then
	if [ $force = 1 ] || ! have "$dest/nested"; then
		# The generic kernel (unlike cloud) has 9p; take the unsigned
		# image so its vmlinuz is the plain bzImage.
		gen=$(resolve linux-image-amd64)
		[ -n "$gen" ] || die "cannot resolve linux-image-amd64 to a concrete kernel package"
		case $gen in *-unsigned) ;; *) gen=$gen-unsigned ;; esac
		apt-cache show "$gen" >/dev/null 2>&1 || die "apt does not know $gen"
		fetch "$gen" "$dest/nested"
	else
		say "nested L1 kernel $(cat "$dest/nested/package") already in $dest/nested"
	fi
	l1init=$top/tests/e2e/nested/l1-init.sh
	out=$dest/nested/l1-initramfs.cpio.gz
	if [ -f "$l1init" ] && { [ $force = 1 ] || [ ! -s "$out" ] || [ "$l1init" -nt "$out" ]; }; then
		"$here/build-initramfs.sh" --init "$l1init" \
			--modules "virtio_pci 9pnet_virtio 9p kvm-amd" \
			"$dest/nested/modules" "$out" || die "building the L1 initramfs failed"
	fi
fi

say "done: $dest"
