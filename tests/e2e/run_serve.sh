#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `cubicle serve` with real VMMs and the real E2B SDK (issue 15), directly
# or nested in L1:
#   - `cubicle template build base` boots the example kernel with an
#     initramfs carrying cubicle-agent, waits for the agent, snapshots;
#   - `cubicle serve` clones its sandboxes from that snapshot; npm e2b
#     2.51.0 with E2B_API_URL = E2B_SANDBOX_URL = serve: create ->
#     commands.run('echo hi') -> files.write/read/list -> setTimeout -> list
#     by metadata -> a command past its timeout -> a wrong access token ->
#     pause (a snapshot to disk, the VMM ends) -> Sandbox.connect (resumed,
#     the written file still there) -> Sandbox.fork twice over (each fork
#     has the source's file and background process, files of its own, a
#     token of its own) -> kill; a sandbox whose timeout expires
#     disappears; SDK 2.46.1 through the v1 paths;
#   - 20 sandboxes created at once each run a command and are killed;
#   - Template.build of a template from base (ENV, RUN, COPY, WORKDIR, a
#     start and a ready command): a sandbox of it has the files, variables,
#     working folder and the start command running; a failing step is
#     reported with its output; fromImage is refused;
#   - bad requests, a client leaving mid-stream, 200 concurrent requests
#     (tests/serve/serve-checks.py);
#   - a warm pool of 2 restored-and-paused clones serves some creates;
#   - afterwards (serve stopped: it ends its pool) no VMM process, socket or
#     sandbox folder is left;
#   - `cubicle template build --jail-user` builds a template with its VMM
#     jailed; the snapshot it wrote is made root's;
#   - a second serve with jail_user runs the SDK's flow again with every VMM
#     jailed, forks too (each sandbox a uid of its own from a range, its root holding
#     only its files, a cgroup with limits), and sandboxes from the jailed
#     template and base side by side (two uids); killed, a sandbox leaves no
#     cgroup, folder or process.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CUBICLE_E2E_TIMEOUT:=900}"
export CUBICLE_E2E_TIMEOUT
e2e_init
w=$e2e_work
e2e_serve_sdk
e2e_agent_initramfs "virtio virtio_ring virtio_pci virtio_console vmw_vsock_virtio_transport"
many=${CUBICLE_SERVE_MANY:-20}

cat >"$w/serve.sh" <<'SCRIPT'
#!/bin/bash
# Where KVM is: $1 work folder, $2 kernel, $3 cubicle, $4 source tree, $5
# the build's tests/e2b (the SDK), $6 how many sandboxes at once.
set -u
w=$1 k=$2 cub=$3 top=$4 e2b=$5 many=$6
. "$top/tests/e2e/serve-lib.sh"
serve_vm_cfg "$w/vm.cfg"
serve_template base "$w/vm.cfg" || exit 1
cat >"$t/serve.cfg" <<CFG
# the nested guest is slow: give agents time to answer
agent_wait_ms = 240000;
max_sandboxes = 64;
# two clones kept restored and paused, for creates to resume
pool_size = 2;
# sandboxes answer at Host PORT-ID.cubicle.test too (the SDK's getHost)
domain = "cubicle.test";
CFG
start_serve "$t/serve.cfg" "$w/serve.log"
export SDK_TEST_DIR=/tmp/serve-sdk
# (autoResume is serve's choice to resume, checked with the host test's
# fake VMMs; the resume itself is the connect's, which runs here: ~30 s of
# an L1 saved)
SERVE_DOMAIN=cubicle.test FORK_ISOLATED=1 SKIP_AUTORESUME=1 node "$e2b/serve-sdk.mjs" "$url" "$key" full || fail=1
[ -z "$(ls -A "$state/forks" 2>/dev/null)" ] && ok "the forks' snapshot copies are gone" ||
	bad "left in $state/forks: $(ls -A "$state/forks")"
node "$e2b/serve-sdk.mjs" "$url" "$key" v1 || fail=1
node "$e2b/serve-sdk.mjs" "$url" "$key" many "$many" || fail=1
BUILD_GUEST=1 node "$e2b/serve-sdk.mjs" "$url" "$key" build || fail=1
python3 "$top/tests/serve/serve-checks.py" "$url" "$key" || fail=1
curl -s -H "X-API-Key: $key" "$url/" >"$w/status.html"
grep -q '<h1>cubicle serve</h1>' "$w/status.html" && grep -q '<polyline' "$w/status.html" &&
	ok "the status page lists sandboxes and plots create latencies" || bad "status page: $(head -c 300 "$w/status.html")"
