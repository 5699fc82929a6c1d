#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `cubicle serve` sandbox networks (issue 15, must-show 3), directly or
# nested in L1, in a network namespace of its own:
#   - a template with a virtio-net device on a tap; serve with
#     network_subnet gives each clone a /30, a tap and an egress policy;
#   - an HTTP server on the host's side (192.0.2.1:8099, an address of the
#     namespace's lo); the real npm e2b SDK creates 4 sandboxes at once: the
#     default one reaches it, allowInternetAccess false does not, false with
#     allowOut [192.0.2.1/32] does (also after pause and connect), denyOut
#     [192.0.2.1/32] does not; a domain name in denyOut is a 400;
#   - allowOut domain names (a name server on 192.0.2.1:53 gives ok.test,
#     wild.test and a.wild.test 192.0.2.2): with ["ok.test"] the address is
#     reachable once the guest has looked the name up, not before, and not
#     after updateNetwork drops the name; with ["*.wild.test"] looking up
#     the apex does not open it, a.wild.test does;
#   - one create takes a warm-pool clone (its policy loaded before it runs);
#   - a serve without network_subnet refuses that template with a reason;
#   - the same for jailed VMMs (jail_user 65534:65534): allowOut reaches it,
#     also after pause and connect; no internet does not, until
#     updateNetwork; each VMM made its tap, then held no capability;
#   - afterwards no VMM process, tap, cgroup or sandbox folder is left.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CUBICLE_E2E_TIMEOUT:=900}"
export CUBICLE_E2E_TIMEOUT
e2e_init
w=$e2e_work
for t in busybox curl unshare ip; do
	command -v $t >/dev/null || e2e_skip "$t is needed"
done
[ "$(id -u)" = 0 ] || e2e_skip "root is needed (taps, eBPF)"
e2e_serve_sdk
e2e_agent_initramfs "virtio virtio_ring virtio_pci virtio_console vmw_vsock_virtio_transport virtio_net"

cat >"$w/net.sh" <<'SCRIPT'
#!/bin/bash
# Where KVM is, in a network namespace of its own: $1 work folder, $2 kernel,
# $3 cubicle, $4 source tree, $5 the build's tests/e2b, $6 the L1 kernel's
# modules, $7 1 when nested.
set -u
w=$1 k=$2 cub=$3 top=$4 e2b=$5 mods=$6 nested=$7
. "$top/tests/e2e/serve-lib.sh"
for m in "tun drivers/net" "sch_ingress net/sched" "cls_bpf net/sched"; do
	sh "$top/tests/e2e/modload.sh" $m "$mods" "$nested" || { bad "cannot load module ${m% *}"; exit 1; }
done
ip link set lo up
ip addr add 192.0.2.1/32 dev lo
ip addr add 192.0.2.2/32 dev lo
mkdir "$t/www"
echo cubicle-net-ok >"$t/www/ok"
busybox httpd -f -p 192.0.2.1:8099 -h "$t/www" &
httpd=$!
# the names allowOut gives (the sandboxes' DNS proxy asks this server)
busybox httpd -f -p 192.0.2.2:8099 -h "$t/www" &
httpd2=$!
node "$e2b/dns-stub.mjs" 192.0.2.1:53 ok.test=192.0.2.2 wild.test=192.0.2.2 a.wild.test=192.0.2.2 big.test=192.0.2.2+39 \
	>"$w/dns-stub.log" 2>&1 &
dnsd=$!
serve_vm_cfg "$w/vm.cfg" \
	'{ type = "virtio-net"; id = "net0"; backend = { type = "tap"; create = true; ifname = "cubtpl0"; }; }'
serve_template base "$w/vm.cfg" || exit 1

# without network_subnet: the template is refused, with the reason
echo 'agent_wait_ms = 240000;' >"$t/plain.cfg"
start_serve "$t/plain.cfg" "$w/serve-plain.log"
out=$(curl -s -X POST -H "X-API-Key: $key" -H 'Content-Type: application/json' \
	-d '{"templateID":"base"}' -w ' HTTP %{http_code}' "$url/sandboxes")
case $out in
*"no network_subnet"*"HTTP 500") ok "serve without network_subnet refuses a template with a tap: $out" ;;
*) bad "serve without network_subnet, a template with a tap: $out" ;;
esac
stop_serve

