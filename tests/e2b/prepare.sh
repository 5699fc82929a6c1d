#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Puts the E2B SDK test's scripts and its pinned npm packages (`npm ci` of tests/e2b/package-lock.json) into BUILDDIR/tests/e2b, once per lock file, under a lock (tests run in parallel).
# Usage: tests/e2b/prepare.sh SRCDIR BUILDDIR   (exit 0 ready, 1 npm ci failed: its log is printed)
set -u
sd=$1 bd=$2
work=$bd/tests/e2b
mkdir -p "$work"
exec 9>"$work/.prepare.lock"
flock 9
for f in package.json package-lock.json sdk-test.mjs serve-sdk.mjs forward.mjs vsock-stub.mjs dns-stub.mjs; do
	[ "$sd/tests/e2b/$f" -ef "$work/$f" ] || cp "$sd/tests/e2b/$f" "$work/$f"
done
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.cubicle-lock" 2>/dev/null; then
	echo "npm ci in $work"
	(cd "$work" && npm ci --no-audit --no-fund --loglevel=error) >"$work/npm.log" 2>&1 ||
		{ cat "$work/npm.log"; exit 1; }
	cp "$work/package-lock.json" "$work/node_modules/.cubicle-lock"
fi
exit 0
