#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# KVM payload tests: tiny guests boot on this host's /dev/kvm (PVM or hardware)
# through `cubicle run`, talk to testdev over port I/O and MMIO, and end the VM
# with a status the test checks. Exit 77 (skip) without a usable /dev/kvm.
set -u
bd=${top_builddir:-.}
cub=${CUBICLE:-$bd/cubicle}
pl=$(cd "$bd" && pwd)/tests/kvm/payloads
if [ "${CUBICLE_ARCH:-x86_64}" != x86_64 ]; then
	echo "SKIP: the payloads are x86 guests; this build is for $CUBICLE_ARCH"
	exit 77
fi
if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
	echo "SKIP: no usable /dev/kvm"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# run NAME PAYLOAD MODE VCPUS EXPECTED_STATUS EXPECTED_STDERR_REGEX [extra --set ...]
# $extra_dev: more entries for the devices list (",\n  { ... }").
extra_dev=
run() {
	name=$1 payload=$2 mode=$3 vcpus=$4 want=$5 grep_re=$6
	shift 6
	cat >"$tmp/$name.cfg" <<CFG
machine = { vcpus = $vcpus; memory_mib = 16; };
boot = { kernel = "$pl/$payload.bin"; format = "flat"; mode = "$mode"; load_addr = 0x10000; };
devices = (
  { type = "testdev"; id = "pio"; bus = "pio"; },
  { type = "testdev"; id = "mmio"; bus = "mmio"; },
  { type = "boot-timer"; id = "boot"; }$extra_dev
);
CFG
	timeout 60 "$cub" run "$tmp/$name.cfg" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null
	got=$?
	if [ "$got" -eq "$want" ] && grep -Eq "$grep_re" "$tmp/$name.err"; then
		echo "ok - $name (status $got)"
		pass=$((pass + 1))
	else
		echo "not ok - $name: status $got, wanted $want and /$grep_re/ on stderr"
		sed 's/^/#   /' "$tmp/$name.err" | tail -n 20
		fail=$((fail + 1))
	fi
}

run real-mode real real 1 42 'testdev\[pio\]: guest: real mode ok'
run protected-mode protected protected 1 42 'testdev\[mmio\]: guest: protected mode ok'
run long-mode long long 1 42 'testdev\[mmio\]: guest: long mode ok'
run smp-4-vcpus long long 4 42 'long mode ok'
run hostile-accesses wild long 1 42 'testdev\[pio\]: guest: string io ok'
run triple-fault fault long 1 4 'triple'
run i8042-reset reset real 1 0 'reset'
run panic-warm-reset reset_panic real 1 3 'panic'
# A payload must not depend on the host check, and log levels are honoured.
run debug-log long long 1 42 'debug: ' --log-level debug
# The virtio core and its MMIO transport, driven by a guest, with a real device.
extra_dev=',
  { type = "virtio-rng"; id = "rng"; transport = "mmio"; }'
run virtio-mmio virtio_mmio long 1 42 'testdev\[mmio\]: guest: virtio-mmio ok'
# virtio-blk on a raw image the backend creates (sparse, 1 MiB); the guest
# writes byte i ^ 0x5a to sector 2, which must reach the file.
extra_dev=',
  { type = "virtio-blk"; id = "disk"; transport = "mmio"; serial = "payload-disk";
    backend = { type = "raw"; path = "'"$tmp"'/blk.img"; size = "1M"; }; }'
run virtio-blk virtio_blk long 1 42 'testdev\[mmio\]: guest: virtio-blk ok'
if [ "$(od -An -tx1 -j1024 -N4 "$tmp/blk.img" 2>/dev/null | tr -d ' ')" != 5a5b5859 ]; then
	echo "not ok - virtio-blk: sector 2 of the image does not hold what the guest wrote"
	fail=$((fail + 1))
fi
# virtio-console: one output buffer and an emergency write reach the file.
extra_dev=',
  { type = "virtio-console"; id = "hvc"; transport = "mmio"; console = "file";
    path = "'"$tmp"'/hvc.txt"; }'
run virtio-console virtio_console long 1 42 'testdev\[mmio\]: guest: virtio-console ok'
if [ "$(cat "$tmp/hvc.txt" 2>/dev/null)" != "$(printf 'hello hvc\nE')" ]; then
	echo "not ok - virtio-console: the console file holds '$(cat "$tmp/hvc.txt" 2>/dev/null)'"
	fail=$((fail + 1))
fi
extra_dev=

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
