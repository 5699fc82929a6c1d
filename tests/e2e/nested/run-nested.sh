#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs one command inside an L1 Linux VM under QEMU software emulation, where L1 has a working /dev/kvm, and returns the command's exit code.
#
# Usage: tests/e2e/nested/run-nested.sh [--arch x86_64|aarch64] [--timeout S]
#            [--boot-timeout S] [--cmd-timeout S] [--rw DIR] [--show] [--smp N]
#            [--mem MIB] -- COMMAND [ARG...]
#        tests/e2e/nested/run-nested.sh [--arch ARCH] --prepare
#
# --arch (default: this host's, uname -m) picks L1:
#   x86_64   qemu-system-x86_64 -M q35 -cpu max,-erms: TCG emulates AMD SVM,
#            so L1's kvm-amd gives a real /dev/kvm
#   aarch64  qemu-system-aarch64 -M virt,virtualization=on: L1 runs at EL2
#            and its built-in KVM works
# Kernels and busybox come from scripts/fetch-guest.sh [--arch aarch64]; L1's
# initramfs (/init: l1-init.sh) is built beside its kernel on first use and
# rebuilt when stale. --prepare only does that (fetch-guest.sh calls it).
#
# L1 sees the host's / read-only over 9p (chrooted into it, same paths) and DIR
# read-write at the same path (default: a temporary folder, removed afterwards).
# /run and /dev/shm are tmpfs inside L1 (TMPDIR=/run/tmp); /tmp is the host's,
# read-only; HOME points at a tmpfs folder whose entries link back to the real
# home (so ~/.cache is still readable), and XDG_CACHE_HOME at an empty tmpfs
# folder (cubicle keeps its caches there). The environment and working directory
# are carried over. COMMAND's stdout and stderr land in DIR/nested-stdout and
# DIR/nested-stderr and are then replayed on this script's stdout and stderr
# (with --show: streamed while it runs); L1's console is DIR/nested-console.log.
#
# On x86_64 COMMAND runs under the host's bash. On aarch64 the host's x86
# programs cannot run, so COMMAND is started according to its kind:
#   a dynamically linked arm64 ELF  through the host's arm64 loader:
#       LOADER --library-path LIBPATH COMMAND ARG...
#     (its /proc/self/exe is then the loader: pass cubicle --plugin-dir)
#   a static arm64 ELF              directly
#   a "#!" script                   with L1's arm64 busybox: /run/busybox sh
#     COMMAND ARG... (the script finds LOADER and LIBPATH in the environment
#     as CUBICLE_ARM64_LOADER and CUBICLE_ARM64_LIBRARY_PATH)
# and busybox's applets (/run/bin) come first on PATH. LOADER:
# $CUBICLE_ARM64_LOADER, else the first of /lib/ld-linux-aarch64.so.1
# (multiarch libc6:arm64), /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1
# (libc6-arm64-cross), the sysroot's. LIBPATH: the loader's folder, then
# $CUBICLE_ARM64_LIBRARY_PATH, then the sysroot's (${CUBICLE_ARM64_SYSROOT:-
# $CUBICLE_CACHE/sysroot-arm64}) and the host's multiarch folders.
#
# --timeout S (default 600 x86_64, 900 aarch64) bounds the whole L1 run;
# --cmd-timeout S bounds COMMAND itself inside L1; --boot-timeout S (default
# 300, or $CUBICLE_NESTED_BOOT_TIMEOUT) bounds L1's boot up to the moment
# COMMAND starts. 45 s before --timeout (when it is 120 s or more) L1 dumps
# every user thread's state, wait channel, system call and kernel stack, its
# blocked tasks and its CPUs' backtraces to its console; a run that ends
# without an RC= marker prints that dump and the L1 kernel's own reports.
# One retry, logged: when L1 never started COMMAND (its kernel panicked,
# reset or hung before /init got that far), or when L1's own kernel wedged
# while COMMAND ran (a CPU of L1 reported stuck for 2 minutes: L1's kernel
# stopped making progress, which neither the command nor a guest inside L1
# can cause short of an L1 kernel bug), or when L1 froze (its heartbeat, a
# console line every 10 s from a sleep loop, stopped for a minute and a key
# press did not bring it back: its timer interrupts stopped, which no program
# in L1 can cause), the fault is the emulator's, not the command's, and L1
# boots once more (the first console is kept as DIR/nested-console.try1.log).
# A frozen L1 that the key press wakes goes on; the run then says so
# ("emulator stall") and DIR/nested-l0-freeze.log has its local APIC's state.
# A command that fails, times out or crashes on its own is never retried.
#
# Exit status: COMMAND's, or 77 when an ingredient is missing (run
# scripts/fetch-guest.sh [--arch aarch64]; apt-get install qemu-system-x86 or
# qemu-system-arm), or 99 when the harness itself failed (no KVM in L1, time
# limit, no RC= marker). CUBICLE_NESTED_VERBOSE=1 streams L1's console;
# CUBICLE_NESTED_CPU overrides -cpu (qemu64,-svm tests the no-KVM path),
# CUBICLE_NESTED_TCG -accel (default tcg), CUBICLE_NESTED_SMP L1's vCPUs (like
# --smp; default 1 on x86_64, see below, 2 on aarch64), CUBICLE_NESTED_FREEZE_S
# how long L1 may send no heartbeat before it is probed as frozen (default
# 60, six beats; the probe is a key press, harmless to a live L1; see boot_l1).

