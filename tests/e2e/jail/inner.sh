#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run_jail.sh's part inside L1 (or on a host that boots Linux itself), as root: the same VM jailed and unjailed.
# Usage: inner.sh WORK CUBICLE CONFIG SET...
# Writes into WORK: jailed.{console,stderr,rc}, api.json, cg-during.txt,
# cg-after.txt, unjailed.{console,stderr,rc}.
set -u
w=$1 cub=$2 cfg=$3
shift 3
[ "$(id -u)" = 0 ] || { echo "inner.sh: needs root" >&2; exit 77; }
# cgroup v2: L1 mounts none; a host may have it at / or beside v1 (unified/).
if ! [ -e /sys/fs/cgroup/cgroup.controllers ] && ! [ -e /sys/fs/cgroup/unified/cgroup.controllers ]; then
	mount -t cgroup2 none /sys/fs/cgroup || { echo "inner.sh: cannot mount cgroup2" >&2; exit 1; }
fi
cgbase=/sys/fs/cgroup/cubicle
[ -e /sys/fs/cgroup/cgroup.controllers ] || cgbase=/sys/fs/cgroup/unified/cubicle
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jail=$tmp/jail
mkdir -p "$jail" && chown 65534:65534 "$jail"
# The disk the jailed uid writes: its own, made beforehand.
truncate -s 8M "$tmp/disk.img" && chown 65534:65534 "$tmp/disk.img"
sock=/run/cubicle-jail-test.sock
"$cub" run --jail "$jail" --jail-probe --jail-pids-max 64 --jail-memory-max 1G \
	--api-sock "$sock" --set devices.disk.backend.path="$tmp/disk.img" "$@" "$cfg" \
	>"$w/jailed.console" 2>"$w/jailed.stderr" </dev/null &
pid=$!
# The API socket is made inside the jail: from here, JAIL/PATH.
for _ in $(seq 1 600); do
	[ -S "$jail$sock" ] && break
	kill -0 $pid 2>/dev/null || break
	sleep 0.1
done
curl -s --max-time 20 --unix-socket "$jail$sock" http://localhost/ >"$w/api.json" 2>&1
ls "$cgbase" >"$w/cg-during.txt" 2>&1
for d in "$cgbase"/vm-*; do
	[ -d "$d" ] && echo "$d pids.max=$(cat "$d/pids.max" 2>/dev/null) memory.max=$(cat "$d/memory.max" 2>/dev/null) procs=$(wc -l <"$d/cgroup.procs")" >>"$w/cg-during.txt"
done
wait $pid
echo $? >"$w/jailed.rc"
ls "$cgbase" >"$w/cg-after.txt" 2>&1
# The same VM without the jail.
"$cub" run --set devices.disk.backend.path="$tmp/disk.img" "$@" "$cfg" \
	>"$w/unjailed.console" 2>"$w/unjailed.stderr" </dev/null
echo $? >"$w/unjailed.rc"
exit 0
