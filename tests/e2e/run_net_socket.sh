#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots two Debian cloud-kernel guests at once, each with a virtio-net device on the socket backend, wired to each other through two Unix datagram sockets under $TMPDIR (tmpfs in the nested L1: 9p cannot hold sockets); each guest sets a static address with busybox ip and pings the other, small and 1400-byte frames, and waits until it has been pinged back.
#
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
w=$e2e_work

cat >"$w/init" <<'EOF'
#!/bin/sh
# Initramfs /init for run_net_socket.sh: bring eth0 up, ping the peer, wait to be pinged.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done </etc/modules.order
exec </dev/null >/dev/hvc0 2>&1
say() { echo "CUBICLE-GUEST $1=$2"; }
arg() { sed -n "s/.*cubicle\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
# Echo requests received so far (Icmp InEchos in /proc/net/snmp).
echoes() {
	awk '/^Icmp:/ { if (!n) { for (i = 1; i <= NF; i++) if ($i == "InEchos") c = i; n = 1 }
	     else { print $c; exit } }' /proc/net/snmp
}
received() { sed -n 's/.* \([0-9][0-9]*\) packets received.*/\1/p'; }
me=$(arg ip) peer=$(arg peer)
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
say driver "$(basename "$(readlink /sys/class/net/eth0/device/driver)")"
say mac "$(cat /sys/class/net/eth0/address)"
ip link set lo up
ip addr add "$me/24" dev eth0
ip link set eth0 up
say carrier "$(cat /sys/class/net/eth0/carrier)"
# The other guest may still be booting: try for up to about two minutes.
first=no i=0
while [ $i -lt 120 ]; do
	if ping -c 1 -W 1 "$peer" >/dev/null 2>&1; then first=yes; break; fi
	i=$((i + 1))
done
say ping_first "$first"
say ping "$(ping -c 5 -i 0.2 -W 3 "$peer" | received)"
say ping_big "$(ping -c 2 -s 1400 -W 3 "$peer" | received)"
# Stay up until the other guest has done the same to us (1 + 5 + 2 echoes).
i=0
while [ "$(echoes)" -lt 8 ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
say echoes "$(echoes)"
say rx_packets "$(cat /sys/class/net/eth0/statistics/rx_packets)"
say tx_packets "$(cat /sys/class/net/eth0/statistics/tx_packets)"
sleep 1
echo "CUBICLE-GUEST ready"
reboot -f
EOF
"$e2e_top/scripts/build-initramfs.sh" --init "$w/init" \
	--modules "virtio virtio_ring virtio_pci virtio_net virtio_console" \
	"$e2e_guest/modules" "$w/initramfs.cpio.gz" \
	2>"$w/initramfs.log" || { cat "$w/initramfs.log"; e2e_skip "cannot build the initramfs"; }
zcat "$w/initramfs.cpio.gz" | cpio -t 2>/dev/null | grep -q 'virtio_net\.ko' ||
	e2e_skip "the guest kernel has no virtio_net module"

# Two VMs: each binds its own socket and sends to the other's. NETDIR is
# made by the driver at run time (under $TMPDIR) and expanded by cubicle.
for vm in a b; do
	if [ $vm = a ]; then me=10.0.7.1 peer=10.0.7.2 other=b; else me=10.0.7.2 peer=10.0.7.1 other=a; fi
	cat >"$w/$vm.cfg" <<EOF
machine = { vcpus = 1; memory_mib = 256; };
boot = {
  kernel = "$e2e_guest/vmlinuz";
  initrd = "initramfs.cpio.gz";
  cmdline = "console=hvc0 reboot=k panic=-1 quiet cubicle.ip=$me cubicle.peer=$peer";
};
devices = (
  { type = "virtio-console"; id = "hvc"; console = "stdio"; input = false; },
  { type = "virtio-net"; id = "net0";
    backend = { type = "socket"; path = "\${NETDIR}/$vm.sock"; peer = "\${NETDIR}/$other.sock"; }; }
);
EOF
done

# The driver runs where the VMs run (directly, or inside L1): both VMs at
# once, each bounded, then their exit statuses.
cat >"$w/both.sh" <<'EOF'
#!/bin/bash
# Runs the two VMs of run_net_socket.sh side by side and records their exit statuses.
w=$1 limit=$2
NETDIR=$(mktemp -d "${TMPDIR:-/tmp}/cubicle-net.XXXXXX") || exit 99
export NETDIR
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$NETDIR"' EXIT
t0=$(date +%s%N)
for vm in a b; do
	timeout -k 5 "$limit" "$CUBICLE" run "$w/$vm.cfg" >"$w/$vm.console" 2>"$w/$vm.stderr" </dev/null &
	pids+=($!)
done
wait "${pids[0]}"; ra=$?
wait "${pids[1]}"; rb=$?
# left: files the VMs left in NETDIR (each removes its socket at exit)
echo "a=$ra b=$rb ms=$((($(date +%s%N) - t0) / 1000000)) left=$(ls -A "$NETDIR" | wc -l)" >"$w/status"
[ $ra = 0 ] && [ $rb = 0 ]
EOF
chmod +x "$w/both.sh"

export CUBICLE
e2e_run "$w/both.sh" "$w" $((e2e_timeout - 10))
rc=$?
echo "# driver exit status $rc; $(cat "$w/status" 2>/dev/null)"

for vm in a b; do
	c=$w/$vm.console
	m() { e2e_marker "$c" "$1"; }
	mac=$(m mac)
	e2e_check "$vm: eth0 is virtio_net (got '$(m driver)')" [ "$(m driver)" = virtio_net ]
	e2e_check "$vm: carrier up" [ "$(m carrier)" = 1 ]
	e2e_check "$vm: derived MAC is locally administered unicast (got '$mac')" \
		eval '[[ $mac =~ ^.[26ae]:..:..:..:..:..$ ]]'
	e2e_check "$vm: reached the other guest" [ "$(m ping_first)" = yes ]
	e2e_check "$vm: 5 of 5 pings answered (got '$(m ping)')" [ "$(m ping)" = 5 ]
	e2e_check "$vm: 2 of 2 1400-byte pings answered (got '$(m ping_big)')" [ "$(m ping_big)" = 2 ]
	pinged() { local e; e=$(m echoes); [ -n "$e" ] && [ "$e" -ge 8 ]; }
	e2e_check "$vm: was pinged by the other (got '$(m echoes)' echo requests)" pinged
	e2e_check "$vm: guest reached ready" grep -q 'CUBICLE-GUEST ready' "$c"
done
e2e_check "the two guests have different MACs" \
	[ "$(e2e_marker "$w/a.console" mac)" != "$(e2e_marker "$w/b.console" mac)" ]
e2e_check "both VMs exit 0 after reboot -f ($(cat "$w/status" 2>/dev/null))" [ $rc = 0 ]
e2e_check "each VM removed its socket at exit" grep -q ' left=0$' "$w/status"
e2e_finish "$w/a.console" "$w/a.stderr" "$w/b.console" "$w/b.stderr"