n=$(grep -c "from the warm pool" "$w/serve.log")
[ "$n" -ge 1 ] && ok "$n creates resumed a warm clone (pool_size 2)" || bad "no create took a warm clone"
stop_serve
serve_left socket "$(find "$state" -type s 2>/dev/null)"
# create latencies, for the note
grep -o "created from 'base' in [0-9.]* ms" "$w/serve.log" | awk '{ print $5 }' | sort -n |
	awk '{ a[NR] = $1 } END { if (NR) printf "# %d creates: p50 %.0f ms, max %.0f ms\n", NR, a[int((NR + 1) / 2)], a[NR] }'

# ---- the same service with each VMM jailed (jail_user: cubicle restore
# --jail, each sandbox a uid of 100000-100063, a cgroup with limits per VMM). Root and cgroup v2
# (L1 mounts none: mounted here).
[ -e /sys/fs/cgroup/cgroup.controllers ] || [ -e /sys/fs/cgroup/unified/cgroup.controllers ] ||
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
cgbase=/sys/fs/cgroup/cubicle
[ -e /sys/fs/cgroup/cgroup.controllers ] || cgbase=/sys/fs/cgroup/unified/cubicle
if [ "$(id -u)" != 0 ] || ! [ -e "${cgbase%/cubicle}/cgroup.controllers" ]; then
	echo "# jailed serve: skipped (it needs root and a cgroup v2 hierarchy)"
else
	cat >"$t/jserve.cfg" <<CFG
