#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The tap backend and its eBPF egress policy end to end: a guest on virtio-net pings its host and fetches 16 MiB over HTTP; under a policy that allows only that server a second host address stays unreachable, a spoofed source address is dropped, drops are counted, an allow-list change at run time takes effect; a policy that cannot attach keeps the VM from starting; the same policy works in a jail (uid 65534) whose VMM makes its tap and then holds no capability.
#
# Everything host-side runs as root in a network and mount namespace of its
# own (unshare): inside the nested harness's L1, or on this host in direct
# mode. Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
w=$e2e_work
# Six VMs in one run (three refused at start): more than one boot's allowance.
e2e_timeout=${CUBICLE_E2E_TIMEOUT:-$([ $e2e_mode = nested ] && echo 800 || echo 400)}
[ "$(id -u)" = 0 ] || e2e_skip "needs root (taps, BPF)"
PATH=$PATH:/sbin:/usr/sbin
for t in ip tc bpftool unshare sha256sum pgrep; do
	command -v $t >/dev/null || e2e_skip "$t not found (apt-get install iproute2 bpftool util-linux coreutils)"
done

# ---- the guest: static address, then what cubicle.phase= asks for ----
cat >"$w/init" <<'EOF'
#!/bin/sh
# Guest /init for run_net_tap.sh: bring eth0 up as 10.0.2.15/24 and run one phase of checks.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /tmp && mount -t tmpfs -o size=64m tmpfs /tmp
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done </etc/modules.order
exec </dev/ttyS0 >/dev/ttyS0 2>&1
say() { echo "CUBICLE-GUEST $1=$2"; }
arg() { sed -n "s/.*cubicle\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
ok() { if "$@" >/dev/null 2>&1; then echo ok; else echo fail; fi; }
# (busybox wget -T crashes in Debian's busybox-static: timeout instead)
fetch() { timeout "$2" wget -q -O "$3" "http://$1" 2>/dev/null; }
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.1
i=0
while [ "$(cat /sys/class/net/eth0/operstate)" != up ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
say eth0 "$(cat /sys/class/net/eth0/operstate)"
case $(arg phase) in
open)
	say ping_host "$(ok ping -c 3 -W 5 10.0.2.1)"
	t0=$(date +%s)
	fetch 10.0.2.1/big.bin 120 /tmp/big.bin
	say fetch_rc $?
	say fetch_s $(($(date +%s) - t0))
	say sha "$(sha256sum /tmp/big.bin | cut -d' ' -f1)"
	rm -f /tmp/big.bin
	say ping_second "$(ok ping -c 1 -W 5 10.0.3.1)"
	say tcp_second "$(ok fetch 10.0.3.1/small.txt 10 /tmp/s)"
	;;
policy)
	say ping_second "$(ok ping -c 2 -W 2 10.0.3.1)"
	say tcp_second "$(ok fetch 10.0.3.1/small.txt 4 /tmp/s)"
	say ping_host "$(ok ping -c 1 -W 5 10.0.2.1)"
	fetch 10.0.2.1/big.bin 120 /tmp/big.bin
	say fetch_rc $?
	say sha "$(sha256sum /tmp/big.bin | cut -d' ' -f1)"
	rm -f /tmp/big.bin
	# a spoofed source address (policy.ip is 10.0.2.15)
	ip addr add 10.0.2.99/32 dev eth0
	say spoof_ping "$(ok ping -c 1 -W 2 -I 10.0.2.99 10.0.2.1)"
	ip addr del 10.0.2.99/32 dev eth0
	say denied_done 1
	# The host now adds 10.0.3.1 to the allow list through the control API.
	r=fail i=0
	while [ $i -lt 60 ]; do
		i=$((i + 1))
		if fetch 10.0.3.1/small.txt 2 /tmp/s; then r=ok; break; fi
		sleep 1
	done
	say tcp_second_after "$r"
	say tries "$i"
	;;
