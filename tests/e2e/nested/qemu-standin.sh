#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A stand-in for `cubicle run CFG --set k=v...` built on QEMU/KVM, used only to validate the e2e harness: same console on stdout, a boot-timer-style log line on stderr, exit 3 on a guest panic.
#
# Usage: CUBICLE=tests/e2e/nested/qemu-standin.sh tests/e2e/run_boot.sh
# It understands only the keys the e2e tests set; the config file is read
# for boot.cmdline alone. Not a test itself.

set -uo pipefail
[ "${1:-}" = run ] && [ $# -ge 2 ] || { echo "usage: $0 run CFG [--set k=v]..." >&2; exit 2; }
cfg=$2; shift 2
vcpus=1 mem=256 kernel='' initrd=''
cmdline=$(sed -n 's/^[[:space:]]*cmdline[[:space:]]*=[[:space:]]*"\(.*\)";.*/\1/p' "$cfg" | head -n 1)
while [ $# -gt 0 ]; do
	case $1 in
	--set) kv=$2; shift ;;
	--set=*) kv=${1#--set=} ;;
	*) echo "qemu-standin: ignoring $1" >&2; shift; continue ;;
	esac
	shift
	case $kv in
	machine.vcpus=*) vcpus=${kv#*=} ;;
	machine.memory_mib=*) mem=${kv#*=} ;;
	boot.kernel=*) kernel=${kv#*=} ;;
	boot.initrd=*) initrd=${kv#*=} ;;
	boot.cmdline=*) cmdline=${kv#*=} ;;
	*) echo "qemu-standin: ignoring --set $kv" >&2 ;;
	esac
done

t0=$(date +%s%N)
panicked=0
while IFS= read -r line; do
	printf '%s\n' "$line"
	case $line in
	*"CUBICLE-GUEST ready"*)
		ms=$(( ($(date +%s%N) - t0) / 1000000 ))
		echo "cubicle: boot-timer[boot]: guest boot done after $ms ms (qemu stand-in)" >&2 ;;
	*"Kernel panic"*) panicked=1 ;;
	esac
done < <(qemu-system-x86_64 -accel kvm -cpu host -M pc -smp "$vcpus" -m "$mem" \
	-nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot \
	-kernel "$kernel" -initrd "$initrd" -append "$cmdline" </dev/null 2>&1; echo "QEMU-STATUS $?")
[ $panicked = 1 ] && exit 3
exit 0
