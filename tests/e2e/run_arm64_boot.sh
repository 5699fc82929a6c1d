#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Boots Debian's arm64 cloud kernel with the cross-built arm64 cubicle (2 vCPUs, 256 MiB, an 8250 UART on MMIO, a virtio-mmio disk whose content the guest hashes), nested inside qemu-system-aarch64 on x86, and checks what the guest reports, the boot-timer log and the exit status.
#
# With --panic the guest panics on purpose after its checks and cubicle must
# exit with status 3 (a PSCI SYSTEM_RESET2 warm reset: reboot=panic_warm).
# With --snapshot the guest counts instead, and a script in L1 snapshots the
# VM (its vCPUs' registers, the GICv3, the writable disk), kills it with
# SIGKILL, restores it in a new process (the count goes on) and rolls it
# back in place (the count goes back).
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh; CUBICLE_E2E_REQUIRE=1
# turns a skip into a failure). Environment, beside lib.sh's:
#   CUBICLE_ARM64          the arm64 binary (default: the first AArch64 one of
#                          $top_builddir/cubicle, $top_srcdir/build-arm64/cubicle,
#                          $top_builddir/build-arm64/cubicle); a "#!" script such
#                          as nested/qemu-standin.sh works too
#   CUBICLE_ARM64_PLUGINS  colon-separated plugin folders (default: the binary's
#                          build tree, plugins/devices/.libs and plugins/storage/.libs)
#   CUBICLE_ARM64_BOOT_TIMER  the boot-timer's guest-physical address, passed as
#                          cubicle.boot_timer= (default: none, and the guest
#                          takes the reg of its device tree's boot-timer@ node)
#   CUBICLE_E2E_MODE       direct (an arm64 host with KVM) or nested (default
#                          on any other host)
#   CUBICLE_ARCH           set by make check: anything but aarch64 skips (so an
#                          x86_64 build tree's make check leaves this test out)
#   CUBICLE_E2E_VERBOSE=1  drop "quiet" and add earlycon (slow under emulation)
# Fetch the kernels with scripts/fetch-guest.sh --arch aarch64.

E2E_NAME=run_arm64_boot
[ "${1:-}" = --snapshot ] && E2E_NAME=run_arm64_snapshot
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# A real arm64 kernel in L1 loads seccomp filters: the qemu-user setting of
# the cross build's make check (CUBICLE_SECCOMP=off) does not apply.
unset CUBICLE_SECCOMP
e2e_guest=$e2e_cache/guest/aarch64
panic=0 snapshot=0
[ "${1:-}" = --panic ] && panic=1
[ "${1:-}" = --snapshot ] && snapshot=1

if [ "${CUBICLE_E2E_SKIP:-0}" = 1 ]; then
	echo "SKIP: $e2e_name: CUBICLE_E2E_SKIP=1"
	exit 77
fi
# lib.sh's rule: make check in an x86_64 build tree skips arm64 guests.
if [ "${CUBICLE_ARCH:-aarch64}" != aarch64 ]; then
	echo "SKIP: $e2e_name: boots aarch64 guests; this build is for $CUBICLE_ARCH"
	exit 77