esac
echo "CUBICLE-GUEST ready"
reboot -f
EOF
"$e2e_top/scripts/build-initramfs.sh" --init "$w/init" --modules "virtio_pci virtio_net" \
	"$e2e_guest/modules" "$w/initramfs.cpio.gz" \
	2>"$w/initramfs.log" || { cat "$w/initramfs.log"; e2e_skip "cannot build the initramfs"; }

mkdir -p "$w/www"
head -c $((16 << 20)) /dev/urandom >"$w/www/big.bin"
echo "second address" >"$w/www/small.txt"
sha=$(sha256sum <"$w/www/big.bin" | cut -d' ' -f1)

# vm.cfg with the given tap backend body
vmcfg() {
	cat >"$w/$1.cfg" <<EOF
machine = { vcpus = 1; memory_mib = 256; };
boot = {
  kernel = "$e2e_guest/vmlinuz";
  initrd = "initramfs.cpio.gz";
  cmdline = "console=ttyS0 reboot=k panic=-1 quiet cubicle.phase=$2";
};
devices = (
  { type = "serial8250"; id = "com1"; console = "stdio"; },
  { type = "virtio-net"; id = "net0"; mac = "52:54:00:12:34:56";
    backend = { type = "tap"; ifname = "${IFN:-tap0}"; $3 }; }
);
EOF
}
vmcfg open open ''
vmcfg policy policy 'policy = { default = "deny"; allow = [ "10.0.2.1:80/tcp" ]; arp = true;
      ip = "10.0.2.15"; pin = "/sys/fs/bpf/cubicle-net0"; };'
# the jail has no bpffs: no pin; the VMM makes its tap
IFN=jtap0 vmcfg jailed policy 'create = true; policy = { default = "deny";
      allow = [ "10.0.2.1:80/tcp" ]; arp = true; ip = "10.0.2.15"; };'
vmcfg badcidr open 'policy = { default = "deny";
      allow = [ "10.0.2.1:80/tcp", "10.0.3.0/33" ]; };'
vmcfg noclsact open 'policy = { default = "deny"; allow = [ "10.0.2.1:80/tcp" ]; };'
vmcfg badprog open 'policy = { default = "deny"; allow = [ "10.0.2.1:80/tcp" ];
      program = "/nonexistent.o"; };'

# ---- the host side, as root in its own namespaces ----
cat >"$w/host.sh" <<'EOF'
#!/bin/bash
# Host side of run_net_tap.sh (runs under unshare --net --mount): taps, httpd, the VMs.
set -u
w=$1 cubicle=$2 top=$3 mods=$4 nested=$5
say() { echo "HOST $1=$2"; }
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
modload() { # NAME DIR: L1 has only its initramfs modules; load the L1 kernel's own
	if [ "$nested" = 1 ]; then
		[ -d /sys/module/$1 ] || insmod "$mods/kernel/$2/$1.ko"
	else
		modprobe "$1"
	fi
}
run() { # NAME: boot $w/NAME.cfg; console, stderr and status in $w/NAME.*
	local s=$(date +%s.%N)
	timeout -k 5 "${VM_TIMEOUT:-200}" "$cubicle" run ${RUN_ARGS:-} "$w/$1.cfg" >"$w/$1.console" 2>"$w/$1.stderr" </dev/null
	echo $? >"$w/$1.rc"
	say "time_$1" "$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
}
denied_done() { # NAME: until VM $vm's guest says its denied checks are done (or it ends)
	local i=0
	until grep -q 'CUBICLE-GUEST denied_done=1' "$w/$1.console" 2>/dev/null || [ $i -ge 1800 ]; do
		kill -0 $vm 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
}
stat() { # counter index (enum tp_stat) summed over CPUs, from the pinned map
	bpftool map lookup pinned /sys/fs/bpf/cubicle-net0/stats key "$1" 0 0 0 2>/dev/null |
		awk '/"value":/ { gsub(/[^0-9]/, "", $2); s += $2 } END { print s + 0 }'
}

