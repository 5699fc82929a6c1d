#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A full Debian 12 systemd boot on a virtio-blk root (raw backend), RUNS times:
# Debian's cloud kernel, the e2e tests' switchroot initramfs (it loads the
# virtio modules, mounts root=/dev/vda and switches to its /sbin/init, i.e.
# systemd), 2 vCPUs, the console on hvc0 with every kernel line timestamped.
# A oneshot unit ordered after multi-user.target writes a marker to /dev/kmsg
# and reboots (reboot=k: cubicle exits 0). For each boot it prints the guest's
# time at which the kernel ran the initramfs's /init, the root was mounted,
# systemd printed its first line and the marker came (guest seconds, the
# kernel's printk clock), and the wall time of `cubicle run` from exec to exit
# as L1 sees it (so it includes the VMM's start, and the dump, sync and
# reboot after the marker); each
# console log is kept (WORK/console-N.log). hvc0 comes up only once the
# initramfs loads virtio_console and shows nothing the kernel said before, so
# the marker unit then copies the kernel log (dmesg) to the console after the
# marker, each line prefixed CUBICLE-DMESG; a boot that never reaches the marker
# needs SD_CONSOLE=ttyS0 (every line as it comes, but each byte is a VM exit).
# Where this host's KVM cannot boot Linux (see bench/lib.sh) every boot runs in
# ONE L1 of the nested harness (tests/e2e/nested/run-nested.sh --smp 2, so that
# the guest's two vCPUs can run on two L1 CPUs).
#
# Usage: bench/systemd-boot.sh [--prepare] [BUILDDIR] [RUNS]   (defaults: the current folder, 6)
# --prepare makes the image, the initramfs and the configs, and stops there.
#        bench/systemd-boot.sh --report WORK [RUNS]   prints the table of a finished run again
# Needs root (scripts/debian-rootfs.sh: mmdebstrap, mke2fs) and debugfs.
# Environment:
#   SD_WORK           the work folder (default BUILDDIR/bench/systemd-boot.work;
#                     emptied first; it is L1's read-write share)
#   SD_CONSOLE        hvc0 (default) or ttyS0 (serial8250 at 0x3F8)
#   SD_VCPUS          the guest's vCPUs (default 2); SD_MEM_MIB its RAM (512)
#   SD_L1_SMP         L1's vCPUs (default 2)
#   SD_BOOT_TIMEOUT   seconds one boot may take (default 300)
#   SD_CMDLINE_EXTRA  appended to the guest's kernel command line
# The root image is made once (scripts/debian-rootfs.sh --include
# systemd-sysv,udev --size 1024, then the marker unit added with debugfs) and
# kept as CUBICLE_CACHE/debian/systemd-boot.ext4 until the bootstrap tar or
# this script is newer; each boot gets its own copy (every boot is a first
# boot of the same image).
set -euo pipefail

# ---- the table ---------------------------------------------------------------
# ts FILE REGEX: the kernel timestamp of the first console line matching REGEX.
ts() {
	tr -d '\r' <"$1" | grep -a -E "$2" | head -n 1 | sed -n 's/^[^[]*\[ *\([0-9.]*\)\].*/\1/p' || true
}
# table WORK RUNS: one line per boot from WORK's console logs and wall.txt.
table() {
	local w=$1 runs=$2 i c a b s m wl r
	printf '%-4s %8s %8s %8s %8s %8s %4s\n' boot init rootmnt systemd marker wall rc
	for i in $(seq 1 "$runs"); do
		c=$w/console-$i.log
		[ -f "$c" ] || { printf '%-4s (no console log)\n' "$i"; continue; }
		a=$(ts "$c" 'Run /init as init process')
		b=$(ts "$c" 'EXT4-fs \(vda\): mounted filesystem')
		s=$(ts "$c" 'systemd\[1\]: systemd [0-9]+.* running in system mode')
		m=$(ts "$c" 'CUBICLE-GUEST marker')
		wl=$(awk -v i="$i" '$1 == i { print $3 }' "$w/wall.txt" 2>/dev/null)
		r=$(awk -v i="$i" '$1 == i { print $2 }' "$w/wall.txt" 2>/dev/null)
		printf '%-4s %8s %8s %8s %8s %8s %4s\n' "$i" "${a:--}" "${b:--}" "${s:--}" "${m:--}" "${wl:--}" "${r:--}"
	done
}