cat >"$t/serve.cfg" <<CFG
agent_wait_ms = 240000;
network_subnet = "10.201.0.0/24";
dns_upstream = "192.0.2.1:53";
pool_size = 1;
CFG
start_serve "$t/serve.cfg" "$w/serve.log"
# the pool's clone ready first (restored and paused, its tap made, its
# allow list empty until a create takes it): its API answers
i=0
until curl -sf --unix-socket "$(ls -d "$state"/sandboxes/*/ 2>/dev/null | head -n 1)api.sock" \
	http://localhost/ >/dev/null 2>&1 || [ $i -ge 600 ]; do
	sleep 0.2
	i=$((i + 1))
done
sleep 1
DNS_ADDR=192.0.2.2 node "$e2b/serve-sdk.mjs" "$url" "$key" net 192.0.2.1:8099 || fail=1
n=$(grep -c "from the warm pool" "$w/serve.log")
[ "$n" -ge 1 ] && ok "$n create took the warm clone (its policy loaded before it ran)" ||
	bad "no create took the warm clone"
stop_serve
taps() { ip -o link show | awk -F': ' '$2 ~ /^cub/ { print $2 }' | tr '\n' ' ' | sed 's/ $//'; }
serve_left tap "$(taps)"

# the same networks with each VMM jailed as 65534: it makes its tap and
# attaches the policy, then gives up every capability before its guest runs
[ -e /sys/fs/cgroup/cgroup.controllers ] || mount -t cgroup2 none /sys/fs/cgroup
cat >"$t/jail.cfg" <<CFG
agent_wait_ms = 240000;
network_subnet = "10.201.0.0/24";
dns_upstream = "192.0.2.1:53";
jail_user = "65534:65534";
CFG
start_serve "$t/jail.cfg" "$w/serve-jail.log"
NET_KINDS=allowOut,internetOff node "$e2b/serve-sdk.mjs" "$url" "$key" net 192.0.2.1:8099 &
sdk=$!
# while they run: every task of every jailed VMM, uid 65534 and no capability
i=0
until [ "$(ls "$state/sandboxes" 2>/dev/null | wc -l)" -ge 2 ] || [ $i -ge 1200 ]; do
	sleep 0.2
	i=$((i + 1))
done
sleep 2
jp=$(pgrep -u 65534 -f "cubicle restore" | tr '\n' ' ')
ids=$(for p in $jp; do sed -n 's/^Uid:[[:space:]]*//p' /proc/$p/task/*/status; done | awk '{ $1 = $1; print }' | sort -u | paste -sd';')
caps=$(for p in $jp; do sed -n 's/^Cap\(Eff\|Prm\):[[:space:]]*//p' /proc/$p/task/*/status; done | sort -u | paste -sd';')
if [ -n "$jp" ] && [ "$ids" = "65534 65534 65534 65534" ] && [ "$caps" = 0000000000000000 ]; then
	ok "jailed VMMs ($(echo $jp | wc -w) processes): every id 65534, no capability left, taps: $(taps)"
else
	bad "jailed VMMs: processes [$jp] ids [$ids] capabilities [$caps] taps [$(taps)]"
fi
wait $sdk || fail=1
stop_serve
echo "# jailed serve:"
serve_left "tap or cgroup" "$(taps)$(ls -d /sys/fs/cgroup/cubicle/vm-* 2>/dev/null)"
kill $httpd $httpd2 $dnsd 2>/dev/null
pkill -KILL -f "cubicle restore" 2>/dev/null
rm -rf "$t"
exit $fail
SCRIPT

nested=0
[ $e2e_mode = nested ] && nested=1
if [ $e2e_mode = nested ]; then
	"$e2e_top/tests/e2e/nested/run-nested.sh" --arch x86_64 --mem 4096 \
		--timeout $((e2e_timeout + 180)) --cmd-timeout "$e2e_timeout" --rw "$w" -- \
		unshare --net bash "$w/net.sh" "$w" "$e2e_guest/vmlinuz" "$CUBICLE" "$e2e_top" \
		"$e2e_builddir/tests/e2b" "$e2e_guest/nested/modules" $nested | tee "$w/out.log"
else
	timeout -k 5 "$e2e_timeout" unshare --net bash "$w/net.sh" "$w" "$e2e_guest/vmlinuz" \
		"$CUBICLE" "$e2e_top" "$e2e_builddir/tests/e2b" "" $nested | tee "$w/out.log"
fi
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ] || grep -q '^not ok' "$w/out.log" || ! grep -q '^ok - nothing left' "$w/out.log"; then
	e2e_dump "$w/serve.log" "$w/serve-jail.log" "$w/serve-plain.log" "$w/template-base.out" \
		"$w/dns-stub.log"
	exit 1
fi
exit 0
