#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# serve-port.sh LOG [LINES]: waits (20 s at most) until the `cubicle serve
# --listen 127.0.0.1:0` writing LOG has said which port it took, and prints
# it; status 1 when none came. With LINES, the first LINES lines of LOG
# (what an earlier serve appending to it wrote) are not looked at: a
# restarted serve's port is its own line, not its predecessor's.
skip=${2:-0}
i=0
while [ $i -lt 200 ]; do
	port=$(tail -n +$((skip + 1)) "$1" 2>/dev/null |
		sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\) .*/\1/p' | tail -n 1)
	[ -n "$port" ] && { echo "$port"; exit 0; }
	sleep 0.1
	i=$((i + 1))
done
exit 1
