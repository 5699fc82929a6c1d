#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A stand-in for the arm64 `cubicle run [--plugin-dir D]... CFG [--set k=v]...` built on an arm64 qemu-system-aarch64 with KVM, run inside the arm64 L1 only to validate the e2e harness: same console on stdout, a boot-timer-style log line on stderr.
#
# Usage, once on the host (downloads Debian's qemu-system-arm:arm64 and the
# arm64 libraries it needs, unpacked with dpkg-deb -x, nothing installed):
#   tests/e2e/nested/qemu-standin-arm64.sh --fetch
# then:
#   CUBICLE_ARM64=$PWD/tests/e2e/nested/qemu-standin-arm64.sh tests/e2e/run_arm64_boot.sh
# Inside L1 it runs under busybox sh (run-nested-arm64.sh starts "#!" scripts
# so) and starts QEMU through $CUBICLE_ARM64_LOADER. It reads from CFG only
# vcpus, memory_mib, kernel, initrd, cmdline and the first backend path (a
# raw virtio-blk disk, on virtio-mmio like cubicle's arm64 default). QEMU's
# virt board has a PL011, not an 8250: console=ttyS0 becomes ttyAMA0 on the
# way in and back to ttyS0 in the guest's reported command line; it has no
# boot-timer either: the guest's "boot_timer=none" is reported as found and
# the log line is made up when the guest says ready. Not a test.

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
	echo "qemu-standin-arm64: $root/root/usr/bin/qemu-system-aarch64 ready" >&2
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
qemu=$root/root/usr/bin/qemu-system-aarch64
[ -f "$qemu" ] || { echo "qemu-standin: $qemu missing: run $0 --fetch on the host" >&2; exit 2; }

# key NAME: the first "NAME = value;" anywhere on a line (one per line).
key() {
	sed -n "s/^\(.*[^a-z_]\)\{0,1\}$1[[:space:]]*=[[:space:]]*\"\{0,1\}\([^\";]*\)\"\{0,1\}[[:space:]]*;.*/\2/p" "$cfg" |
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
abs() { case $1 in /*|'') echo "$1" ;; *) echo "$dir/$1" ;; esac; }
kernel=$(abs "$kernel") initrd=$(abs "$initrd") disk=$(abs "$disk")
qcmdline=$(echo "$cmdline" | sed 's/console=ttyS0/console=ttyAMA0/; s/earlycon=[^ ]*//')

set -- -accel kvm -M virt,gic-version=3 -cpu host -smp "${vcpus:-1}" -m "${mem:-256}" \
	-nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot \
	-kernel "$kernel" -append "$qcmdline"
[ -n "$initrd" ] && set -- "$@" -initrd "$initrd"
[ -n "$disk" ] && set -- "$@" -drive "file=$disk,format=raw,if=none,id=vda" \
	-device virtio-blk-device,drive=vda
lp=${CUBICLE_ARM64_LIBRARY_PATH:-/usr/lib/aarch64-linux-gnu}:$root/root/usr/lib/aarch64-linux-gnu:$root/root/lib/aarch64-linux-gnu

t0=$(date +%s)
status=${TMPDIR:-/tmp}/qemu-standin.status.$$
{ "${CUBICLE_ARM64_LOADER:-/lib/ld-linux-aarch64.so.1}" --library-path "$lp" "$qemu" "$@" </dev/null 2>&1
  echo $? >"$status"; } |
while IFS= read -r line; do
	case $line in
	*"CUBICLE-GUEST cmdline="*) line=$(echo "$line" | sed 's/console=ttyAMA0/console=ttyS0/') ;;
	*"CUBICLE-GUEST boot_timer=none"*) line="CUBICLE-GUEST boot_timer=qemu-standin" ;;
	esac
	printf '%s\n' "$line"
	case $line in
	*"CUBICLE-GUEST ready"*)
		echo "cubicle: boot-timer[boot]: guest boot done after $(( $(date +%s) - t0 )) s (qemu stand-in)" >&2 ;;
	esac
done
rc=$(cat "$status" 2>/dev/null)
rm -f "$status"
exit "${rc:-99}"