set -uo pipefail
freeze_s=${CUBICLE_NESTED_FREEZE_S:-60}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../../.." && pwd)
cache=${CUBICLE_CACHE:-${HOME:?HOME is not set}/.cache/cubicle}
arch=$(uname -m)
timeout='' boot_timeout=${CUBICLE_NESTED_BOOT_TIMEOUT:-300} cmd_timeout=''
rw='' smp=${CUBICLE_NESTED_SMP:-} mem='' show=0 prepare=0
usage="usage: run-nested.sh [--arch x86_64|aarch64] [--timeout S] [--boot-timeout S] [--cmd-timeout S] [--rw DIR] [--show] [--smp N] [--mem MIB] -- COMMAND [ARG...] | [--arch ARCH] --prepare"

say() { printf 'run-nested: %s\n' "$*" >&2; }
die() { printf 'run-nested: error: %s\n' "$1" >&2; exit "${2:-99}"; }

while [ $# -gt 0 ]; do
	case $1 in
	--arch) arch=${2:?--arch needs x86_64 or aarch64}; shift ;;
	--arch=*) arch=${1#--arch=} ;;
	--timeout) timeout=${2:?--timeout needs seconds}; shift ;;
	--boot-timeout) boot_timeout=${2:?--boot-timeout needs seconds}; shift ;;
	--cmd-timeout) cmd_timeout=${2:?--cmd-timeout needs seconds}; shift ;;
	--rw) rw=${2:?--rw needs a folder}; shift ;;
	--show) show=1 ;;
	--prepare) prepare=1 ;;
	--smp) smp=${2:?}; shift ;;
	--mem) mem=${2:?}; shift ;;
	--) shift; break ;;
	-h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
	*) die "unknown option '$1' ($usage)" ;;
	esac
	shift
