#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The arm64 example guest's /init: report CPUs, RAM, command line and the first disk's checksum, tell the boot-timer, then reboot, panic or open a shell.
#
# Command-line options it reads (all optional):
#   cubicle.boot_timer=ADDR  the boot-timer's MMIO address; without it the
#                            reg of the device tree's boot-timer@ node
#   cubicle.disk_bytes=N     hash the first N bytes of /dev/vda (default: all)
#   cubicle.sha=HEX          also print disk_ok=yes|no against this sha256
#   cubicle.test=panic       panic on purpose (sysrq c)
#   cubicle.test=tick        count forever instead ("CUBICLE-GUEST tick=N",
#                            every half second): the snapshot test's guest
#   cubicle.shell            open a shell on the console instead of rebooting
# Console lines: "CUBICLE-GUEST key=value", ending with "CUBICLE-GUEST ready".
/bin/busybox --install -s /bin 2>/dev/null
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

while read -r m; do
	insmod "/lib/modules/$m" 2>/dev/null
done </etc/modules.order

say() { echo "CUBICLE-GUEST $1=$2"; }
read -r cmdline </proc/cmdline
arg() {
	for a in $cmdline; do
		case $a in "cubicle.$1="*) echo "${a#*=}"; return ;; esac
	done
}

cpus=$(grep -c '^processor' /proc/cpuinfo)
# Top-level "System RAM" ranges only; ash arithmetic is 64-bit.
kib=0
while IFS=' ' read -r range colon rest; do
	case "$range" in [0-9a-f]*-[0-9a-f]*) ;; *) continue ;; esac
	[ "$rest" = "System RAM" ] || continue
	start=${range%-*} end=${range#*-}
	kib=$((kib + (0x$end - 0x$start + 1) / 1024))
done </proc/iomem
say cpus "$cpus"
say mem_kib "$kib"
say cmdline "$cmdline"

# The disk: when a virtio block device (id 2) exists, give devtmpfs a moment
# to create its node.
if grep -qx 0x0002 /sys/bus/virtio/devices/*/device 2>/dev/null; then
	i=0
	while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
fi
if [ -b /dev/vda ]; then
	n=$(arg disk_bytes)
	if [ -n "$n" ]; then
		sha=$(head -c "$n" /dev/vda | sha256sum | cut -d' ' -f1)
	else
		sha=$(sha256sum </dev/vda | cut -d' ' -f1)
	fi
	say vda_sha256 "$sha"
	want=$(arg sha)
	[ -n "$want" ] && say disk_ok "$([ "$sha" = "$want" ] && echo yes || echo no)"
else
	say vda_sha256 none
fi
echo "CUBICLE-GUEST ready"

# Tell cubicle's boot-timer device that userspace is up: at the address on
# the command line, else at the reg of the device tree's boot-timer@ node.
bt=$(arg boot_timer)
if [ -z "$bt" ]; then
	node=$(find /sys/firmware/devicetree/base -maxdepth 2 -name 'boot-timer@*' 2>/dev/null | head -n 1)
	if [ -n "$node" ]; then
		cells=$(od -An -tx1 "${node%/*}/#address-cells" 2>/dev/null | tr -d ' \n')
		cells=$((0x${cells:-2}))
		reg=$(od -An -tx1 -N$((cells * 4)) "$node/reg" 2>/dev/null | tr -d ' \n')
		bt=0x${reg:-${node##*@}}
	fi
fi
say boot_timer "${bt:-none}"
if [ -n "$bt" ]; then
	devmem "$bt" 8 123 2>/dev/null || echo "CUBICLE-GUEST devmem-failed=$bt"
fi

# Let the UART send the buffered markers before a panic or reset cuts them.
sleep 1
case " $cmdline " in
*" cubicle.test=tick "*)
	n=0
	while :; do
		n=$((n + 1))
		echo "CUBICLE-GUEST tick=$n"
		sleep 0.5
	done ;;
*" cubicle.test=panic "*)
	sleep 1
	echo 1 >/proc/sys/kernel/sysrq
	echo c >/proc/sysrq-trigger ;;
*" cubicle.shell "*)
	setsid cttyhack sh ;;
esac
sync
reboot -f
