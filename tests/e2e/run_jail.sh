#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The jail (cubicle run --jail DIR): Debian's cloud kernel boots jailed, with a disk, the control API's socket inside the jail and a cgroup with limits; the jailed process sees none of the host's files, processes or network; the cgroup is gone after exit; the same VM boots unjailed.
#
# Runs as root inside the nested harness's L1 (tests/e2e/jail/inner.sh), or
# directly on a host that boots Linux when run as root. Exit status: 0 pass,
# 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
if [ $e2e_mode = direct ] && [ "$(id -u)" != 0 ]; then
	e2e_skip "the jail needs root"
fi
cfg=$e2e_work/vm.cfg
cat >"$cfg" <<CFG
machine = { vcpus = 1; memory_mib = 192; };
boot = {
  kernel = "$e2e_guest/vmlinuz";
  initrd = "$e2e_guest/initramfs.cpio.gz";
  cmdline = "console=ttyS0 reboot=k,panic_warm panic=-1 quiet";
};
devices = (
  { type = "serial8250"; id = "com1"; console = "stdio"; },
  { type = "boot-timer"; id = "boot"; },
  { type = "virtio-rng"; id = "rng"; },
  { type = "virtio-blk"; id = "disk"; backend = { type = "raw"; path = "/nonexistent"; }; }
);
CFG
e2e_run bash "$e2e_top/tests/e2e/jail/inner.sh" "$e2e_work" "$CUBICLE" "$cfg" \
	>"$e2e_work/inner.out" 2>&1
rc=$?
w=$e2e_work
probe=$(grep 'jail probe:' "$w/jailed.stderr" 2>/dev/null)
echo "# inner.sh: status $rc; ${probe#*cubicle: }"
roots=$(printf '%s\n' "$probe" | sed -n 's/.* \/ holds:\([^;]*\);.*/\1/p')
e2e_check "inner.sh ran (status $rc)" [ $rc = 0 ]
e2e_check "jailed: the guest booted (CUBICLE-GUEST ready)" grep -q 'CUBICLE-GUEST ready' "$w/jailed.console"
e2e_check "jailed: exit status 0 (got $(cat "$w/jailed.rc" 2>/dev/null))" [ "$(cat "$w/jailed.rc" 2>/dev/null)" = 0 ]
e2e_check "jailed: runs as pid 2, uid 65534 gid 65534" grep -q 'jail probe: pid 2 uid 65534 gid 65534' "$w/jailed.stderr"
e2e_check "jailed: / holds only what the plan names (got:$roots)" \
	bash -c '[ -n "$1" ] && ! printf "%s\n" $1 | grep -qxE "etc|usr|bin|lib|home|sbin|var|boot|sys"' _ "$roots"
e2e_check "jailed: sees two processes, the namespace's init and itself" grep -q '; 2 processes: 1 2;' "$w/jailed.stderr"
e2e_check "jailed: sees no network but lo" grep -Eq 'network interfaces: lo;' "$w/jailed.stderr"
e2e_check "jailed: the API answered through the socket inside the jail" grep -q '"state"' "$w/api.json"
e2e_check "jailed: its cgroup had the limits and the process" \
	grep -Eq 'vm-[0-9]+ pids.max=64 memory.max=1073741824 procs=[1-9]' "$w/cg-during.txt"
e2e_check "jailed: the cgroup is gone after exit" bash -c '! grep -q "^vm-" "$1"' _ "$w/cg-after.txt"
e2e_check "unjailed: the same VM boots (status $(cat "$w/unjailed.rc" 2>/dev/null))" \
	bash -c 'grep -q "CUBICLE-GUEST ready" "$1" && [ "$(cat "$2")" = 0 ]' _ "$w/unjailed.console" "$w/unjailed.rc"
[ "$e2e_failed" != 0 ] && e2e_dump "$w/inner.out" "$w/jailed.stderr" "$w/cg-during.txt" "$w/api.json"
e2e_finish "$w/jailed.console" "$w/jailed.stderr"