done
[ $# -gt 0 ] || [ $prepare = 1 ] || die "no command given ($usage)"

# ---- what differs between the two L1s --------------------------------------
gdir=$cache/guest/$arch
l1dir=$gdir/nested
case $arch in
x86_64|amd64)
	arch=x86_64
	qemu=qemu-system-x86_64 qpkg=qemu-system-x86 fetch=scripts/fetch-guest.sh
	# -erms: without "enhanced REP MOVSB/STOSB" L1's and L2's kernels clear
	# pages with rep stosq (8 bytes a step) and glibc's memset and memcpy
	# use vector stores, where with it they use rep stosb / rep movsb,
	# which the emulator runs one byte per step (~4.5 MB/s clearing pages:
	# Debian's kernels zero every page they allocate). Measured with
	# bench/microvm.sh (stock kernel + initramfs to the init's marker,
	# median of 5): cubicle's boot 6.3 s -> 3.0 s, QEMU microvm's 11.0 s ->
	# 7.9 s. On hardware ERMS is fast; here it was the larger part, and the
	# noisiest, of every nested Linux boot. (Like pauth-impdef=on below.)
	machine=(-M q35 -cpu "${CUBICLE_NESTED_CPU:-max,-erms}")
	# One vCPU in L1 (--smp, CUBICLE_NESTED_SMP). With two, each on its own
	# emulator thread (QEMU 7.2's MTTCG), L1 froze now and then (six times
	# on 2026-12-01, and in 2 of 2 ASan payload runs beside another nested
	# test): both L1 CPUs looped for good in exc_int3 ->
	# kprobe_int3_handler ("the breakpoint was removed right after we hit
	# it": rewind RIP, return) with interrupts off, so L1 printed nothing,
	# not even lockup reports. A CPU kept re-running a stale translation
	# of an INT3 that the other had written and removed again while
	# patching kernel text (static keys KVM flips as VMs come and go): the
	# emulator's cross-thread code invalidation, not L1 or cubicle. With one
	# vCPU no other thread runs L1's code. Both vCPUs on one thread
	# (thread=single) cured that too, but its 100 ms turns made a 2-vCPU
	# Linux guest in L1 crawl; one L1 vCPU boots it as fast as two did
	# (run_boot: 21 s against 20 s).
	: "${smp:=1}"
	# no_timer_check: at boot the kernel checks that the PIT's IRQ 0 reaches
	# the IO-APIC by counting ticks across a short busy wait. With the
	# emulator's vCPU thread starved by other load the ticks arrive late and
	# L1 panics ("IO-APIC + timer doesn't work!") before /init. The check
	# guards against broken firmware, which QEMU's is not.
	# nokaslr: L1's kernel addresses (in the L0 dump's registers) are
	# then the same every boot and can be looked up once. unknown_nmi_panic
	# and panic_print=0x40: the NMI that l0_dump sends a stalled L1 makes
	# it panic with a backtrace of every CPU (even one that runs with
	# interrupts disabled).
	kargs="console=ttyS0 no_timer_check nokaslr unknown_nmi_panic panic_print=0x40"
	mods="virtio_pci 9pnet_virtio 9p kvm-amd"
	busybox='' nestsh=bash
	: "${timeout:=600}" "${mem:=3072}" ;;
aarch64|arm64)
	arch=aarch64
	qemu=qemu-system-aarch64 qpkg=qemu-system-arm fetch="scripts/fetch-guest.sh --arch aarch64"
	# pauth-impdef=on: Debian's kernel signs every return address; the
	# architected algorithm is about 3x slower to emulate.
	machine=(-M virt,virtualization=on,gic-version=3 -cpu "${CUBICLE_NESTED_CPU:-max,pauth-impdef=on}")
	kargs="console=ttyAMA0 rdinit=/init"
	mods="virtio_pci 9pnet_virtio 9p" # KVM is built in
	busybox=$gdir/busybox nestsh=busybox
	: "${smp:=2}" "${timeout:=900}" "${mem:=2048}" ;;
*) die "unknown --arch '$arch' (x86_64 or aarch64)" ;;
esac
[ "$boot_timeout" -le "$timeout" ] || boot_timeout=$timeout
tcg=${CUBICLE_NESTED_TCG:-tcg}

[ $prepare = 1 ] || command -v $qemu >/dev/null || die "$qemu not found (apt-get install $qpkg)" 77
[ -s "$l1dir/vmlinuz" ] && [ -d "$l1dir/modules" ] ||
	die "no $arch L1 kernel in $l1dir: run $fetch" 77