modload tun drivers/net || { say error "no tun module"; exit 1; }
ip link set lo up
"$top/scripts/tap-setup.sh" --addr 10.0.2.1/24 tap0 || { say error "tap-setup failed"; exit 1; }
ip addr add 10.0.3.1/24 dev tap0
busybox httpd -f -p 80 -h "$w/www" &
httpd=$!
mount -t bpf bpf /sys/fs/bpf

# 1. config errors name the file and line
run badcidr
# 2. no clsact in the kernel yet (sch_ingress not loaded): no VM
if [ -d /sys/module/sch_ingress ]; then
	say noclsact skipped
else
	run noclsact
fi
modload sch_ingress net/sched && modload cls_bpf net/sched || say error "cannot load sch_ingress/cls_bpf"
# 3. a program that cannot be loaded: no VM
run badprog
# 4. no policy: everything reachable
run open
say tap_filters_after_open "$(tc filter show dev tap0 ingress 2>/dev/null | wc -l)"
# 5. the policy; while the guest runs, read the counters and widen the list
# through the control API (a 9p share cannot hold its socket: a tmpfs can)
sock=$(mktemp -d)/api.sock
RUN_ARGS="--api-sock $sock" run policy &
vm=$!
denied_done policy
say drops_addr_live "$(stat 6)"
say passed_live "$(stat 0)"
say drops_srcip_live "$(stat 11)"
say filter_live "$(tc filter show dev tap0 ingress 2>/dev/null | grep -c 'direct-action')"
say api_methods "$("$cubicle" ctl "$sock" devices 2>&1 | grep -c 'policy_allow')"
"$cubicle" ctl "$sock" call net0 backend.policy_allow 10.0.3.1/32 >"$w/allow.out" 2>&1
say api_allow $?
say api_allow_reply "$(head -n 1 "$w/allow.out")"
wait $vm
say tap_filters_after "$(tc filter show dev tap0 ingress 2>/dev/null | wc -l)"
say pins_after "$(ls /sys/fs/bpf | grep -c cubicle)"
"$top/scripts/tap-setup.sh" --delete tap0
# 6. the policy in a jail, as uid 65534: the VMM makes jtap0 and attaches
# the policy, then holds no capability before the guest runs; this side
# gives jtap0 the addresses tap0 had
[ -e /sys/fs/cgroup/cgroup.controllers ] || mount -t cgroup2 none /sys/fs/cgroup
# (in a folder of root's alone: --jail refuses one its uid could rename)
jail=$(mktemp -d)/j && mkdir "$jail" && chown 65534:65534 "$jail"
jsock=$(mktemp -d)/api.sock
RUN_ARGS="--jail $jail --jail-uid 65534 --jail-gid 65534 --api-sock $jsock" run jailed &
vm=$!
up=0 i=0
# (ip, not /sys/class/net: this namespace's sysfs is the one it was made in)
until ip link show dev jtap0 >/dev/null 2>&1 || [ $i -ge 600 ]; do
	kill -0 $vm 2>/dev/null || break
	sleep 0.1
	i=$((i + 1))
done
ip addr add 10.0.2.1/24 dev jtap0 && ip addr add 10.0.3.1/24 dev jtap0 && up=1
say jail_tap_up $up
denied_done jailed
jpids=$(pgrep -u 65534 | tr '\n' ' ')
say jail_tasks "$(for p in $jpids; do ls /proc/$p/task; done | wc -l)"
say jail_ids "$(for p in $jpids; do sed -n 's/^Uid:[[:space:]]*//p' /proc/$p/task/*/status; done | awk '{ $1 = $1; print }' | sort -u | paste -sd';')"
say jail_caps "$(for p in $jpids; do sed -n 's/^Cap\(Eff\|Prm\):[[:space:]]*//p' /proc/$p/task/*/status; done | sort -u | tr '\n' ' ')"
say jail_filter_live "$(tc filter show dev jtap0 ingress 2>/dev/null | grep -c 'direct-action')"
"$cubicle" ctl "$jail$jsock" call net0 backend.policy_allow 10.0.3.1/32 >"$w/jallow.out" 2>&1
say jail_allow $?
wait $vm
say jail_tap_after "$(ip link show dev jtap0 >/dev/null 2>&1 && echo present || echo gone)"
say jail_cgroups_after "$(ls -d /sys/fs/cgroup/cubicle/vm-* 2>/dev/null | wc -l)"
kill $httpd 2>/dev/null
wait $httpd 2>/dev/null
say total_s "$(elapsed)"
EOF

