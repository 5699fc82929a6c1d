#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages cubicle needs to build, test and boot its
# example guest (--test: and what only the tests use). Uses sudo when not root. Safe to run again.
set -eu
pkgs="build-essential autoconf automake libtool pkg-config
libconfig-dev libffi-dev libzstd-dev libxxhash-dev libseccomp-dev zlib1g-dev liblz4-dev libbpf-dev libcunit1-dev
libhttp-parser-dev libjansson-dev libc-ares-dev libcurl4-gnutls-dev libarchive-dev nettle-dev curl
qemu-system-x86 busybox-static cpio kmod xz-utils ca-certificates
e2fsprogs xfsprogs clang llvm bpftool zstd libfdt-dev device-tree-compiler
python3 file mmdebstrap"
# --test: also what only the test suite uses (headless Chromium for the
# status page of cubicle serve; bindfs, a FUSE mount for the agent's watch
# of a network file system)
[ "${1:-}" = --test ] && pkgs="$pkgs chromium bindfs"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "deps: installing$missing" >&2
$sudo apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing >&2
