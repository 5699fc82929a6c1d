#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Makes the example Debian 12 root file system that `cubicle serve`'s
# `base` template is built from (cubicle-serve(1), TEMPLATES):
#
#   scripts/debian-rootfs.sh base.ext4
#   cubicle template build base vm.cfg --ext4 base.ext4
#
# The tree is mmdebstrap's minbase variant of bookworm (dash, bash,
# coreutils, apt and what they need), a user `user` (uid and gid 1000,
# home /home/user, shell bash) as E2B's sandboxes have, and the packages
# --include names, without manuals, translations and documentation but
# for each package's copyright file; it is written as an ext4 image of SIZE MiB (sparse;
# default 1024). The guest's init (scripts/build-initramfs.sh) mounts it
# and runs the agent there, so nothing of the agent goes into the image.
#
# Usage: scripts/debian-rootfs.sh [--include PKG,...] [--size MIB] IMAGE
# Needs root (the tree's owners are kept), mmdebstrap and mke2fs, and a
# Debian mirror the first time: the bootstrapped tree is kept as a tar in
# ~/.cache/cubicle/debian/ (CUBICLE_CACHE overrides ~/.cache/cubicle) and
# used again while it is younger than a week.
set -eu
usage() {
	sed -n 's/^# Usage: /usage: /p' "$0" >&2
	exit 2
}
include=
size=1024
img=
while [ $# -gt 0 ]; do
	case $1 in
	--include) [ $# -ge 2 ] || usage; include=$2; shift 2 ;;
	--include=*) include=${1#*=}; shift ;;
	--size) [ $# -ge 2 ] || usage; size=$2; shift 2 ;;
	--size=*) size=${1#*=}; shift ;;
	-h | --help) sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "debian-rootfs: unknown option $1" >&2; usage ;;
	*) [ -z "$img" ] || usage; img=$1; shift ;;
	esac
done
[ -n "$img" ] || usage
case $size in '' | *[!0-9]*) echo "debian-rootfs: --size $size: a number of MiB" >&2; exit 2 ;; esac
[ "$size" -ge 256 ] || { echo "debian-rootfs: --size $size: the tree needs 256 MiB or more" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "debian-rootfs: root is needed (mmdebstrap keeps the tree's owners)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "debian-rootfs: mmdebstrap is needed (apt-get install mmdebstrap)" >&2; exit 1; }
mke2fs=$(command -v mke2fs || echo /sbin/mke2fs)
[ -x "$mke2fs" ] || { echo "debian-rootfs: mke2fs is needed (apt-get install e2fsprogs)" >&2; exit 1; }

cache=${CUBICLE_CACHE:-$HOME/.cache/cubicle}/debian
tag=bookworm-minbase$(printf '%s' "$include" | tr ',' '+' | sed 's/^./-&/')
tar=$cache/$tag.tar
mkdir -p "$cache"
if [ -z "$(find "$tar" -mtime -7 2>/dev/null)" ]; then
	echo "debian-rootfs: bootstrapping Debian 12 (minbase${include:+, $include}) into $tar" >&2
	mmdebstrap --quiet --format=tar --variant=minbase ${include:+--include="$include"} \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--customize-hook='chroot "$1" groupadd -g 1000 user' \
		--customize-hook='chroot "$1" useradd -m -u 1000 -g 1000 -s /bin/bash user' \
		--customize-hook='echo cubicle > "$1/etc/hostname"' \
		bookworm "$tar.new" || { rm -f "$tar.new"; echo "debian-rootfs: mmdebstrap failed" >&2; exit 1; }
	mv "$tar.new" "$tar"
fi
tree=$(mktemp -d "${TMPDIR:-/tmp}/cubicle-rootfs.XXXXXX")
trap 'rm -rf "$tree"' EXIT
tar -C "$tree" --numeric-owner -xpf "$tar"
rm -f "$img"
"$mke2fs" -q -F -t ext4 -L cubicle-root -d "$tree" "$img" "${size}M" >/dev/null ||
	{ rm -f "$img"; echo "debian-rootfs: mke2fs -d $tree $img failed" >&2; exit 1; }
echo "debian-rootfs: $img: Debian $(cat "$tree/etc/debian_version"), $(du -sm "$tree" | cut -f1) MiB in a $size MiB ext4 image" >&2
