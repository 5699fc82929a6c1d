#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A stand-in for `cubicle run [--plugin-dir D]... CFG [--set k=v]...` built on QEMU with KVM, run inside the nested harness's L1 only to validate the e2e tests: same console on stdout, a boot-timer-style log line on stderr, exit 3 after a guest panic.
#
# Usage (x86_64: the host's qemu-system-x86_64 runs in L1 as it is):
#   CUBICLE=$PWD/tests/e2e/nested/qemu-standin.sh tests/e2e/run_boot.sh
# aarch64: once on the host, fetch Debian's qemu-system-arm:arm64 and the arm64
# libraries it needs (apt-get download + dpkg-deb -x, nothing installed):
#   tests/e2e/nested/qemu-standin.sh --fetch
# then:
#   CUBICLE_ARM64=$PWD/tests/e2e/nested/qemu-standin.sh tests/e2e/run_arm64_boot.sh
# POSIX sh: in the arm64 L1 it runs under busybox sh (run-nested.sh starts
# "#!" scripts so) and starts QEMU through $CUBICLE_ARM64_LOADER.
# It reads from CFG only vcpus, memory_mib, kernel, initrd, cmdline and the
# first backend path (a raw virtio-blk disk: PCI on x86, virtio-mmio on arm64
# like cubicle's default there); --set overrides machine.* and boot.*.
# QEMU's arm64 virt board has a PL011, not an 8250: console=ttyS0 becomes
# ttyAMA0 on the way in and back to ttyS0 in the guest's reported command
# line; it has no boot-timer either: the guest's "boot_timer=none" is
# reported as found and the log line is made up when the guest says ready.
# Not a test.

set -u
root=${CUBICLE_STANDIN_ROOT:-${CUBICLE_CACHE:-$HOME/.cache/cubicle}/standin-arm64}

if [ "${1:-}" = --fetch ]; then
	set -e
	mkdir -p "$root/debs"
	cd "$root/debs"
	sandbox=
	[ "$(id -u)" = 0 ] && sandbox="-o APT::Sandbox::User=root"
	pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances --no-pre-depends qemu-system-arm:arm64 |
		grep -E '^(lib[^ ]*|qemu-system-arm):arm64$' | sort -u)
	# shellcheck disable=SC2086
	apt-get $sandbox download $pkgs >/dev/null
	rm -rf "$root/root"
	mkdir -p "$root/root"
	for d in ./*.deb; do dpkg-deb -x "$d" "$root/root"; done
	echo "qemu-standin: $root/root/usr/bin/qemu-system-aarch64 ready" >&2
	exit 0
fi

[ "${1:-}" = run ] || { echo "usage: $0 run [--plugin-dir D]... CFG [--set k=v]... | --fetch" >&2; exit 2; }
shift
cfg='' sets=''
while [ $# -gt 0 ]; do
	case $1 in
	--plugin-dir|-P) shift ;;
	--plugin-dir=*) ;;
	--set) sets="$sets
$2"; shift ;;
	--set=*) sets="$sets
${1#--set=}" ;;
	-*) echo "qemu-standin: ignoring $1" >&2 ;;
	*) cfg=$1 ;;
	esac
	shift
done
[ -f "$cfg" ] || { echo "qemu-standin: no config file" >&2; exit 2; }

# key NAME: the first "NAME = value;" on a line that is not a comment.
key() {
	sed -e '/^[[:space:]]*#/d' \
	    -n -e "s/^\(.*[^a-z_]\)\{0,1\}$1[[:space:]]*=[[:space:]]*\"\{0,1\}\([^\";]*\)\"\{0,1\}[[:space:]]*;.*/\2/p" "$cfg" |
		head -n 1
}
vcpus=$(key vcpus) mem=$(key memory_mib) kernel=$(key kernel) initrd=$(key initrd)
cmdline=$(key cmdline) disk=$(key path)
old_ifs=$IFS
IFS='
'
for kv in $sets; do
	case $kv in
	machine.vcpus=*) vcpus=${kv#*=} ;;
	machine.memory_mib=*) mem=${kv#*=} ;;
	boot.kernel=*) kernel=${kv#*=} ;;
	boot.initrd=*) initrd=${kv#*=} ;;
	boot.cmdline=*) cmdline=${kv#*=} ;;
	*) echo "qemu-standin: ignoring --set $kv" >&2 ;;
	esac
done
IFS=$old_ifs
dir=$(dirname "$cfg")
abs() { case $1 in /*|'') echo "$1" ;; \~/*) echo "$HOME/${1#\~/}" ;; *) echo "$dir/$1" ;; esac; }
kernel=$(abs "$kernel") initrd=$(abs "$initrd") disk=$(abs "$disk")

case $(uname -m) in
aarch64)
	qemu=$root/root/usr/bin/qemu-system-aarch64
	[ -f "$qemu" ] || { echo "qemu-standin: $qemu missing: run $0 --fetch on the host" >&2; exit 2; }
	lp=${CUBICLE_ARM64_LIBRARY_PATH:-/usr/lib/aarch64-linux-gnu}:$root/root/usr/lib/aarch64-linux-gnu:$root/root/lib/aarch64-linux-gnu
	set -- "${CUBICLE_ARM64_LOADER:-/lib/ld-linux-aarch64.so.1}" --library-path "$lp" "$qemu" \
		-M virt,gic-version=3
	qcmdline=$(echo "$cmdline" | sed 's/console=ttyS0/console=ttyAMA0/; s/earlycon=[^ ]*//')
	blk=virtio-blk-device ;;
*)
	set -- qemu-system-x86_64 -M pc
	qcmdline=$cmdline
	blk=virtio-blk-pci ;;
esac
set -- "$@" -accel kvm -cpu host -smp "${vcpus:-1}" -m "${mem:-256}" \
	-nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot \
	-kernel "$kernel" -append "$qcmdline"
[ -n "$initrd" ] && set -- "$@" -initrd "$initrd"
[ -n "$disk" ] && set -- "$@" -drive "file=$disk,format=raw,if=none,id=vda" -device "$blk,drive=vda"

now_ms() {
	t=$(date +%s%N 2>/dev/null)
	case $t in ''|*[!0-9]*) echo $(($(date +%s) * 1000)) ;; *) echo $((t / 1000000)) ;; esac
}
t0=$(now_ms)
status=${TMPDIR:-/tmp}/qemu-standin.status.$$
panicked=${TMPDIR:-/tmp}/qemu-standin.panic.$$
rm -f "$panicked"
{ "$@" </dev/null 2>&1; echo $? >"$status"; } |
while IFS= read -r line; do
	case $line in
	*"CUBICLE-GUEST cmdline="*) line=$(echo "$line" | sed 's/console=ttyAMA0/console=ttyS0/') ;;
	*"CUBICLE-GUEST boot_timer=none"*) line="CUBICLE-GUEST boot_timer=qemu-standin" ;;
	esac
	printf '%s\n' "$line"
	case $line in
	*"CUBICLE-GUEST ready"*)
		echo "cubicle: boot-timer[boot]: guest boot done after $(($(now_ms) - t0)) ms (qemu stand-in)" >&2 ;;
	*"Kernel panic"*) : >"$panicked" ;;
	esac
done
rc=$(cat "$status" 2>/dev/null)
rm -f "$status"
[ -e "$panicked" ] && { rm -f "$panicked"; exit 3; }
exit "${rc:-99}"
