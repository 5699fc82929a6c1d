# SPDX-License-Identifier: Apache-2.0
# Sourced by run_payloads.sh: the jail's network namespace pool
# (--jail-netns-pool DIR, issue 14). The example payload guest runs jailed
# twice with a pool of 2: the first finds it empty (its supervisor makes
# the namespace itself) and fills it after; the second runs in one of the
# pool's namespaces (its probe names that namespace's inode), which is no
# longer pinned afterwards, and the pool is full again. A pool folder
# others may write is refused before anything is made. Then `cubicle
# netns-pool` fills a pool ahead, counts it and drains it. Root and cgroup v2.

jp_ok() { echo "ok - jail netns pool: $1"; pass=$((pass + 1)); }
jp_bad() {
	echo "not ok - jail netns pool: $1"
	shift
	for f in "$@"; do sed 's/^/#   /' "$f" | tail -n 8; done
	fail=$((fail + 1))
}
# the pool's entries pinned by a mount, one "NAME INODE" line each
jp_list() {
	for e in "$1"/net-*; do
		[ -e "$e" ] || continue
		grep -q " $e rw.* nsfs " /proc/self/mountinfo && echo "${e##*/} $(stat -L -c %i "$e")"
	done
}
jp_clean() {
	for e in "$1"/net-*; do
		[ -e "$e" ] && umount "$e" 2>/dev/null
		rm -f "$e"
	done
	umount "$1" 2>/dev/null
	rmdir "$1" 2>/dev/null
}

[ "$nested_l1" = 1 ] && ! [ -e /sys/fs/cgroup/cgroup.controllers ] &&
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
if [ "$(id -u)" != 0 ] || { ! [ -e /sys/fs/cgroup/cgroup.controllers ] &&
   ! [ -e /sys/fs/cgroup/unified/cgroup.controllers ]; }; then
	echo "# jail netns pool: skipped (it needs root and a cgroup v2 hierarchy)"
