#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cubicle exec and cubicle cp against cubicle-agent run on this host (no VM):
# the agent listens on a Unix socket, tests/cli/vsock_shim stands in for the
# VM's vsock socket (CONNECT 49983 -> OK, then bytes both ways). Output and
# exit status, 20 MiB of stdout, stdin, a pty, cp both ways of 64 MiB, Ctrl-C
# reaching the guest command, and the errors (no file, bad token, no agent).
set -u
bd=${top_builddir:-.}
cub=${CUBICLE:-$bd/cubicle}
agent=${CUBICLE_AGENT:-$bd/agent/cubicle-agent}
shim=$bd/tests/cli/vsock_shim
if [ -n "${TEST_RUNNER:-}" ]; then
	echo "SKIP: cross build: exec/cp are tested in the native build"
	exit 77
fi
if [ ! -x "$agent" ]; then
	echo "SKIP: $agent is not built (the agent is needed to test cubicle exec/cp)"
	exit 77
fi
for t in sha256sum head cmp; do
	command -v $t >/dev/null || { echo "SKIP: $t is not installed"; exit 77; }
done
[ -x "$shim" ] || { echo "not ok - $shim is not built"; exit 1; }
tmp=$(mktemp -d)
apid= spid= api=
cleanup() {
	for p in $apid $spid $api; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
notok() {
	echo "not ok - $1"
	for f in "$tmp/out" "$tmp/err"; do
		[ -s "$f" ] && head -c 2000 "$f" | sed 's/^/#   /' | tail -n 8
	done
	fail=$((fail + 1))
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
wait_sock() {
	i=0
	while [ ! -S "$1" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -S "$1" ]
}

# A background job of a script ignores SIGINT and SIGQUIT, and so would the
# agent's children: give it the default (a guest's init does not ignore them).
dflt=
env --default-signal=INT true 2>/dev/null && dflt="env --default-signal=INT,QUIT"
$dflt "$agent" --listen "unix:$tmp/agent.sock" --token s3cret --ready-port 0 >"$tmp/agent.log" 2>&1 &
apid=$!
"$shim" "$tmp/v.sock" "$tmp/agent.sock" >"$tmp/shim.log" 2>&1 &
spid=$!
if ! wait_sock "$tmp/agent.sock" || ! wait_sock "$tmp/v.sock"; then
	echo "not ok - the agent or the shim did not start"
	sed 's/^/#   /' "$tmp/agent.log" "$tmp/shim.log"
	exit 1
fi
vm=$tmp/v.sock
export CUBICLE_AGENT_TOKEN=s3cret

# exec NAME: runs `cubicle exec ARGS` with a 60 s bound; $st its status.
run() { timeout 60 "$cub" "$@" >"$tmp/out" 2>"$tmp/err"; st=$?; }

run exec "$vm" -- sh -c 'echo $((6*7)); echo err >&2; exit 3'
if [ $st -eq 3 ] && [ "$(cat "$tmp/out")" = 42 ] && [ "$(cat "$tmp/err")" = err ]; then
	ok "exec: stdout 42, stderr err, status 3"
else
	notok "exec: status $st (want 3), stdout '$(cat "$tmp/out")', stderr '$(head -c 200 "$tmp/err")'"
fi

run exec --cwd /tmp -e CUB_X=a=b "$vm" -- sh -c 'printf "%s %s" "$(pwd)" "$CUB_X"'
[ $st -eq 0 ] && [ "$(cat "$tmp/out")" = "/tmp a=b" ] && ok "exec: --cwd and -e" ||
	notok "exec --cwd -e: status $st, stdout '$(cat "$tmp/out")'"

if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	run exec --user nobody "$vm" -- id -un
	[ $st -eq 0 ] && [ "$(cat "$tmp/out")" = nobody ] && ok "exec --user nobody runs as nobody" ||
		notok "exec --user: status $st, stdout '$(cat "$tmp/out")'"
else
	echo "ok - # SKIP exec --user: the agent is not root here"
fi

head -c 20971520 /dev/urandom >"$tmp/big20"
run exec "$vm" -- cat "$tmp/big20"
[ $st -eq 0 ] && [ "$(sha "$tmp/out")" = "$(sha "$tmp/big20")" ] &&
	ok "exec: 20 MiB of stdout, sha256 kept" || notok "exec: 20 MiB stdout, status $st"

head -c 3000000 /dev/urandom >"$tmp/in"
timeout 60 "$cub" exec -i "$vm" -- cat <"$tmp/in" >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st -eq 0 ] && cmp -s "$tmp/out" "$tmp/in" && ok "exec -i: 3 MB through cat's stdin and back" ||
	notok "exec -i: status $st"

printf 'line\n' | timeout 60 "$cub" exec -i "$vm" -- sh -c 'read x && echo "got $x"; exit 5' \
	>"$tmp/out" 2>"$tmp/err"
st=$?
[ $st -eq 5 ] && [ "$(cat "$tmp/out")" = "got line" ] && ok "exec -i: a line read, status 5" ||
	notok "exec -i read: status $st"

run exec -t "$vm" -- sh -c 'test -t 0 && test -t 1 && echo tty'
[ $st -eq 0 ] && grep -q '^tty' "$tmp/out" && ok "exec -t: the command runs on a terminal" ||
	notok "exec -t: status $st"

# -t on a real terminal (script(1) makes one): its size, then a new size by SIGWINCH.
if command -v script >/dev/null; then
	timeout 60 script -qfec "stty rows 30 cols 90; '$cub' exec -t '$vm' -- sh -c 'stty size; sleep 2; stty size' &
		p=\$!; sleep 1; stty rows 40 cols 120; kill -WINCH \$p; wait \$p" /dev/null 2>"$tmp/err" |
		tr -d '\r' >"$tmp/out"
	[ "$(cat "$tmp/out")" = "$(printf '30 90\n40 120')" ] &&
		ok "exec -t: the terminal's size, and its new size after SIGWINCH" ||
		notok "exec -t size: got '$(cat "$tmp/out")'"
	# -it: keys go to the guest's shell on a raw terminal, restored at the end.
	(sleep 2; printf 'echo in-$((6*7))\rexit 4\r'; sleep 3) |
		timeout 60 script -qfec "stty -g >'$tmp/before'; '$cub' exec -it '$vm' -- sh;
			echo status=\$?; stty -g >'$tmp/after'" /dev/null 2>"$tmp/err" | tr -d '\r' >"$tmp/out"
	grep -q '^in-42$' "$tmp/out" && grep -q 'status=4$' "$tmp/out" && [ -s "$tmp/before" ] &&
		cmp -s "$tmp/before" "$tmp/after" &&
		ok "exec -it: typed input runs in the guest's shell, status 4, the terminal restored" ||
		notok "exec -it: $(tr '\n' '|' <"$tmp/out" | head -c 300)"
else
	echo "ok - # SKIP exec -t size: script(1) is not installed"
fi

run exec "$vm" -- sh -c 'kill -TERM $$'
[ $st -eq 143 ] && ok "exec: a command killed by SIGTERM gives 143" || notok "exec SIGTERM: status $st"

# Ctrl-C: SIGINT to cubicle exec reaches the guest command, which ends; so
# does cubicle exec, with 130.
"$cub" exec "$vm" -- sh -c 'echo $$ >'"$tmp"'/sleep.pid; exec sleep 7200' >"$tmp/out" 2>"$tmp/err" &
epid=$!
i=0
while [ ! -s "$tmp/sleep.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
gpid=$(cat "$tmp/sleep.pid" 2>/dev/null)
kill -INT $epid
i=0
while kill -0 $epid 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 $epid 2>/dev/null; then
	kill -9 $epid
	notok "exec: SIGINT did not end cubicle exec within 10 s"
else
	wait $epid
	st=$?
	if [ $st -eq 130 ] && [ -n "$gpid" ] && ! kill -0 "$gpid" 2>/dev/null; then
		ok "exec: SIGINT reaches the guest's sleep 7200 (gone), status 130"
	else
		notok "exec SIGINT: status $st (want 130), guest pid '$gpid' $(kill -0 "$gpid" 2>/dev/null && echo still runs)"
	fi
fi
[ -n "$gpid" ] && kill -9 "$gpid" 2>/dev/null

# cp both ways, 64 MiB
head -c 67108864 /dev/urandom >"$tmp/big64"
timeout 120 "$cub" cp "$tmp/big64" "$vm:$tmp/in64" >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st -eq 0 ] && [ "$(sha "$tmp/in64")" = "$(sha "$tmp/big64")" ] &&
	ok "cp in: 64 MiB, sha256 kept" || notok "cp in: status $st"
mkdir "$tmp/dl"
timeout 120 "$cub" cp "$vm:$tmp/in64" "$tmp/dl/" >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st -eq 0 ] && [ "$(sha "$tmp/dl/in64")" = "$(sha "$tmp/big64")" ] &&
	[ -z "$(ls -A "$tmp/dl" | grep -v '^in64$')" ] &&
	ok "cp out: 64 MiB into a folder, sha256 kept, no temporary left" || notok "cp out: status $st"
