#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The control API over its real socket, with no VM (no KVM needed): cubicle
# --api-sock waiting to be configured, driven with curl and `cubicle ctl`.
# Firecracker's pre-boot sequence, refusals with their status codes, raw
# HTTP (malformed, pipelined, chunked, Expect: 100-continue, cut short) when
# node is there, a socket already served, SIGTERM. Then the
# schema subset in tests/api/fc-schema.json is cross-checked against
# Firecracker's published description when ../shared/reference has it.
set -u
bd=${top_builddir:-.}
sd=${top_srcdir:-.}
cub=${CUBICLE:-$bd/cubicle}
if ! command -v curl >/dev/null; then
	echo "SKIP: curl is not installed (scripts/deps.sh installs it)"
	exit 77
fi
if [ -n "${TEST_RUNNER:-}" ]; then
	echo "SKIP: cross build: the API test runs in the native build"
	exit 77
fi
tmp=$(mktemp -d)
sock=$tmp/api.sock
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
notok() {
	echo "not ok - $1"
	[ -n "${2:-}" ] && [ -f "$2" ] && sed 's/^/#   /' "$2" | tail -n 10
	fail=$((fail + 1))
}
# check NAME EXPECTED_STATUS REGEX CURL_ARGS...: the status and the body.
check() {
	name=$1 want=$2 re=$3
	shift 3
	got=$(curl -s -o "$tmp/body" -w '%{http_code}' --unix-socket "$sock" "$@")
	if [ "$got" = "$want" ] && { [ -z "$re" ] || grep -Eq -- "$re" "$tmp/body"; }; then
		ok "$name ($got)"
	else
		notok "$name: status $got (want $want), body: $(head -c 300 "$tmp/body")"
	fi
}
u=http://localhost

