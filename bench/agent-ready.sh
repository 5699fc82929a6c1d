#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `make bench-agent`: time from exec of cubicle to "ready for code" (cubicle-agent's READY
# on vsock port 49984) beside the time to the example initramfs's marker in a VM without
# vsock or agent (bench/agent_ready.c), both with Debian's stock cloud kernel. Where this
# host's KVM cannot boot Linux (no VT-x/AMD-V, or PVM), it runs in the nested harness's L1
# (tests/e2e/nested/run-nested.sh), where only the ratio means something.
# Usage: bench/agent-ready.sh [BUILDDIR] [RUNS]   (defaults: the current folder, 5)
# BENCH_NESTED_TIMEOUT (default 1800 s) bounds the L1 run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
bd=$(cd "${1:-.}" && pwd)
runs=${2:-5}
cache=${CUBICLE_CACHE:-$HOME/.cache/cubicle}
guest=$cache/guest/x86_64
[ -s "$guest/vmlinuz" ] || { echo "bench-agent: no guest kernel: run scripts/fetch-guest.sh" >&2; exit 1; }
make -s -C "$bd" cubicle agent/cubicle-agent bench/agent_ready
w=$bd/bench/agent-ready.work
rm -rf "$w" && mkdir -p "$w"
# The same example /init in both; only one carries the agent.
"$top/scripts/build-initramfs.sh" "$guest/modules" "$w/plain.cpio.gz" 2>"$w/initramfs.log"
"$top/scripts/build-initramfs.sh" --agent "$bd/agent/cubicle-agent" "$guest/modules" "$w/agent.cpio.gz" \
	2>>"$w/initramfs.log"
set -- "$bd/bench/agent_ready" "$bd/cubicle" "$guest/vmlinuz" "$w/plain.cpio.gz" "$w/agent.cpio.gz" "$runs"
. "$top/tests/e2e/lib.sh"
if host_boots_linux; then
	exec "$@"
fi
echo "# this host's KVM cannot boot Linux: bench/agent_ready runs in the nested harness's L1" >&2
exec "$top/tests/e2e/nested/run-nested.sh" --arch x86_64 --timeout "${BENCH_NESTED_TIMEOUT:-1800}" -- "$@"