[ -z "$busybox" ] || [ -s "$busybox" ] || die "no $arch busybox in $gdir: run $fetch" 77

# ---- the L1 initramfs: cached beside its kernel, rebuilt when its sources change
# The cache is shared by every checkout on this machine: compare the /init
# inside it with ours rather than trusting timestamps, so that another
# checkout's older l1-init.sh never boots under this harness.
l1init=$here/l1-init.sh
initrd=$l1dir/l1-initramfs.cpio.gz
same_init() { gzip -dc "$initrd" 2>/dev/null | cpio -i --quiet --to-stdout init 2>/dev/null | cmp -s - "$l1init"; }
if [ ! -s "$initrd" ] || ! same_init ||
   { [ -n "$busybox" ] && [ "$busybox" -nt "$initrd" ]; } ||
   [ "$top/scripts/build-initramfs.sh" -nt "$initrd" ]; then
	say "building $initrd"
	"$top/scripts/build-initramfs.sh" ${busybox:+--busybox "$busybox"} --init "$l1init" \
		--modules "$mods" "$l1dir/modules" "$initrd" ||
		die "building the L1 initramfs failed"
fi
[ $prepare = 1 ] && exit 0

# ---- aarch64: how COMMAND starts inside L1 ----------------------------------
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; } # POSIX single quoting: bash and ash
launch=() # words put before COMMAND, already quoted
if [ $arch = aarch64 ]; then
	sysroot=${CUBICLE_ARM64_SYSROOT:-$cache/sysroot-arm64}
	prog=$1
	case $prog in /*) ;; *) prog=$(command -v "$prog" 2>/dev/null || echo "$PWD/$prog") ;; esac
	[ -f "$prog" ] || die "$1: no such file" 77
	case $prog in /*) ;; *) prog=$PWD/$prog ;; esac
	shift
	set -- "$prog" "$@"
	magic=$(head -c 4 "$prog" | od -An -c | tr -d ' \n')
	case $magic in
	'177ELF')
		# e_machine (offset 18, little-endian) 0xb7 = AArch64; a PT_INTERP
		# program header means dynamically linked.
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
	case $kind in
	dynamic) launch=("$(q "$loader")" --library-path "$(q "$libpath")") ;;
	script) launch=(/run/busybox sh) ;;
	esac
	[ -n "$cmd_timeout" ] && launch=(/run/busybox timeout "$(q "$cmd_timeout")" "${launch[@]}")
elif [ -n "$cmd_timeout" ]; then
	launch=(timeout -k 5 "$(q "$cmd_timeout")")
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

# ---- the script L1 runs, chrooted into the host root -------------------------
script=$rw/nested-cmd.sh
log=$rw/nested-console.log
out=$rw/nested-stdout err=$rw/nested-stderr
{
	echo "# Generated by run-nested.sh: run inside the $arch L1 (chrooted into the host root) by $nestsh."
	for v in $(compgen -e); do
		case $v in PWD|OLDPWD|SHLVL|_|TMPDIR|HOME|TERM|BASH_*|BASHOPTS|SHELLOPTS) continue ;; esac
		printf 'export %s=%s\n' "$v" "$(q "${!v}")"
	done
	if [ $arch = aarch64 ]; then
		printf 'export BUSYBOX=/run/busybox CUBICLE_ARM64_LOADER=%s CUBICLE_ARM64_LIBRARY_PATH=%s\n' \
			"$(q "$loader")" "$(q "$libpath")"
		# Busybox applets come first on PATH: the host's own tools are x86.
		printf '/run/busybox mkdir -p /run/bin && /run/busybox --install -s /run/bin\n'
		printf 'export PATH=/run/bin${PATH:+:$PATH}\n'
	fi
	printf 'export TMPDIR=/run/tmp XDG_RUNTIME_DIR=/run/user\n'
	printf 'mkdir -p /run/user /run/home && export HOME=/run/home\n'
	# cubicle's cache (KVM's CPUID table, compiled seccomp filters) where
	# it can be written, as on a host: under the read-only home each start
	# made again what was missing there (49 ms of a start in L1)
	printf 'mkdir -p /run/xdg-cache && export XDG_CACHE_HOME=/run/xdg-cache\n'
	if [ -n "${HOME:-}" ] && [ "$HOME" != / ]; then
		printf 'for e in %s/.[!.]* %s/*; do [ -e "$e" ] && ln -s "$e" /run/home/; done\n' "$(q "$HOME")" "$(q "$HOME")"
	fi
	printf 'cd %s || exit 99\n' "$(q "$PWD")"
	printf 'exec </dev/null >>%s 2>>%s\n' "$(q "$out")" "$(q "$err")"
	printf 'exec'
	for a in "${launch[@]}"; do printf ' %s' "$a"; done
	for a in "$@"; do printf ' %s' "$(q "$a")"; done
	echo
} >"$script"

# 45 s before the time limit L1 dumps its tasks and CPUs to the console (see
# l1-init.sh), which dump() below prints when no RC= marker came. loglevel=4:
# errors reach the console too (hung tasks, RCU stalls), not only panics.
dumpat=
[ "$timeout" -ge 120 ] && dumpat=$((timeout - 45))
args=(-accel "$tcg" "${machine[@]}" -smp "$smp" -m "$mem"
	-nodefaults -no-user-config -display none -monitor "pipe:$rw/nested-monitor" -no-reboot
	-serial "file:$log"
	-kernel "$l1dir/vmlinuz" -initrd "$initrd"
	-append "$kargs panic=-1 quiet loglevel=4 mitigations=off nestcmd=$script nestrw=$rw nestsh=$nestsh${dumpat:+ nestdump=$dumpat}"
	-virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap
	-virtfs "local,path=$rw,mount_tag=work,security_model=none,multidevs=remap")

# The monitor (HMP) on two FIFOs: l0_dump asks it what L1's CPUs are doing.
# QEMU opens both ends itself; nothing is written to .out but the answers to
# l0_dump's questions (and the banner), far below a FIFO's 64 KiB.
rm -f "$rw/nested-monitor.in" "$rw/nested-monitor.out"
mkfifo "$rw/nested-monitor.in" "$rw/nested-monitor.out" || die "mkfifo in $rw failed"

# thread_use PID: how much CPU each of the process's threads used over 2 s
# (a vCPU that spins in a guest, or none that runs at all), state and wait.
thread_use() {
	local pid=$1 t a b
	declare -A ticks0
	for t in /proc/$pid/task/*; do
		read -r a <"$t/stat" 2>/dev/null && a=${a##*) } && set -- $a && ticks0[${t##*/}]=$((${12} + ${13}))
	done
	sleep 2
	for t in /proc/$pid/task/*; do
		read -r a <"$t/stat" 2>/dev/null || continue
		a=${a##*) }
		set -- $a
		b=$((${12} + ${13} - ${ticks0[${t##*/}]:-0}))
		echo "  thread ${t##*/} $(cat "$t/comm") state $1: $b ticks in 2 s, wchan $(cat "$t/wchan" 2>/dev/null)"
	done
}

