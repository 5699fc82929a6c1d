#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs what an ARM64 cross build needs on an x86_64 Debian 12 host: the cross compiler, the arm64 -dev packages through multiarch, QEMU (user mode for the arm64 unit tests, system mode for the nested e2e), `file`, and an arm64 libfdt sysroot.
#
# Usage: scripts/deps-arm64.sh [--download-only]
#
# --download-only fetches the missing packages into apt's cache and installs
# nothing (after adding the arm64 architecture and `apt-get update`): CI runs
# it beside its first stage, so the later install changes nothing under
# programs that are running, and is quick.
#
# Uses sudo when not root. Safe to run again: it does nothing when everything
# is already there. libfdt-dev:arm64 cannot be installed beside libfdt-dev
# (amd64), so its .deb is unpacked (not installed) into
#   ${CUBICLE_CACHE:-$HOME/.cache/cubicle}/sysroot-arm64
# where `configure --host=aarch64-linux-gnu` looks by default
# (`--with-libfdt=DIR` points it elsewhere). libfdt1:arm64, the run-time
# library, installs normally through multiarch. libhttp-parser-dev:arm64 goes
# into the same sysroot for its static library (cubicle-agent links it in).
# http-parser's header is the
# one libhttp-parser-dev (amd64, from scripts/deps.sh) puts in /usr/include,
# which the cross compiler reads too (that -dev package is not multiarch);
# cubicle dlopens the library, libhttp-parser2.9:arm64, at run time.
set -eu
download_only=0
case "${1:-}" in
--download-only) download_only=1 ;;
"") ;;
*) printf 'usage: scripts/deps-arm64.sh [--download-only]\n' >&2; exit 2 ;;
esac

say() { printf 'deps-arm64: %s\n' "$*" >&2; }
die() { printf 'deps-arm64: error: %s\n' "$*" >&2; exit 1; }

for tool in dpkg apt-get dpkg-deb dpkg-query; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found: this script needs a Debian host"
done
[ "$(dpkg --print-architecture)" = amd64 ] ||
	die "this host is $(dpkg --print-architecture); the cross setup is for amd64 hosts (on arm64, use scripts/deps.sh and a native build)"

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
cache=${CUBICLE_CACHE:-${HOME:?HOME is not set}/.cache/cubicle}
sysroot=$cache/sysroot-arm64
fdt_ver_file=$sysroot/.libfdt-version

pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu
libconfig-dev:arm64 libseccomp-dev:arm64 libffi-dev:arm64 libzstd-dev:arm64 libxxhash-dev:arm64 zlib1g-dev:arm64 libbpf-dev:arm64 libcunit1-dev:arm64
libhttp-parser2.9:arm64 libjansson-dev:arm64 libc-ares-dev:arm64 libcurl4-gnutls-dev:arm64 nettle-dev:arm64
libfdt1:arm64 pkgconf:arm64 qemu-user-static qemu-system-arm file"

installed() {
	dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q "install ok installed"
}

# 1. The arm64 architecture, once.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	say "adding the arm64 architecture (dpkg --add-architecture arm64)"
	$sudo dpkg --add-architecture arm64
	new_arch=1
else
	new_arch=0
fi

missing=
for p in $pkgs; do
	installed "$p" || missing="$missing $p"
done

updated=0
apt_update() {
	[ $updated = 1 ] && return 0
	say "apt-get update"
	$sudo apt-get update -q >/dev/null || die "apt-get update failed"
	updated=1
}

# 2. The packages that install beside the host's own.
if [ -n "$missing" ] || [ $new_arch = 1 ]; then
	apt_update
fi
if [ $download_only = 1 ]; then
	if [ -n "$missing" ]; then
		say "downloading$missing"
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --download-only --no-install-recommends \
			$missing >/dev/null || die "apt-get install --download-only failed for:$missing"
	fi
	say "downloaded: nothing installed"
	exit 0
fi
if [ -n "$missing" ]; then
	say "installing$missing"
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing \
		>/dev/null || die "apt-get install failed for:$missing"