fi
srcdir=${abs_top_srcdir:-${top_srcdir:-$e2e_top}}
case $srcdir in /*) ;; *) srcdir=$PWD/$srcdir ;; esac
builddir=${abs_top_builddir:-${top_builddir:-$PWD}}
case $builddir in /*) ;; *) builddir=$PWD/$builddir ;; esac

# ---- ingredients -----------------------------------------------------------
is_a64() { # an AArch64 ELF: e_machine (offset 18) 183
	[ "$(head -c 4 "$1" | od -An -c | tr -d ' \n')" = '177ELF' ] &&
		[ "$(od -An -tu2 -j18 -N2 "$1" | tr -d ' ')" = 183 ]
}
bin=${CUBICLE_ARM64:-}
if [ -z "$bin" ]; then
	for b in "$builddir/cubicle" "$srcdir/build-arm64/cubicle" "$builddir/build-arm64/cubicle"; do
		[ -f "$b" ] && is_a64 "$b" && { bin=$b; break; }
	done
fi
[ -n "$bin" ] && [ -f "$bin" ] ||
	e2e_skip "no arm64 cubicle (build it in $srcdir/build-arm64 with ./configure --host=aarch64-linux-gnu, or set CUBICLE_ARM64)"
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac
bindir=$(dirname "$bin")
# A libtool wrapper script is not what we want: take the real binary.
if [ "$(head -c 2 "$bin")" = '#!' ] && grep -q 'libtool' "$bin" 2>/dev/null &&
   [ -f "$(dirname "$bin")/.libs/$(basename "$bin")" ]; then
	bin=$(dirname "$bin")/.libs/$(basename "$bin")
fi
[ "$(head -c 2 "$bin")" = '#!' ] || is_a64 "$bin" || e2e_skip "$bin is not an AArch64 binary"
plugin_args=()
if [ -n "${CUBICLE_ARM64_PLUGINS:-}" ]; then
	IFS=: read -ra pdirs <<<"$CUBICLE_ARM64_PLUGINS"
else
	pdirs=("$bindir/plugins/devices/.libs" "$bindir/plugins/storage/.libs")
fi
for d in "${pdirs[@]}"; do
	[ -d "$d" ] && plugin_args+=(--plugin-dir "$d")
done
[ "$(head -c 2 "$bin")" = '#!' ] || [ ${#plugin_args[@]} -gt 0 ] ||
	e2e_skip "no arm64 plugin folders (${pdirs[*]}): build plugins in the arm64 tree"
[ -s "$e2e_guest/vmlinuz" ] && [ -d "$e2e_guest/modules" ] && [ -s "$e2e_guest/busybox" ] ||
	e2e_skip "no arm64 guest kernel in $e2e_guest: run scripts/fetch-guest.sh --arch aarch64"

case ${CUBICLE_E2E_MODE:-} in
direct|nested) mode=$CUBICLE_E2E_MODE ;;
"") if [ "$(uname -m)" = aarch64 ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
	mode=direct; else mode=nested; fi ;;
*) echo "not ok - CUBICLE_E2E_MODE must be direct or nested"; exit 99 ;;
esac
if [ $mode = nested ]; then
	command -v qemu-system-aarch64 >/dev/null ||
		e2e_skip "qemu-system-aarch64 (for the nested harness) is missing: apt-get install qemu-system-arm"
	[ -s "$e2e_guest/nested/vmlinuz" ] ||
		e2e_skip "no arm64 L1 kernel in $e2e_guest/nested: run scripts/fetch-guest.sh --arch aarch64"
	timeout=${CUBICLE_E2E_TIMEOUT:-300}
else
	timeout=${CUBICLE_E2E_TIMEOUT:-60}
fi

e2e_work=$builddir/tests/e2e/$e2e_name.work
w=$e2e_work
rm -rf "$w" && mkdir -p "$w" || { echo "not ok - cannot create $w"; exit 99; }
echo "# $e2e_name: mode $mode, binary $bin, work folder $w"

# ---- the guest: initramfs, disk, config -----------------------------------
"$e2e_top/scripts/build-initramfs.sh" --busybox "$e2e_guest/busybox" \
	--init "$e2e_top/tests/e2e/guest-init-arm64.sh" \
	--modules "virtio virtio_ring virtio_mmio virtio_blk" \
	"$e2e_guest/modules" "$w/initramfs.cpio.gz" 2>"$w/initramfs.log" ||
	{ cat "$w/initramfs.log"; e2e_skip "cannot build the arm64 initramfs"; }

# The disk: 1 MiB of random data at offset 0 of a 2 MiB raw image.
disk_bytes=$((1 << 20))
head -c $disk_bytes /dev/urandom >"$w/payload.bin"
sha=$(sha256sum <"$w/payload.bin" | cut -d' ' -f1)
cp "$w/payload.bin" "$w/disk.img" && truncate -s 2M "$w/disk.img"

bt=${CUBICLE_ARM64_BOOT_TIMER:-}
cmdline="console=ttyS0 reboot=panic_warm panic=-1 quiet"
[ "${CUBICLE_E2E_VERBOSE:-0}" = 1 ] && cmdline="console=ttyS0 earlycon reboot=panic_warm panic=-1"
cmdline="$cmdline cubicle.disk_bytes=$disk_bytes cubicle.sha=$sha${bt:+ cubicle.boot_timer=$bt}"
[ $panic = 1 ] && cmdline="$cmdline cubicle.test=panic"
[ $snapshot = 1 ] && cmdline="$cmdline cubicle.test=tick"
mem_mib=256
cat >"$w/vm.cfg" <<EOF
# Written by $e2e_name: every path is absolute, so it means the same in L1.
log_level = "info";
machine = { vcpus = 2; memory_mib = $mem_mib; };
boot = {
  kernel = "$e2e_guest/vmlinuz";
  initrd = "$w/initramfs.cpio.gz";
  cmdline = "$cmdline";
};
devices = (
  { type = "serial8250"; id = "uart0"; console = "stdio"; },
  { type = "boot-timer"; id = "boot"; },
  { type = "virtio-blk"; id = "vda";
    backend = { type = "raw"; path = "$w/disk.img"; }; }
);
EOF

# ---- snapshot, kill, restore, roll back (--snapshot) -------------------------
if [ $snapshot = 1 ]; then
	[ $mode = nested ] || e2e_skip "--snapshot runs in the nested harness only"
	ctl=$bindir/tools/ctl/cubicle-ctl
	[ -f "$ctl" ] && is_a64 "$ctl" || e2e_skip "no arm64 cubicle-ctl in $bindir/tools/ctl"
	# Run by L1's busybox sh; the arm64 programs through the loader.
	cat >"$w/snap.sh" <<SCRIPT
#!/bin/sh
L="\$CUBICLE_ARM64_LOADER --library-path \$CUBICLE_ARM64_LIBRARY_PATH"
t=\$(mktemp -d) # sockets and the snapshot: not on the 9p share
w=$w
# (0 until the file exists: the background job's shell creates it)
ticks() { c=\$(grep -c 'CUBICLE-GUEST tick=' "\$1" 2>/dev/null); echo "\${c:-0}"; }
last() { tr -d '\\r' <"\$1" | sed -n 's/.*CUBICLE-GUEST tick=\\([0-9]*\\).*/\\1/p' | tail -n 1; }
wait_ticks() { # FILE N PID
	n=0
	while [ \$n -lt 1200 ] && [ "\$(ticks "\$1")" -lt "\$2" ] && kill -0 "\$3" 2>/dev/null; do
		sleep 0.2; n=\$((n + 1))
	done
	[ "\$(ticks "\$1")" -ge "\$2" ]
}
\$L $bin run ${plugin_args[*]} --api-sock \$t/a.sock \$w/vm.cfg >\$w/console.log 2>\$w/stderr.log &
pid=\$!
wait_ticks \$w/console.log 3 \$pid && echo booted=yes
\$L $ctl \$t/a.sock pause && echo pause=ok
echo snap_tick=\$(last \$w/console.log)
\$L $ctl \$t/a.sock snapshot \$t/snap && echo snapshot=ok
ls -ls \$t/snap | sed 's/^/# /'
kill -9 \$pid
wait \$pid 2>/dev/null
\$L $bin restore ${plugin_args[*]} --api-sock \$t/r.sock --set devices.vda.backend.path=\$t/disk2.img \$t/snap >\$w/restored.log 2>\$w/rstderr.log &
rpid=\$!
wait_ticks \$w/restored.log 3 \$rpid && echo restored=yes
\$L $ctl \$t/r.sock rollback \$t/snap && echo rollback=ok
n0=\$(ticks \$w/restored.log)
wait_ticks \$w/restored.log \$((n0 + 2)) \$rpid && echo rolled=yes
kill -TERM \$rpid
wait \$rpid
echo rc=\$?
SCRIPT
	start=$(date +%s.%N)
	"$e2e_top/tests/e2e/nested/run-nested.sh" --arch aarch64 --timeout $((timeout + 300)) \
		--cmd-timeout $((timeout + 120)) --rw "$w" -- "$w/snap.sh" >"$w/snap.log" 2>"$w/snap.err"
	echo "# snap.sh exit status $? after $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
	sed 's/^/# /' "$w/snap.log"
	v() { sed -n "s/^$1=//p" "$w/snap.log" | head -n 1; }
	tks() { tr -d '\r' <"$1" 2>/dev/null | sed -n 's/.*CUBICLE-GUEST tick=\([0-9]*\).*/\1/p'; }
	s=$(v snap_tick)
	first=$(tks "$w/restored.log" | head -n 1)
	# After the rollback: the first tick printed after the ones before it.
	after=$(tks "$w/restored.log" | awk -v s="$s" 'NR > 1 && $1 <= p { print; exit } { p = $1 }')
	# The UART may have been mid-line at the snapshot ("CUBICLE-GUEST ti" in
	# the first VM's log, "ck=6" in the restored one's): the first whole
	# tick is then one more.
	near() { [ -n "$s" ] && [ -n "$1" ] && [ "$1" -ge "$s" ] && [ "$1" -le $((s + 2)) ]; }
	goes_on() { near "$first"; }
	back() { near "$after"; }
	e2e_check "snapshot of the arm64 VM at tick ${s:-?} (vCPU registers, GICv3, disk)" grep -q '^snapshot=ok' "$w/snap.log"
	e2e_check "restored after SIGKILL: ticks go on from ${first:-none} (snapshot at ${s:-?})" goes_on
	e2e_check "rollback in place: ticks back to ${after:-none}" back
	e2e_check "SIGTERM ends the restored VM (143)" grep -q '^rc=143' "$w/snap.log"
	e2e_finish "$w/console.log" "$w/stderr.log" "$w/restored.log" "$w/rstderr.log" "$w/snap.err"
