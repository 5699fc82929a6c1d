#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs one arm64 program inside an arm64 L1 Linux VM under qemu-system-aarch64 software emulation at EL2 (so L1's built-in KVM works) and returns its exit code.
#
# Usage: tests/e2e/nested/run-nested-arm64.sh [--timeout S] [--cmd-timeout S] [--rw DIR]
#            [--show] [--smp N] [--mem MIB] -- PROGRAM [ARG...]
#
# L1 sees the host's / read-only over 9p and DIR read-write at the same path
# (default: a temporary folder, removed afterwards), and runs PROGRAM chrooted
# into the host root, so every host path means the same inside L1. The host's
# x86 shell cannot run there, so PROGRAM is started according to its kind:
#   a dynamically linked arm64 ELF  through the host's arm64 loader:
#       LOADER --library-path LIBPATH PROGRAM ARG...
#     (its /proc/self/exe is then the loader: pass cubicle --plugin-dir)
#   a static arm64 ELF              directly
#   a "#!" script                   with L1's arm64 busybox: /run/busybox sh
#     PROGRAM ARG... (the script finds LOADER and LIBPATH in the environment
#     as CUBICLE_ARM64_LOADER and CUBICLE_ARM64_LIBRARY_PATH)
# LOADER: $CUBICLE_ARM64_LOADER, else the first of /lib/ld-linux-aarch64.so.1
# (multiarch libc6:arm64), /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1
# (libc6-arm64-cross), the sysroot's. LIBPATH: the loader's folder, then
# $CUBICLE_ARM64_LIBRARY_PATH, then the sysroot's (${CUBICLE_ARM64_SYSROOT:-
# $CUBICLE_CACHE/sysroot-arm64}) and the host's multiarch folders.
# --cmd-timeout S bounds PROGRAM itself inside L1 (busybox timeout).
# /run and /dev/shm are tmpfs inside L1 (TMPDIR=/run/tmp); the environment and
# working directory are carried over, with busybox's applets (/run/bin) first
# on PATH. PROGRAM's stdout and stderr land in
# DIR/nested-stdout and DIR/nested-stderr and are then replayed on this
# script's stdout and stderr (with --show: streamed while it runs); L1's
# console is DIR/nested-console.log.
#
# Exit status: PROGRAM's, or 77 when an ingredient is missing (run
# scripts/fetch-guest-arm64.sh; apt-get install qemu-system-arm), or 99 when
# the harness itself failed (no KVM in L1, time limit, no RC= marker).
# CUBICLE_NESTED_VERBOSE=1 streams L1's console.

set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../../.." && pwd)
cache=${CUBICLE_CACHE:-${HOME:?HOME is not set}/.cache/cubicle}
gdir=$cache/guest/aarch64
l1dir=$gdir/nested
sysroot=${CUBICLE_ARM64_SYSROOT:-$cache/sysroot-arm64}
timeout=900 cmd_timeout='' rw='' smp=2 mem=2048 show=0

say() { printf 'run-nested-arm64: %s\n' "$*" >&2; }
die() { printf 'run-nested-arm64: error: %s\n' "$*" >&2; exit "${2:-99}"; }
usage="usage: run-nested-arm64.sh [--timeout S] [--cmd-timeout S] [--rw DIR] [--show] [--smp N] [--mem MIB] -- PROGRAM [ARG...]"

while [ $# -gt 0 ]; do
	case $1 in
	--timeout) timeout=${2:?--timeout needs seconds}; shift ;;
	--cmd-timeout) cmd_timeout=${2:?--cmd-timeout needs seconds}; shift ;;
	--rw) rw=${2:?--rw needs a folder}; shift ;;
	--show) show=1 ;;
	--smp) smp=${2:?}; shift ;;
	--mem) mem=${2:?}; shift ;;
	--) shift; break ;;
	-h|--help) sed -n '3,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' ($usage)" ;;
	esac
	shift
