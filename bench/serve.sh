#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `make bench-serve`: `cubicle serve` as the E2B SDK sees it (issue 15).
#   - create -> first command finished (Sandbox.create, then commands.run),
#     p50 and p95 at concurrency 1 and 10, through the real SDK;
#   - beside it, in the same run, a cold boot of the same template's VM file
#     until its agent has run a command (`cubicle exec`): the ratio is the figure;
#   - PSS per idle sandbox with IDLE (default 50) sandboxes idle: the VMM
#     processes' summed Pss (/proc/PID/smaps_rollup, shared pages split
#     between sharers) over their number (goal: < 25 MiB each).
# Where this host's KVM cannot boot Linux, it all runs in the nested
# harness's L1, where only the ratio means something.
# Usage: bench/serve.sh [BUILDDIR] [RUNS] [IDLE]   (defaults: ., 10, 50)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
bd=$(cd "${1:-.}" && pwd)
runs=${2:-10}
idle=${3:-50}
cache=${CUBICLE_CACHE:-$HOME/.cache/cubicle}
guest=$cache/guest/x86_64
[ -s "$guest/vmlinuz" ] || { echo "bench-serve: no guest kernel: run scripts/fetch-guest.sh" >&2; exit 1; }
command -v node >/dev/null || { echo "bench-serve: node is needed" >&2; exit 1; }
make -s -C "$bd" cubicle agent/cubicle-agent tools/serve/cubicle-serve
"$top/tests/e2b/prepare.sh" "$top" "$bd" >/dev/null
cp "$here/serve-bench.mjs" "$bd/tests/e2b/serve-bench.mjs"
w=$bd/bench/serve.work
rm -rf "$w" && mkdir -p "$w"
"$top/scripts/build-initramfs.sh" --agent "$bd/agent/cubicle-agent" \
	--modules "virtio virtio_ring virtio_pci virtio_console vmw_vsock_virtio_transport" \
	"$guest/modules" "$w/initramfs.cpio.gz" 2>"$w/initramfs.log"
cat >"$w/inner.sh" <<'SCRIPT'
#!/bin/bash
# $1 work folder, $2 kernel, $3 cubicle, $4 the build's tests/e2b, $5 runs, $6 idle,
# $7 the source tree
set -eu
w=$1 k=$2 cub=$3 e2b=$4 runs=$5 idle=$6 top=$7
t=$(mktemp -d)
trap 'pkill -KILL -f "cubicle restore" 2>/dev/null; pkill -f "cubicle-serve" 2>/dev/null; rm -rf "$t"' EXIT
cat >"$w/vm.cfg" <<CFG
machine = { vcpus = 1; memory_mib = 256; };
boot = { kernel = "$k"; initrd = "$w/initramfs.cpio.gz";
  cmdline = "console=ttyS0 reboot=k panic=-1 quiet cubicle.agent"; };
devices = (
  { type = "serial8250"; id = "com1"; console = "file"; path = "$t/console.log"; },
  { type = "virtio-vsock"; id = "vsock0"; guest_cid = 3; uds_path = "$t/cold.sock"; }
);
CFG
now() { date +%s%N; }
# the cold boot, 3 times: exec of cubicle -> a command run by the agent
cold=
for i in 1 2 3; do
	t0=$(now)
	"$cub" run "$w/vm.cfg" </dev/null >"$w/cold.log" 2>&1 &
	vmm=$!
	until "$cub" exec "$t/cold.sock" -- echo ready >/dev/null 2>&1; do
		kill -0 $vmm 2>/dev/null || { echo "cold boot failed: $(tail -n 3 "$w/cold.log")"; exit 1; }
		sleep 0.02
	done
	cold="$cold $((($(now) - t0) / 1000000))"
	kill -9 $vmm; wait $vmm 2>/dev/null || true
done
cold_ms=$(printf '%s\n' $cold | sort -n | sed -n 2p)
echo "cold boot -> first command: $cold_ms ms (median of$cold)"
"$cub" template build base "$w/vm.cfg" --state "$t/s" >"$w/template.log" 2>&1
printf 'agent_wait_ms = 300000;\nmax_sandboxes = %d;\n' $((idle + 20)) >"$t/serve.cfg"
"$cub" serve --config "$t/serve.cfg" --state "$t/s" --listen 127.0.0.1:0 >"$w/serve.log" 2>&1 &
port=$(sh "$top/tests/serve/serve-port.sh" "$w/serve.log") ||
	{ echo "bench-serve: serve did not start: $(cat "$w/serve.log")" >&2; exit 1; }
mkfifo "$t/hold"
node "$e2b/serve-bench.mjs" "http://127.0.0.1:$port" "$(cat "$t/s/api-key")" "$runs" "$idle" <"$t/hold" >"$t/out" 2>&1 &
node=$!
exec 9>"$t/hold"
until grep -q '^idle-ready' "$t/out"; do
	kill -0 $node 2>/dev/null || { cat "$t/out"; exit 1; }
	sleep 1
done
sleep 5
pss=0 n=0
for p in $(pgrep -f "cubicle restore"); do
	v=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
	pss=$((pss + v)); n=$((n + 1))
done
sp=$(awk '/^Pss:/ { print $2 }' "/proc/$(pgrep -f cubicle-serve | head -n 1)/smaps_rollup")
exec 9>&-
wait $node || true
grep '^create' "$t/out" | while read -r what c p50 p95 n; do
	p50=${p50#p50=}
	echo "$what $c ${p50} ms ${p95#p95=} ms (p50, p95; $n): $(awk "BEGIN { printf \"%.3f\", $p50 / $cold_ms }")x the cold boot"
done
echo "idle: $n sandboxes, PSS $((pss / 1024)) MiB in all: $(awk "BEGIN { printf \"%.1f\", $pss / 1024 / ($n ? $n : 1) }") MiB each (goal < 25); serve itself $((sp / 1024)) MiB"
SCRIPT
set -- bash "$w/inner.sh" "$w" "$guest/vmlinuz" "$bd/cubicle" "$bd/tests/e2b" "$runs" "$idle" "$top"
. "$top/tests/e2e/lib.sh"
if host_boots_linux; then
	exec "$@"
fi
echo "# this host's KVM cannot boot Linux: bench-serve runs in the nested harness's L1" >&2
exec "$top/tests/e2e/nested/run-nested.sh" --arch x86_64 --mem 8192 --rw "$w" \
	--timeout "${BENCH_NESTED_TIMEOUT:-3600}" -- "$@"