# monitor_ask CMDS: CMDS (printf's escapes: \n between commands) to the
# monitor, its answers (general registers only, not FPU/SSE/debug) indented.
monitor_ask() {
	timeout 5 sh -c 'printf "$2" >"$1"' sh "$rw/nested-monitor.in" "$1" &
	timeout 5 cat "$rw/nested-monitor.out" | tr -d '\r' | grep -v -a -E $'^$|\e|^(FPR|YMM|XMM|FCW|DR[0-9])' | sed 's/^/  /'
}

# l0_dump: seen from outside L1, just before the time limit: how much CPU
# each QEMU thread used over 2 s (a vCPU that spins in a guest, or none that
# runs at all), then each L1 CPU's registers from the monitor (in a guest
# of L1's, or in L1's kernel: where it stopped). Written to nested-l0.log.
l0_dump() {
	local qemu_pid
	qemu_pid=$(pgrep -P "$qpid" | head -n 1)
	[ -n "$qemu_pid" ] || return 0
	{
		echo "L0 view at $(date +%T), ${SECONDS}s into the run, QEMU pid $qemu_pid"
		thread_use "$qemu_pid"
		echo "monitor:"
		# The general registers (not FPU/SSE/debug) and the next
		# instructions of each CPU, as that CPU sees memory (a guest's,
		# when it is in one).
		monitor_ask "info cpus\ninfo registers -a\ncpu 0\nx/4i \$pc\ncpu 1\nx/4i \$pc\n$([ "$arch" = x86_64 ] && echo 'info lapic\n')"
		echo "(monitor read ended)"
		# Then an NMI: on x86 L1 panics with every CPU's backtrace on its
		# console (unknown_nmi_panic, panic_print), which dump() prints.
		if [ "$arch" = x86_64 ] && timeout 5 sh -c 'echo nmi >"$1"' sh "$rw/nested-monitor.in"; then
			echo "(sent an NMI)"
		fi
	} >"$rw/nested-l0.log" 2>&1
}