# --report WORK [RUNS]: the table again from a finished run's folder.
if [ "${1:-}" = --report ]; then
	table "$2" "${3:-$(ls "$2"/console-*.log 2>/dev/null | wc -l)}"
	exit 0
fi

# ---- inside L1 (or directly): boot every prepared config, timed -------------
if [ "${1:-}" = --inner ]; then
	w=$2 cubicle=$3 runs=$4 tmo=$5
	for i in $(seq 1 "$runs"); do
		t0=$(date +%s.%N)
		rc=0
		timeout -k 5 "$tmo" "$cubicle" run "$w/vm-$i.cfg" >"$w/console-$i.log" 2>"$w/stderr-$i.log" </dev/null || rc=$?
		t1=$(date +%s.%N)
		echo "$i $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" >>"$w/wall.txt"
		echo "# boot $i: exit status $rc after $(tail -n 1 "$w/wall.txt" | cut -d' ' -f3) s" >&2
	done
	exit 0
fi

prepare=0
[ "${1:-}" = --prepare ] && { prepare=1; shift; }
. "$(dirname "$0")/lib.sh"
bench_guest bench-systemd-boot
bd=$(cd "${1:-.}" && pwd)
runs=${2:-6}
console=${SD_CONSOLE:-hvc0}
vcpus=${SD_VCPUS:-2} mem=${SD_MEM_MIB:-512} l1smp=${SD_L1_SMP:-2} tmo=${SD_BOOT_TIMEOUT:-300}
PATH=$PATH:/sbin:/usr/sbin
for t in debugfs mke2fs; do
	command -v $t >/dev/null || { echo "bench-systemd-boot: $t not found (apt-get install e2fsprogs)" >&2; exit 1; }
done
make -s -C "$bd" >/dev/null
w=${SD_WORK:-$bd/bench/systemd-boot.work}
rm -rf "$w" && mkdir -p "$w"
w=$(cd "$w" && pwd -P)

# ---- the root image, cached -------------------------------------------------
cache=${CUBICLE_CACHE:-$HOME/.cache/cubicle}/debian
img=$cache/systemd-boot.ext4
tar=$cache/bookworm-minbase-systemd-sysv+udev.tar
mkdir -p "$cache"
if [ ! -s "$img" ] || [ ! -s "$tar" ] || [ "$tar" -nt "$img" ] || [ "$0" -nt "$img" ]; then
	"$top/scripts/debian-rootfs.sh" --include systemd-sysv,udev --size 1024 "$img.new"
	cat >"$w/cubicle-marker" <<'EOF'
#!/bin/sh
# bench/systemd-boot.sh: multi-user.target is reached; say so and reboot.
up=$(cut -d' ' -f1 /proc/uptime)
echo "CUBICLE-GUEST marker uptime=$up" >/dev/kmsg
echo "CUBICLE-GUEST marker uptime=$up" >/dev/console
grep -E 'CPU|virtio|hvc|timer|LOC|RES|CAL' /proc/interrupts | sed 's/^/CUBICLE-GUEST irq: /' >/dev/console
# hvc0 registers late and does not replay what the kernel said before it:
# the whole kernel log, timestamps and all, follows the marker.
grep -q 'console=hvc0' /proc/cmdline && dmesg | sed 's/^/CUBICLE-DMESG /' >/dev/console
sync
exec systemctl reboot -ff
EOF
	cat >"$w/cubicle-marker.service" <<'EOF'
[Unit]
Description=bench/systemd-boot.sh marker: multi-user.target reached
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/cubicle-marker

[Install]
WantedBy=multi-user.target
EOF
	chmod 755 "$w/cubicle-marker"
	debugfs -w -f - "$img.new" >"$w/debugfs.log" 2>&1 <<EOF
