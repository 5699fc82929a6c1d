#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# README command 1: install dependencies, build, fetch the guest kernel and
# initramfs, and boot examples/hello.cfg. On a host whose KVM cannot boot a
# stock kernel (PVM, or no VT-x/AMD-V) it boots through the nested harness
# (tests/e2e/nested) and says so.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
"$src/scripts/deps.sh"
"$src/scripts/build.sh" "$src/build" --enable-werror
# The example initramfs carries cubicle-agent (for `cubicle exec`/`cp` once
# the VM has a vsock device: see examples/hello.cfg).
CUBICLE_AGENT="$src/build/agent/cubicle-agent" "$src/scripts/fetch-guest.sh"
. "$src/tests/e2e/lib.sh"
cub="$src/build/cubicle"
if host_boots_linux; then
	echo "quickstart: booting examples/hello.cfg directly on this host's KVM" >&2
	exec "$cub" run "$src/examples/hello.cfg" "$@"
fi
echo "quickstart: this host's KVM cannot boot a stock kernel ($("$cub" check-host | sed -n 's/^boots stock Linux kernels  *//p'))" >&2
echo "quickstart: booting examples/hello.cfg inside the nested harness (QEMU TCG -> KVM -> cubicle), about a minute" >&2
exec "$src/tests/e2e/nested/run-nested.sh" --arch x86_64 --show -- "$cub" run "$src/examples/hello.cfg" "$@"
