#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots Debian's cloud kernel with the example initramfs (examples/hello.cfg, 2 vCPUs, 192 MiB) and checks what the guest reports, the boot-timer log and the exit status.
#
# With --panic (see run_panic.sh) the guest panics on purpose and cubicle must
# exit with status 3; with --split (run_boot_split.sh) the VM has
# machine.irqchip = "split": KVM's LAPICs, cubicle's IOAPIC, no 8259, no PIT.
# cubicle decompresses the kernel (boot.decompress = "vmm", the default) and
# picks its KASLR offset: the guest's _text must sit exactly there. The
# panic run leaves the decompression to the kernel (boot.decompress = "guest").
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

panic=0
split=()
decompress=(--log-level debug)
[ "${1:-}" = --panic ] && panic=1 decompress=(--set boot.decompress=guest)
[ "${1:-}" = --split ] && split=(--set machine.irqchip=split)

e2e_init
cfg=$e2e_top/examples/hello.cfg
base=$(e2e_cfg_string "$cfg" cmdline)
[ -n "$base" ] || { echo "not ok - no boot.cmdline in $cfg"; exit 1; }
cmdline=$base
[ $panic = 1 ] && cmdline="$base cubicle.test=panic"
console=$e2e_work/console.log
stderr=$e2e_work/stderr.log

start=$(date +%s.%N)
# Options before the file: right for both permuting and strict parsers.
e2e_run "$CUBICLE" run \
	--set machine.vcpus=2 --set machine.memory_mib=192 "${split[@]}" "${decompress[@]}" \
	--set boot.kernel="$e2e_guest/vmlinuz" \
	--set boot.initrd="$e2e_guest/initramfs.cpio.gz" \
	--set boot.cmdline="$cmdline" \
	"$cfg" >"$console" 2>"$stderr"
rc=$?
echo "# exit status $rc after $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"

cpus=$(e2e_marker "$console" cpus)
kib=$(e2e_marker "$console" mem_kib)
seen_cmdline=$(e2e_marker "$console" cmdline)
want_kib=$((192 * 1024))

mem_ok() { [ -n "$kib" ] && [ "$kib" -le $want_kib ] && [ "$kib" -ge $((want_kib - 2048)) ]; }
e2e_check "guest sees 2 cpus (got '${cpus}')" [ "$cpus" = 2 ]
e2e_check "guest RAM within 2 MiB below 192 MiB (got '${kib}' KiB)" mem_ok
e2e_check "guest cmdline is the configured one" [ "$seen_cmdline" = "$cmdline" ]
e2e_check "guest init reached ready" grep -q 'CUBICLE-GUEST ready' "$console"
e2e_check "boot-timer logged boot done" grep -Eq 'boot-timer\[boot\].*boot done' "$stderr"
if [ $panic = 0 ]; then
	# the link address: __START_KERNEL_map + the bzImage's pref_address
	pref=$(od -An -tx8 -j $((0x258)) -N8 "$e2e_guest/vmlinuz" | tr -d ' ')
	off=$(sed -n 's/.*boot: KASLR: virtual offset 0x\([0-9a-f]*\) .*/\1/p' "$stderr")
	text=$(e2e_marker "$console" text)
	want=$(printf '%016x' $((0xffffffff80000000 + 0x${pref:-0} + 0x${off:-0})))
	e2e_check "cubicle decompressed the kernel and chose a KASLR offset (0x${off})" [ -n "$off" ]
	e2e_check "guest _text is at that offset (want $want, got '${text}')" [ "$text" = "$want" ]
fi
if [ $panic = 1 ]; then
	e2e_check "guest kernel panicked" grep -q 'Kernel panic' "$console"
	e2e_check "exit status 3 after a guest panic (got $rc)" [ $rc = 3 ]
else
	e2e_check "exit status 0 after reboot -f (got $rc)" [ $rc = 0 ]
fi
e2e_finish "$console" "$stderr"
