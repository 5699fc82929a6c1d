#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Fetches Debian's stock guest (cloud) and nested-L1 (generic) kernels for x86_64 or aarch64 into the user cache, and builds the guest and L1 initramfs images.
#
# Usage: scripts/fetch-guest.sh [--arch x86_64|aarch64] [--force] [--no-nested]
#
# --arch defaults to this host's (uname -m). Nothing is installed: each
# package is taken with `apt-get download` and unpacked with `dpkg-deb -x`
# (for aarch64 on another host, after `dpkg --add-architecture arm64` and
# `apt-get update` when apt does not know the packages yet: that part needs
# root). Layout under ${CUBICLE_CACHE:-$HOME/.cache/cubicle}/guest/ARCH/:
#   vmlinuz  config  release  package  modules/   the L2 guest (cloud) kernel
#   busybox                  aarch64 only: arm64 static busybox (x86_64 uses
#                            the host's busybox-static)
#   initramfs.cpio.gz        the example guest initramfs (aarch64's /init:
#                            tests/e2e/guest-init-arm64.sh); x86_64: with
#                            $CUBICLE_AGENT (a static cubicle-agent, as
#                            scripts/quickstart.sh sets) it carries the agent
#   nested/vmlinuz  config  release  package  modules/   the L1 (generic)
#   kernel, and nested/l1-initramfs.cpio.gz (built by
#   tests/e2e/nested/run-nested.sh --prepare, which rebuilds it when stale)
# Running it again skips whatever is already present (--force refetches).

set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cache=${CUBICLE_CACHE:-${HOME:?HOME is not set}/.cache/cubicle}
arch=$(uname -m)
force=0
nested=1

say() { printf 'fetch-guest: %s\n' "$*" >&2; }
die() { printf 'fetch-guest: error: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--arch) [ $# -ge 2 ] || die "--arch needs x86_64 or aarch64"; arch=$2; shift ;;
	--arch=*) arch=${1#--arch=} ;;
	--force) force=1 ;;
	--no-nested) nested=0 ;;
	-h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
	*) die "unknown argument '$1' (try --help)" ;;
	esac
	shift
done

# Per arch: Debian's name for it, the two kernel flavours' meta packages,
# whether the L2 kernel is taken unsigned too (the L1 always is: its vmlinuz
# is then the plain image).
case $arch in
x86_64|amd64) arch=x86_64 darch=amd64 l2_unsigned=0 ;;
aarch64|arm64) arch=aarch64 darch=arm64 l2_unsigned=1 ;;
*) die "unknown --arch '$arch' (x86_64 or aarch64)" ;;
esac
dest=$cache/guest/$arch
# A foreign architecture's packages are named PKG:ARCH.
sfx=
[ "$(dpkg --print-architecture 2>/dev/null)" = $darch ] || sfx=:$darch

for tool in apt-get apt-cache dpkg dpkg-deb; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found: this script needs a Debian-like host"
done

# need PACKAGE: apt must know it. For a foreign architecture, add it to dpkg;
# apt-get update runs at most once, and only when a package is unknown.
updated=0
known() { apt-cache show "$1" >/dev/null 2>&1; }
need() {
	known "$1" && return 0
	[ $updated = 1 ] && die "apt does not know '$1' even after apt-get update"
	if [ -n "$sfx" ] && ! dpkg --print-foreign-architectures | grep -qx $darch; then
		say "adding the $darch architecture to dpkg"
		dpkg --add-architecture $darch || die "dpkg --add-architecture $darch failed (needs root)"
	fi
	say "apt does not know $1; running apt-get update"
	apt-get -o DPkg::Lock::Timeout=300 update >&2 || die "apt-get update failed"
	updated=1
	known "$1" || die "apt does not know '$1' even after apt-get update"
}

# resolve META UNSIGNED: the concrete kernel package a meta package points at
# (linux-image-cloud-arm64 -> linux-image-6.1.0-NN-cloud-arm64-unsigned:arm64).
resolve() {
	need "$1$sfx"
	pkg=$(apt-cache depends "$1$sfx" 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
	pkg=${pkg%:$darch}
	[ -n "$pkg" ] || die "cannot resolve $1$sfx to a concrete kernel package"
	if [ "$2" = 1 ]; then
		case $pkg in *-unsigned) ;; *) pkg=$pkg-unsigned ;; esac
	fi
	need "$pkg$sfx"
	echo "$pkg$sfx"
}

