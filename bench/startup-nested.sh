#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# bench/startup (the first lines of `make bench`: exec to first guest
# instruction and resident memory beside a bare-KVM floor, the control API,
# seccomp and --jail, create -> exit churn) on a host without a usable
# /dev/kvm: in the nested harness's L1 (tests/e2e/nested/run-nested.sh: QEMU
# TCG with emulated SVM), as root, with cgroup v2 mounted there so the
# --jail row is measured too; TMPDIR (/run/tmp, tmpfs) holds the configs,
# sockets and the jail folder. With a usable /dev/kvm it runs here (the jail
# row then needs root and cgroup v2 on this host). In L1 every instruction
# is emulated: milliseconds there are many times a real host's, and the
# ratios are what compare.
# Usage: bench/startup-nested.sh [BUILDDIR] [RUNS]   (default: ., 15)
# BENCH_NESTED_TIMEOUT (default 900 s) bounds the L1 run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bd=$(cd "${1:-.}" && pwd)
runs=${2:-15}
make -s -C "$bd" all bench/startup bench/floor bench/first_insn.bin
set -- "$bd/bench/startup" "$bd/cubicle" "$bd/bench/floor" "$bd/bench/first_insn.bin" "$runs"
if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	exec "$@"
fi
echo "# no usable /dev/kvm here: bench/startup runs in the nested harness's L1" >&2
# L1 sees this host's files read-only; run-nested.sh keeps cubicle's cache
# (compiled seccomp filters, KVM's CPUID table) on L1's tmpfs: the first start compiles them,
# as a user's first start does; the medians are of starts that load them, as
# a user's next are.
exec "$here/../tests/e2e/nested/run-nested.sh" --arch x86_64 \
	--timeout "${BENCH_NESTED_TIMEOUT:-900}" -- sh -c '
		if ! [ -e /sys/fs/cgroup/cgroup.controllers ]; then
			mount -t cgroup2 none /sys/fs/cgroup || echo "# cannot mount cgroup v2: no --jail row" >&2
		fi
		exec "$@"' sh "$@"