printf 'small' | timeout 60 "$cub" cp - "$vm:$tmp/small" >"$tmp/out" 2>"$tmp/err"
st=$?
timeout 60 "$cub" cp "$vm:$tmp/small" - >"$tmp/out" 2>"$tmp/err"
st2=$?
[ $st -eq 0 ] && [ $st2 -eq 0 ] && [ "$(cat "$tmp/out")" = small ] &&
	ok "cp: stdin in (chunked), stdout out" || notok "cp - : status $st"

# errors
run cp "$vm:$tmp/no/such" "$tmp/x"
[ $st -eq 1 ] && grep -q "no such file in the guest: $tmp/no/such" "$tmp/err" && [ ! -e "$tmp/x" ] &&
	[ -z "$(ls -A "$tmp" | grep cubicle-cp)" ] &&
	ok "cp: a missing guest file is named, nothing left behind" || notok "cp missing: status $st"
echo keep >"$tmp/keep"
run cp --token wrong "$vm:$tmp/small" "$tmp/keep"
[ $st -eq 1 ] && grep -q "token" "$tmp/err" && [ "$(cat "$tmp/keep")" = keep ] &&
	ok "cp: a bad token is refused with a hint, the local file untouched" || notok "cp bad token: status $st"
run exec --token wrong "$vm" -- true
[ $st -eq 125 ] && grep -q "token" "$tmp/err" && ok "exec: a bad token: 125 and a hint" ||
	notok "exec bad token: status $st"
