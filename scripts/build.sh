#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Configures and builds cubicle in a build folder (default: build/).
# Usage: scripts/build.sh [BUILDDIR] [configure options...]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
bd=${1:-$src/build}
[ $# -gt 0 ] && shift
[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi)
mkdir -p "$bd"
cd "$bd"
if [ ! -f Makefile ] || [ "$src/configure" -nt Makefile ]; then
	"$src/configure" -q "$@"
fi
make -j"$(nproc)" >/dev/null
echo "build: $bd/cubicle" >&2
