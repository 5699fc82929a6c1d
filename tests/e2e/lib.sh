# SPDX-License-Identifier: Apache-2.0
# Shared helpers for the Linux-guest end-to-end tests: find the binary and the cached kernels, boot directly or through the nested harness, and report TAP-like checks.
# shellcheck shell=sh
#
# Source it from a test script (POSIX sh or bash). Environment it honours:
#   CUBICLE                the binary (default: $top_builddir/cubicle, else ./cubicle)
#   CUBICLE_CACHE          the kernel cache (default ~/.cache/cubicle)
#   CUBICLE_E2E_MODE       force "direct" or "nested" instead of detecting
#   CUBICLE_E2E_REQUIRE=1  a missing ingredient fails the test instead of skipping (CI)
#   CUBICLE_E2E_SKIP=1     skip every e2e test (e.g. inside make distcheck)
#   CUBICLE_E2E_TIMEOUT    seconds allowed for the VMM itself (default 60 direct, 240 nested)
#   CUBICLE_ARCH           the build's arch (make check sets it); a test whose
#                          E2E_ARCH (default x86_64) differs skips, whatever REQUIRE says

# The source tree: from bash's own record of this file, else by walking up
# from the calling script until tests/e2e/lib.sh appears.
e2e_top=
if [ -n "${BASH_VERSION:-}" ]; then
	eval 'e2e_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)'
fi
if [ -z "$e2e_top" ]; then
	e2e_top=$(cd "$(dirname "$0")" && pwd)
	while [ "$e2e_top" != / ] && [ ! -f "$e2e_top/tests/e2e/lib.sh" ]; do
		e2e_top=$(dirname "$e2e_top")
	done
fi
e2e_name=${E2E_NAME:-$(basename "${0%.sh}")}
e2e_cache=${CUBICLE_CACHE:-${HOME:-/root}/.cache/cubicle}
e2e_guest=$e2e_cache/guest/x86_64
e2e_failed=0

# e2e_skip MESSAGE: exit 77 (automake SKIP), or 1 when CUBICLE_E2E_REQUIRE=1.
e2e_skip() {
	if [ "${CUBICLE_E2E_REQUIRE:-0}" = 1 ]; then
		echo "not ok - $e2e_name: required but cannot run: $*"
		exit 1
	fi
	echo "SKIP: $e2e_name: $*"
	exit 77
}

# True when this host's KVM can boot a stock kernel itself: hardware
# virtualization and not PVM (which runs only VMM-built payloads).
e2e_can_boot_direct() {
	grep -qwE 'vmx|svm' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ] &&
		[ -r /dev/kvm ] && [ -w /dev/kvm ]
}
host_boots_linux() { e2e_can_boot_direct; }

