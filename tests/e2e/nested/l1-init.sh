#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The nested harness's L1 /init (x86_64 and aarch64): load 9p (and kvm-amd on x86), check /dev/kvm, mount the host root read-only and the scratch folder read-write, run one script chrooted, print its exit code.
#
# Kernel command line:
#   nestcmd=/abs/script  the script to run inside the host root
#   nestrw=/abs/scratch  the read-write share, mounted at the same path
#   nestsh=bash|busybox  what runs the script: the host's /bin/bash (default
#                        on x86_64), or this initramfs's busybox, copied to
#                        /run/busybox (default on aarch64: the host's own
#                        shells are x86 and cannot run)
#   nestdump=S           when L1 has been up S seconds and the script still
#                        runs, dump what every task and CPU is doing to the
#                        console (just before the harness's time limit): a
#                        stall then says whether it is in a program, in L1's
#                        kernel (a task blocked in a system call) or under it
#                        (a CPU that stays in a guest)
# Console protocol, read back by run-nested.sh:
#   CUBICLE-NESTED init              /init started (the L1 kernel booted)
#   CUBICLE-NESTED kvm=ok | CUBICLE-NESTED error: ...
#   CUBICLE-NESTED start             the script starts now: anything that
#                                    goes wrong from here on is not L1's boot
#   CUBICLE-NESTED stall dump ...    nestdump= reached; the dump follows
#   CUBICLE-NESTED beat <uptime>     every 10 s while the script runs: L1's
#                                    timers still fire (run-nested.sh tells
#                                    a frozen L1 from a busy one by it)
#   CUBICLE-NESTED RC=<exit code of the script>
/bin/busybox --install -s /bin 2>/dev/null # a foreign busybox may lack links
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
echo "CUBICLE-NESTED init"
# Loopback, for commands that talk to themselves over TCP (the E2B SDK test).
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null

fail() {
	echo "CUBICLE-NESTED error: $*"
	echo "CUBICLE-NESTED RC=none"
	sync
	poweroff -f
}

while read -r m; do
	insmod "/lib/modules/$m" 2>/dev/null
done </etc/modules.order

cmd='' rw='' sh='' dump=''
for arg in $(cat /proc/cmdline); do
	case $arg in
	nestdump=*) dump=${arg#nestdump=} ;;
	nestcmd=*) cmd=${arg#nestcmd=} ;;
	nestrw=*) rw=${arg#nestrw=} ;;
	nestsh=*) sh=${arg#nestsh=} ;;
	esac
done
[ -n "$cmd" ] && [ -n "$rw" ] || fail "nestcmd= or nestrw= missing from the L1 command line"
[ -n "$sh" ] || case $(uname -m) in x86_64) sh=bash ;; *) sh=busybox ;; esac

kvmlog() { dmesg | grep -i kvm | tail -n 2 | tr '\n' ' '; }
case $(uname -m) in
x86_64)
	if [ ! -c /dev/kvm ]; then
		grep -qw svm /proc/cpuinfo || fail "no svm flag in L1's /proc/cpuinfo: L0 must run QEMU with -cpu max (TCG)"
		fail "/dev/kvm missing in L1: kvm_amd did not load ($(kvmlog))"
	fi
	echo "CUBICLE-NESTED kvm=ok" ;;
*)
	# arm64: KVM is built into Debian's kernel; it needs EL2.
	[ -c /dev/kvm ] || fail "/dev/kvm missing in L1: L0 must run at EL2 (-M virt,virtualization=on) ($(kvmlog))"
	echo "CUBICLE-NESTED kvm=ok $(dmesg | grep -o 'VHE mode\|nVHE mode\|hVHE mode' | head -n 1)" ;;
esac

