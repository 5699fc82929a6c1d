#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `cubicle exec`, `cubicle cp` and E2B's own JavaScript SDK against
# cubicle-agent in a stock-kernel guest, over the user-space virtio-vsock
# device (issue 13). One VM, booted once (directly, or nested in L1):
#   1. exec of sh -c 'echo $((6*7)); echo err >&2; exit 3': 42 on stdout,
#      err on stderr, exit status 3;
#   3. a file of CUBICLE_EXEC_BIG_MIB MiB (default 1024) copied in with
#      `cubicle cp`, hashed by the guest, and copied back out: one sha256;
#   2. its first 100 MiB through exec's stdout (`head -c`): the same sha256
#      as the host's file;
#   4. `cubicle exec VM -- sleep 7200` given SIGINT (what Ctrl-C sends) ends
#      with status 130 and the guest's sleep is gone;
#   5. npm `e2b` (pinned in tests/e2b/package.json, `npm ci`) with sandboxUrl
#      a local TCP port forwarded to the VM's vsock port 49983
#      (tests/e2b/forward.mjs): commands.run, files.write/read/list, files.watchDir and
#      commands.kill (tests/e2b/sdk-test.mjs).
#   6. (first, while the guest is small) a snapshot with an exec open, the
#      VM killed and restored: the open exec ends instead of hanging (the
#      guest is told its vsock transport was reset), the agent answers on the
#      same socket path; parts 2-5 then run on the restored VM.
# The agent checks an access token given on the kernel command line; a
# wrong token is refused. Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The guest holds the big file in RAM (a tmpfs): size the guest and L1 for it.
big=${CUBICLE_EXEC_BIG_MIB:-1024}
case $big in ''|*[!0-9]*) echo "not ok - CUBICLE_EXEC_BIG_MIB must be a number of MiB"; exit 99 ;; esac
: "${CUBICLE_E2E_TIMEOUT:=$((600 + big * 3 / 2))}"
export CUBICLE_E2E_TIMEOUT
e2e_init
w=$e2e_work
e2e_agent_initramfs "virtio virtio_ring virtio_pci virtio_console vmw_vsock_virtio_transport"
e2b=$e2e_top/tests/e2b
# CUBICLE_EXEC_SDK=0 leaves out part 5 (for a quick run while developing).
sdk=${CUBICLE_EXEC_SDK:-1}
[ "$sdk" = 0 ] || {
command -v node >/dev/null && command -v npm >/dev/null ||
	e2e_skip "node and npm are needed for the E2B SDK part (apt-get install nodejs npm)"
# The SDK, exactly as pinned by the lock file, into the build folder.
"$e2b/prepare.sh" "$e2e_top" "$e2e_builddir" >"$w/npm.log" 2>&1 ||
	{ cat "$w/npm.log"; e2e_skip "npm ci for the E2B SDK failed (no registry?)"; }
}


# The big file, made and hashed here (natively, not in L1).
head -c $((big << 20)) /dev/urandom >"$w/big.in"
big_sum=$(sha256sum <"$w/big.in" | cut -d' ' -f1)
head -c $(((big < 100 ? big : 100) << 20)) "$w/big.in" | sha256sum | cut -d' ' -f1 >"$w/stream.want"

cat >"$w/exec.sh" <<'SCRIPT'
#!/bin/bash
# Where KVM is (directly or in L1): $1 work folder, $2 kernel, $3 cubicle,
# $4 source tree, $5 big file MiB, $6 0 to leave the SDK out.
set -u
w=$1 k=$2 cub=$3 top=$4 big=$5 sdk=$6
t=$(mktemp -d) # sockets and big files: a 9p share cannot hold sockets
tok=cub-$RANDOM$RANDOM
fail=0
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; fail=1; }
now() { date +%s.%N; }
# ended PID: wait up to 20 s for it to end; true (its status in $st) when it
# did, else false with the process killed
ended() {
	local i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
	if kill -0 "$1" 2>/dev/null; then
		kill -9 "$1"
		return 1
	fi
	wait "$1"
	st=$?
}
# calc EXPR: a decimal, one place
calc() { awk "BEGIN { printf \"%.1f\", $1 }"; }
cat >"$w/vm.cfg" <<CFG
machine = { vcpus = 1; memory_mib = $((big + 512)); };
boot = { kernel = "$k"; initrd = "$w/initramfs.cpio.gz";
  cmdline = "console=ttyS0 reboot=k panic=-1 quiet cubicle.agent cubicle.agent_token=$tok"; };