# e2e_init: choose the mode, check every ingredient, make $e2e_work.
e2e_init() {
	if [ "${CUBICLE_E2E_SKIP:-0}" = 1 ]; then
		echo "SKIP: $e2e_name: CUBICLE_E2E_SKIP=1"
		exit 77
	fi
	if [ "${CUBICLE_ARCH:-x86_64}" != "${E2E_ARCH:-x86_64}" ]; then
		echo "SKIP: $e2e_name: boots ${E2E_ARCH:-x86_64} guests; this build is for $CUBICLE_ARCH"
		exit 77
	fi
	case ${CUBICLE_E2E_MODE:-} in
	direct|nested) e2e_mode=$CUBICLE_E2E_MODE ;;
	"") if e2e_can_boot_direct; then e2e_mode=direct; else e2e_mode=nested; fi ;;
	*) echo "not ok - CUBICLE_E2E_MODE must be direct or nested"; exit 99 ;;
	esac
	e2e_builddir=${abs_top_builddir:-${top_builddir:-$PWD}}
	case $e2e_builddir in /*) ;; *) e2e_builddir=$PWD/$e2e_builddir ;; esac
	CUBICLE=${CUBICLE:-$e2e_builddir/cubicle}
	case $CUBICLE in /*) ;; *) CUBICLE=$PWD/$CUBICLE ;; esac
	[ -x "$CUBICLE" ] || e2e_skip "$CUBICLE is not built"
	[ -s "$e2e_guest/vmlinuz" ] && [ -s "$e2e_guest/initramfs.cpio.gz" ] ||
		e2e_skip "no guest kernel in $e2e_guest: run scripts/fetch-guest.sh"
	if [ $e2e_mode = nested ]; then
		command -v qemu-system-x86_64 >/dev/null ||
			e2e_skip "this host's KVM cannot boot Linux and qemu-system-x86_64 (for the nested harness) is missing: apt-get install qemu-system-x86"
		[ -s "$e2e_guest/nested/vmlinuz" ] ||
			e2e_skip "no nested L1 kernel in $e2e_guest/nested: run scripts/fetch-guest.sh"
		e2e_timeout=${CUBICLE_E2E_TIMEOUT:-240}
	else
		[ -c /dev/kvm ] || e2e_skip "no /dev/kvm"
		e2e_timeout=${CUBICLE_E2E_TIMEOUT:-60}
	fi
	# Outputs live in the build tree; in nested mode this folder is L1's
	# read-write share, so it must be under a path L1 can see (all of /).
	e2e_work=$e2e_builddir/tests/e2e/$e2e_name.work
	rm -rf "$e2e_work" && mkdir -p "$e2e_work" || { echo "not ok - cannot create $e2e_work"; exit 99; }
	echo "# $e2e_name: mode $e2e_mode, binary $CUBICLE, work folder $e2e_work"
}

# e2e_run COMMAND...: run it bounded by $e2e_timeout, directly or inside L1;
# stdout and stderr are the command's own; returns its exit status.
e2e_run() {
	if [ $e2e_mode = direct ]; then
		timeout -k 5 "$e2e_timeout" "$@"
	else
		"$e2e_top/tests/e2e/nested/run-nested.sh" --arch "${E2E_ARCH:-x86_64}" \
			--timeout $((e2e_timeout + 180)) --cmd-timeout "$e2e_timeout" \
			--rw "$e2e_work" -- "$@"
	fi
}

# e2e_check NAME COMMAND...: one "ok -" / "not ok -" line.
e2e_check() {
	local name=$1; shift
	if "$@"; then
		echo "ok - $name"
	else
		echo "not ok - $name"
		e2e_failed=1
	fi
}

# e2e_agent_initramfs "MODULES": $e2e_work/initramfs.cpio.gz, the example
# initramfs with cubicle-agent and those guest modules; skips when the agent
# is not built, or not static (a sanitizer build: the guest has no libc).
e2e_agent_initramfs() {
	local agent=$e2e_builddir/agent/cubicle-agent
	[ -x "$agent" ] || e2e_skip "$agent is not built"
	file -L "$agent" | grep -q 'statically linked' ||
		e2e_skip "$agent is not statically linked (a sanitizer build?): the guest has no libc for it"
	"$e2e_top/scripts/build-initramfs.sh" --agent "$agent" --modules "$1" \
		"$e2e_guest/modules" "$e2e_work/initramfs.cpio.gz" 2>"$e2e_work/initramfs.log" ||
		{ cat "$e2e_work/initramfs.log"; e2e_skip "cannot build the initramfs"; }
}

# e2e_serve_sdk: skips unless cubicle-serve is built and node, npm and
# python3 are here; then readies the E2B SDK the serve tests drive (npm ci
# from the committed lock file; its log in $e2e_work/npm.log).
e2e_serve_sdk() {
	command -v node >/dev/null && command -v npm >/dev/null ||
		e2e_skip "node and npm are needed (apt-get install nodejs npm)"
	command -v python3 >/dev/null || e2e_skip "python3 is needed"
	[ -x "$e2e_builddir/tools/serve/cubicle-serve" ] || e2e_skip "cubicle-serve is not built"
	"$e2e_top/tests/e2b/prepare.sh" "$e2e_top" "$e2e_builddir" >"$e2e_work/npm.log" 2>&1 ||
		{ cat "$e2e_work/npm.log"; e2e_skip "npm ci for the E2B SDK failed (no registry?)"; }
}

# e2e_dump FILE...: the last 60 lines of each, for a failure report.
e2e_dump() {
	local f
	for f in "$@"; do
		echo "# ---- last 60 lines of $f ----"
		tail -n 60 "$f" 2>/dev/null | tr -d '\r' | sed 's/^/# /'
	done
}

# e2e_marker FILE KEY: the value of the last "CUBICLE-GUEST KEY=value" line.
e2e_marker() {
	tr -d '\r' <"$1" | sed -n "s/^.*CUBICLE-GUEST $2=//p" | tail -n 1
}

# e2e_cfg_string FILE KEY: a string setting such as cmdline from a .cfg.
e2e_cfg_string() {
	sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\"\\(.*\\)\"[[:space:]]*;.*/\\1/p" "$1" | head -n 1
}

# e2e_switchroot_initramfs OUT MODULE...: build OUT, an initramfs whose
# /init loads MODULEs (from the guest kernel's), mounts root= (ext4, rw) and
# switches to its /sbin/init, as a distribution's initramfs honours root=.
# A root that does not mount says CUBICLE-GUEST mount_failed=DEV on the
# console and reboots. Skips the test when it cannot be built.
e2e_switchroot_initramfs() {
	out=$1
	shift
	cat >"$e2e_work/switchroot-init" <<'INIT'
#!/bin/sh
# Initramfs of cubicle's e2e tests: load the virtio modules, mount root= and switch to it.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done </etc/modules.order
root=$(sed -n 's/.*root=\([^ ]*\).*/\1/p' /proc/cmdline)
i=0
while [ ! -b "$root" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mkdir -p /newroot
mount -t ext4 -o rw "$root" /newroot || { echo "CUBICLE-GUEST mount_failed=$root" >/dev/console; reboot -f; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
INIT
	"$e2e_top/scripts/build-initramfs.sh" --init "$e2e_work/switchroot-init" --modules "$*" \
		"$e2e_guest/modules" "$out" 2>"$e2e_work/initramfs.log" ||
		{ cat "$e2e_work/initramfs.log"; e2e_skip "cannot build the initramfs"; }
}

# e2e_finish: exit 0 when every check passed, else dump the outputs and exit 1.
e2e_finish() {
	if [ $e2e_failed != 0 ]; then
		e2e_dump "$@"
		exit 1
	fi
	exit 0
}
