#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `make bench-microvm`: cubicle beside QEMU's microvm machine booting the same stock
# Debian kernel and busybox initramfs to the init's console marker (bench/microvm.c).
# Where this host's KVM cannot boot Linux (no VT-x/AMD-V, or PVM), both run in the
# nested harness's L1 (tests/e2e/nested/run-nested.sh), where only the ratio means
# something.
# Usage: bench/microvm.sh [BUILDDIR] [RUNS]   (defaults: the current folder, 5)
# BENCH_NESTED_TIMEOUT (default 1800 s) bounds the L1 run.
set -eu
. "$(dirname "$0")/lib.sh"
bench_guest bench-microvm
bd=$(cd "${1:-.}" && pwd)
runs=${2:-5}
qemu=$(command -v qemu-system-x86_64) ||
	{ echo "bench-microvm: no qemu-system-x86_64: apt-get install qemu-system-x86" >&2; exit 1; }
make -s -C "$bd" cubicle plugins/devices/serial8250.la bench/microvm
w=$bd/bench/microvm.work
rm -rf "$w" && mkdir -p "$w"
"$top/scripts/build-initramfs.sh" "$guest/modules" "$w/plain.cpio.gz" 2>"$w/initramfs.log"
bench_exec "$bd/bench/microvm" "$bd/cubicle" "$qemu" "$guest/vmlinuz" "$w/plain.cpio.gz" "$runs"
