#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# serve-port.sh LOG: waits (20 s at most) until the `cubicle serve --listen
# 127.0.0.1:0` writing LOG has said which port it took, and prints it (the
# last one LOG names); status 1 when none came.
i=0
while [ $i -lt 200 ]; do
	port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\) .*/\1/p' "$1" | tail -n 1)
	[ -n "$port" ] && { echo "$port"; exit 0; }
	sleep 0.1
	i=$((i + 1))
done
exit 1
