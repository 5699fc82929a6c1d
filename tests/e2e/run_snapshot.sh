#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Snapshot (Full, then Diff), kill, restore and roll back a Linux guest
# (issue 12). The guest
# counts in a shell loop and, every tick, reads its read-only virtio-blk
# disk past the page cache (md5), reads the tick it wrote last from its
# writable virtio-blk disk and writes this one (fsync'd), reads its
# virtio-rng and pings a
# neighbour that never answers (ARP frames) through virtio-net (socket backend; the far end is a Unix
# datagram socket this test reads). With dirty-page tracking on, a Full
# snapshot at tick F, three more ticks, a Diff at tick N; the process is
# killed with SIGKILL; `cubicle restore` of the Diff (the Full one with the
# Diff's pages over it: what the guest and the devices wrote) must go on
# from tick N, with the disk's md5 right, entropy read and frames sent; a
# rollback in place to the Full brings back tick F, one to the Diff tick N.
# The writable disk goes with them (the snapshot's copy of it, cloned for
# the restore, rolled back in place): every tick reads the tick before it.
# With --split (run_snapshot_split.sh) the VM has machine.irqchip = "split":
# the new generation's GPE then reaches the guest as a level-triggered SCI
# through cubicle's IOAPIC, restored from the snapshot.
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

