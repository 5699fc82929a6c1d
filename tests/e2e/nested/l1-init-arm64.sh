#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The arm64 nested harness's L1 /init: check KVM (built into Debian's arm64 kernel), mount the host root read-only and the scratch folder read-write over 9p, run one script chrooted with this initramfs's arm64 busybox, print its exit code.
#
# Kernel command line: nestcmd=/abs/script (run as `busybox sh SCRIPT` inside
# the host root, where the host's own /bin/sh is x86 and cannot run)
# nestrw=/abs/scratch (the read-write share, mounted at the same path).
# Inside the chroot this busybox is /run/busybox.
# Console protocol, read back by run-nested-arm64.sh:
#   CUBICLE-NESTED kvm=ok | CUBICLE-NESTED error: ...
#   CUBICLE-NESTED RC=<exit code of the script>
/bin/busybox --install -s /bin 2>/dev/null
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

fail() {
	echo "CUBICLE-NESTED error: $*"
	echo "CUBICLE-NESTED RC=none"
	sync
	poweroff -f
}

while read -r m; do
	insmod "/lib/modules/$m" 2>/dev/null
done </etc/modules.order

cmd='' rw=''
for arg in $(cat /proc/cmdline); do
	case $arg in
	nestcmd=*) cmd=${arg#nestcmd=} ;;
	nestrw=*) rw=${arg#nestrw=} ;;
	esac
done
[ -n "$cmd" ] && [ -n "$rw" ] || fail "nestcmd= or nestrw= missing from the L1 command line"

if [ ! -c /dev/kvm ]; then
	fail "/dev/kvm missing in L1: L0 must run at EL2 (-M virt,virtualization=on) ($(dmesg | grep -i kvm | tail -n 2 | tr '\n' ' '))"
fi
echo "CUBICLE-NESTED kvm=ok $(dmesg | grep -o 'VHE mode\|nVHE mode\|hVHE mode' | head -n 1)"

mkdir -p /host
o=trans=virtio,version=9p2000.L,msize=262144
# The read-only root is cached (cache=loose): without the page cache every
# page of a mmap()ed file is one 9p round trip, which under emulation makes
# a 27 MB kernel image take half a minute. The scratch share stays uncached.
mount -t 9p -o $o,ro,cache=loose host /host || fail "cannot mount the host root over 9p"
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
# 9p holds no sockets or FIFOs and the root is read-only: give the command tmpfs.
mount -t tmpfs -o mode=755 tmpfs /host/run
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm 2>/dev/null
mkdir -p -m 1777 /host/run/tmp
cp /bin/busybox /host/run/busybox || fail "cannot copy busybox to /host/run"
# After the tmpfs mounts, so a scratch folder under /tmp or /run stays visible.
[ -d "/host$rw" ] || mkdir -p "/host$rw"
mount -t 9p -o $o work "/host$rw" || fail "cannot mount the scratch folder $rw over 9p"

chroot /host /run/busybox sh "$cmd"
echo "CUBICLE-NESTED RC=$?"
sync
poweroff -f
