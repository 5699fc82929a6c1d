#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots Debian's cloud kernel with the example initramfs (examples/hello.cfg, 2 vCPUs, 192 MiB) and checks what the guest reports, the boot-timer log and the exit status.
#
# With --panic (see run_panic.sh) the guest panics on purpose and cubicle must
# exit with status 3; with --split (run_boot_split.sh) the VM has
# machine.irqchip = "split": KVM's LAPICs, cubicle's IOAPIC, no 8259, no PIT.
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

panic=0
split=()
[ "${1:-}" = --panic ] && panic=1
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
	--set machine.vcpus=2 --set machine.memory_mib=192 "${split[@]}" \
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
if [ $panic = 1 ]; then
	e2e_check "guest kernel panicked" grep -q 'Kernel panic' "$console"
	e2e_check "exit status 3 after a guest panic (got $rc)" [ $rc = 3 ]
else
	e2e_check "exit status 0 after reboot -f (got $rc)" [ $rc = 0 ]
fi
e2e_finish "$console" "$stderr"
