#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Pause and resume a Linux guest over the control API (PATCH /vm, through
# `cubicle ctl`): the guest prints its uptime four times a second; while the
# VM is paused (3 s) nothing may come, after the resume it must go on, and
# the guest's clock must not jump: the uptime between the last tick before
# the pause and the first after stays under 1.5 s. SIGTERM then ends it.
# Exit status: 0 pass, 1 fail, 77 skip (see lib.sh).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

e2e_init
command -v curl >/dev/null || e2e_skip "curl is not installed (scripts/deps.sh installs it)"
w=$e2e_work
cat >"$w/init" <<'INIT'
#!/bin/sh
# The guest side of run_api_pause.sh: tick with the uptime, forever.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
echo "CUBICLE-GUEST clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
while :; do
	echo "CUBICLE-GUEST tick=$(cut -d' ' -f1 /proc/uptime)"
	sleep 0.25
done
INIT
"$e2e_top/scripts/build-initramfs.sh" --init "$w/init" --modules "" "$e2e_guest/modules" "$w/initramfs.cpio.gz" \
	2>"$w/initramfs.log" || { cat "$w/initramfs.log"; e2e_skip "cannot build the initramfs"; }
cat >"$w/pause.sh" <<'SCRIPT'
#!/bin/bash
# Where KVM is (directly or in L1): $1 work folder, $2 kernel, $3 cubicle.
set -u
w=$1 k=$2 cub=$3
sock=$(mktemp -d)/api.sock # a 9p share cannot hold a Unix socket
cat >"$w/vm.cfg" <<CFG
machine = { vcpus = 1; memory_mib = 128; };
boot = { kernel = "$k"; initrd = "$w/initramfs.cpio.gz"; cmdline = "console=ttyS0 reboot=k panic=-1 quiet"; };
devices = ( { type = "serial8250"; id = "com1"; console = "stdio"; input = false; } );
CFG
"$cub" run --api-sock "$sock" "$w/vm.cfg" </dev/null >"$w/console.log" 2>"$w/stderr.log" &
pid=$!
ticks() { grep -c 'CUBICLE-GUEST tick=' "$w/console.log"; }
n=0
while [ $n -lt 1200 ] && [ "$(ticks)" -lt 4 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
if [ "$(ticks)" -lt 4 ]; then
	# Say where every thread of cubicle is, should the guest never tick.
	for t in /proc/$pid/task/*; do
		echo "# thread $(cat "$t/comm" 2>/dev/null): state $(cut -d' ' -f3 "$t/stat" 2>/dev/null), in $(cat "$t/wchan" 2>/dev/null)"
	done >"$w/threads.log"
fi
{
	"$cub" ctl "$sock" pause && echo "pause=ok"
	# A count, not the value: the pause may cut a tick's line in two.
	b=$(ticks)
	echo "before=$b"
	sleep 3
	echo "paused=$(ticks)"
	"$cub" ctl "$sock" info
	"$cub" ctl "$sock" resume && echo "resume=ok"
	n=0
	while [ $n -lt 300 ] && [ "$(ticks)" -le $((b + 1)) ]; do sleep 0.1; n=$((n + 1)); done
	echo "after=$(ticks)"
} >"$w/pause.log" 2>&1
kill -TERM $pid
wait $pid
echo "rc=$?" >>"$w/pause.log"
exit 0
SCRIPT
e2e_run bash "$w/pause.sh" "$w" "$e2e_guest/vmlinuz" "$(cd "$(dirname "$CUBICLE")" && pwd)/$(basename "$CUBICLE")"
echo "# pause.sh exit status $?"
sed 's/^/# /' "$w/pause.log"
echo "# guest clocksource: $(e2e_marker "$w/console.log" clocksource)"
v() { sed -n "s/^$1=//p" "$w/pause.log" | head -n 1; }
n_before=$(v before) n_after=$(v after)
# The tick lines by number, now complete: the last one before the pause
# (written in full after the resume if the pause cut it) and the next.
tick() { tr -d '\r' <"$w/console.log" | sed -n 's/.*CUBICLE-GUEST tick=//p' | sed -n "$1p"; }
u_before=$(tick "${n_before:-0}") u_after=$(tick $((${n_before:-0} + 1)))
no_ticks() { [ -n "$n_before" ] && [ "$(v paused)" = "$n_before" ]; }
went_on() { [ -n "$n_after" ] && [ "$n_after" -gt "$n_before" ]; }
no_jump() { awk -v a="$u_before" -v b="$u_after" 'BEGIN { exit !(a != "" && b != "" && b - a >= 0 && b - a < 1.5) }'; }
e2e_check "ctl pause, ctl resume" grep -q 'resume=ok' "$w/pause.log"
e2e_check "GET / said Paused" grep -q ': Paused (' "$w/pause.log"
e2e_check "no tick in 3 s paused (${n_before:-?} then $(v paused))" no_ticks
e2e_check "ticks go on after the resume (${n_after:-?})" went_on
e2e_check "the guest's clock did not jump (uptime ${u_before:-?} then ${u_after:-?})" no_jump
e2e_check "SIGTERM ends it (143)" grep -q '^rc=143' "$w/pause.log"
e2e_finish "$w/console.log" "$w/stderr.log" "$w/pause.log" "$w/threads.log"
