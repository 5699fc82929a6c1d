#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Firecracker's getting-started sequence over cubicle's control API: cubicle
# --api-sock waits; curl PUTs machine-config, boot-source (Debian's kernel,
# an initramfs that only loads virtio and mounts root=), a virtio-blk root
# drive (an ext4 image) and entropy, then InstanceStart. The guest must boot
# from /dev/vda with what the API said (vCPUs, memory, boot_args plus the
# root= the root drive adds), `cubicle ctl` must see it running with the
# mapped devices, the pre-boot objects must then be closed, the guest's
# file must reach the image, and its reboot must end cubicle with status 0
# and remove the socket. GET /metrics must show the root drive's reads while
# it runs. Then the same VM boots from Firecracker's JSON description with
# `cubicle --no-api --config-file vm.json`. Exit status: 0 pass, 1 fail, 77 skip.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
command -v curl >/dev/null || e2e_skip "curl is not installed (scripts/deps.sh installs it)"
for t in mkfs.ext4 e2fsck debugfs; do
	command -v $t >/dev/null || PATH=$PATH:/sbin:/usr/sbin
	command -v $t >/dev/null || e2e_skip "$t not found (apt-get install e2fsprogs)"
done
w=$e2e_work

# The initramfs loads the virtio drivers and hands over to root=, as a
# distribution's does; the root file system's init reports and reboots.
e2e_switchroot_initramfs "$w/initramfs.cpio.gz" virtio virtio_ring virtio_pci virtio_blk virtio_rng
root=$w/rootfs
rm -rf "$root" && mkdir -p "$root"/{bin,sbin,proc,sys,dev,data}
cp /bin/busybox "$root/bin/busybox"
cat >"$root/sbin/init" <<'INIT'
#!/bin/busybox sh
# The root file system's init for run_api_boot.sh: report, write, sync, reboot.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
exec </dev/console >/dev/console 2>&1
say() { echo "CUBICLE-GUEST $1=$2"; }
kib=0
while IFS=' ' read -r range colon rest; do
	case "$range" in [0-9a-f]*-[0-9a-f]*) ;; *) continue ;; esac
	[ "$rest" = "System RAM" ] || continue
	start=${range%-*} end=${range#*-}
	kib=$((kib + (0x$end - 0x$start + 1) / 1024))
done </proc/iomem
say cpus "$(grep -c '^processor' /proc/cpuinfo)"
say mem_kib "$kib"
say cmdline "$(cat /proc/cmdline)"
say root "$(awk '$2 == "/" { print $1 " " $3 " " $4 }' /proc/mounts | grep -v rootfs | head -n 1)"
echo "written through the API's root drive" >/data/from-guest.txt
sync
echo "CUBICLE-GUEST ready"
mount -o remount,ro / 2>/dev/null
sync
reboot -f
INIT
chmod +x "$root/sbin/init"
rm -f "$w/root.img"
mkfs.ext4 -q -F -L cubicle-root -d "$root" "$w/root.img" 64M || { echo "not ok - mkfs.ext4 -d failed"; exit 1; }
args="console=ttyS0 reboot=k panic=-1 quiet"

cat >"$w/api.sh" <<'SCRIPT'
#!/bin/bash
# Runs where KVM is (directly or in L1): $1 work folder, $2 kernel, $3 initrd, $4 boot_args, $5 cubicle.
set -u
w=$1 k=$2 i=$3 args=$4 cub=$5
# Not in $w: a 9p share (the nested harness's) cannot hold a Unix socket.
sock=$(mktemp -d)/api.sock
"$cub" --api-sock "$sock" --id e2e-api </dev/null >"$w/console.log" 2>"$w/stderr.log" &
pid=$!
for n in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
c() { curl -s -o "$w/body" -w '%{http_code}' --unix-socket "$sock" "$@"; }
{
	echo "machine=$(c -X PUT -d '{"vcpu_count":2,"mem_size_mib":192}' http://localhost/machine-config)"
	echo "boot=$(c -X PUT -d "{\"kernel_image_path\":\"$k\",\"initrd_path\":\"$i\",\"boot_args\":\"$args\"}" http://localhost/boot-source)"
	echo "drive=$(c -X PUT -d "{\"drive_id\":\"rootfs\",\"path_on_host\":\"$w/root.img\",\"is_root_device\":true,\"is_read_only\":false}" http://localhost/drives/rootfs)"
	echo "entropy=$(c -X PUT -d '{}' http://localhost/entropy)"
	echo "start=$(c -X PUT -d '{"action_type":"InstanceStart"}' http://localhost/actions) $(cat "$w/body")"
	"$cub" ctl "$sock" info
	"$cub" ctl "$sock" devices
	echo "late_boot=$(c -X PUT -d "{\"kernel_image_path\":\"$k\"}" http://localhost/boot-source)"
	# GET /metrics until the root drive has been read (the guest mounts it).
	for n in $(seq 600); do
		curl -s --unix-socket "$sock" http://localhost/metrics >"$w/metrics.txt" 2>&1 || break
		grep -q '^cubicle_storage_reads_total{device="rootfs",backend="raw"} [1-9]' "$w/metrics.txt" && break
		sleep 0.2
	done
	echo "metrics: $(grep -E '^cubicle_(storage_read(s|_bytes)_total|vm_state)' "$w/metrics.txt" | tr '\n' ' ')"
} >"$w/api.log" 2>&1
wait $pid
echo "rc=$? (after ${SECONDS}s)" >>"$w/api.log"
[ -e "$sock" ] && echo "socket left behind" >>"$w/api.log"
# The same VM from Firecracker's JSON description, with no API at all.
cat >"$w/vm.json" <<JSON
{
  "boot-source": { "kernel_image_path": "$k", "initrd_path": "$i", "boot_args": "$args" },
  "drives": [ { "drive_id": "rootfs", "path_on_host": "$w/root.img",
                "is_root_device": true, "is_read_only": false } ],
  "machine-config": { "vcpu_count": 1, "mem_size_mib": 160 },
  "entropy": {}
}
JSON
"$cub" --no-api --config-file "$w/vm.json" </dev/null >"$w/console2.log" 2>"$w/stderr2.log"
echo "json_rc=$? (after ${SECONDS}s)" >>"$w/api.log"
exit 0
SCRIPT
# Two boots in one run (the API's, then the JSON file's): twice the time.
e2e_timeout=$((e2e_timeout * 2))
e2e_run bash "$w/api.sh" "$w" "$e2e_guest/vmlinuz" "$w/initramfs.cpio.gz" "$args" \
	"$(cd "$(dirname "$CUBICLE")" && pwd)/$(basename "$CUBICLE")"
echo "# api.sh exit status $?"
sed 's/^/# /' "$w/api.log"
console=$w/console.log
stderr=$w/stderr.log
a() { grep -q "^$1" "$w/api.log"; }
m() { e2e_marker "$console" "$1"; }
kib=$(m mem_kib)
mem_ok() { [ -n "$kib" ] && [ "$kib" -le $((192 * 1024)) ] && [ "$kib" -ge $((192 * 1024 - 2048)) ]; }
puts_ok() { a "machine=204" && a "boot=204" && a "drive=204" && a "entropy=204"; }
from_guest=$(debugfs -R "cat /data/from-guest.txt" "$w/root.img" 2>/dev/null)
fsck_clean() { e2fsck -fn "$w/root.img" >"$w/e2fsck.log" 2>&1 || { sed 's/^/# /' "$w/e2fsck.log"; false; }; }
e2e_check "PUT /machine-config, /boot-source, /drives/rootfs, /entropy: 204" puts_ok
e2e_check "InstanceStart: 204" a "start=204"
e2e_check "cubicle ctl info: Running" a "e2e-api: Running"
e2e_check "cubicle ctl devices: the root drive" grep -q 'virtio-blk\[rootfs\]' "$w/api.log"
e2e_check "boot-source after the start: 400" a "late_boot=400"
e2e_check "GET /metrics: the root drive's reads and bytes while it runs" \
	grep -Eq 'reads_total\{device="rootfs",backend="raw"\} [1-9].*read_bytes_total\{device="rootfs",backend="raw"\} [1-9][0-9]{3}' "$w/api.log"
e2e_check "guest sees 2 cpus (got '$(m cpus)')" [ "$(m cpus)" = 2 ]
e2e_check "guest RAM within 2 MiB below 192 MiB (got '${kib}' KiB)" mem_ok
e2e_check "guest cmdline is boot_args plus the root drive's root= (got '$(m cmdline)')" \
	[ "$(m cmdline)" = "$args root=/dev/vda rw" ]
e2e_check "root is /dev/vda ext4 rw (got '$(m root)')" [ "$(m root)" = "/dev/vda ext4 rw,relatime" ]
e2e_check "guest init reached ready" grep -q 'CUBICLE-GUEST ready' "$console"
e2e_check "the guest's reboot ended cubicle with 0" a "rc=0"
e2e_check "the socket is gone" bash -c "! grep -q 'socket left behind' '$w/api.log'"
e2e_check "the host reads the guest's file from the image" \
	[ "$from_guest" = "written through the API's root drive" ]
e2e_check "e2fsck -fn finds the image clean" fsck_clean
m2() { e2e_marker "$w/console2.log" "$1"; }
e2e_check "--no-api --config-file vm.json: the guest booted from /dev/vda and rebooted (0)" \
	bash -c "grep -q '^json_rc=0' '$w/api.log' && grep -q 'CUBICLE-GUEST ready' '$w/console2.log'"
e2e_check "vm.json's machine-config: 1 cpu (got '$(m2 cpus)'), no API socket" \
	bash -c "[ '$(m2 cpus)' = 1 ] && ! grep -q 'API listening' '$w/stderr2.log'"
e2e_finish "$console" "$stderr" "$w/api.log" "$w/stderr2.log"
