#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The real E2B JavaScript SDK (npm e2b, pinned by tests/e2b/package-lock.json,
# installed with `npm ci` into the build folder) against cubicle-agent on this
# host: sdk-test.mjs -> forward.mjs (TCP) -> a stand-in for cubicle's vsock
# socket (vsock-stub.mjs) -> the agent's Unix socket. The nested test reuses
# sdk-test.mjs and forward.mjs unchanged against a VM's real vsock socket.
what="SDK test"
. "${top_srcdir:-.}/tests/agent/common.sh"
[ "${CUBICLE_E2E_SKIP:-0}" = 1 ] && { echo "SKIP: CUBICLE_E2E_SKIP=1"; exit 77; }
command -v node >/dev/null || skip "node is not installed (the E2B SDK test needs Node.js >= 18 and npm)"
command -v npm >/dev/null || skip "npm is not installed"
[ -x "$agent" ] || { echo "FAIL: $agent was not built"; exit 1; }

# npm ci into $bd/tests/e2b, once per lock file.
work=$bd/tests/e2b
"$sd/tests/e2b/prepare.sh" "$sd" "$bd" || skip "npm ci failed (no registry?)"

tmp=$(mktemp -d)
pids=
fuse=
cleanup() {
	[ -n "$fuse" ] && { fusermount -u "$fuse" 2>/dev/null || umount -l "$fuse"; }
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
tok=sdk-token-$$
"$agent" --listen "unix:$tmp/agent.sock" --token "$tok" --ready-port 0 2>"$tmp/agent.err" &
pids="$pids $!"
node "$work/vsock-stub.mjs" "$tmp/v.sock" "$tmp/agent.sock" >"$tmp/stub.out" 2>&1 &
pids="$pids $!"
node "$work/forward.mjs" 0 "$tmp/v.sock" >"$tmp/fwd.out" 2>&1 &
pids="$pids $!"
i=0
port=
while [ $i -lt 200 ]; do
	port=$(sed -n 's/^forward: listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/fwd.out")
	[ -n "$port" ] && [ -S "$tmp/agent.sock" ] && grep -q listening "$tmp/stub.out" && break
	sleep 0.1
	i=$((i + 1))
done
[ -n "$port" ] || { echo "FAIL: the forwarder did not start: $(cat "$tmp/fwd.out")"; exit 1; }
# a FUSE folder (bindfs) for watchDir's allowNetworkMounts, where there is one
mkdir "$tmp/fuse-src" "$tmp/fuse"
if command -v bindfs >/dev/null && [ -c /dev/fuse ] && bindfs "$tmp/fuse-src" "$tmp/fuse" 2>/dev/null; then
	fuse=$tmp/fuse
else
	echo "# no FUSE folder (bindfs, /dev/fuse): watchDir's allowNetworkMounts is tried on a local one"
fi
SDK_TEST_DIR=$tmp/guest SDK_FUSE_DIR=$fuse timeout 300 node "$work/sdk-test.mjs" "http://127.0.0.1:$port" "$tok"
rc=$?
[ $rc -ne 0 ] && { echo "# agent stderr:"; sed 's/^/#   /' "$tmp/agent.err"; echo "# forwarder:"; sed 's/^/#   /' "$tmp/fwd.out"; }
exit $rc