agent_wait_ms = 240000;
jail_user = "100000-100063";
jail_memory_max = "1G";
jail_pids_max = "64";
CFG
	# A template built jailed too (its own console and vsock paths: the
	# base build's, root's, are not the jail's uid's to write)
	sed "s|$t/template|$t/jtemplate|g" "$w/vm.cfg" >"$w/jvm.cfg"
	if serve_template jailed "$w/jvm.cfg" --jail-user 65534:65534; then
		jt=$state/templates/jailed
		# the VMM ran as 65534; what it wrote is root's now, links none
		notroot=$(find "$jt/snap" ! -user root -o ! -group root -o -perm /022 ! -type l -o -type l 2>&1 | head -n 3)
		if grep -q "jailed in .* as uid 65534 gid 65534" "$jt/build.log" && [ -n "$(ls "$jt/snap")" ] &&
		   [ -z "$notroot" ] && ! [ -e "$jt/j" ] && [ -z "$(ls -d "$cgbase"/vm-* 2>/dev/null)" ]; then
			ok "template build --jail-user: its VMM ran jailed as 65534; the snapshot ($(ls "$jt/snap" | wc -l) entries) is root's, the jail folder and cgroup gone"
		else
			bad "template build --jail-user: $(grep -c 'jailed in' "$jt/build.log") 'jailed in' lines; not root's or writable: '$notroot'; left: $(ls -d "$jt/j" "$cgbase"/vm-* 2>/dev/null)"
		fi
	fi
	start_serve "$t/jserve.cfg" "$w/jserve.log"
	SDK_TEST_DIR=/tmp/serve-sdk-jailed FORK_ISOLATED=1 SKIP_AUTORESUME=1 node "$e2b/serve-sdk.mjs" "$url" "$key" full || fail=1
	# Two more by hand, from the jailed template and from base, to look at
	# their VMMs from outside: a uid each from jail_user's range.
	make_sbx() {
		curl -s -X POST -H "X-API-Key: $key" -H 'Content-Type: application/json' \
			-d "{\"templateID\":\"$1\"}" "$url/sandboxes" | sed -n 's/.*"sandboxID": *"\([^"]*\)".*/\1/p'
	}
	# the supervisor (root, outside) and the VMM (jailed) of sandbox $1;
	# the jail's init (root too, pid 1 of the jail's namespace: NSpid
	# names it twice) is neither
	vmm_of() {
		sup= vmm=
		for p in $(pgrep -f "cubicle restore .*--id $1" 2>/dev/null); do
			if [ "$(awk '/^Uid:/ { print $2 }' "/proc/$p/status")" != 0 ]; then
				vmm=$p
			elif [ "$(awk '/^NSpid:/ { print NF }' "/proc/$p/status")" = 2 ]; then
				sup=$p
			fi
		done
	}
	id=$(make_sbx jailed)
	id2=$(make_sbx base)
	cg= uid= uid2= root= lim= args= mem= vrss=
	vmm_of "$id2"
	[ -n "$vmm" ] && uid2=$(awk '/^Uid:/ { print $2 }' "/proc/$vmm/status")
	vmm_of "$id"
	if [ -n "$id" ] && [ -n "$sup" ] && [ -n "$vmm" ]; then
		uid=$(awk '/^Uid:/ { print $2 }' "/proc/$vmm/status")
		cg=$cgbase/vm-$sup
		lim="pids.max $(cat "$cg/pids.max" 2>/dev/null), memory.max $(cat "$cg/memory.max" 2>/dev/null)"
		root=$(ls /proc/$vmm/root/ 2>/dev/null | tr '\n' ' ')
		args=$(tr '\0' ' ' <"/proc/$sup/cmdline")
		# serve's metrics are the VMM's, found below the supervisor
		mem=$(curl -s -H "X-API-Key: $key" "$url/sandboxes/metrics?sandbox_ids=$id" |
			sed -n 's/.*"memUsed": *\([0-9]*\).*/\1/p')
		vrss=$(awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$vmm/status")
	fi
	saved=$(sed -n 's/.*"jail_uid": *\([0-9]*\).*/\1/p' "$state/sandboxes/$id/sandbox.json" 2>/dev/null)
	if [ -n "$uid" ] && [ -n "$uid2" ] && [ "$uid" != "$uid2" ] &&
	   [ "$uid" -ge 100000 ] && [ "$uid" -le 100063 ] && [ "$uid2" -ge 100000 ] && [ "$uid2" -le 100063 ] &&
	   [ "$saved" = "$uid" ] && echo "$args" | grep -q -- "--jail-uid $uid --jail-gid $uid --jail-foreign-ids 100000-100063"; then
		ok "jailed serve, jail_user 100000-100063: sandboxes $id and $id2 run as uids $uid and $uid2 (kept in sandbox.json; --jail-foreign-ids given)"
	else
		bad "jailed serve, a uid per sandbox: '$id' uid '$uid' (saved '$saved'), '$id2' uid '$uid2'; supervisor's arguments: $args"
	fi
	code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "X-API-Key: $key" "$url/sandboxes/$id")
	curl -s -o /dev/null -X DELETE -H "X-API-Key: $key" "$url/sandboxes/$id2"
	sleep 0.5
	# its / holds the folders of the files it was given (the kernel under
	# ~/.cache, the snapshot) and vm/ (its sockets), never etc, usr, bin, lib
	if [ -n "$uid" ] && [ "$lim" = "pids.max 64, memory.max 1073741824" ] &&
	   ! echo " $root" | grep -Eq ' (etc|usr|bin|home|sys|lib) ' && echo " $root" | grep -q ' vm ' &&
	   [ -n "$mem" ] && [ -n "$vrss" ] && [ $((mem * 10)) -ge $((vrss * 8)) ] && [ $((mem * 10)) -le $((vrss * 12)) ] &&
	   [ "$code" = 204 ] && ! [ -e "$cg" ] && ! [ -e "$state/sandboxes/$id" ]; then
		ok "jailed serve: sandbox $id's VMM ran as uid $uid, its / held only: $root; its cgroup had $lim; its metrics' memUsed $mem is the VMM's (VmRSS $vrss); killed (204): the cgroup and its folder gone"
	else
		bad "jailed serve: sandbox '$id': supervisor '$sup' VMM '$vmm' uid '$uid', / '$root', cgroup $cg: '$lim'$([ -e "$cg" ] && echo ' still there'), metrics' memUsed '$mem' (the VMM's VmRSS '$vrss'), DELETE $code"
	fi
	stop_serve
	echo "# jailed serve:"
	serve_left cgroup "$(ls -d "$cgbase"/vm-* 2>/dev/null)"
fi
pkill -KILL -f "cubicle restore" 2>/dev/null
rm -rf "$t"
exit $fail
SCRIPT

if [ $e2e_mode = nested ]; then
	"$e2e_top/tests/e2e/nested/run-nested.sh" --arch x86_64 --mem 4096 \
		--timeout $((e2e_timeout + 180)) --cmd-timeout "$e2e_timeout" --rw "$w" -- \
		bash "$w/serve.sh" "$w" "$e2e_guest/vmlinuz" "$CUBICLE" "$e2e_top" \
		"$e2e_builddir/tests/e2b" "$many" | tee "$w/out.log"
else
	timeout -k 5 "$e2e_timeout" bash "$w/serve.sh" "$w" "$e2e_guest/vmlinuz" "$CUBICLE" "$e2e_top" \
		"$e2e_builddir/tests/e2b" "$many" | tee "$w/out.log"
fi
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ] || grep -q '^not ok' "$w/out.log" || ! grep -q '^ok - nothing left' "$w/out.log"; then
	e2e_dump "$w/serve.log" "$w/template-base.out"
	exit 1
fi
exit 0