nested=0
[ $e2e_mode = nested ] && nested=1
e2e_run unshare --net --mount bash "$w/host.sh" "$w" "$CUBICLE" "$e2e_top" \
	"$e2e_guest/nested/modules" $nested >"$w/host.log" 2>&1
rc=$?
echo "# host script exit status $rc"
sed -n 's/^HOST \(time_.*\|total_s=.*\)/# \1/p' "$w/host.log"

h() { sed -n "s/^HOST $1=//p" "$w/host.log" | tail -n 1; }
m() { e2e_marker "$w/$1.console" "$2"; }
rcof() { cat "$w/$1.rc" 2>/dev/null; }
has() { grep -q -- "$2" "$w/$1.stderr" 2>/dev/null; }
noguest() { ! grep -q 'CUBICLE-GUEST' "$w/$1.console" 2>/dev/null; }
refused() { [ -n "$(rcof "$1")" ] && [ "$(rcof "$1")" != 0 ] && noguest "$1"; }

e2e_check "host side ran (errors: '$(h error)')" [ -z "$(h error)" ]
e2e_check "a bad CIDR names the config file and line" \
	has badcidr "badcidr.cfg:1[0-9]*: tap\[net0\]: policy.allow\[1\]: '10.0.3.0/33': prefix length is more than 32"
e2e_check "... and the VM does not start (status $(rcof badcidr))" refused badcidr
if [ "$(h noclsact)" != skipped ]; then
	e2e_check "without clsact support the VM does not start (status $(rcof noclsact))" refused noclsact
	e2e_check "... and the log says why" has noclsact "the egress policy cannot be enforced, so the VM does not start.*clsact"
fi
e2e_check "an unloadable program: the VM does not start (status $(rcof badprog))" refused badprog
e2e_check "... and the log says why" has badprog "cannot read the BPF program /nonexistent.o: No such file or directory"

e2e_check "no policy: eth0 is up (got '$(m open eth0)')" [ "$(m open eth0)" = up ]
e2e_check "no policy: the guest pings 10.0.2.1" [ "$(m open ping_host)" = ok ]
e2e_check "no policy: 16 MiB fetched (wget status '$(m open fetch_rc)', $(m open fetch_s) s)" [ "$(m open fetch_rc)" = 0 ]
e2e_check "no policy: its sha256 matches" [ "$(m open sha)" = "$sha" ]
e2e_check "no policy: the second address answers ping" [ "$(m open ping_second)" = ok ]
e2e_check "no policy: the second address answers TCP" [ "$(m open tcp_second)" = ok ]
e2e_check "no policy: exit status 0 (got $(rcof open))" [ "$(rcof open)" = 0 ]
e2e_check "no policy: no filter on the tap" [ "$(h tap_filters_after_open)" = 0 ]

e2e_check "policy: the log says it is attached" has policy "egress policy attached (default deny, 1 allow rules"
e2e_check "policy: ping to the second address fails" [ "$(m policy ping_second)" = fail ]
e2e_check "policy: TCP to the second address fails" [ "$(m policy tcp_second)" = fail ]
e2e_check "policy: the allowed fetch still works (wget status '$(m policy fetch_rc)')" [ "$(m policy fetch_rc)" = 0 ]
e2e_check "policy: its sha256 matches" [ "$(m policy sha)" = "$sha" ]
e2e_check "policy: ICMP to the allowed address passes" [ "$(m policy ping_host)" = ok ]
e2e_check "policy: the device told the backend the guest's MAC" \
	has policy "frames pass only from the guest's MAC 52:54:00:12:34:56"