# freeze_probe: L1 sent no heartbeat for a while (l1-init.sh's "beat" every
# 10 s). Its CPU's local APIC (timer armed? an interrupt pending, or stuck in
# service?) and the QEMU threads' CPU use over 2 s go to nested-l0-freeze.log, then a
# key press: an interrupt that wakes a CPU halted with its timer lost.
freeze_probe() {
	local qemu_pid
	qemu_pid=$(pgrep -P "$qpid" | head -n 1)
	{
		echo "L1 sent no heartbeat for $1 s (at $(date +%T), ${SECONDS}s into the run)"
		thread_use "$qemu_pid"
		echo "monitor:"
		monitor_ask "info cpus\n$([ "$arch" = x86_64 ] && echo 'info lapic\ninfo registers\n')sendkey shift\n"
		echo "(monitor read ended; a key press sent)"
	} >>"$rw/nested-l0-freeze.log" 2>&1
}

# boot_l1: one L1 run. Sets qrc (timeout/QEMU's status), hung (1 when L1 did
# not start COMMAND within boot_timeout and was stopped), secs and boot_secs
# (until COMMAND started, with the 0.5 s resolution of the watch).
boot_l1() {
	local t0 contail='' tails=() started=0 deadline=$((SECONDS + boot_timeout)) p
	local l0at=$((SECONDS + timeout - 15)) l0done=0
	local beats=0 n beat_at=0 nudged=0
	boot_secs='?'
	rm -f "$log" "$out" "$err" "$rw/nested-l0.log" "$rw/nested-seccomp.log"
	[ "$try" = 1 ] && rm -f "$rw/nested-l0-freeze.log" # a retry adds to it
	: >"$log"; : >"$out"; : >"$err" # L1 appends, so a live tail never sees a truncation
	hung=0
	wedged= revived=
	t0=$(date +%s.%N)
	if [ "${CUBICLE_NESTED_VERBOSE:-0}" = 1 ]; then
		tail -s 0.2 -n +1 -F "$log" 1>&2 2>/dev/null &
		contail=$!
	fi
	timeout -k 10 "$timeout" $qemu "${args[@]}" </dev/null >"$rw/nested-qemu.log" 2>&1 &
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
	# Watch the boot: L1 must reach "start" (or report an error) in time.
	while kill -0 $qpid 2>/dev/null; do
		if [ $started = 0 ]; then
			if grep -q 'CUBICLE-NESTED \(start\|error\)' "$log"; then
				started=1 beat_at=$SECONDS
				boot_secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
			elif [ $SECONDS -ge $deadline ]; then
				hung=1
				kill $qpid 2>/dev/null # timeout passes it on to QEMU
			fi
		elif ! grep -q 'CUBICLE-NESTED RC=' "$log"; then
			# A CPU of L1 stuck for 2 minutes: L1 stopped making progress
			# (a shorter report can be a busy host's passing stall).
			[ -z "$wedged" ] && wedged=$(grep -o 'soft lockup - CPU#[0-9]* stuck for [0-9]*s! \[[^]]*\]' "$log" |
				awk -F'stuck for ' '{ split($2, a, "s"); if (a[1] + 0 >= 120) { print; exit } }')
			[ -n "$wedged" ] && kill $qpid 2>/dev/null
			# L1's heartbeat stopped, or never came (counted from
			# COMMAND's start: the initramfs is always this tree's
			# l1-init.sh, which beats every 10 s; on 2026-12-06 L1
			# froze 9 s into its run, before its first beat, and
			# only the time limit ended it, 12 minutes on): its
			# timers stopped firing. Seen
			# once (2026-12-04, a busy host, 11 minutes into a run):
			# L1's only CPU halted with interrupts on for good, even
			# l1-init.sh's 5 s sleeps never ended, no lockup report
			# (that needs a timer too), an NMI still got in. No program
			# in L1 can do that: a timer interrupt was lost under it
			# (the emulator's SVM or APIC, or L1's kernel).
			# After $freeze_s (60) s, the probe and a key press; a beat
			# within 35 s after it: L1 lives on (said once the run is
			# over), else it is stopped as wedged (retried once, below).
			n=$(grep -c 'CUBICLE-NESTED beat' "$log")
			if [ "$n" != "$beats" ]; then
				[ $nudged = 1 ] && revived="L1 sent no heartbeat for $((SECONDS - beat_at)) s; a key press woke it (the probe: $rw/nested-l0-freeze.log)"
				beats=$n beat_at=$SECONDS nudged=0
			elif [ $nudged = 0 ] && [ $((SECONDS - beat_at)) -ge $freeze_s ]; then
				nudged=1
				freeze_probe $((SECONDS - beat_at))
			elif [ $nudged = 1 ] && [ $((SECONDS - beat_at)) -ge $((freeze_s + 35)) ]; then
				wedged="L1 froze: no heartbeat for $((SECONDS - beat_at)) s, and a key press did not wake it (the probe: $rw/nested-l0-freeze.log)"
				kill $qpid 2>/dev/null
			fi
			# 15 s before the limit, the view from outside L1 too.
			[ $l0done = 0 ] && [ $SECONDS -ge $l0at ] && { l0done=1; (l0_dump); }
		fi
		sleep 0.5
	done
	wait $qpid
	qrc=$?
	for p in "${tails[@]}"; do wait "$p"; done
	[ -n "$contail" ] && { sleep 0.3; kill "$contail"; wait "$contail"; } 2>/dev/null
	trap - INT TERM
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# emulator_fault: why L1 never started COMMAND, when that is the emulator's
# fault (printed; status 0), else status 1. A QEMU that exits non-zero by
# itself (a bad option, a missing file) fails the same way twice: no retry.
emulator_fault() {
	local panic
	if [ -n "$wedged" ]; then
		echo "L1's kernel stopped making progress while the command ran ($wedged)"
		return 0
	fi
	grep -q 'CUBICLE-NESTED \(start\|error\)' <<<"$console" && return 1
	panic=$(grep -m 1 -o 'Kernel panic.*' <<<"$console")
	case $panic in
	# A broken initramfs or /init: the harness's own bug, the same every time.
	*"No working init"*|*"Attempted to kill init"*|*"Unable to mount root"*) return 1 ;;
	esac
	if [ -n "$panic" ]; then
		echo "L1's kernel panicked before running the command: $panic"
	elif [ $hung = 1 ]; then
		grep -q 'CUBICLE-NESTED init' <<<"$console" &&
			echo "L1's /init did not start the command within ${boot_timeout}s" ||
			echo "L1's kernel did not reach /init within ${boot_timeout}s"
	elif [ $qrc = 0 ]; then
		echo "L1 reset before running the command (no panic message)"
	else
		return 1
	fi
}