# download PACKAGE DIR: apt-get download into DIR, print the .deb's path.
download() {
	# As root, apt would drop to _apt, which cannot write into $HOME.
	sandbox=
	[ "$(id -u)" = 0 ] && sandbox="-o APT::Sandbox::User=root"
	# shellcheck disable=SC2086
	(cd "$2" && apt-get $sandbox download "$1" >&2) || die "apt-get download $1 failed"
	deb=$(ls "$2"/*.deb 2>/dev/null | head -n 1)
	[ -n "$deb" ] || die "apt-get download $1 produced no .deb"
	echo "$deb"
}

# fetch PACKAGE DIR: unpack the package's vmlinuz, config and modules into DIR.
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
	fetch "$(resolve linux-image-cloud-$darch $l2_unsigned)" "$dest"
else
	say "guest kernel $(cat "$dest/package") already in $dest"
fi

# The guest initramfs. x86_64: build-initramfs.sh's own example /init, the
# host's busybox and the virtio-pci set. aarch64: an arm64 busybox, the
# virtio-mmio disk stack (in the cloud flavour virtio and virtio_ring are
# modules as well) and tests/e2e/guest-init-arm64.sh.
set --
if [ $arch = aarch64 ]; then
	if [ $force = 1 ] || [ ! -s "$dest/busybox" ]; then
		need busybox-static$sfx
		tmp=$(mktemp -d "$dest/.fetch.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT INT TERM
		deb=$(download busybox-static$sfx "$tmp")
		dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x $deb failed"
		[ -s "$tmp/root/bin/busybox" ] || die "$(basename "$deb") has no bin/busybox"
		mv "$tmp/root/bin/busybox" "$dest/busybox"
		chmod 755 "$dest/busybox"
		rm -rf "$tmp"
		trap - EXIT INT TERM
		say "busybox-static$sfx -> $dest/busybox"
	fi
	ginit=$top/tests/e2e/guest-init-arm64.sh
	set -- --busybox "$dest/busybox" --init "$ginit" --modules "virtio virtio_ring virtio_mmio virtio_blk"
fi
agent=
if [ $arch = x86_64 ] && [ -n "${CUBICLE_AGENT:-}" ]; then
	[ -x "$CUBICLE_AGENT" ] || die "CUBICLE_AGENT=$CUBICLE_AGENT is not an executable"
	agent=$CUBICLE_AGENT
	set -- --agent "$agent"
fi
out=$dest/initramfs.cpio.gz
# The agent that went in last time (none: an empty file); another one rebuilds.
[ "$(cat "$dest/initramfs.agent" 2>/dev/null)" = "$agent" ] || rm -f "$dest/initramfs.agent"
if [ $force = 1 ] || [ ! -s "$out" ] || [ "$here/build-initramfs.sh" -nt "$out" ] ||
   [ ! -f "$dest/initramfs.agent" ] || { [ -n "$agent" ] && [ "$agent" -nt "$out" ]; } ||
   { [ $arch = aarch64 ] && { [ "$ginit" -nt "$out" ] || [ "$dest/busybox" -nt "$out" ]; }; }; then
	"$here/build-initramfs.sh" "$@" "$dest/modules" "$out" ||
		die "building the guest initramfs failed"
	echo "$agent" >"$dest/initramfs.agent"
fi

if [ $nested = 1 ]; then
	if [ $force = 1 ] || ! have "$dest/nested"; then
		# The generic flavour (unlike cloud) has 9p.
		fetch "$(resolve linux-image-$darch 1)" "$dest/nested"
	else
		say "nested L1 kernel $(cat "$dest/nested/package") already in $dest/nested"
	fi
	# The L1 initramfs: run-nested.sh knows what goes in it.
	[ $force = 1 ] && rm -f "$dest/nested/l1-initramfs.cpio.gz"
	"$top/tests/e2e/nested/run-nested.sh" --arch $arch --prepare ||
		die "preparing the nested harness failed"
fi

say "done: $dest"