devices = (
  { type = "serial8250"; id = "com1"; console = "file"; path = "$w/serial.log"; },
  { type = "virtio-vsock"; id = "vsock0"; guest_cid = 3; uds_path = "$t/v.sock"; }
);
CFG
t0=$(now)
"$cub" run --api-sock "$t/api.sock" "$w/vm.cfg" </dev/null >"$w/cubicle.log" 2>&1 &
vmm=$!
export CUBICLE_AGENT_TOKEN=$tok
v=$t/v.sock
# Ready when the agent answers (it also says so on the console).
i=0
until "$cub" exec "$v" -- true 2>"$w/ready.err"; do
	i=$((i + 1))
	if [ $i -ge 600 ] || ! kill -0 $vmm 2>/dev/null; then
		bad "the agent never answered"; cat "$w/ready.err"
		kill -9 $vmm 2>/dev/null; exit 1
	fi
	sleep 0.5
done
echo "# agent answered $(calc "$(now) - $t0") s after cubicle started"

# 1. output, error, status
"$cub" exec "$v" -- sh -c 'echo $((6*7)); echo err >&2; exit 3' >"$w/1.out" 2>"$w/1.err"
rc=$?
[ "$(cat "$w/1.out")" = 42 ] && [ "$(cat "$w/1.err")" = err ] && [ $rc = 3 ] &&
	ok "exec: stdout 42, stderr err, status 3" ||
	bad "exec: stdout '$(head -c 200 "$w/1.out")', stderr '$(head -c 200 "$w/1.err")', status $rc (want 42, err, 3)"
CUBICLE_AGENT_TOKEN=wrong "$cub" exec "$v" -- true 2>"$w/tok.err"
rc=$?
[ $rc != 0 ] && grep -qi token "$w/tok.err" && ok "a wrong access token is refused (status $rc)" ||
	bad "a wrong access token: status $rc, '$(head -c 300 "$w/tok.err")'"

# 6 (done here, while the guest is small). A snapshot with the agent idle
# and a connection open, the VM killed, restored in a new process: the
# device tells the guest its transport was reset (the open connection ends,
# no hang) and the agent answers on the same socket path. Parts 2-5 run on
# the restored VM.
"$cub" exec "$v" -- sleep 600 >/dev/null 2>"$w/held.err" &
held=$!
sleep 2
if "$cub" ctl "$t/api.sock" pause >/dev/null && "$cub" snapshot "$t/api.sock" "$t/snap" >"$w/snap.log" 2>&1; then
	kill -9 $vmm; wait $vmm 2>/dev/null
	t1=$(now)
	"$cub" restore "$t/snap" --api-sock "$t/r.sock" </dev/null >"$w/restored.log" 2>&1 &
	vmm=$!
	out=$("$cub" exec "$v" -- sh -c 'echo restored $((6*7))' 2>"$w/restored-exec.err")
	rc=$?
	[ "$out" = "restored 42" ] && [ $rc = 0 ] &&
		ok "snapshot, kill, restore: the agent answers on the same socket $(calc "$(now) - $t1") s after the restore began" ||
		bad "after the restore: exec said '$out' (status $rc): $(head -c 300 "$w/restored-exec.err")"
	# The connection open at the snapshot: its client ends, not hangs.
	ended $held &&
		ok "the exec open across the snapshot ended (status $st: $(head -c 150 "$w/held.err" | tr '\n' ' '))" ||
		bad "the exec open across the snapshot still hangs 20 s after the restore"
	"$cub" exec "$v" -- pkill -f 'sleep 600' >/dev/null 2>&1
else
	bad "pause or snapshot failed: $(cat "$w/snap.log")"
	kill $held
fi
rm -rf "$t/snap"

# 3. a big file in and out: it lives in the work folder (L1's share), where
# this script's caller made it and hashes what comes back. 2. in between:
# its first 100 MiB (less when it is smaller) through exec's stdout. (The
# guest's own pipes, /dev/urandom and sha256sum run at a few MiB/s nested:
# data the guest already holds measures the stream, not the guest's CPU.)
# (The initramfs root is a tmpfs limited to half the RAM: a tmpfs of its own.)
"$cub" exec "$v" -- sh -c "mkdir -p /big && mount -t tmpfs -o size=$((big + 16))m big /big" ||
	bad "cannot mount a tmpfs for the big file in the guest"
t1=$(now)
"$cub" cp "$w/big.in" "$v:/big/file" 2>"$w/cp-in.err" || { bad "cp in failed"; cat "$w/cp-in.err"; }
t2=$(now)
sm=$((big < 100 ? big : 100))
"$cub" exec "$v" -- head -c $((sm << 20)) /big/file | sha256sum >"$t/2.sum"
t3=$(now)
got=$(cut -d' ' -f1 "$t/2.sum")
want=$(cat "$w/stream.want")
[ "$got" = "$want" ] && ok "$sm MiB through exec's stdout: sha256 $got ($(calc "$sm / ($t3 - $t2)") MiB/s)" ||
	bad "$sm MiB through exec's stdout: sha256 '$got', want '$want'"