fi

# ---- boot --------------------------------------------------------------------
console=$w/console.log
stderr=$w/stderr.log
start=$(date +%s.%N)
if [ $mode = nested ]; then
	"$e2e_top/tests/e2e/nested/run-nested.sh" --arch aarch64 --timeout $((timeout + 180)) \
		--cmd-timeout "$timeout" --rw "$w" -- \
		"$bin" run "${plugin_args[@]}" "$w/vm.cfg" >"$console" 2>"$stderr"
else
	timeout -k 5 "$timeout" "$bin" run "${plugin_args[@]}" "$w/vm.cfg" >"$console" 2>"$stderr"
fi
rc=$?
echo "# exit status $rc after $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
[ $rc = 77 ] && [ $mode = nested ] && e2e_skip "the nested harness lacks an ingredient: $(grep 'run-nested: error' "$stderr" | tail -n 1)"
[ $rc = 99 ] && [ $mode = nested ] && sed -n 's/^run-nested: error: /# harness: /p' "$stderr"

cpus=$(e2e_marker "$console" cpus)
kib=$(e2e_marker "$console" mem_kib)
seen_cmdline=$(e2e_marker "$console" cmdline)
vda=$(e2e_marker "$console" vda_sha256)
want_kib=$((mem_mib * 1024))