fi

# 3. libfdt-dev:arm64 into the sysroot, at the version of the installed libfdt1:arm64.
fdt_ver=$(dpkg-query -W -f='${Version}' libfdt1:arm64)
if [ "$(cat "$fdt_ver_file" 2>/dev/null)" != "$fdt_ver" ] ||
   [ ! -e "$sysroot/usr/lib/aarch64-linux-gnu/libfdt.so" ] ||
   [ ! -e "$sysroot/usr/include/libfdt.h" ]; then
	say "unpacking libfdt-dev:arm64 $fdt_ver into $sysroot"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -q "libfdt-dev:arm64=$fdt_ver" "libfdt1:arm64=$fdt_ver" >/dev/null 2>&1) || {
		apt_update
		(cd "$tmp" && apt-get download -q "libfdt-dev:arm64=$fdt_ver" "libfdt1:arm64=$fdt_ver" >/dev/null) ||
			die "apt-get download libfdt-dev:arm64 libfdt1:arm64 failed"
	}
	rm -rf "$sysroot.new"
	mkdir -p "$sysroot.new"
	for deb in "$tmp"/*.deb; do
		dpkg-deb -x "$deb" "$sysroot.new" || die "dpkg-deb -x $deb failed"
	done
	[ -e "$sysroot.new/usr/lib/aarch64-linux-gnu/libfdt.so" ] ||
		die "libfdt-dev:arm64 did not hold usr/lib/aarch64-linux-gnu/libfdt.so"
	echo "$fdt_ver" >"$sysroot.new/.libfdt-version"
	rm -rf "$sysroot"
	mv "$sysroot.new" "$sysroot"
fi

# 3b. libhttp-parser-dev:arm64 (libhttp_parser.a, for the static cubicle-agent)
# into the same sysroot, at the version of the installed libhttp-parser2.9:arm64:
# like libfdt-dev, it cannot be installed beside the amd64 -dev package.
hp_ver=$(dpkg-query -W -f='${Version}' libhttp-parser2.9:arm64)
if [ "$(cat "$sysroot/.http-parser-version" 2>/dev/null)" != "$hp_ver" ] ||
   [ ! -e "$sysroot/usr/lib/aarch64-linux-gnu/libhttp_parser.a" ]; then
	say "unpacking libhttp-parser-dev:arm64 $hp_ver into $sysroot"
	hptmp=$(mktemp -d)
	(cd "$hptmp" && apt-get download -q "libhttp-parser-dev:arm64=$hp_ver" "libhttp-parser2.9:arm64=$hp_ver" >/dev/null 2>&1) || {
		apt_update
		(cd "$hptmp" && apt-get download -q "libhttp-parser-dev:arm64=$hp_ver" "libhttp-parser2.9:arm64=$hp_ver" >/dev/null) ||
			{ rm -rf "$hptmp"; die "apt-get download libhttp-parser-dev:arm64 libhttp-parser2.9:arm64 failed"; }
	}
	for deb in "$hptmp"/*.deb; do
		dpkg-deb -x "$deb" "$sysroot" || { rm -rf "$hptmp"; die "dpkg-deb -x $deb failed"; }
	done
	rm -rf "$hptmp"
	[ -e "$sysroot/usr/lib/aarch64-linux-gnu/libhttp_parser.a" ] ||
		die "libhttp-parser-dev:arm64 did not hold usr/lib/aarch64-linux-gnu/libhttp_parser.a"
	echo "$hp_ver" >"$sysroot/.http-parser-version"
fi

# 4. A last check that the pieces a cross build uses are really there.
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-pkg-config qemu-aarch64-static qemu-system-aarch64; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' is still missing after the install"
done
aarch64-linux-gnu-pkg-config --exists libconfig libffi libzstd libbpf cunit ||
	die "aarch64-linux-gnu-pkg-config does not find the arm64 .pc files"
[ -n "$missing" ] && say "ready: ./configure --host=aarch64-linux-gnu (libfdt from $sysroot)"
exit 0