"$cub" --api-sock "$sock" --id api-test >"$tmp/out" 2>"$tmp/err" </dev/null &
pid=$!
i=0
while [ $i -lt 100 ] && ! [ -S "$sock" ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$sock" ] && ok "cubicle --api-sock listens" || notok "no socket after 10 s" "$tmp/err"

check "GET /" 200 '"state":"Not started"' $u/
check "GET /version" 200 '"firecracker_version"' $u/version
check "PUT /machine-config" 204 '' -X PUT -d '{"vcpu_count":2,"mem_size_mib":256}' $u/machine-config
check "GET /machine-config" 200 '"vcpu_count":2,"mem_size_mib":256' $u/machine-config
check "PUT /boot-source" 204 '' -X PUT -d '{"kernel_image_path":"/nonexistent/vmlinuz","boot_args":"console=ttyS0"}' $u/boot-source
check "PUT /drives/rootfs" 204 '' -X PUT -d '{"drive_id":"rootfs","path_on_host":"/nonexistent/rootfs.ext4","is_root_device":true,"is_read_only":false}' $u/drives/rootfs
check "PUT /network-interfaces/eth0" 204 '' -X PUT -d '{"iface_id":"eth0","host_dev_name":"tap0"}' $u/network-interfaces/eth0
check "PUT /entropy" 204 '' -X PUT -d '{}' $u/entropy
check "unknown field: 400" 400 "unknown field 'vcpus'" -X PATCH -d '{"vcpus":1}' $u/machine-config
check "wrong type: 400" 400 "'is_root_device' must be a boolean" -X PUT -d '{"drive_id":"d","is_root_device":1}' $u/drives/d
check "malformed JSON: 400" 400 'not valid JSON' -X PUT -d '{"kernel' $u/boot-source
check "unknown path: 400" 400 'Invalid request method and/or path: GET /nope' $u/nope
check "unknown method: 400" 400 'malformed HTTP request: invalid HTTP method' -X BREW $u/
check "a method HTTP knows, not the API: 400" 400 'Invalid request method and/or path: DELETE /' -X DELETE $u/
check "PUT /vsock" 204 '' -X PUT -d "{\"guest_cid\":3,\"uds_path\":\"$tmp/v.sock\"}" $u/vsock
check "GET /vm/config shows the vsock" 200 "\"vsock\":\\{\"guest_cid\":3,\"uds_path\":\"$tmp/v.sock\"\\}" $u/vm/config
check "PUT /vsock without uds_path: 400" 400 "vsock: missing required field 'uds_path'" -X PUT -d '{"guest_cid":3}' $u/vsock
check "PUT /vsock with CID 2: 400" 400 "vsock: 'guest_cid' is 2; expected 3 to 4294967294" -X PUT -d '{"guest_cid":2,"uds_path":"/v"}' $u/vsock
check "not built yet: 400" 400 'not supported by cubicle yet' -X PUT -d '{}' $u/balloon
check "pause before the start: 400" 400 'the VM is not running' -X PATCH -d '{"state":"Paused"}' $u/vm
head -c 70000 /dev/zero | tr '\0' ' ' >"$tmp/big"
check "oversized body: 413" 413 'larger than the limit of 65536 bytes' -X PUT --data-binary @"$tmp/big" $u/boot-source
check "oversized headers: 431" 431 'headers are larger than the limit of 16384 bytes' -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" $u/
# InstanceStart plans first: the missing kernel is named, nothing started.
check "InstanceStart with a missing kernel: 400" 400 'PUT /boot-source: boot.kernel: .*/nonexistent/vmlinuz' \
	-X PUT -d '{"action_type":"InstanceStart"}' $u/actions
check "still not started" 200 '"state":"Not started"' $u/

# Raw HTTP on the socket (node's net module: curl sends only good HTTP).
raw() {
	name=$1 want=$2
	shift 2
	if node -e '
const net = require("net");
const [sock, want, ...parts] = process.argv.slice(1);
const c = net.connect(sock);
let got = "";
c.on("data", (d) => { got += d; });
c.on("error", (e) => { got += "[" + e.code + "]"; });
c.on("close", () => {
	// Status lines and fault messages, one per answer, joined by " | ".
	const seen = [];
	const re = /HTTP\/1\.1 (\d+)[^\r]*\r\n[\s\S]*?\r\n\r\n(\{[^\n]*?\}(?=HTTP|$))?/g;
	let m;
	while ((m = re.exec(got))) {
		const f = m[2] && JSON.parse(m[2]).fault_message;
		seen.push(m[1] + (f ? " " + f : ""));
	}
	const s = seen.join(" | ");
	console.log(s);
	process.exit(new RegExp(want).test(s) ? 0 : 1);
});
let i = 0;
const next = () => {
	if (i == parts.length) return;
	if (parts[i] == "END") { c.end(); return; }
	c.write(parts[i++].replace(/\\r\\n/g, "\r\n"));
	setTimeout(next, 50);
};
c.on("connect", next);
setTimeout(() => { console.log("timeout: " + JSON.stringify(got)); process.exit(1); }, 5000);
' "$sock" "$want" "$@" >"$tmp/raw" 2>&1; then
		ok "$name: $(cat "$tmp/raw")"
	else
		notok "$name" "$tmp/raw"
	fi
}
if command -v node >/dev/null; then
	# Each ends by the server closing the connection, unless the last part
	# is END (the client then closes its side after its writes).
	raw "garbage: 400, closed" '^400 malformed HTTP request: ' 'GARBAGE\r\n\r\n'
	raw "HTTP/0.9: 505, closed" '^505 malformed HTTP request: only HTTP/1.0 and HTTP/1.1' 'GET /\r\n\r\n'
	raw "two pipelined requests in one write: answered in order" \
		'^200 \| 400 Invalid request method and/or path: GET /nope$' \
		'GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n' END
	raw "a chunked body, split across writes" '^204$' \
		'PUT /entropy HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{' \
		'\r\n1\r\n}\r\n0\r\n\r\n' END
	raw "Expect: 100-continue with a body over the limit: 413 before the body, closed" \
		'^413 the request body is larger than the limit of 65536 bytes$' \
		'PUT /entropy HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n'
	raw "a body over the limit, sent anyway: read, 413, closed" '^413 the request body is larger' \
		"PUT /entropy HTTP/1.1\\r\\nContent-Length: 70000\\r\\n\\r\\n$(head -c 70000 /dev/zero | tr '\0' ' ')"
	raw "a request cut short gets no answer, and the server lives" '^$' \
		'PUT /entropy HTTP/1.1\r\nContent-Length: 10\r\n\r\n{' END
	raw "HTTP/1.0: answered, closed" '^200$' 'GET /version HTTP/1.0\r\n\r\n'
else
	echo "ok - raw HTTP checks # SKIP node is not installed"
fi

# cubicle ctl
if "$cub" ctl "$sock" info >"$tmp/ctl" 2>&1 && grep -q '^api-test: Not started (cubicle ' "$tmp/ctl"; then
	ok "cubicle ctl info"
else
	notok "cubicle ctl info" "$tmp/ctl"
fi
if "$cub" ctl --json "$sock" config >"$tmp/ctl" 2>&1 && grep -q '"path_on_host": "/nonexistent/rootfs.ext4"' "$tmp/ctl"; then
	ok "cubicle ctl --json config"
else
	notok "cubicle ctl --json config" "$tmp/ctl"
fi
"$cub" ctl "$sock" put /machine-config '{"vcpu_count":0,"mem_size_mib":1}' >"$tmp/ctl" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "400: machine-config: 'vcpu_count' is 0; expected 1 to 32" "$tmp/ctl"; then
	ok "cubicle ctl put: a refusal is exit 1 with the fault message"
else
	notok "cubicle ctl put: exit $rc" "$tmp/ctl"
fi
"$cub" ctl "$sock" call nodev nomethod >"$tmp/ctl" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "no VM is running yet" "$tmp/ctl"; then
	ok "cubicle ctl call before start: exit 1, named"
else
	notok "cubicle ctl call before start: exit $rc" "$tmp/ctl"
fi
"$cub" ctl "$tmp/nothing.sock" info >"$tmp/ctl" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "nothing.sock" "$tmp/ctl"; then
	ok "cubicle ctl on a dead socket: exit 1, named"
else
	notok "cubicle ctl on a dead socket: exit $rc" "$tmp/ctl"
fi

# A second cubicle on the same socket is refused; the first keeps it.
"$cub" --api-sock "$sock" >/dev/null 2>"$tmp/err2" </dev/null
rc=$?
if [ $rc = 1 ] && grep -q 'another process is listening there' "$tmp/err2" && [ -S "$sock" ]; then
	ok "a socket in use is refused (exit 1)"
else
	notok "a socket in use: exit $rc" "$tmp/err2"
fi

# GET /metrics before any VM, as text and through cubicle ctl --json.
check "GET /metrics: Prometheus text" 200 '^cubicle_vm_state\{state="Not started"\} 1$' $u/metrics
if "$cub" ctl --json "$sock" metrics >"$tmp/ctl" 2>&1 && grep -q '"cubicle_info{version=' "$tmp/ctl"; then
	ok "cubicle ctl --json metrics"
else
	notok "cubicle ctl --json metrics" "$tmp/ctl"
fi
check "PUT /stop takes no body: 400" 400 'takes no body' -X PUT -d '{}' $u/stop

kill -TERM $pid
wait $pid
rc=$?
pid=
if [ $rc = 143 ] && ! [ -e "$sock" ] && grep -q 'stopped by signal' "$tmp/err"; then
	ok "SIGTERM ends the waiting cubicle (143) and removes its socket"
else
	notok "SIGTERM: exit $rc, socket $( [ -e "$sock" ] && echo left || echo gone)" "$tmp/err"
fi

# cubicle ctl stop: 204, then cubicle ends with 0 and removes its socket.
"$cub" --api-sock "$sock" >/dev/null 2>"$tmp/err" </dev/null &
pid=$!
i=0
while [ $i -lt 100 ] && ! [ -S "$sock" ]; do sleep 0.1; i=$((i + 1)); done
"$cub" ctl "$sock" stop >"$tmp/ctl" 2>&1
crc=$?
wait $pid
rc=$?
pid=
if [ $crc = 0 ] && [ $rc = 0 ] && ! [ -e "$sock" ] && grep -q 'stopped through the API' "$tmp/err"; then
	ok "cubicle ctl stop: cubicle ends with 0, its socket removed"
else
	notok "cubicle ctl stop: ctl exit $crc, cubicle exit $rc" "$tmp/err"
fi

# The schema subset against Firecracker's own description.
yaml=$sd/../shared/reference/firecracker-api.yaml
if ! [ -f "$yaml" ]; then
	echo "ok - schema cross-check # SKIP $yaml is absent (a clone without ../shared)"
elif ! command -v node >/dev/null; then
	echo "ok - schema cross-check # SKIP node is not installed"
elif node -e '
const fs = require("fs");
const sub = JSON.parse(fs.readFileSync(process.argv[1], "utf8")).definitions;
const y = fs.readFileSync(process.argv[2], "utf8").split("\n");
let bad = 0;
for (const [def, s] of Object.entries(sub)) {
	const at = y.indexOf("  " + def + ":");
	if (at < 0) { console.log("# no definition " + def); bad++; continue; }
	let end = at + 1;
	while (end < y.length && !/^  [A-Za-z]+:$/.test(y[end])) end++;
	const block = y.slice(at, end);
	for (const p of Object.keys(s.properties || {}))
		if (!block.some(l => l === "      " + p + ":")) { console.log("# " + def + "." + p + " is not in the description"); bad++; }
	for (const r of s.required || [])
		if (!block.some(l => l.trim() === "- " + r)) { console.log("# " + def + ": required " + r + " is not required there"); bad++; }
}
process.exit(bad ? 1 : 0);
' "$sd/tests/api/fc-schema.json" "$yaml"; then
	ok "tests/api/fc-schema.json agrees with $yaml"
else
	notok "tests/api/fc-schema.json disagrees with Firecracker's description"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
