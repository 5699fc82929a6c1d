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
. "$(dirname "$0")/lib.sh"
bench_guest bench-agent
bd=$(cd "${1:-.}" && pwd)
runs=${2:-5}
make -s -C "$bd" cubicle agent/cubicle-agent bench/agent_ready
w=$bd/bench/agent-ready.work
rm -rf "$w" && mkdir -p "$w"
# The same example /init in both; only one carries the agent.
"$top/scripts/build-initramfs.sh" "$guest/modules" "$w/plain.cpio.gz" 2>"$w/initramfs.log"
"$top/scripts/build-initramfs.sh" --agent "$bd/agent/cubicle-agent" "$guest/modules" "$w/agent.cpio.gz" \
	2>>"$w/initramfs.log"
bench_exec "$bd/bench/agent_ready" "$bd/cubicle" "$guest/vmlinuz" "$w/plain.cpio.gz" "$w/agent.cpio.gz" "$runs"