else
	jp=$tmp/netns-pool
	jroot=$tmp/jp-root
	mkdir -p "$jroot" && chown 65534:65534 "$jroot"
	# (ASan's leak check ptraces from a forked task, which the jail refuses)
	jenv=
	[ $asan = 1 ] && jenv="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	ex=$(cd "$bd" && pwd)/examples/payload/hello.cfg
	jp_run() { # NAME: the example jailed with the pool of 2, debug log in $tmp/NAME.err
		env $jenv timeout -k 5 60 "$cub" run "$ex" --jail "$jroot" --jail-probe -l debug \
			--jail-netns-pool "$jp" --jail-netns-pool-size 2 >"$tmp/$1.out" 2>"$tmp/$1.err" </dev/null
		echo $? >"$tmp/$1.rc"
	}
	jp_run jp1
	before=$(jp_list "$jp")
	if [ "$(cat "$tmp/jp1.rc")" = 0 ] && grep -q 'network namespace pool .* is empty' "$tmp/jp1.err" &&
	   grep -q '^Hello from a cubicle payload guest' "$tmp/jp1.out" &&
	   [ "$(printf '%s\n' "$before" | grep -c .)" = 2 ]; then
		jp_ok "an empty pool: the VM runs (status 0); then 2 namespaces are pinned in the pool"
	else
		jp_bad "an empty pool: status $(cat "$tmp/jp1.rc"), pool after: '$before'" "$tmp/jp1.err"
	fi
	# the pool a private mount of its own (no propagation to other namespaces)
	if grep -q " $jp rw[^ ]* - " /proc/self/mountinfo && ! grep " $jp rw" /proc/self/mountinfo | grep -q shared:; then
		jp_ok "the pool folder is a private mount of its own"
	else
		jp_bad "the pool folder is not a private mount of its own: $(grep " $jp " /proc/self/mountinfo)"
	fi
	jp_run jp2
	after=$(jp_list "$jp")
	taken=$(sed -n 's/.*jail: the network namespace .*\/\(net-[^ ,]*\), from the pool.*/\1/p' "$tmp/jp2.err")
	seen=$(sed -n 's/.*jail probe: .*; network namespace \([0-9]*\)$/\1/p' "$tmp/jp2.err")
	want=$(printf '%s\n' "$before" | awk -v n="$taken" '$1 == n { print $2 }')
	if [ "$(cat "$tmp/jp2.rc")" = 0 ] && [ -n "$taken" ] && [ -n "$want" ] && [ "$seen" = "$want" ] &&
	   ! printf '%s\n' "$after" | grep -q "^$taken " && ! [ -e "$jp/$taken" ] &&
	   [ "$(printf '%s\n' "$after" | grep -c .)" = 2 ] &&
	   grep -q 'network interfaces: lo;' "$tmp/jp2.err"; then
		jp_ok "the next VM runs in the pool's namespace $taken (inode $seen, only lo), no longer pinned after; the pool is full again"
	else
		jp_bad "a pooled start: status $(cat "$tmp/jp2.rc"), taken '$taken' (inode '$want'), the VMM's '$seen', pool after: '$after'" "$tmp/jp2.err"
	fi
	# a pool folder others may write: refused, nothing run
	chmod 0777 "$jp"
	env $jenv timeout -k 5 60 "$cub" run "$ex" --jail "$jroot" --jail-netns-pool "$jp" \
		>"$tmp/jp3.out" 2>"$tmp/jp3.err" </dev/null
	got=$?
	if [ $got = 1 ] && grep -q "jail-netns-pool $jp: the folder must be root's and writable by root alone" "$tmp/jp3.err" &&
	   ! grep -q 'Hello' "$tmp/jp3.out" && [ "$(jp_list "$jp" | grep -c .)" = 2 ]; then
		jp_ok "a pool folder others may write: status 1 naming it; the pool untouched"
	else
		jp_bad "a pool folder others may write: status $got" "$tmp/jp3.err"
	fi
	jp_clean "$jp"
	# a pool on a path someone else could change: under a folder others
	# may write (nothing is made there), or through a symbolic link
	mkdir -p "$tmp/jp-open" "$tmp/jp-real/pool" && chmod 0777 "$tmp/jp-open" &&
		ln -sfn "$tmp/jp-real" "$tmp/jp-link"
	fillout=$("$cub" netns-pool fill "$tmp/jp-open/a/pool" 2>&1)
	got=$?
	env $jenv timeout -k 5 60 "$cub" run "$ex" --jail "$jroot" --jail-netns-pool "$tmp/jp-link/pool" \
		>"$tmp/jp5.out" 2>"$tmp/jp5.err" </dev/null
	got5=$?
	if [ $got = 1 ] && printf '%s\n' "$fillout" | grep -q "$tmp/jp-open is not root's, or others may write it" &&
	   [ -z "$(ls -A "$tmp/jp-open")" ] && [ $got5 = 1 ] &&
	   grep -q "jail-netns-pool $tmp/jp-link/pool: $tmp/jp-link is a symbolic link" "$tmp/jp5.err" &&
	   ! grep -q 'Hello' "$tmp/jp5.out" && [ -z "$(ls -A "$tmp/jp-real/pool")" ]; then
		jp_ok "a pool under a folder others may write, or named through a link: status 1 naming the folder; nothing made, nothing run"
	else
		jp_bad "a pool on a path others could change: fill $got '$fillout', run $got5" "$tmp/jp5.err"
	fi
	jp_clean "$tmp/jp-open/a/pool" # (only if it was wrongly made)
	rm -rf "$tmp/jp-open" "$tmp/jp-real" "$tmp/jp-link"
	# cubicle netns-pool: filled ahead, the first start takes from it;
	# status counts; drain leaves no folder and no pinned namespace
	jq=$tmp/netns-pool2
	fillout=$("$cub" netns-pool fill "$jq" --size 3 2>&1)
	env $jenv timeout -k 5 60 "$cub" run "$ex" --jail "$jroot" -l debug --jail-netns-pool "$jq" \
		--jail-netns-pool-size 3 >"$tmp/jp4.out" 2>"$tmp/jp4.err" </dev/null
	got=$?
	st=$("$cub" netns-pool status "$jq" 2>&1)
	drainout=$("$cub" netns-pool drain "$jq" 2>&1)
	drc=$?
	left=$(grep -c " $jq" /proc/self/mountinfo)
	if [ "$fillout" = "$jq: 3 network namespaces (3 made)" ] && [ $got = 0 ] &&
	   grep -q 'jail: the network namespace .*, from the pool' "$tmp/jp4.err" &&
	   [ "$st" = "$jq: 3 network namespaces" ] && [ $drc = 0 ] &&
	   [ "$drainout" = "$jq: 3 network namespaces unpinned; the folder removed" ] &&
	   ! [ -e "$jq" ] && [ "$left" = 0 ]; then
		jp_ok "netns-pool fill made 3 ahead, the first start took one, status said 3 after its refill, drain left no folder and no mount"
	else
		jp_bad "netns-pool: fill '$fillout', run status $got, status '$st', drain $drc '$drainout', mounts left $left" "$tmp/jp4.err"
	fi
	jp_clean "$jq"
	rm -rf "$jroot"
fi
