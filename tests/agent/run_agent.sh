#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cubicle-agent on the host (no VM): listening on a Unix socket, driven with
# curl through the E2B envd protocol. Processes (output, exit codes, stdin,
# signals, pty, Connect, keepalives, deadlines), files up and down (a few MiB,
# multipart and raw, sha256 compared), the filesystem RPCs and watches, the access token,
# the port bridge, and malformed requests the agent must answer and survive.
what="agent test"
. "${top_srcdir:-.}/tests/agent/common.sh"
command -v curl >/dev/null || skip "curl is not installed (scripts/deps.sh installs it)"
# Debian's python3 first: a pyenv shim costs seconds per start on a busy machine.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
command -v "$PY" >/dev/null || skip "python3 is not installed"
[ -x "$agent" ] || { echo "FAIL: $agent was not built"; exit 1; }
py="$PY $sd/tests/agent/connect.py"

tmp=$(mktemp -d)
sock=$tmp/agent.sock
tok=s3cret-$$
pid=
fuse=
cleanup() {
	[ -n "$fuse" ] && { fusermount -u "$fuse" 2>/dev/null || umount -l "$fuse"; }
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
notok() { echo "not ok - $1"; fail=$((fail + 1)); }
u=http://agent

"$agent" --listen "unix:$sock" --token "$tok" --ready-port 0 2>"$tmp/agent.err" &
pid=$!
i=0
while [ $i -lt 100 ] && ! [ -S "$sock" ]; do sleep 0.05; i=$((i + 1)); done
grep -q 'cubicle-agent: ready' "$tmp/agent.err" && ok "agent listens and says ready" ||
	notok "agent did not start: $(cat "$tmp/agent.err")"

C() { curl -s --unix-socket "$sock" -H "X-Access-Token: $tok" "$@"; }
# status NAME WANT CURL_ARGS...: checks the HTTP status, body in $tmp/body.
status() {
	name=$1 want=$2
	shift 2
	got=$(C -o "$tmp/body" -w '%{http_code}' "$@")
	[ "$got" = "$want" ] && ok "$name ($got)" || notok "$name: status $got, want $want: $(head -c 300 "$tmp/body")"
}
# unary METHOD JSON: POST a unary Connect call; body in $tmp/body, status in $code.
unary() {
	code=$(C -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
		-H 'Connect-Protocol-Version: 1' --data-binary "$2" "$u/$1")
}
# stream NAME JSON [CURL_ARGS...]: a server stream into $tmp/NAME.raw, summed up in $tmp/NAME.json.
stream() {
	name=$1 body=$2
	shift 2
	$py wrap "$body" >"$tmp/$name.req"
	C -N -H 'Content-Type: application/connect+json' -H 'Connect-Protocol-Version: 1' "$@" \
		--data-binary "@$tmp/$name.req" "$u/process.Process/Start" >"$tmp/$name.raw"
	$py events "$tmp/$name.raw" >"$tmp/$name.json"
}
# field FILE EXPR: a Python expression over the JSON in FILE (as d).
field() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
expect() {
	name=$1 got=$2 want=$3
	[ "$got" = "$want" ] && ok "$name" || notok "$name: got '$got', want '$want'"
}
b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
wait_pid() { # wait_pid FILE: until the stream in FILE has its start event
	i=0
	while [ $i -lt 200 ]; do
		p=$($py events "$1" 2>/dev/null | $PY -c 'import json,sys; print(json.load(sys.stdin)["pid"] or "")' 2>/dev/null)
		[ -n "$p" ] && { echo "$p"; return 0; }
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# ---- health and the token ----
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" $u/health)
expect "GET /health without a token is 204" "$code" 204
code=$(curl -s -o "$tmp/body" -w '%{http_code}' --unix-socket "$sock" -H 'Content-Type: application/json' \
	--data-binary '{}' $u/process.Process/List)
expect "an RPC without the token is 401" "$code" 401
grep -q '"unauthenticated"' "$tmp/body" && ok "401 names the Connect code" || notok "401 body: $(cat "$tmp/body")"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" -H 'X-Access-Token: wrong' \
	"$u/files?path=/etc/hostname")
expect "GET /files with a wrong token is 401" "$code" 401

# ---- Start: output, exit code ----
stream run '{"process":{"cmd":"sh","args":["-c","echo $((6*7)); echo err >&2; exit 3"]},"stdin":false}'
expect "Start: stdout" "$(field "$tmp/run.json" 'd["stdout"]')" 42
expect "Start: stderr" "$(field "$tmp/run.json" 'd["stderr"]')" err
expect "Start: exit code 3" "$(field "$tmp/run.json" 'd["end"]["exitCode"]')" 3
expect "Start: status" "$(field "$tmp/run.json" 'd["end"]["status"]')" "exit status 3"
expect "Start: start event first" "$(field "$tmp/run.json" 'd["order"][0]')" start
expect "Start: end envelope {}" "$(field "$tmp/run.json" 'd["trailer"]')" "{}"
expect "Start: clean framing" "$(field "$tmp/run.json" 'd["bad"]')" None

stream env '{"process":{"cmd":"/bin/sh","args":["-c","echo $FOO; pwd"],"envs":{"FOO":"bar baz"},"cwd":"/tmp"}}'
expect "Start: envs and cwd" "$(field "$tmp/env.json" 'd["stdout"].split()')" "['bar', 'baz', '/tmp']"

stream nocmd '{"process":{"cmd":"/nonexistent/cmd"}}'
expect "Start of a missing program ends the stream with not_found" \
	"$(field "$tmp/nocmd.json" 'd["trailer"]["error"]["code"]')" not_found

# ---- stdin: SendInput then CloseStdin ----
stream cat '{"process":{"cmd":"cat"},"stdin":true,"tag":"cat1"}' &
cat_job=$!
catpid=$(wait_pid "$tmp/cat.raw") && ok "stdin: cat started (pid $catpid)" || notok "stdin: no start event"
unary process.Process/SendInput "{\"process\":{\"tag\":\"cat1\"},\"input\":{\"stdin\":\"$(b64 'hello ')\"}}"
expect "SendInput by tag" "$code" 200
unary process.Process/SendInput "{\"process\":{\"pid\":$catpid},\"input\":{\"stdin\":\"$(b64 'agent')\"}}"
expect "SendInput by pid" "$code" 200
unary process.Process/List '{}'
grep -q "\"pid\":$catpid" "$tmp/body" && grep -q '"tag":"cat1"' "$tmp/body" && ok "List shows cat with its tag" ||
	notok "List: $(cat "$tmp/body")"
unary process.Process/CloseStdin "{\"process\":{\"pid\":$catpid}}"
expect "CloseStdin" "$code" 200
wait $cat_job
$py events "$tmp/cat.raw" >"$tmp/cat.json"
expect "stdin came back through cat" "$(field "$tmp/cat.json" 'd["stdout"]')" "hello agent"
expect "cat exits 0 after CloseStdin" "$(field "$tmp/cat.json" 'd["end"]["exitCode"]')" 0

# ---- SendSignal: SIGKILL by enum name, SIGINT by number; Connect by tag ----
stream sleep1 '{"process":{"cmd":"sleep","args":["1000"]},"tag":"sleeper"}' &
s_job=$!
spid=$(wait_pid "$tmp/sleep1.raw") || notok "sleep did not start"
$py wrap '{"process":{"tag":"sleeper"}}' >"$tmp/conn.req"
C -N -H 'Content-Type: application/connect+json' --data-binary "@$tmp/conn.req" \
	"$u/process.Process/Connect" >"$tmp/conn.raw" &
c_job=$!
wait_pid "$tmp/conn.raw" >/dev/null && ok "Connect by tag gets a start event" || notok "Connect: no start event"
unary process.Process/SendSignal "{\"process\":{\"pid\":$spid},\"signal\":\"SIGNAL_SIGKILL\"}"
expect "SendSignal SIGNAL_SIGKILL" "$code" 200
wait $s_job $c_job
$py events "$tmp/sleep1.raw" >"$tmp/sleep1.json"
$py events "$tmp/conn.raw" >"$tmp/conn.json"
expect "killed: status" "$(field "$tmp/sleep1.json" 'd["end"]["status"]')" "signal: killed"
expect "killed: exited false" "$(field "$tmp/sleep1.json" 'd["end"]["exited"]')" False
expect "the Connect stream saw the end too" "$(field "$tmp/conn.json" 'd["end"]["status"]')" "signal: killed"

stream sleep2 '{"process":{"cmd":"sleep","args":["1000"]}}' &
s_job=$!
spid=$(wait_pid "$tmp/sleep2.raw") || notok "sleep did not start"
unary process.Process/SendSignal "{\"process\":{\"pid\":$spid},\"signal\":2}"
expect "SendSignal 2 (an integer)" "$code" 200
wait $s_job
$py events "$tmp/sleep2.raw" >"$tmp/sleep2.json"
expect "SIGINT: status" "$(field "$tmp/sleep2.json" 'd["end"]["status"]')" "signal: interrupt"
unary process.Process/SendSignal '{"process":{"pid":999999},"signal":"SIGNAL_SIGTERM"}'
expect "SendSignal to an unknown pid is 404" "$code" 404
unary process.Process/SendSignal "{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGBOGUS\"}"
expect "an unknown signal name is 404 or 400" "$(echo "$code" | sed 's/^404$/4xx/; s/^400$/4xx/')" 4xx

# ---- pty, keepalives, deadlines ----
stream pty '{"process":{"cmd":"sh","args":["-c","stty size; test -t 0 && echo tty"]},"pty":{"size":{"cols":100,"rows":30}}}'
expect "pty: size and a terminal" "$(field "$tmp/pty.json" 'd["pty"].split()')" "['30', '100', 'tty']"
stream ka '{"process":{"cmd":"sleep","args":["2.5"]}}' -H 'Keepalive-Ping-Interval: 1'
ka=$(field "$tmp/ka.json" 'd["keepalives"]')
[ "$ka" -ge 1 ] && ok "keepalive events while idle ($ka)" || notok "no keepalive events"
stream dl '{"process":{"cmd":"sleep","args":["30"]},"tag":"late"}' -H 'Connect-Timeout-Ms: 500'
expect "Connect-Timeout-Ms ends the stream with deadline_exceeded" \
	"$(field "$tmp/dl.json" 'd["trailer"]["error"]["code"]')" deadline_exceeded
unary process.Process/SendSignal '{"process":{"tag":"late"},"signal":"SIGNAL_SIGKILL"}'
expect "the process outlives its stream's deadline (killed by tag afterwards)" "$code" 200

# ---- a big output, streamed with backpressure ----
stream big '{"process":{"cmd":"sh","args":["-c","head -c 3000000 /dev/zero | tr \"\\\\0\" x"]}}'
expect "3 MB of stdout arrive whole" "$(field "$tmp/big.json" 'len(d["stdout"])')" 3000000

# ---- the user from Authorization: Basic ----
if [ "$(id -u)" = 0 ] && grep -q '^nobody:' /etc/passwd; then
	stream who '{"process":{"cmd":"id","args":["-u"]}}' -H "Authorization: Basic $(b64 nobody:)"
	expect "runs as the Basic user (nobody)" "$(field "$tmp/who.json" 'd["stdout"].strip()')" \
		"$(grep '^nobody:' /etc/passwd | cut -d: -f3)"
fi

# ---- /init: the default user and working folder of requests naming none ----
if [ "$(id -u)" = 0 ] && grep -q '^nobody:' /etc/passwd; then
	status "POST /init with defaultUser nobody, defaultWorkdir /tmp" 204 -H 'Content-Type: application/json' \
		--data '{"defaultUser":"nobody","defaultWorkdir":"/tmp"}' "$u/init"
	stream dflt '{"process":{"cmd":"sh","args":["-c","id -u; pwd"]}}'
	expect "a process naming no user runs as defaultUser, in defaultWorkdir" \
		"$(field "$tmp/dflt.json" '" ".join(d["stdout"].split())')" "$(grep '^nobody:' /etc/passwd | cut -d: -f3) /tmp"
	status "POST /init with both empty puts them back" 204 -H 'Content-Type: application/json' \
		--data '{"defaultUser":"","defaultWorkdir":""}' "$u/init"
	stream dflt2 '{"process":{"cmd":"id","args":["-u"]}}'
	expect "then it runs as \`user\` where there is one, else as the agent's user" \
		"$(field "$tmp/dflt2.json" 'd["stdout"].strip()')" "$(id -u user 2>/dev/null || id -u)"
fi

# ---- files: raw and multipart uploads, downloads, sha256 ----
head -c 5000000 /dev/urandom >"$tmp/blob"
sum=$(sha256sum <"$tmp/blob" | cut -d' ' -f1)
status "POST /files octet-stream (5 MB)" 200 -H 'Content-Type: application/octet-stream' \
	--data-binary "@$tmp/blob" "$u/files?path=$tmp/up/deep/blob.bin"
grep -q "\"path\":\"$tmp/up/deep/blob.bin\"" "$tmp/body" && ok "upload answers its entry" ||
	notok "upload body: $(cat "$tmp/body")"
expect "upload on disk has the sha256" "$(sha256sum <"$tmp/up/deep/blob.bin" | cut -d' ' -f1)" "$sum"
status "GET /files" 200 "$u/files?path=$tmp/up/deep/blob.bin"
expect "download has the sha256" "$(sha256sum <"$tmp/body" | cut -d' ' -f1)" "$sum"
status "GET /files of a missing file is 404" 404 "$u/files?path=$tmp/nope"
grep -q '"code":404' "$tmp/body" && ok "404 body is JSON" || notok "404 body: $(cat "$tmp/body")"
status "POST /files multipart" 200 -F "file=@$tmp/blob" "$u/files?path=$tmp/mp/blob2"
expect "multipart upload has the sha256" "$(sha256sum <"$tmp/mp/blob2" | cut -d' ' -f1)" "$sum"
printf 'two' >"$tmp/small"
status "POST /files multipart, path from the filename" 200 -F "file=@$tmp/small;filename=$tmp/mp/named.txt" "$u/files"
expect "the part's filename is the path" "$(cat "$tmp/mp/named.txt" 2>/dev/null)" two
status "POST /files multipart without a closing boundary is 400" 400 \
	-H 'Content-Type: multipart/form-data; boundary=XyZ' --data-binary $'--XyZ\r\nContent-Disposition: form-data; name="file"\r\n\r\nabc' \
	"$u/files?path=$tmp/mp/cut"

# ---- file metadata (X-Metadata-* headers kept as user.e2b.* xattrs) ----
got=$(C -o "$tmp/body" -w '%{http_code}' -H 'X-Metadata-Owner: Alice' -H 'X-Metadata-Owner: Bob' \
	-H 'Content-Type: application/octet-stream' --data-binary 'm' "$u/files?path=$tmp/meta/f")
if [ "$got" = 200 ]; then
	unary filesystem.Filesystem/Stat "{\"path\":\"$tmp/meta/f\"}"
	expect "metadata: lower-cased key, first value, shown by Stat" "$(field "$tmp/body" 'd["entry"].get("metadata")')" "{'owner': 'Alice'}"
	C -o /dev/null -H 'Content-Type: application/octet-stream' --data-binary 'm' "$u/files?path=$tmp/meta/f"
	unary filesystem.Filesystem/Stat "{\"path\":\"$tmp/meta/f\"}"
	expect "metadata: an upload without it clears it" "$(field "$tmp/body" 'd["entry"].get("metadata")')" None
elif grep -q 'not supported' "$tmp/body"; then
	echo "# metadata: $tmp is on a filesystem without user xattrs: not checked"
else
	notok "metadata upload: $got $(cat "$tmp/body")"
fi
status "metadata over 4096 bytes is 400" 400 -H "X-Metadata-A: $(printf '%3000s' '' | tr ' ' a)" \
	-H "X-Metadata-B: $(printf '%3000s' '' | tr ' ' b)" --data-binary 'm' "$u/files?path=$tmp/meta/g"

# ---- filesystem RPCs ----
unary filesystem.Filesystem/MakeDir "{\"path\":\"$tmp/fs/a/b\"}"
expect "MakeDir" "$code" 200
grep -q '"type":"FILE_TYPE_DIRECTORY"' "$tmp/body" && ok "MakeDir answers a directory entry" || notok "MakeDir: $(cat "$tmp/body")"
unary filesystem.Filesystem/MakeDir "{\"path\":\"$tmp/fs/a/b\"}"
expect "MakeDir again is already_exists (409)" "$code" 409
grep -q '"already_exists"' "$tmp/body" && ok "409 names already_exists" || notok "$(cat "$tmp/body")"
printf 'hello' >"$tmp/fs/a/f.txt"
chmod 640 "$tmp/fs/a/f.txt"
unary filesystem.Filesystem/Stat "{\"path\":\"$tmp/fs/a/f.txt\"}"
expect "Stat" "$code" 200
field "$tmp/body" 'd["entry"]["type"], d["entry"]["size"], d["entry"]["permissions"], d["entry"]["name"]' >"$tmp/st"
expect "Stat: type, size, permissions, name" "$(cat "$tmp/st")" "('FILE_TYPE_FILE', '5', '-rw-r-----', 'f.txt')"
field "$tmp/body" 'd["entry"]["modifiedTime"]' | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$' &&
	ok "Stat: modifiedTime is RFC 3339" || notok "modifiedTime: $(field "$tmp/body" 'd["entry"]["modifiedTime"]')"
unary filesystem.Filesystem/ListDir "{\"path\":\"$tmp/fs\",\"depth\":1}"
expect "ListDir depth 1" "$(field "$tmp/body" 'sorted(e["name"] for e in d["entries"])')" "['a']"
unary filesystem.Filesystem/ListDir "{\"path\":\"$tmp/fs\",\"depth\":3}"
expect "ListDir depth 3" "$(field "$tmp/body" 'sorted(e["name"] for e in d["entries"])')" "['a', 'b', 'f.txt']"
unary filesystem.Filesystem/Move "{\"source\":\"$tmp/fs/a/f.txt\",\"destination\":\"$tmp/fs/moved/g.txt\"}"
expect "Move" "$code" 200
expect "Move: the file is there" "$(cat "$tmp/fs/moved/g.txt" 2>/dev/null)" hello
unary filesystem.Filesystem/Remove "{\"path\":\"$tmp/fs/a\"}"
expect "Remove (a tree)" "$code" 200
[ ! -e "$tmp/fs/a" ] && ok "Remove: it is gone" || notok "Remove left $tmp/fs/a"
unary filesystem.Filesystem/Stat "{\"path\":\"$tmp/fs/a\"}"
expect "Stat of a missing path is 404" "$code" 404
grep -q '"not_found"' "$tmp/body" && ok "404 names not_found" || notok "$(cat "$tmp/body")"

# ---- watches: the polled watcher and a WatchDir stream ----
mkdir -p "$tmp/w/old"
unary filesystem.Filesystem/CreateWatcher "{\"path\":\"$tmp/w\",\"recursive\":true}"
expect "CreateWatcher" "$code" 200
wid=$(field "$tmp/body" 'd["watcherId"]')
printf 'x' >"$tmp/w/a.txt"
mkdir "$tmp/w/new"
printf 'y' >"$tmp/w/old/b.txt" # a folder there before the watch: followed
mv "$tmp/w/a.txt" "$tmp/w/c.txt"
chmod 600 "$tmp/w/c.txt"
rm "$tmp/w/old/b.txt"
unary filesystem.Filesystem/GetWatcherEvents "{\"watcherId\":\"$wid\"}"
expect "GetWatcherEvents: every event in order, names below the folder" \
	"$(field "$tmp/body" '" ".join(e["type"][11:].lower() + ":" + e["name"] for e in d["events"])')" \
	"create:a.txt write:a.txt create:new create:old/b.txt write:old/b.txt rename:a.txt create:c.txt chmod:c.txt remove:old/b.txt"
printf 'z' >"$tmp/w/new/d.txt" # in a folder made after the watch began
unary filesystem.Filesystem/GetWatcherEvents "{\"watcherId\":\"$wid\"}"
expect "GetWatcherEvents again: only what came since, a new folder followed" \
	"$(field "$tmp/body" '" ".join(e["type"][11:].lower() + ":" + e["name"] for e in d["events"])')" \
	"create:new/d.txt write:new/d.txt"
# the agent stopped meanwhile: it reads the move and what came after it in one go
kill -STOP "$pid"
mv "$tmp/w/new" "$tmp/w/moved"
printf 'f' >"$tmp/w/moved/f.txt"
kill -CONT "$pid"
unary filesystem.Filesystem/GetWatcherEvents "{\"watcherId\":\"$wid\"}"
expect "GetWatcherEvents: a folder moved within is followed under its new name" \
	"$(field "$tmp/body" '" ".join(e["type"][11:].lower() + ":" + e["name"] for e in d["events"])')" \
	"rename:new create:moved create:moved/f.txt write:moved/f.txt"
unary filesystem.Filesystem/RemoveWatcher "{\"watcherId\":\"$wid\"}"
expect "RemoveWatcher" "$code" 200
unary filesystem.Filesystem/GetWatcherEvents "{\"watcherId\":\"$wid\"}"
expect "a removed watcher is not_found (404)" "$code" 404
unary filesystem.Filesystem/CreateWatcher "{\"path\":\"$tmp/w/c.txt\"}"
expect "CreateWatcher of a file is invalid_argument (400)" "$code" 400
unary filesystem.Filesystem/CreateWatcher "{\"path\":\"$tmp/w/none\"}"
expect "CreateWatcher of a missing folder is not_found (404)" "$code" 404
# A folder on a network file system (FUSE, by bindfs) is refused unless the
# request says allowNetworkMounts (envd 0.6.4); then what is done there shows.
mkdir "$tmp/fuse-src" "$tmp/fuse"
if ! [ -c /dev/fuse ]; then
	echo "# a watch on a network file system: skipped (this kernel has no /dev/fuse)"
elif ! command -v bindfs >/dev/null; then
	[ "$req" = 1 ] && notok "a watch on FUSE: no bindfs (scripts/deps.sh --test installs it)" ||
		echo "# a watch on a network file system: skipped (no bindfs)"
elif ! bindfs "$tmp/fuse-src" "$tmp/fuse" 2>"$tmp/bindfs.err"; then
	[ "$req" = 1 ] && notok "bindfs: $(cat "$tmp/bindfs.err")" ||
		echo "# a watch on a network file system: skipped (bindfs: $(cat "$tmp/bindfs.err"))"
else
	fuse=$tmp/fuse
	unary filesystem.Filesystem/CreateWatcher "{\"path\":\"$fuse\"}"
	expect "CreateWatcher of a folder on FUSE is invalid_argument (400)" "$code" 400
	grep -q "$fuse: it is on a network file system (fuse)" "$tmp/body" && ok "the refusal names the folder and fuse" ||
		notok "the refusal: $(cat "$tmp/body")"
	unary filesystem.Filesystem/CreateWatcher "{\"path\":\"$fuse\",\"allowNetworkMounts\":true}"
	expect "CreateWatcher on FUSE with allowNetworkMounts" "$code" 200
	wid=$(field "$tmp/body" 'd["watcherId"]')
	printf 'n' >"$fuse/n.txt"
	unary filesystem.Filesystem/GetWatcherEvents "{\"watcherId\":\"$wid\"}"
	expect "GetWatcherEvents on FUSE: what was done through the mount" \
		"$(field "$tmp/body" '" ".join(e["type"][11:].lower() + ":" + e["name"] for e in d["events"])')" \
		"create:n.txt write:n.txt"
	unary filesystem.Filesystem/RemoveWatcher "{\"watcherId\":\"$wid\"}"
	fusermount -u "$fuse" 2>/dev/null || umount "$fuse"
	fuse=
fi
# watchdir NAME FOLDER TIMEOUT_MS: a WatchDir stream in the background (its
# raw bytes in $tmp/NAME.raw, summed up by watchsum), once its start is in.
watchdir() {
	$py wrap "{\"path\":\"$2\"}" >"$tmp/$1.req"
	C -N -H 'Content-Type: application/connect+json' -H 'Connect-Protocol-Version: 1' \
		-H "Connect-Timeout-Ms: $3" -H 'Keepalive-Ping-Interval: 1' \
		--data-binary "@$tmp/$1.req" "$u/filesystem.Filesystem/WatchDir" >"$tmp/$1.raw" &
	wpid=$!
	i=0
	while [ $i -lt 200 ] && ! [ -s "$tmp/$1.raw" ]; do sleep 0.05; i=$((i + 1)); done
}
# watchsum FILE: the messages in order (keepalives counted apart, last).
watchsum() {
	$PY - "$1" <<'PY'
import json, struct, sys
raw, i, out, ka = open(sys.argv[1], "rb").read(), 0, [], 0
while i + 5 <= len(raw):
    flags, (n,) = raw[i], struct.unpack(">I", raw[i + 1:i + 5])
    msg = json.loads(raw[i + 5:i + 5 + n])
    i += 5 + n
    if flags & 2:
        out.append("end:" + msg.get("error", {}).get("code", "ok"))
    elif "filesystem" in msg:
        out.append(msg["filesystem"]["type"][11:].lower() + ":" + msg["filesystem"]["name"])
    elif "keepalive" in msg:
        ka += 1
    else:
        out.append(next(iter(msg)))
print(" ".join(out), "keepalives:" + ("some" if ka else "none"))
PY
}
mkdir "$tmp/w2"
watchdir watch "$tmp/w2" 30000
printf 'e' >"$tmp/w2/e.txt"
sleep 1.5 # a keepalive's time
rm -r "$tmp/w2"
wait $wpid
expect "WatchDir: start, the events, keepalives; the folder's removal ends it" "$(watchsum "$tmp/watch.raw")" \
	"start create:e.txt write:e.txt remove:e.txt end:ok keepalives:some"
watchdir idle "$tmp/w" 300
wait $wpid
expect "WatchDir: Connect-Timeout-Ms ends it with deadline_exceeded" "$(watchsum "$tmp/idle.raw")" \
	"start end:deadline_exceeded keepalives:none"
# A WatchDir whose client goes away while events for it wait: the agent,
# stopped meanwhile, reads the events first, and sending the first one
# closes the connection (and so the watcher) under the watcher's own
# callback, which then must not touch it (it did: a use after free that
# killed a guest's agent).
mkdir "$tmp/w3"
watchdir gone "$tmp/w3" 30000
kill -STOP "$pid"
for f in 1 2 3 4 5 6 7 8; do : >"$tmp/w3/f$f"; done
pkill -P "$wpid" curl # (the background job is a subshell running curl)
wait $wpid 2>/dev/null
sleep 0.2
kill -CONT "$pid"
sleep 0.5
code=$(C -o /dev/null -w '%{http_code}' $u/health)
kill -0 "$pid" 2>/dev/null && [ "$code" = 204 ] &&
	ok "WatchDir: a client gone while its events waited: the agent goes on" ||
	notok "WatchDir: a client gone while its events waited: /health $code; $(tail -n 5 "$tmp/agent.err")"
rm -r "$tmp/w3"

# ---- malformed requests: answered, and the agent survives ----
unary process.Process/List '{not json'
expect "bad JSON is 400" "$code" 400
unary filesystem.Filesystem/Frobnicate '{}'
expect "an unknown method is 501" "$code" 501
code=$(C -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/connect+json' \
	--data-binary 'xx' "$u/process.Process/Start")
grep -q 'invalid_argument' "$tmp/body" && ok "a broken envelope ends the stream with invalid_argument" ||
	notok "broken envelope: $code $(cat "$tmp/body")"
$PY - "$sock" "$tok" >"$tmp/raw.out" <<'EOF'
import socket, sys
def ask(data):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(sys.argv[1])
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    s.close()
    return out.split(b"\r\n", 1)[0].decode(errors="replace")
print(ask(b"GARBAGE\r\n\r\n"))
print(ask(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"))
print(ask(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"))
tok = b"X-Access-Token: " + sys.argv[2].encode() + b"\r\n"
print(ask(b"POST /process.Process/List HTTP/1.1\r\n" + tok + b"Content-Length: 99999999999\r\n\r\n"))
print(ask(b"POST /files?path=/tmp/x HTTP/1.1\r\n" + tok + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"))
EOF
expect "raw garbage / huge header / huge URL / huge body / bad chunk get 4xx answers" \
	"$(cut -c1-12 "$tmp/raw.out" | tr '\n' ' ')" "HTTP/1.1 400 HTTP/1.1 431 HTTP/1.1 414 HTTP/1.1 413 HTTP/1.1 400 "
$PY - "$sock" "$tok" >"$tmp/pipe.out" <<'EOF'
import re, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
tok = b"X-Access-Token: " + sys.argv[2].encode() + b"\r\n"
body = b'{"path":"/"}'
s.sendall(b"GET /health HTTP/1.1\r\n\r\n"
          b"POST /filesystem.Filesystem/Stat HTTP/1.1\r\n" + tok +
          b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
          b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
          b"GET /health HTTP/1.0\r\n\r\n")
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    out += b"(timeout)"
print(" ".join(x.decode() for x in re.findall(rb"HTTP/1\.1 (\d{3}) ", out)),
      "closed" if not out.endswith(b"(timeout)") else "open")
EOF
expect "pipelined keep-alive requests (chunked RPC body, then HTTP/1.0 closes)" "$(cat "$tmp/pipe.out")" "204 200 204 closed"
# the port bridge (serve's way to a TCP server in the guest)
$py bridge "$sock" "$tok" >"$tmp/bridge.out" 2>&1 || echo "not ok - connect.py bridge: exit $?" >>"$tmp/bridge.out"
while IFS= read -r line; do
	case $line in
	"ok - "*) ok "${line#ok - }" ;;
	*) notok "${line#not ok - }" ;;
	esac
done <"$tmp/bridge.out"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" $u/health)
expect "the agent still answers after all that" "$code" 204
kill -0 "$pid" 2>/dev/null && ok "the agent is still running" || notok "the agent died: $(tail -5 "$tmp/agent.err")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