mkdir -p /host
o=trans=virtio,version=9p2000.L,msize=262144
# cache=loose: the read-only root never changes under L1, and cubicle mmaps
# kernels (uncached, every page of a mmap()ed file is one 9p round trip:
# half a minute for a 27 MB image under emulation). The scratch share stays
# uncached.
mount -t 9p -o $o,ro,cache=loose host /host || fail "cannot mount the host root over 9p"
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
# devtmpfs lacks the links udev would add; bash process substitution needs /dev/fd.
ln -sf /proc/self/fd /host/dev/fd
ln -sf /proc/self/fd/0 /host/dev/stdin
ln -sf /proc/self/fd/1 /host/dev/stdout
ln -sf /proc/self/fd/2 /host/dev/stderr
mkdir -p /host/dev/pts 2>/dev/null && mount -t devpts devpts /host/dev/pts 2>/dev/null
# 9p holds no sockets or FIFOs and the root is read-only: give the command tmpfs.
mount -t tmpfs -o mode=755 tmpfs /host/run
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm 2>/dev/null
# /tmp stays the host's (read-only): a checkout under /tmp must stay visible.
# Scratch files go to TMPDIR=/run/tmp instead.
mkdir -p -m 1777 /host/run/tmp
# After the tmpfs mounts, so a scratch folder under /tmp or /run stays visible.
[ -d "/host$rw" ] || mkdir -p "/host$rw"
mount -t 9p -o $o work "/host$rw" || fail "cannot mount the scratch folder $rw over 9p"

case $sh in
bash) set -- /bin/bash ;;
busybox)
	cp /bin/busybox /host/run/busybox || fail "cannot copy busybox to /host/run"
	set -- /run/busybox sh ;;
*) fail "unknown nestsh=$sh (bash or busybox)" ;;
esac
# stall_dump: every user task's threads (state, wait channel, system call,
# kernel stack), then the kernel's own view: blocked tasks (sysrq w) and what
# each CPU runs (sysrq l). Only /proc and this initramfs's busybox: nothing
# here touches 9p, which may be what is stuck.
stall_dump() {
	echo "CUBICLE-NESTED stall dump: L1 up $(cut -d' ' -f1 /proc/uptime) s, the command still runs"
	for d in /proc/[0-9]*; do
		read -r _ _ _ ppid _ <"$d/stat" 2>/dev/null || continue
		[ "$ppid" = 2 ] || [ "${d#/proc/}" = 2 ] && continue # kernel threads
		for t in "$d"/task/*; do
			read -r st <"$t/stat" 2>/dev/null || continue
			st=${st##*) } && st=${st%% *}
			echo "task ${d#/proc/}/${t##*/} $(cat "$t/comm") state $st wchan $(cat "$t/wchan" 2>/dev/null) syscall $(cut -d' ' -f1-3 "$t/syscall" 2>/dev/null)"
			sed 's/^/    /' "$t/stack" 2>/dev/null
		done
	done
	echo 8 >/proc/sys/kernel/printk
	echo w >/proc/sysrq-trigger
	echo l >/proc/sysrq-trigger
	sleep 2
	echo 4 >/proc/sys/kernel/printk
	echo "CUBICLE-NESTED stall dump end"
}
watch=
if [ -n "$dump" ]; then
	(
		while [ "$(cut -d. -f1 /proc/uptime)" -lt "$dump" ]; do sleep 5; done
		stall_dump
	) &
	watch=$!
fi
# The heartbeat: a sleep that ends and a line on the console. No 9p here
# either. When it stops, L1's timer interrupts have (run-nested.sh).
(
	while sleep 10; do echo "CUBICLE-NESTED beat $(cut -d' ' -f1 /proc/uptime)"; done
) &
beat=$!
# Every seccomp event the kernel logs (cubicle --seccomp=log) is kept, not
# rate-limited away; they are handed back as nested-seccomp.log.
echo 0 >/proc/sys/kernel/printk_ratelimit 2>/dev/null
echo "CUBICLE-NESTED start"
chroot /host "$@" "$cmd"
rc=$?
dmesg | grep 'type=1326' >"/host$rw/nested-seccomp.log" 2>/dev/null
[ -n "$watch" ] && kill "$watch" 2>/dev/null
kill "$beat" 2>/dev/null
echo "CUBICLE-NESTED RC=$rc"
sync
poweroff -f
