#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The benchmarks that need no KVM (virtio-blk's and virtio-net's host paths
# against plain syscalls, `make bench-blk` and `make bench-net`; a start
# under the stand-in KVM, `make bench-jail`) run once,
# small, so that `make bench` cannot break unseen: each must finish with
# status 0 and print its ratio rows. Their figures are not judged here
# (timings belong to `make bench`, not to a test). bench/startup, the
# start against a bare KVM program, runs where /dev/kvm does.
set -u
bd=${top_builddir:-.}
if [ -n "${TEST_RUNNER:-}" ]; then
	echo "SKIP: a cross build's benchmarks run under $TEST_RUNNER"
	exit 77
fi
if [ "${CUBICLE_ARCH:-x86_64}" != x86_64 ]; then
	echo "SKIP: the benchmarks are built for x86_64 builds (this one: $CUBICLE_ARCH)"
	exit 77
fi
fail=0
n=0
# run NAME ROWS ARGS...: the benchmark ARGS, which must print ROWS lines with a ratio
run() {
	name=$1 rows=$2
	shift 2
	n=$((n + 1))
	out=$("$@" 2>&1)
	rc=$?
	got=$(printf '%s\n' "$out" | grep -c 'ratio')
	if [ $rc -ne 0 ] || [ "$got" -lt "$rows" ]; then
		printf '%s\n' "$out" | sed 's/^/# /'
		echo "not ok $n - $name (status $rc, $got ratio rows of $rows)"
		fail=1
	else
		printf '%s\n' "$out" | sed 's/^/# /'
		echo "ok $n - $name"
	fi
}
run "bench/blk" 4 "$bd/bench/blk" 16 1
run "bench/net" 2 "$bd/bench/net" 1
# bench/jail_setup (make bench-jail): the stand-in KVM carries cubicle, with
# and without seccomp and jailed, and the floor from exec to their first
# KVM_RUN; as root with cgroup v2 (it says "not measured" otherwise)
n=$((n + 1))
insn=$bd/bench/first_insn.bin
[ -f "$insn" ] || insn=${top_srcdir:-.}/bench/first_insn.bin
out=$("$bd/bench/jail_setup" "$(cd "$bd" && pwd)/cubicle" "$(cd "$bd" && pwd)/bench/kvm_standin.so" \
	"$(cd "$(dirname "$insn")" && pwd)/$(basename "$insn")" 1 "$(cd "$bd" && pwd)/bench/floor" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q 'not measured'; then
	echo "ok $n - bench/jail_setup # SKIP $(printf '%s\n' "$out" | grep 'not measured' | head -1 | sed 's/^ *//')"
elif [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "beside the floor: [0-9.]*x to KVM_CREATE_VM, [0-9.]*x to the first KVM_RUN"; then
	echo "ok $n - bench/jail_setup"
else
	echo "not ok $n - bench/jail_setup (status $rc)"
	fail=1
fi
# bench/startup (make bench's first rows), one round, where this host's KVM
# runs the payload guest (elsewhere make bench runs it in the nested
# harness: bench/startup-nested.sh)
if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	run "bench/startup" 9 "$bd/bench/startup" "$(cd "$bd" && pwd)/cubicle" "$bd/bench/floor" \
		"$(cd "$(dirname "$insn")" && pwd)/$(basename "$insn")" 1
else
	n=$((n + 1))
	echo "ok $n - bench/startup # SKIP no usable /dev/kvm"
fi
exit $fail
