#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Firecracker's getting-started sequence over cubicle's control API: cubicle
# --api-sock waits; curl PUTs machine-config, boot-source (Debian's kernel and
# the example initramfs), a read-only drive and entropy, then InstanceStart.
# The guest must boot with what the API said (vCPUs, memory, command line),
# `cubicle ctl` must see it running with the mapped devices, the pre-boot
# objects must then be closed, and the guest's reboot must end cubicle with
# status 0 and remove the socket. Exit status: 0 pass, 1 fail, 77 skip.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
command -v curl >/dev/null || e2e_skip "curl is not installed (scripts/deps.sh installs it)"
w=$e2e_work
args=$(e2e_cfg_string "$e2e_top/examples/hello.cfg" cmdline)
head -c $((1 << 20)) /dev/zero >"$w/data.img"
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
	echo "drive=$(c -X PUT -d "{\"drive_id\":\"data\",\"path_on_host\":\"$w/data.img\",\"is_root_device\":false,\"is_read_only\":true}" http://localhost/drives/data)"
	echo "entropy=$(c -X PUT -d '{}' http://localhost/entropy)"
	echo "start=$(c -X PUT -d '{"action_type":"InstanceStart"}' http://localhost/actions) $(cat "$w/body")"
	"$cub" ctl "$sock" info
	"$cub" ctl "$sock" devices
	echo "late_boot=$(c -X PUT -d "{\"kernel_image_path\":\"$k\"}" http://localhost/boot-source)"
} >"$w/api.log" 2>&1
wait $pid
echo "rc=$?" >>"$w/api.log"
[ -e "$sock" ] && echo "socket left behind" >>"$w/api.log"
exit 0
SCRIPT
e2e_run bash "$w/api.sh" "$w" "$e2e_guest/vmlinuz" "$e2e_guest/initramfs.cpio.gz" "$args" \
	"$(cd "$(dirname "$CUBICLE")" && pwd)/$(basename "$CUBICLE")"
echo "# api.sh exit status $?"
sed 's/^/# /' "$w/api.log"
console=$w/console.log
stderr=$w/stderr.log
a() { grep -q "^$1" "$w/api.log"; }
kib=$(e2e_marker "$console" mem_kib)
mem_ok() { [ -n "$kib" ] && [ "$kib" -le $((192 * 1024)) ] && [ "$kib" -ge $((192 * 1024 - 2048)) ]; }
puts_ok() { a "machine=204" && a "boot=204" && a "drive=204" && a "entropy=204"; }
e2e_check "PUT /machine-config, /boot-source, /drives/data, /entropy: 204" puts_ok
e2e_check "InstanceStart: 204" a "start=204"
e2e_check "cubicle ctl info: Running" a "e2e-api: Running"
e2e_check "cubicle ctl devices: the console and the drive" \
	grep -q 'virtio-blk\[data\]' "$w/api.log"
e2e_check "boot-source after the start: 400" a "late_boot=400"
e2e_check "guest sees 2 cpus (got '$(e2e_marker "$console" cpus)')" [ "$(e2e_marker "$console" cpus)" = 2 ]
e2e_check "guest RAM within 2 MiB below 192 MiB (got '${kib}' KiB)" mem_ok
e2e_check "guest cmdline is boot_args" [ "$(e2e_marker "$console" cmdline)" = "$args" ]
e2e_check "guest init reached ready" grep -q 'CUBICLE-GUEST ready' "$console"
e2e_check "the guest's reboot ended cubicle with 0" a "rc=0"
e2e_check "the socket is gone" bash -c "! grep -q 'socket left behind' '$w/api.log'"
e2e_finish "$console" "$stderr" "$w/api.log"