done
[ $# -gt 0 ] || die "no program given ($usage)"

command -v qemu-system-aarch64 >/dev/null ||
	die "qemu-system-aarch64 not found (apt-get install qemu-system-arm)" 77
[ -s "$l1dir/vmlinuz" ] && [ -d "$l1dir/modules" ] && [ -s "$gdir/busybox" ] ||
	die "no arm64 L1 kernel or busybox in $gdir: run scripts/fetch-guest-arm64.sh" 77

# ---- how PROGRAM starts inside L1 -------------------------------------------
prog=$1
case $prog in /*) ;; *) prog=$(command -v "$prog" 2>/dev/null || echo "$PWD/$prog") ;; esac
[ -f "$prog" ] || die "$1: no such file" 77
case $prog in /*) ;; *) prog=$PWD/$prog ;; esac
shift
magic=$(head -c 4 "$prog" | od -An -c | tr -d ' \n')
kind=
case $magic in
'177ELF')
	# e_machine (offset 18, little-endian) 0xb7 = AArch64; a PT_INTERP
	# program header ("interpreter" in file(1)) means dynamically linked.
	mach=$(od -An -tu2 -j18 -N2 "$prog" | tr -d ' ')
	[ "$mach" = 183 ] || die "$prog is not an AArch64 ELF (e_machine $mach)" 77
	if readelf -lW "$prog" 2>/dev/null | grep -q 'INTERP'; then kind=dynamic; else kind=static; fi ;;
'#!'*) kind=script ;;
*) die "$prog is neither an ELF nor a #! script" ;;
esac

loader=${CUBICLE_ARM64_LOADER:-}
if [ -z "$loader" ]; then
	for l in /lib/ld-linux-aarch64.so.1 /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 \
		 "$sysroot/lib/ld-linux-aarch64.so.1" \
		 "$sysroot/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"; do
		[ -e "$l" ] && { loader=$l; break; }
	done
fi
if [ -z "$loader" ] || [ ! -e "$loader" ]; then
	[ $kind = dynamic ] &&
		die "no arm64 loader (ld-linux-aarch64.so.1): apt-get install libc6:arm64 (after dpkg --add-architecture arm64) or libc6-arm64-cross" 77
	loader=
fi
libpath=
addlib() { [ -d "$1" ] && case ":$libpath:" in *":$1:"*) ;; *) libpath=${libpath:+$libpath:}$1 ;; esac; }
[ -n "$loader" ] && addlib "$(dirname "$(readlink -f "$loader")")"
IFS=: read -ra extra <<<"${CUBICLE_ARM64_LIBRARY_PATH:-}"
for d in "${extra[@]}"; do [ -n "$d" ] && addlib "$d"; done
for d in "$sysroot/usr/lib/aarch64-linux-gnu" "$sysroot/lib/aarch64-linux-gnu" \
	 /usr/lib/aarch64-linux-gnu /lib/aarch64-linux-gnu /usr/aarch64-linux-gnu/lib; do
	addlib "$d"
done
case "$loader$libpath" in *[[:space:]]*) die "the loader or library path contains spaces: $loader $libpath" ;; esac

# ---- the L1 initramfs: cached beside its kernel, rebuilt when its sources change
l1init=$here/l1-init-arm64.sh
initrd=$l1dir/l1-initramfs.cpio.gz
if [ ! -s "$initrd" ] || [ "$l1init" -nt "$initrd" ] || [ "$gdir/busybox" -nt "$initrd" ] ||
   [ "$top/scripts/build-initramfs.sh" -nt "$initrd" ]; then
	say "building $initrd"
	"$top/scripts/build-initramfs.sh" --busybox "$gdir/busybox" --init "$l1init" \
		--modules "virtio_pci 9pnet_virtio 9p" "$l1dir/modules" "$initrd" ||
		die "building the L1 initramfs failed"
fi

cleanup=
if [ -z "$rw" ]; then
	rw=$(mktemp -d "${TMPDIR:-/tmp}/cubicle-nested.XXXXXX") || die "mktemp failed"
	cleanup=$rw
fi
mkdir -p "$rw" || die "cannot create $rw"
rw=$(cd "$rw" && pwd -P)
case $rw in
*[[:space:],]*) die "the scratch folder '$rw' must not contain spaces or commas" ;;
/) die "the scratch folder cannot be /" ;;
esac
trap '[ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT

# ---- the script L1 runs: busybox sh inside the host root --------------------
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; } # POSIX single quoting for ash
script=$rw/nested-cmd.sh
log=$rw/nested-console.log
out=$rw/nested-stdout err=$rw/nested-stderr
rm -f "$log" "$out" "$err"
: >"$out"; : >"$err" # L1 appends, so a live tail never sees a truncation
{
	echo '# Generated by run-nested-arm64.sh: run by /run/busybox sh inside L1, chrooted into the host root.'
	for v in $(compgen -e); do
		case $v in PWD|OLDPWD|SHLVL|_|TMPDIR|TERM|BASH_*) continue ;; esac
		printf 'export %s=%s\n' "$v" "$(q "${!v}")"
	done
	printf 'export TMPDIR=/run/tmp XDG_RUNTIME_DIR=/run/user BUSYBOX=/run/busybox\n'
	printf 'export CUBICLE_ARM64_LOADER=%s CUBICLE_ARM64_LIBRARY_PATH=%s\n' "$(q "$loader")" "$(q "$libpath")"
	# Busybox applets come first on PATH: the host's own tools are x86.
	printf '/run/busybox mkdir -p /run/user /run/bin && /run/busybox --install -s /run/bin\n'
	printf 'export PATH=/run/bin${PATH:+:$PATH}\n'
	printf 'cd %s || exit 99\n' "$(q "$PWD")"
	printf 'exec </dev/null >>%s 2>>%s\n' "$(q "$out")" "$(q "$err")"
	printf 'exec'
	[ -n "$cmd_timeout" ] && printf ' /run/busybox timeout %s' "$(q "$cmd_timeout")"
	case $kind in
	dynamic) printf ' %s --library-path %s' "$(q "$loader")" "$(q "$libpath")" ;;
	script) printf ' /run/busybox sh' ;;
	esac
	printf ' %s' "$(q "$prog")"
	for a in "$@"; do printf ' %s' "$(q "$a")"; done
	echo
} >"$script"

args=(-accel tcg -M virt,virtualization=on,gic-version=3
	-cpu "${CUBICLE_NESTED_CPU:-max,pauth-impdef=on}" -smp "$smp" -m "$mem"
	-nodefaults -no-user-config -display none -monitor none -no-reboot
	-serial "file:$log"
	-kernel "$l1dir/vmlinuz" -initrd "$initrd"
	-append "console=ttyAMA0 rdinit=/init panic=-1 quiet loglevel=3 mitigations=off nestcmd=$script nestrw=$rw"
	-virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap
	-virtfs "local,path=$rw,mount_tag=work,security_model=none,multidevs=remap")

say "booting arm64 L1 (timeout ${timeout}s): $prog $*"
t0=$(date +%s.%N)
contail='' tails=()
if [ "${CUBICLE_NESTED_VERBOSE:-0}" = 1 ]; then
	: >"$log"
	tail -s 0.2 -n +1 -F "$log" 1>&2 2>/dev/null &
	contail=$!
fi
timeout -k 10 "$timeout" qemu-system-aarch64 "${args[@]}" </dev/null >"$rw/nested-qemu.log" 2>&1 &
qpid=$!
# A background job ignores ^C: pass it on, or QEMU would outlive us.
trap 'kill $qpid $contail 2>/dev/null; exit 130' INT TERM
if [ $show = 1 ]; then
	# --pid: each tail reads what is left once QEMU is gone, then exits.
	tail -s 0.2 -n +1 -f --pid=$qpid "$out" &
	tails+=($!)
	tail -s 0.2 -n +1 -f --pid=$qpid "$err" 1>&2 &
	tails+=($!)
fi
wait $qpid
qrc=$?
for p in "${tails[@]}"; do wait "$p"; done
[ -n "$contail" ] && { sleep 0.3; kill "$contail"; wait "$contail"; } 2>/dev/null
trap - INT TERM
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')

if [ $show = 0 ]; then
	cat "$out"
	cat "$err" >&2
fi

console=$(tr -d '\r' <"$log" 2>/dev/null)
dump() {
	say "last lines of L1's console ($log):"
	tail -n 30 <<<"$console" | sed 's/^/  | /' >&2
	[ -s "$rw/nested-qemu.log" ] && sed 's/^/  qemu: /' "$rw/nested-qemu.log" >&2
	[ -n "$cleanup" ] && cleanup= && say "kept $rw for inspection"
}
errline=$(grep -o 'CUBICLE-NESTED error: .*' <<<"$console" | head -n 1)
if [ -n "$errline" ]; then
	dump
	die "L1 failed: ${errline#CUBICLE-NESTED error: }"
fi
rc=$(grep -o 'CUBICLE-NESTED RC=[0-9]*' <<<"$console" | tail -n 1)
rc=${rc#CUBICLE-NESTED RC=}
if [ -z "$rc" ]; then
	dump
	[ $qrc = 124 ] || [ $qrc = 137 ] && die "L1 did not finish within ${timeout}s (no RC= marker on its console)"
	die "L1 ended (qemu status $qrc) without an RC= marker on its console"
fi
say "L1 done in ${secs}s, program exit status $rc"
exit "$rc"
