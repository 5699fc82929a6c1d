#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The nested harness's L1 /init: load KVM and 9p, mount the host root read-only and the scratch folder read-write, run one script chrooted, print its exit code.
#
# Kernel command line: nestcmd=/abs/script (run with /bin/bash inside the host
# root) nestrw=/abs/scratch (the read-write share, mounted at the same path).
# Console protocol, read back by run-nested.sh:
#   CUBICLE-NESTED kvm=ok | CUBICLE-NESTED error: ...
#   CUBICLE-NESTED RC=<exit code of the script>
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
	grep -qw svm /proc/cpuinfo || fail "no svm flag in L1's /proc/cpuinfo: L0 must run QEMU with -cpu max (TCG)"
	fail "/dev/kvm missing in L1: kvm_amd did not load ($(dmesg | grep -i kvm | tail -n 2 | tr '\n' ' '))"
fi
echo "CUBICLE-NESTED kvm=ok"

mkdir -p /host
o=trans=virtio,version=9p2000.L,msize=262144
# cache=loose: the read-only root never changes under L1, and cubicle mmaps
# kernels (uncached 9p makes every page a round trip).
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

chroot /host /bin/bash "$cmd"
echo "CUBICLE-NESTED RC=$?"
sync
poweroff -f
