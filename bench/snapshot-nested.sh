#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench/snapshot (what `make bench-snapshot` runs) on a host without a usable
# /dev/kvm: in the nested harness's L1 (tests/e2e/nested/run-nested.sh: QEMU
# TCG with emulated SVM), which sees this root read-only and whose TMPDIR
# (/run/tmp, tmpfs) holds the sockets and snapshots. With a usable /dev/kvm
# it runs here. In L1 everything is emulated and slow: only the ratios mean
# something, and those less than on a real host.
# Usage: bench/snapshot-nested.sh [BUILDDIR] [-- SNAPSHOT-ARGS...]
#   BUILDDIR       a configured build (default: the current folder)
#   SNAPSHOT-ARGS  bench/snapshot's options and guest MiB; the default is
#                  make bench-snapshot's with a longer timeout:
#                  -r 5 -n 50 -c 3 -b 20 -t 600 128 2048
# BENCH_NESTED_TIMEOUT (default 1800 s) bounds the L1 run, BENCH_NESTED_MEM
# (default 3072 MiB) is L1's RAM.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bd=.
if [ $# -gt 0 ] && [ "$1" != -- ]; then
	bd=$1
	shift
fi
[ $# -gt 0 ] && [ "$1" = -- ] && shift
[ $# -gt 0 ] || set -- -r 5 -n 50 -c 3 -b 20 -t 600 128 2048
bd=$(cd "$bd" && pwd)
make -s -C "$bd" bench-snapshot-programs
set -- "$bd/bench/snapshot" "$bd/cubicle" "$bd/bench/snap_floor" "$bd/bench/snap_guest.bin" "$@"
if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	exec "$@"
fi
echo "# no usable /dev/kvm here: bench/snapshot runs in the nested harness's L1" >&2
exec "$here/../tests/e2e/nested/run-nested.sh" --arch x86_64 \
	--timeout "${BENCH_NESTED_TIMEOUT:-1800}" --mem "${BENCH_NESTED_MEM:-3072}" -- "$@"
