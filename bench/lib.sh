# SPDX-License-Identifier: Apache-2.0
# Sourced by the benchmark scripts that boot a stock kernel (agent-ready.sh,
# microvm.sh): where to find things, and how to run where this host's KVM
# cannot boot Linux.

# bench_guest NAME: $top (the source tree) and $guest (the fetched x86
# guest's folder), or exit 1 saying NAME needs scripts/fetch-guest.sh.
bench_guest() {
	top=$(cd "$(dirname "$0")/.." && pwd)
	guest=${CUBICLE_CACHE:-$HOME/.cache/cubicle}/guest/x86_64
	[ -s "$guest/vmlinuz" ] || { echo "$1: no guest kernel: run scripts/fetch-guest.sh" >&2; exit 1; }
}

# bench_exec PROGRAM ARG...: replaced by the program, run directly where
# this host's KVM boots Linux, else in the nested harness's L1 (where only
# ratios mean something); BENCH_NESTED_TIMEOUT (default 1800 s) bounds L1.
bench_exec() {
	. "$top/tests/e2e/lib.sh"
	if host_boots_linux; then
		exec "$@"
	fi
	echo "# this host's KVM cannot boot Linux: ${1##*/} runs in the nested harness's L1" >&2
	exec "$top/tests/e2e/nested/run-nested.sh" --arch x86_64 --timeout "${BENCH_NESTED_TIMEOUT:-1800}" -- "$@"
}