run exec "$vm" -- /no/such/program
[ $st -ne 0 ] && [ -s "$tmp/err" ] && ok "exec: a missing program fails with a message (status $st)" ||
	notok "exec missing program: status $st"
"$shim" "$tmp/dead.sock" "$tmp/nothing-here" >/dev/null 2>&1 &
dpid=$!
wait_sock "$tmp/dead.sock"
# (the shim closes at once; the timeout only bounds a failure: a loaded host is slow)
run exec --timeout 15 "$tmp/dead.sock" -- true
kill $dpid 2>/dev/null
[ $st -eq 125 ] && grep -q "nothing listens on guest port 49983" "$tmp/err" &&
	ok "exec: no agent behind the vsock socket: 125 and why" || notok "exec no agent: status $st"
t0=$(date +%s%N)
run exec --timeout 1 "$tmp/absent.sock" -- true
ms=$((($(date +%s%N) - t0) / 1000000))
[ $st -eq 125 ] && grep -q "cannot connect to $tmp/absent.sock" "$tmp/err" && [ $ms -ge 900 ] &&
	ok "exec: a wrong VM path is named, after --timeout 1 ($ms ms)" ||
	notok "exec wrong path: status $st after $ms ms"
# A VM being started or restored binds its socket late, or over a stale one
# left by the process before it: exec waits for it (within --timeout).
for how in late stale; do
	rm -f "$tmp/$how.sock"
	if [ $how = stale ]; then
		"$shim" "$tmp/$how.sock" "$tmp/agent.sock" >/dev/null 2>&1 &
		lpid=$!
		wait_sock "$tmp/$how.sock"
		kill $lpid; wait $lpid 2>/dev/null
	fi
	timeout 60 "$cub" exec --timeout 20 "$tmp/$how.sock" -- echo $how >"$tmp/out" 2>"$tmp/err" &
	epid=$!
	sleep 1
	"$shim" "$tmp/$how.sock" "$tmp/agent.sock" >/dev/null 2>&1 &
	lpid=$!
	wait $epid
	st=$?
	kill $lpid 2>/dev/null; wait $lpid 2>/dev/null
	[ $st -eq 0 ] && [ "$(cat "$tmp/out")" = $how ] &&
		ok "exec: a VM socket bound 1 s late is waited for ($how: $([ $how = late ] && echo no file before it || echo a dead socket file before it))" ||
		notok "exec on a $how socket: status $st"