e2e_check "policy: a ping from a spoofed source address fails" [ "$(m policy spoof_ping)" = fail ]
e2e_check "policy: ... and is counted as source_ip (got '$(h drops_srcip_live)')" \
	[ "$(h drops_srcip_live)" -ge 1 ]
e2e_check "policy: the classifier sits on tap0's ingress (direct action) while the VM runs" [ "$(h filter_live)" = 1 ]
drops=$(h drops_addr_live)
e2e_check "policy: address drops counted while it runs (got '$drops', want >= 3)" [ "${drops:-0}" -ge 3 ]
e2e_check "policy: passed frames counted (got '$(h passed_live)')" [ "$(h passed_live)" -gt 10 ]
e2e_check "policy: cubicle ctl devices lists the tap's policy_allow" [ "$(h api_methods)" = 1 ]
e2e_check "policy: the allow list changed through the API (cubicle ctl call net0 backend.policy_allow: status $(h api_allow), '$(h api_allow_reply)')" [ "$(h api_allow)" = 0 ]
e2e_check "policy: then TCP to the second address works, same VM (after $(m policy tries) tries)" \
	[ "$(m policy tcp_second_after)" = ok ]
e2e_check "policy: exit status 0 (got $(rcof policy))" [ "$(rcof policy)" = 0 ]
final=$(sed -n 's/.*tap0: policy: passed [0-9]*; dropped:.* address \([0-9]*\).*/\1/p' "$w/policy.stderr")
e2e_check "policy: counters logged at exit (address drops '$final')" [ "${final:-0}" -ge "${drops:-1}" ]
e2e_check "policy: filter and pins removed after exit" [ "$(h tap_filters_after)/$(h pins_after)" = 0/0 ]

e2e_check "jail: the VMM made jtap0 and this side gave it its addresses" [ "$(h jail_tap_up)" = 1 ]
e2e_check "jail: the log says the policy is attached" has jailed "egress policy attached (default deny, 1 allow rules"
e2e_check "jail: ... and every capability was dropped before the guest ran" \
	has jailed "jail: the tap is set up; every id is now 65534, no capability is left"
e2e_check "jail: its $(h jail_tasks) tasks (init, VMM threads) have every uid 65534 (got '$(h jail_ids)')" \
	[ "$(h jail_ids)" = "65534 65534 65534 65534" ]
e2e_check "jail: ... and no capability, effective or permitted (got '$(h jail_caps)')" \
	[ "$(h jail_caps)" = "0000000000000000 " ]
e2e_check "jail: the classifier sits on jtap0's ingress" [ "$(h jail_filter_live)" = 1 ]
e2e_check "jail: TCP to the second address fails" [ "$(m jailed tcp_second)" = fail ]
e2e_check "jail: the allowed fetch works (wget status '$(m jailed fetch_rc)')" [ "$(m jailed fetch_rc)" = 0 ]
e2e_check "jail: its sha256 matches" [ "$(m jailed sha)" = "$sha" ]
e2e_check "jail: a ping from a spoofed source address fails" [ "$(m jailed spoof_ping)" = fail ]
e2e_check "jail: the allow list changed through the API inside the jail (status $(h jail_allow))" [ "$(h jail_allow)" = 0 ]
e2e_check "jail: then TCP to the second address works (after $(m jailed tries) tries)" \
	[ "$(m jailed tcp_second_after)" = ok ]
e2e_check "jail: exit status 0 (got $(rcof jailed))" [ "$(rcof jailed)" = 0 ]
e2e_check "jail: the counters are still read at exit, without CAP_BPF" has jailed "jtap0: policy: passed [0-9]*; dropped:"
e2e_check "jail: jtap0 is gone with the VMM, and its cgroup ($(h jail_tap_after), $(h jail_cgroups_after) left)" \
	[ "$(h jail_tap_after)/$(h jail_cgroups_after)" = gone/0 ]
e2e_finish "$w/host.log" "$w/jailed.stderr" "$w/open.console" "$w/open.stderr" "$w/policy.console" "$w/policy.stderr" \
	"$w/badprog.stderr" "$w/noclsact.stderr"