mkdir /usr/local/sbin
write $w/cubicle-marker /usr/local/sbin/cubicle-marker
sif /usr/local/sbin/cubicle-marker mode 0100755
sif /usr/local/sbin/cubicle-marker uid 0
sif /usr/local/sbin/cubicle-marker gid 0
write $w/cubicle-marker.service /etc/systemd/system/cubicle-marker.service
sif /etc/systemd/system/cubicle-marker.service mode 0100644
sif /etc/systemd/system/cubicle-marker.service uid 0
sif /etc/systemd/system/cubicle-marker.service gid 0
mkdir /etc/systemd/system/multi-user.target.wants
symlink /etc/systemd/system/multi-user.target.wants/cubicle-marker.service /etc/systemd/system/cubicle-marker.service
EOF
	for f in /usr/local/sbin/cubicle-marker /etc/systemd/system/cubicle-marker.service \
		/etc/systemd/system/multi-user.target.wants/cubicle-marker.service; do
		debugfs -R "stat $f" "$img.new" 2>/dev/null | grep -q 'Type:' ||
			{ cat "$w/debugfs.log" >&2; echo "bench-systemd-boot: debugfs did not add $f" >&2; exit 1; }
	done
	e2fsck -fn "$img.new" >"$w/e2fsck.log" 2>&1 ||
		{ cat "$w/e2fsck.log" >&2; echo "bench-systemd-boot: $img.new is not clean" >&2; exit 1; }
	mv -f "$img.new" "$img"
fi

# ---- the initramfs: the e2e tests' switchroot one ----------------------------
. "$top/tests/e2e/lib.sh"
e2e_work=$w e2e_top=$top e2e_guest=$guest
e2e_name=bench-systemd-boot
mods="virtio virtio_ring virtio_pci virtio_blk virtio_console"
# shellcheck disable=SC2086
e2e_switchroot_initramfs "$w/initramfs.cpio.gz" $mods

# ---- one config and one copy of the image per boot ---------------------------
cmdline="console=$console root=/dev/vda rw reboot=k panic=-1 ignore_loglevel printk.time=1"
cmdline="$cmdline printk.devkmsg=on log_buf_len=1M systemd.log_target=kmsg systemd.show_status=0 systemd.firstboot=off"
cmdline="$cmdline${SD_CMDLINE_EXTRA:+ $SD_CMDLINE_EXTRA}"
case $console in
hvc0) condev='{ type = "virtio-console"; id = "hvc"; console = "stdio"; input = false; },' ;;
ttyS0) condev='{ type = "serial8250"; id = "com1"; console = "stdio"; input = false; },' ;;
*) echo "bench-systemd-boot: SD_CONSOLE=$console: hvc0 or ttyS0" >&2; exit 2 ;;
esac
for i in $(seq 1 "$runs"); do
	cp --sparse=always "$img" "$w/root-$i.img"
	cat >"$w/vm-$i.cfg" <<EOF
machine = { vcpus = $vcpus; memory_mib = $mem; };
boot = {
  kernel = "$guest/vmlinuz";
  initrd = "initramfs.cpio.gz";
  cmdline = "$cmdline";
};
devices = (
  $condev
  { type = "virtio-blk"; id = "root"; root = true;
    backend = { type = "raw"; path = "root-$i.img"; }; }
);
EOF
done
echo "# $runs boots of $img, $vcpus vCPUs, $mem MiB, console $console; logs in $w" >&2
echo "# cmdline: $cmdline" >&2
[ $prepare = 0 ] || exit 0

inner=("$(cd "$(dirname "$0")" && pwd)/systemd-boot.sh" --inner "$w" "$bd/cubicle" "$runs" "$tmo")
t0=$(date +%s)
rc=0
if host_boots_linux; then
	"${inner[@]}" || rc=$?
else
	echo "# this host's KVM cannot boot Linux: the boots run in one L1 of the nested harness (--smp $l1smp)" >&2
	"$top/tests/e2e/nested/run-nested.sh" --arch x86_64 --smp "$l1smp" \
		--timeout $((runs * (tmo + 10) + 300)) --rw "$w" -- "${inner[@]}" || rc=$?
fi
echo "# all boots: $(($(date +%s) - t0)) s (harness exit status $rc)" >&2

table "$w" "$runs"
exit $rc