done
run exec "$vm" -- echo "$(printf 'bad\377')"
[ $st -eq 125 ] && grep -q "not UTF-8" "$tmp/err" && ok "exec: an argument JSON cannot carry is refused, not dropped" ||
	notok "exec non-UTF-8: status $st"
run cp "$tmp/big20" "$tmp/big21"
[ $st -eq 2 ] && grep -q "exactly one of SRC and DST" "$tmp/err" && ok "cp: no VM side is bad usage" ||
	notok "cp usage: status $st"

# A broken or hostile agent (canned answers): a clear error and 125, never a hang.
# frame FLAGS JSON: one Connect envelope (JSON shorter than 64 KiB).
frame() {
	n=${#2}
	printf "\\$(printf %03o "$1")\\000\\000\\$(printf %03o $((n / 256)))\\$(printf %03o $((n % 256)))%s" "$2"
}
http200='HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nConnection: close\r\n'
# (Frames go straight to files: a shell variable cannot hold their NUL bytes.)
sj='{"event":{"start":{"pid":77}}}'
start() { frame 0 "$sj"; }
# canned NAME WANT_STATUS STDERR_REGEX|-: exec against $tmp/canned.
canned() {
	"$shim" "$tmp/c.sock" "canned:$tmp/canned" >/dev/null 2>&1 &
	cpid=$!
	wait_sock "$tmp/c.sock"
	run exec --timeout 2 "$tmp/c.sock" -- true
	kill $cpid 2>/dev/null
	wait $cpid 2>/dev/null
	rm -f "$tmp/c.sock"
	[ $st -eq "$2" ] && { [ "$3" = - ] || grep -Eq "$3" "$tmp/err"; } && ok "exec, $1" ||
		notok "exec, $1: status $st (want $2), want /$3/"
}
{ printf "$http200\r\n"; start; frame 0 '{"event":{"data":{"stdout":"aGk="}}}'; } >"$tmp/canned"
canned "a stream that stops without its end" 125 "ended without its end message"
[ "$(cat "$tmp/out")" = hi ] || notok "exec: output before the cut is lost"
{ printf "$http200\r\n"; start; frame 0 '{"event":{"end":{"exitCode":0,"exited":true}}}'
  frame 2 '{"error":{"code":"internal","message":"boom"}}'; } >"$tmp/canned"
canned "an end-of-stream with an error" 125 "error: internal: boom"
{ printf "$http200\r\n"; start; frame 0 '{"event":{"end":{"exitCode":-1,"status":"signal: killed"}}}'
  frame 2 '{}'; } >"$tmp/canned"
canned "killed by signal 9 gives 137" 137 -
{ printf "$http200\r\n"; start; printf '\000\177\377\377\377xx'; } >"$tmp/canned"
canned "a 2 GiB message is refused" 125 "message over 16 MiB"
{ printf "$http200\r\n"; start; frame 0 '{"event":{"data":{"stdout":"a*b="}}}'; } >"$tmp/canned"
canned "bad base64" 125 "bad base64 for stdout"
{ printf 'HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nTransfer-Encoding: chunked\r\n\r\n'
  printf '%x\r\n' $((${#sj} + 5)); start; printf '\r\n100\r\nabc'; } >"$tmp/canned"
canned "a chunked stream cut mid-chunk" 125 "cut before the command ended"
printf 'HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nContent-Length: 5\r\n\r\nnot a' >"$tmp/canned"
canned "garbage" 125 "cubicle exec: .+"

# The API socket names the vsock socket (GET /vm/config), when PUT /vsock is there.
"$cub" --api-sock "$tmp/api.sock" >"$tmp/api.log" 2>&1 &
api=$!
if wait_sock "$tmp/api.sock" && curl -s -o /dev/null -w '%{http_code}' --unix-socket "$tmp/api.sock" \
	-X PUT -H 'Content-Type: application/json' \
	-d "{\"guest_cid\": 3, \"uds_path\": \"$vm\"}" http://localhost/vsock | grep -q '^20'; then
	run exec "$tmp/api.sock" -- echo via-api
	[ $st -eq 0 ] && [ "$(cat "$tmp/out")" = via-api ] && ok "exec through the API socket" ||
		notok "exec through the API socket: status $st"
else
	echo "ok - # SKIP the API has no PUT /vsock here"
fi
kill $api 2>/dev/null

echo "# $pass passed, $fail failed"
[ $fail -eq 0 ]