mem_ok() { [ -n "$kib" ] && [ "$kib" -le $want_kib ] && [ "$kib" -ge $((want_kib - 8192)) ]; }
e2e_check "guest sees 2 cpus (got '${cpus}')" [ "$cpus" = 2 ]
e2e_check "guest RAM within 8 MiB below $mem_mib MiB (got '${kib}' KiB)" mem_ok
e2e_check "guest cmdline is the configured one" [ "$seen_cmdline" = "$cmdline" ]
e2e_check "guest read the disk file's sha256 (got '${vda}')" [ "$vda" = "$sha" ]
e2e_check "guest verified the disk file" [ "$(e2e_marker "$console" disk_ok)" = yes ]
e2e_check "guest init reached ready" grep -q 'CUBICLE-GUEST ready' "$console"
e2e_check "guest found the boot-timer (got '$(e2e_marker "$console" boot_timer)')" \
	[ "$(e2e_marker "$console" boot_timer)" != none ]
e2e_check "boot-timer logged boot done" grep -Eq 'boot-timer\[boot\].*boot done' "$stderr"
if [ $panic = 1 ]; then
	e2e_check "guest kernel panicked" grep -q 'Kernel panic' "$console"
	e2e_check "exit status 3 after a guest panic (got $rc)" [ $rc = 3 ]
else
	e2e_check "exit status 0 after reboot -f (got $rc)" [ $rc = 0 ]
fi
e2e_finish "$console" "$stderr"