gsum=$("$cub" exec "$v" -- sha256sum /big/file | cut -d' ' -f1)
echo "guest-sum $gsum" >"$w/big.guest"
t4=$(now)
"$cub" cp "$v:/big/file" "$w/big.out" 2>"$w/cp-out.err" || { bad "cp out failed"; cat "$w/cp-out.err"; }
t5=$(now)
echo "# $big MiB: cp in $(calc "$big / ($t2 - $t1)") MiB/s, guest sha256sum $(calc "$t4 - $t3") s, cp out $(calc "$big / ($t5 - $t4)") MiB/s"
"$cub" exec "$v" -- sh -c 'rm -f /big/file; umount /big'

# 4. Ctrl-C
"$cub" exec "$v" -- sleep 7200 &
e=$!
i=0
until [ "$("$cub" exec "$v" -- sh -c 'ps -o args | grep -c "^sleep 7200"')" = 1 ] || [ $i -ge 40 ]; do
	sleep 0.5; i=$((i + 1))
done
t1=$(now)
kill -INT $e
if ! ended $e; then
	bad "Ctrl-C: cubicle exec still running 20 s after SIGINT"
else
	rc=$st
	left=$("$cub" exec "$v" -- sh -c 'ps -o args | grep -c "^sleep 7200"')
	[ $rc = 130 ] && [ "$left" = 0 ] &&
		ok "Ctrl-C: exec ended with 130 after $(calc "$(now) - $t1") s, the guest's sleep is gone" ||
		bad "Ctrl-C: status $rc (want 130), sleeps left in the guest: $left"
fi

# 5. E2B's SDK through a TCP port forwarded to vsock port 49983
[ "$sdk" = 0 ] && echo "# CUBICLE_EXEC_SDK=0: the E2B SDK part is left out" || {
e2b=$(dirname "$cub")/tests/e2b # prepare.sh put the SDK there
node "$e2b/forward.mjs" 0 "$v" >"$w/forward.log" 2>&1 &
fwd=$!
i=0 port=
while [ -z "$port" ] && [ $i -lt 300 ]; do
	sleep 0.2; i=$((i + 1))
	port=$(sed -n 's/^forward: listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$w/forward.log")
done
if [ -n "$port" ]; then
	if SDK_TEST_DIR=/root/sdk node "$e2b/sdk-test.mjs" "http://127.0.0.1:$port" "$tok" >"$w/sdk.log" 2>&1; then
		ok "E2B SDK: $(grep -c '^ok' "$w/sdk.log") checks passed"
	else
		bad "E2B SDK"
	fi
	sed 's/^/# sdk: /' "$w/sdk.log"
else
	bad "the forwarder never listened"; cat "$w/forward.log"
fi
kill $fwd 2>/dev/null
}

"$cub" exec "$v" -- sh -c 'sync; reboot -f' >/dev/null 2>&1
i=0
while kill -0 $vmm 2>/dev/null && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
kill -9 $vmm 2>/dev/null
wait $vmm
echo "# cubicle exited with status $?"
rm -rf "$t"
exit $fail
SCRIPT

if [ $e2e_mode = nested ]; then
	"$e2e_top/tests/e2e/nested/run-nested.sh" --arch x86_64 --mem $((big + 2048)) \
		--timeout $((e2e_timeout + 180)) --cmd-timeout "$e2e_timeout" --rw "$w" -- \
		bash "$w/exec.sh" "$w" "$e2e_guest/vmlinuz" "$CUBICLE" "$e2e_top" "$big" "$sdk" | tee "$w/out.log"
else
	timeout -k 5 "$e2e_timeout" bash "$w/exec.sh" "$w" "$e2e_guest/vmlinuz" "$CUBICLE" "$e2e_top" "$big" "$sdk" |
		tee "$w/out.log"
fi
rc=${PIPESTATUS[0]}
gsum=$(sed -n 's/^guest-sum //p' "$w/big.guest" 2>/dev/null)
osum=$(sha256sum <"$w/big.out" 2>/dev/null | cut -d' ' -f1)
rm -f "$w/big.in" "$w/big.out"
[ "$gsum" = "$big_sum" ] && echo "ok - $big MiB copied in: the guest's sha256 is the file's ($big_sum)" ||
	{ echo "not ok - $big MiB copied in: guest sha256 '$gsum', the file's $big_sum"; rc=1; }
[ "$osum" = "$big_sum" ] && echo "ok - $big MiB copied back out: same sha256" ||
	{ echo "not ok - $big MiB copied back out: sha256 '$osum', want $big_sum"; rc=1; }
if [ "$rc" != 0 ] || grep -q '^not ok' "$w/out.log"; then
	e2e_dump "$w/serial.log" "$w/cubicle.log"
	exit 1
fi
[ "$sdk" = 0 ] || grep -q '^ok - E2B SDK' "$w/out.log" || { echo "not ok - the SDK part did not run"; exit 1; }
exit 0