irqchip=kernel
[ "${1:-}" = --split ] && irqchip=split
e2e_init
w=$e2e_work
cat >"$w/init" <<'INIT'
#!/bin/sh
# The guest side of run_snapshot.sh: tick with the disk's md5, forever.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done </etc/modules.order
exec </dev/null >/dev/hvc0 2>&1
i=0
while { [ ! -b /dev/vda ] || [ ! -b /dev/vdb ] || [ ! -e /sys/class/net/eth0 ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
echo "CUBICLE-GUEST vgen=$(ls /sys/bus/acpi/devices 2>/dev/null | grep -c '^VMGENCTR')"
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
n=0
while :; do
	n=$((n + 1))
	echo 3 >/proc/sys/vm/drop_caches
	md5=$(dd if=/dev/vda bs=64k count=4 2>/dev/null | md5sum | cut -d' ' -f1)
	prev=$(dd if=/dev/vdb bs=512 count=1 2>/dev/null | tr -dc 0-9)
	echo $n | dd of=/dev/vdb bs=512 count=1 conv=sync,fsync 2>/dev/null
	rng=$(dd if=/dev/hwrng bs=16 count=1 2>/dev/null | wc -c)
	ping -c 1 -W 1 10.0.2.2 >/dev/null 2>&1 & # an ARP request at least
	gpe=$(awk '{ print $1; exit }' /sys/firmware/acpi/interrupts/gpe00 2>/dev/null)
	echo "CUBICLE-GUEST tick=$n md5=$md5 rng=$rng tx=$(cat /sys/class/net/eth0/statistics/tx_packets) prev=$prev gpe=${gpe:-none}"
	sleep 0.3
done
INIT
"$e2e_top/scripts/build-initramfs.sh" --init "$w/init" \
	--modules "virtio virtio_ring virtio_pci virtio_blk virtio_console virtio_rng virtio_net" \
	"$e2e_guest/modules" "$w/initramfs.cpio.gz" \
	2>"$w/initramfs.log" || { cat "$w/initramfs.log"; e2e_skip "cannot build the initramfs"; }
head -c $((1 << 20)) /dev/urandom >"$w/ro.img"
want_md5=$(head -c $((256 << 10)) "$w/ro.img" | md5sum | cut -d' ' -f1)

cat >"$w/snap.sh" <<'SCRIPT'
#!/bin/bash
# Where KVM is (directly or in L1): $1 work folder, $2 kernel, $3 cubicle
# (in its build tree, beside tests/kvm/netpeer), $4 machine.irqchip.
set -u
w=$1 k=$2 cub=$3 irqchip=$4
t=$(mktemp -d) # sockets and the snapshot: a 9p share cannot hold sockets
cat >"$w/vm.cfg" <<CFG
machine = { vcpus = 1; memory_mib = 128; track_dirty_pages = true; irqchip = "$irqchip"; };
boot = { kernel = "$k"; initrd = "$w/initramfs.cpio.gz"; cmdline = "console=ttyS0 reboot=k panic=-1 quiet"; };
devices = (
  { type = "serial8250"; id = "com1"; console = "file"; path = "$w/serial.log"; },
  { type = "virtio-blk"; id = "disk"; read_only = true;
    backend = { type = "raw"; path = "$w/ro.img"; read_only = true; }; },
  { type = "virtio-blk"; id = "data"; backend = { type = "raw"; path = "$t/data.img"; size = "1M"; }; },
  { type = "virtio-rng"; id = "rng" },
  { type = "virtio-console"; id = "hvc"; console = "stdio"; input = false; },
  { type = "virtio-net"; id = "net"; backend = { type = "socket"; path = "$t/vm.sock"; peer = "$t/peer.sock"; }; }
);
CFG
# The far end of the guest's network counts the frames that arrive.
netpeer=$(dirname "$cub")/tests/kvm/netpeer
# (0 until the file exists: a background job's redirection creates it)
ticks() { local c; c=$(grep -c 'CUBICLE-GUEST tick=' "$1" 2>/dev/null); echo "${c:-0}"; }
last_tick() { tr -d '\r' <"$1" | sed -n 's/.*CUBICLE-GUEST tick=\([0-9]*\) .*/\1/p' | tail -n 1; }
wait_ticks() { # FILE N PID: until FILE has N tick lines (4 min at most)
	local n=0
	while [ $n -lt 2400 ] && [ "$(ticks "$1")" -lt "$2" ] && kill -0 "$3" 2>/dev/null; do
		sleep 0.1
		n=$((n + 1))
	done
	[ "$(ticks "$1")" -ge "$2" ]
}
"$netpeer" --sink "$t/peer.sock" >"$w/frames.log" 2>&1 &
ppid=$!
"$cub" run --api-sock "$t/api.sock" "$w/vm.cfg" </dev/null >"$w/console.log" 2>"$w/stderr.log" &
pid=$!
{
	wait_ticks "$w/console.log" 3 $pid && echo "booted=yes"
	"$cub" ctl "$t/api.sock" pause && echo "pause=ok"
	echo "full_tick=$(last_tick "$w/console.log")"
	"$cub" snapshot "$t/api.sock" "$t/full" && echo "full=ok"
	"$cub" ctl "$t/api.sock" resume
	# Three more ticks: the guest reads its disk (virtio-blk fills its page
	# cache), entropy, sends frames: the host's writes a Diff must hold.
	wait_ticks "$w/console.log" $(($(ticks "$w/console.log") + 3)) $pid
	"$cub" ctl "$t/api.sock" pause
	echo "snap_tick=$(last_tick "$w/console.log")"
	"$cub" ctl "$t/api.sock" snapshot "$t/snap" --diff && echo "snapshot=ok"
	ls -ls "$t/full" "$t/snap" | sed 's/^/# /'
	kill -9 $pid
	wait $pid 2>/dev/null
	echo "frames_before=$(wc -l <"$w/frames.log")"
	# The killed VM's disk is still there: the restore's copy is a new file.
	"$cub" restore "$t/snap" --api-sock "$t/r.sock" --set "devices.data.backend.path=$t/data2.img" \
		</dev/null >"$w/restored.log" 2>"$w/rstderr.log" &
	rpid=$!
	wait_ticks "$w/restored.log" 4 $rpid && echo "restored=yes"
	echo "frames_after=$(wc -l <"$w/frames.log")"
	"$cub" ctl "$t/r.sock" rollback "$t/full" && echo "rollback_full=ok"
	n0=$(ticks "$w/restored.log")
	wait_ticks "$w/restored.log" $((n0 + 2)) $rpid
	cp "$w/restored.log" "$w/restored-before-rollback.log"
	"$cub" ctl "$t/r.sock" rollback "$t/snap" && echo "rollback=ok"
	n0=$(ticks "$w/restored.log")
	wait_ticks "$w/restored.log" $((n0 + 3)) $rpid && echo "rolled=yes"
	kill -TERM $rpid
	wait $rpid
	echo "rc=$?"
} >"$w/snap.log" 2>&1
kill $ppid 2>/dev/null
exit 0
SCRIPT
e2e_run bash "$w/snap.sh" "$w" "$e2e_guest/vmlinuz" "$(cd "$(dirname "$CUBICLE")" && pwd)/$(basename "$CUBICLE")" "$irqchip"
echo "# snap.sh exit status $?"
sed 's/^/# /' "$w/snap.log"
v() { sed -n "s/^$1=//p" "$w/snap.log" | head -n 1; }
# The tick lines of FILE: "N md5 rng tx prev gpe" (prev is empty at tick 1:
# take gpe as the last field).
tick_lines() { tr -d '\r' <"$1" | sed -n 's/.*CUBICLE-GUEST tick=\([0-9]*\) md5=\([0-9a-f]*\) rng=\([0-9]*\) tx=\([0-9]*\) prev=\([0-9]*\) gpe=\([0-9a-z]*\).*/\1 \2 \3 \4 \5 \6/p'; }
s=$(v snap_tick) f=$(v full_tick)
first=$(tick_lines "$w/restored.log" | head -n 1 | cut -d' ' -f1)
# The first tick after the rollback: the line after those printed before it.
nb=$(tick_lines "$w/restored-before-rollback.log" | wc -l)
after_rb=$(tick_lines "$w/restored.log" | sed -n "$((nb + 1)),\$p" | head -n 2 | cut -d' ' -f1 | tr '\n' ' ')
goes_on() { [ -n "$s" ] && [ -n "$first" ] && { [ "$first" = "$s" ] || [ "$first" = $((s + 1)) ]; }; }
disk_ok() { [ -n "$first" ] && ! tick_lines "$w/restored.log" | awk -v m="$want_md5" '$2 != m { bad = 1 } END { exit !bad }'; }
# Each tick read the one before it from the writable disk: restored and
# rolled back, the disk and the guest's memory are of one instant.
data_ok() { [ -n "$first" ] && tick_lines "$w/restored.log" | awk '$5 != $1 - 1 { bad = 1; print "# tick " $1 " read " $5 } END { exit bad }'; }
# The VM generation ID: the guest found the device at boot, never saw its
# GPE before the snapshot, and the restore and each rollback raised it (the
# guest's count of GPE 0, in its memory, rolls back with it: 1 after each).
vgen_ok() {
	grep -q 'CUBICLE-GUEST vgen=1' "$w/console.log" &&
	! tick_lines "$w/console.log" | awk '$NF != 0 { bad = 1 } END { exit !bad }' &&
	[ "$(tick_lines "$w/restored-before-rollback.log" | tail -n 1 | awk '{ print $NF }')" = 1 ] &&
	[ "$(tick_lines "$w/restored.log" | tail -n 1 | awk '{ print $NF }')" = 1 ]
}
rng_ok() { [ -n "$first" ] && ! tick_lines "$w/restored.log" | awk '$3 != 16 { bad = 1 } END { exit !bad }'; }
net_ok() { [ -n "$(v frames_after)" ] && [ "$(v frames_after)" -gt "$(v frames_before)" ]; }
rolled_back() { case " $after_rb" in *" $s "* | *" $((s + 1)) "*) return 0 ;; esac; return 1; }
back_to_full() { tick_lines "$w/restored-before-rollback.log" | awk -v f="$f" '$1 == f || $1 == f + 1 { ok = 1 } END { exit !ok }'; }
e2e_check "Full snapshot at tick ${f:-?}, then a Diff at tick ${s:-?}" grep -q '^snapshot=ok' "$w/snap.log"
e2e_check "restored from the Diff after SIGKILL: ticks go on from ${first:-?} (snapshot at ${s:-?})" goes_on
e2e_check "rollback in place to the Full snapshot: its ticks again (${f:-?})" back_to_full
e2e_check "virtio-blk after restore: every md5 is the disk's ($want_md5)" disk_ok
e2e_check "writable virtio-blk through restore and both rollbacks: every tick read the tick before it" data_ok
e2e_check "VM generation ID: the guest has the device; a new generation (GPE 0) at the restore and each rollback (its count by tick: $(tick_lines "$w/restored.log" | awk '{ print $NF }' | tr '\n' ' '))" vgen_ok
e2e_check "virtio-rng after restore: 16 bytes each tick" rng_ok
e2e_check "virtio-net after restore: frames reach the far end ($(v frames_before) then $(v frames_after))" net_ok
e2e_check "rollback in place to the Diff: ticks back to ${s:-?} (then: ${after_rb:-none})" rolled_back
e2e_check "SIGTERM ends the restored VM (143)" grep -q '^rc=143' "$w/snap.log"
e2e_finish "$w/console.log" "$w/serial.log" "$w/stderr.log" "$w/restored.log" "$w/rstderr.log" "$w/snap.log"