say "booting $arch L1 (timeout ${timeout}s): $*"
try=1
while :; do
	boot_l1
	console=$(tr -d '\r' <"$log" 2>/dev/null)
	[ $try = 1 ] && why=$(emulator_fault) || break
	mv -f "$log" "$rw/nested-console.try1.log"
	say "emulator failure (not the command's); retrying once:" \
		"$why (after ${secs}s; first console kept as $rw/nested-console.try1.log)"
	[ -n "$cleanup" ] && cleanup= && say "kept $rw for inspection"
	try=2
done

[ -n "$revived" ] && say "emulator stall: $revived"
if [ $show = 0 ]; then
	cat "$out"
	cat "$err" >&2
fi
# seccomp events L1's kernel logged (cubicle --seccomp=log, or
# CUBICLE_SECCOMP=log in the environment): the calls a filter would refuse.
if [ -s "$rw/nested-seccomp.log" ]; then
	say "L1's kernel logged seccomp events (system calls outside cubicle's allow-lists):"
	sed 's/^/  /' "$rw/nested-seccomp.log" >&2
fi

dump() {
	local first
	# The L1 kernel's own reports (hung tasks, RCU stalls, lockups, oopses)
	# and its stall dump, in full: they say where a silent stall was.
	first=$(grep -n -m 1 -E 'INFO: task .* blocked|rcu: INFO|detected stalls|soft lockup|BUG: |WARNING: |Oops|Kernel panic|NMI received|Uhhuh' <<<"$console" | cut -d: -f1)
	if [ -n "$first" ]; then
		say "L1's kernel reported (console from line $first, 300 lines at most):"
		sed -n "$first,\$p" <<<"$console" | sed '/CUBICLE-NESTED stall dump:/,/CUBICLE-NESTED stall dump end/d' | head -n 300 | sed 's/^/  | /' >&2
	fi
	if grep -q 'CUBICLE-NESTED stall dump:' <<<"$console"; then
		say "L1's stall dump, ${dumpat}s after its boot (every user thread, then sysrq w and l):"
		sed -n '/CUBICLE-NESTED stall dump:/,/CUBICLE-NESTED stall dump end/p' <<<"$console" |
			head -n 600 | sed 's/^/  | /' >&2
	fi
	say "last lines of L1's console ($log):"
	grep -v 'CUBICLE-NESTED beat' <<<"$console" | tail -n 30 | sed 's/^/  | /' >&2
	if [ -s "$rw/nested-l0.log" ]; then
		say "L1 seen from outside, 15 s before the limit ($rw/nested-l0.log):"
		head -n 200 "$rw/nested-l0.log" | sed 's/^/  l0: /' >&2
	fi
	if [ -s "$rw/nested-l0-freeze.log" ]; then
		say "L1's heartbeat stopped ($rw/nested-l0-freeze.log):"
		head -n 80 "$rw/nested-l0-freeze.log" | sed 's/^/  l0: /' >&2
	fi
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
	[ $try = 2 ] && why=$(emulator_fault) && die "$why (again, on the retry)"
	[ $qrc = 124 ] || [ $qrc = 137 ] && die "L1 did not finish within ${timeout}s (no RC= marker on its console)"
	grep -q 'sent an NMI' "$rw/nested-l0.log" 2>/dev/null &&
		die "L1 did not finish within ${timeout}s (no RC= marker; stopped by the harness's NMI, above)"
	die "L1 ended (qemu status $qrc) without an RC= marker on its console"
fi
say "L1 done in ${secs}s (booted in ${boot_secs}s$([ $try = 2 ] && echo ', second boot')), command exit status $rc"
exit "$rc"
