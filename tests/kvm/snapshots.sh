# SPDX-License-Identifier: Apache-2.0
# Snapshots of payload guests (issue 12), sourced by run_payloads.sh (its
# $cub, $tmp, mkcfg, ok, notok, wait_line, kib). The counter payload counts
# in memory and checks a 64 KiB pattern every round:
#   1. snapshot, kill -9, restore: the count goes on from the snapshot's;
#   2. 100 rollbacks in place in one process: the count goes back each time,
#      guest RAM is the snapshot's byte for byte, no fd or RSS growth;
#   3. $CUBICLE_CLONES (50) clones restored at once from one snapshot: each
#      goes on from the count, the snapshot's pages are shared between them;
#   4. a truncated, a corrupt, a foreign and a future snapshot, and overrides
#      that change the machine or name no device: one clear line each; an
#      override of a device setting reaches the clone;
#   5. Diff snapshots;
#   6. a writable disk (the diskcount payload writes its count to sector 1
#      with the tag it reads from sector 0): the snapshot holds a copy of it
#      at that instant; 100 rollbacks bring the disk back to it byte for
#      byte; $CUBICLE_CLONES clones each get a copy of their own (a tag
#      written into one is read by that clone alone, its writes stay in its
#      file); a restore never overwrites an existing disk;
#   7.-9. (below) memory.zst, Uffd, a jailed restore, machine.pit, machine.irqchip;
#  10. Landlock: the API writes a snapshot only into the VM's own folders
#      or api.paths.

# The counts testdev logged in FILE, in order.
counts() { sed -n 's/.*guest: count \([0-9][0-9]*\)$/\1/p' "$1"; }
# Are the counts in FILE consecutive from its first to its last?
consecutive() { counts "$1" | awk 'NR > 1 && $1 != p + 1 { bad = 1 } { p = $1 } END { exit bad }'; }
scratch() { "$cub" ctl "$1" call mmio get_scratch 2>/dev/null; }
# Wait (up to 120 s, while PID lives) until FILE logs a count of at least N
# after its first SKIP count lines: after a rollback the file still holds
# the counts from before it, which wait_line would find at once.
wait_count_after() {
	wc_i=0
	while [ $wc_i -lt 1200 ] && kill -0 "$1" 2>/dev/null &&
	      ! counts "$2" | tail -n +$(($3 + 1)) | awk -v n="$4" '$1 >= n { f = 1 } END { exit !f }'; do
		sleep 0.1
		wc_i=$((wc_i + 1))
	done
}
# kB of FIELD (Rss, Pss, Shared_Clean, ...) in pid's mappings of FILE.
map_kb() {
	awk -v f="$2" -v k="$3:" '$NF == f { on = 1; next } /^[0-9a-f]+-[0-9a-f]+ / { on = 0 }
		on && $1 == k { s += $2 } END { print s + 0 }' "/proc/$1/smaps" 2>/dev/null
}
# fds PID: its open fds, once the VMM has closed the API connection a ctl
# or curl that just returned used (the fewest of five looks 20 ms apart: a
# leak stays in all five)
fds() {
	_min=
	for _ in 1 2 3 4 5; do
		_n=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
		if [ -z "$_min" ] || [ "$_n" -lt "$_min" ]; then _min=$_n; fi
		sleep 0.02
	done
	echo "${_min:-0}"
}
# rollback_100 SOCK SNAP OUT: 100 rollbacks to SNAP by one curl, 100
# requests on one connection (the rollbacks, not 100 process starts, slow in
# the nested L1, are what is timed): $t0, $t1 (ms) and $bad (replies other
# than 200, whose tail goes to OUT.out).
rollback_100() {
	urls= i=0
	while [ $i -lt 100 ]; do urls="$urls http://localhost/snapshot/rollback"; i=$((i + 1)); done
	t0=$(now_ms)
	# shellcheck disable=SC2086
	curl -s --unix-socket "$1" -X PUT -H 'Content-Type: application/json' \
		-d "{\"snapshot_path\": \"$2\"}" -w '\n%{http_code}\n' $urls >"$3.codes" 2>&1
	t1=$(now_ms)
	bad=$((100 - $(grep -cx 200 "$3.codes")))
	[ $bad = 0 ] || tail -n 6 "$3.codes" >>"$3.out"
}

snap=$tmp/snap-counter
mkcfg counter counter long 1
echo "api = { socket = \"$tmp/counter.sock\"; };" >>"$tmp/counter.cfg"
"$cub" run "$tmp/counter.cfg" >/dev/null 2>"$tmp/counter.err" </dev/null &
pid=$!
s=
if ! wait_line $pid "$tmp/counter.err" 'guest: count 3$'; then
	notok "snapshot: the counter guest did not count to 3" "$tmp/counter.err"
elif ! "$cub" ctl "$tmp/counter.sock" pause >"$tmp/snap.out" 2>&1 ||
     ! s=$(scratch "$tmp/counter.sock") ||
     ! "$cub" snapshot "$tmp/counter.sock" "$snap" >>"$tmp/snap.out" 2>&1; then
	notok "snapshot: pause, scratch ($s) or snapshot failed" "$tmp/snap.out"
	s=
fi
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null

# 1. Restore in a new process after the first one was killed.
if [ -n "$s" ]; then
	mem_kb=$(du -k "$snap/memory" | cut -f1)
	"$cub" restore "$snap" --api-sock "$tmp/r.sock" >/dev/null 2>"$tmp/restored.err" </dev/null &
	rpid=$!
	want=$((s + 2))
	if wait_line $rpid "$tmp/restored.err" "guest: count $want\$" &&
	   first=$(counts "$tmp/restored.err" | head -n 1) &&
	   { [ "$first" = "$s" ] || [ "$first" = $((s + 1)) ]; } && consecutive "$tmp/restored.err" &&
	   ! grep -q 'memory lost' "$tmp/restored.err"; then
		ok "snapshot at count $s, kill -9, restore: counts on from $first to $want, pattern intact; memory file $mem_kb KiB on disk of 16 MiB (sparse)"
	else
		notok "restore: wanted counts from $s or $((s + 1)) up to $want" "$tmp/restored.err"
	fi
else
	rpid=
fi

# 2. Rollback in place, 100 times, in the restored process.
if [ -n "$rpid" ] && kill -0 $rpid 2>/dev/null; then
	fd0=$(fds $rpid)
	rss0=$(kib $rpid VmRSS)
	rollback_100 "$tmp/r.sock" "$snap" "$tmp/rb"
	fd1=$(fds $rpid)
	rss1=$(kib $rpid VmRSS)
	# Paused, rolled back, snapshot again: RAM is the first snapshot's.
	"$cub" ctl "$tmp/r.sock" pause >>"$tmp/rb.out" 2>&1
	"$cub" ctl "$tmp/r.sock" rollback "$snap" >>"$tmp/rb.out" 2>&1 || bad=$((bad + 1))
	s2=$(scratch "$tmp/r.sock")
	# A snapshot of a VM whose RAM maps the first one reads only pages
	# with data: the holes of the shared file are not faulted in (on
	# tmpfs they would be allocated in it).
	kb0=$(du -k "$snap/memory" | cut -f1)
	"$cub" snapshot "$tmp/r.sock" "$tmp/snap-again" >>"$tmp/rb.out" 2>&1 || bad=$((bad + 1))
	kb1=$(du -k "$snap/memory" | cut -f1)
	[ $((kb1 - kb0)) -lt 512 ] || { echo "# $snap/memory grew from $kb0 to $kb1 KiB" >>"$tmp/rb.out"; bad=$((bad + 1)); }
	# Byte for byte but the VM generation ID (16 bytes at 0xefff0, cmp -l
	# counts from 1), which each rollback renews: it must differ.
	same=no
	cmp -l "$snap/memory" "$tmp/snap-again/memory" >"$tmp/rb.cmp" 2>/dev/null
	if [ -s "$tmp/snap-again/memory" ] &&
	   ! awk '$1 < 983025 || $1 > 983040 { bad = 1 } END { exit bad }' "$tmp/rb.cmp"; then
		: # a byte outside the generation ID differs
	elif [ -s "$tmp/snap-again/memory" ] && [ -s "$tmp/rb.cmp" ]; then
		same=yes
	fi
	n_before=$(counts "$tmp/restored.err" | wc -l)
	"$cub" ctl "$tmp/r.sock" resume >>"$tmp/rb.out" 2>&1
	wait_count_after $rpid "$tmp/restored.err" "$n_before" 0
	after=$(counts "$tmp/restored.err" | tail -n +$((n_before + 1)) | head -n 1)
	# RSS bounds what 100 rollbacks may keep; under ASan its quarantine keeps
	# what they free (LeakSanitizer checks at the exit instead, below).
	rss_ok=yes
	[ $((rss1 - rss0)) -lt 4096 ] || grep -qa '__asan_init' "$cub" 2>/dev/null || rss_ok=no
	if [ $bad = 0 ] && [ "$s2" = "$s" ] && [ $same = yes ] && [ "$fd1" = "$fd0" ] &&
	   [ $rss_ok = yes ] && { [ "$after" = "$s" ] || [ "$after" = $((s + 1)) ]; } &&
	   ! grep -q 'memory lost' "$tmp/restored.err"; then
		ok "rollback x100 in one process ($(( (t1 - t0) / 100 )) ms each, running VM, one HTTP connection): scratch back to $s, RAM identical to the snapshot's (cmp) but for the VM generation ID, which the rollback renewed ($(wc -l <"$tmp/rb.cmp") of its 16 bytes differ); counts on from $after; fds $fd0 -> $fd1, RSS $rss0 -> $rss1 KiB; a snapshot of it read no hole of the first ($kb0 -> $kb1 KiB)"
	else
		echo "# bad=$bad scratch=$s2 (want $s) same_ram=$same fds $fd0->$fd1 rss $rss0->$rss1 after=$after" >>"$tmp/rb.out"
		notok "rollback: see below" "$tmp/rb.out"
	fi
	# Pause to disk: snapshot --release frees guest RAM (the mapping of the
	# new snapshot has nothing resident) until the resumed guest reads it,
	# and the guest's pattern check reads it all back intact.
	"$cub" ctl "$tmp/r.sock" pause >"$tmp/rel.out" 2>&1
	c0=$(counts "$tmp/restored.err" | tail -n 1)
	"$cub" ctl "$tmp/r.sock" snapshot "$tmp/snap-released" --release >>"$tmp/rel.out" 2>&1
	rel0=$(map_kb $rpid "$tmp/snap-released/memory" Rss)
	"$cub" ctl "$tmp/r.sock" resume >>"$tmp/rel.out" 2>&1
	if [ -n "$c0" ] && wait_line $rpid "$tmp/restored.err" "guest: count $((c0 + 2))\$" &&
	   rel1=$(map_kb $rpid "$tmp/snap-released/memory" Rss) && [ "$rel0" = 0 ] && [ "$rel1" -gt 0 ] &&
	   ! grep -q 'memory lost' "$tmp/restored.err"; then
		ok "pause to disk (snapshot --release): guest RAM resident 0 KiB until the resume, $rel1 KiB after; counts on from $c0, pattern intact"
	else
		echo "# count at the pause ${c0:-?}; RAM resident ${rel0:-?} KiB released, ${rel1:-?} KiB after" >>"$tmp/rel.out"
		notok "pause to disk" "$tmp/rel.out"
	fi
	# No dirty-page tracking in this VM: a Diff says what it needs.
	"$cub" ctl "$tmp/r.sock" pause >"$tmp/nodiff.out" 2>&1
	if ! "$cub" ctl "$tmp/r.sock" snapshot "$tmp/no-diff" --diff >>"$tmp/nodiff.out" 2>&1 &&
	   grep -q 'Diff snapshots need dirty-page tracking: machine.track_dirty_pages' "$tmp/nodiff.out"; then
		ok "a Diff without dirty-page tracking is refused, saying what it needs"
	else
		notok "a Diff without dirty-page tracking" "$tmp/nodiff.out"
	fi
	kill -TERM $rpid
	wait $rpid 2>/dev/null
	got=$?
	# 143: SIGTERM's status; under ASan a leak would abort it instead.
	[ $got = 143 ] && ok "the restored, rolled back, released process ends on SIGTERM (143)" ||
		notok "the restored process: SIGTERM gave $got" "$tmp/restored.err"
fi

# 3. Clones: N processes restored from one snapshot at once.
if [ -n "$s" ]; then
	n=${CUBICLE_CLONES:-50}
	pids=
	i=0
	while [ $i -lt $n ]; do
		# niced: 50 guests that never idle must not starve this script
		# (in the nested L1 they share one emulated CPU with it)
		nice -n 19 "$cub" restore "$snap" >/dev/null 2>"$tmp/clone$i.err" </dev/null &
		pids="$pids $!"
		i=$((i + 1))
	done
	# A clone seen counting on is stopped (SIGSTOP): it stays, with its
	# mappings, for the sharing check below, but its guest, which never
	# idles, leaves the CPU to those still starting (in the nested L1 all
	# share one emulated CPU: 50 counting at once made each start slow).
	c=0 good=0 lowshare= t0=$(now_ms)
	for p in $pids; do
		if wait_line $p "$tmp/clone$c.err" "guest: count $((s + 1))\$" &&
		   ! grep -q 'memory lost' "$tmp/clone$c.err"; then
			good=$((good + 1))
		else
			bad_clone=$c
		fi
		kill -STOP $p 2>/dev/null
		c=$((c + 1))
	done
	t1=$(now_ms)
	# Every clone has run its guest's pattern check: its pages are mapped.
	c=0 shared=0 rss=0 pss=0
	for p in $pids; do
		# Shared_Dirty too: the page cache of a tmpfs file is always dirty.
		sc=$(($(map_kb $p "$snap/memory" Shared_Clean) + $(map_kb $p "$snap/memory" Shared_Dirty)))
		shared=$((shared + sc))
		rss=$((rss + $(map_kb $p "$snap/memory" Rss)))
		pss=$((pss + $(map_kb $p "$snap/memory" Pss)))
		[ "$sc" -ge 64 ] || lowshare="$lowshare $c:${sc}kB"
		c=$((c + 1))
	done
	if [ -n "$lowshare" ]; then # what the first clone maps, before it goes
		set -- $pids
		{
			echo "# clones with less than 64 KiB shared:$lowshare"
			echo "# the first clone's mappings:"
			grep -E "memory|memfd" "/proc/$1/maps"
			grep -A 12 "$snap/memory" "/proc/$1/smaps"
		} >"$tmp/clones.out" 2>&1
	fi
	for p in $pids; do kill -TERM $p 2>/dev/null; kill -CONT $p 2>/dev/null; done
	for p in $pids; do wait $p 2>/dev/null; done
	if [ $good = $n ] && [ -z "$lowshare" ]; then
		ok "$n clones of one snapshot: each counted on from $s (all within $((t1 - t0)) ms of the last start); the snapshot's memory mapped shared: $shared KiB Shared_* in all, Rss $rss KiB, Pss $pss KiB"
	elif [ $good != $n ]; then
		notok "clones: $good of $n counted on from $s" "$tmp/clone${bad_clone:-0}.err"
	else
		notok "clones: the pattern pages are not shared" "$tmp/clones.out"
	fi
fi

# 7. memory.zst: a copy of the snapshot compressed (`cubicle compress`,
#    several threads); restored, the guest counts on from its count with its
#    pattern intact, and the stock zstd tests the file.
if [ -n "$s" ]; then
	cp -r "$snap" "$tmp/snap-zst"
	if "$cub" compress --threads 2 "$tmp/snap-zst" >"$tmp/zst.out" 2>&1 &&
	   [ -s "$tmp/snap-zst/memory.zst" ] && [ ! -e "$tmp/snap-zst/memory" ]; then
		zkb=$(du -k "$tmp/snap-zst/memory.zst" | cut -f1)
		ztest=skipped
		if command -v zstd >/dev/null; then
			zstd -q -t "$tmp/snap-zst/memory.zst" >>"$tmp/zst.out" 2>&1 && ztest=ok || ztest=failed
		fi
		"$cub" restore "$tmp/snap-zst" >/dev/null 2>"$tmp/zrestored.err" </dev/null &
		p=$!
		if [ $ztest != failed ] && wait_line $p "$tmp/zrestored.err" "guest: count $((s + 2))\$" &&
		   first=$(counts "$tmp/zrestored.err" | head -n 1) &&
		   { [ "$first" = "$s" ] || [ "$first" = $((s + 1)) ]; } && consecutive "$tmp/zrestored.err" &&
		   ! grep -q 'memory lost' "$tmp/zrestored.err"; then
			ok "memory.zst: compressed to $zkb KiB ($(tr '\n' ' ' <"$tmp/zst.out")); zstd -t $ztest; restored: counts on from $first, pattern intact"
		else
			cat "$tmp/zrestored.err" >>"$tmp/zst.out"
			notok "memory.zst restore (zstd -t $ztest)" "$tmp/zst.out"
		fi
		kill -TERM $p 2>/dev/null
		wait $p 2>/dev/null
	else
		notok "cubicle compress" "$tmp/zst.out"
	fi
fi

# 8. The Uffd memory backend: RAM filled page by page by cubicle's
#    userfaultfd handler; the guest counts on with its pattern intact, a
#    rollback in place works over it, SIGTERM ends it (143).
if [ -n "$s" ]; then
	"$cub" restore "$snap" --mem-backend uffd --api-sock "$tmp/u.sock" >/dev/null \
		2>"$tmp/uffd.err" </dev/null &
	p=$!
	u1= ur=
	if wait_line $p "$tmp/uffd.err" "guest: count $((s + 2))\$"; then
		# the log up to here: after the rollback its counts start again
		cp "$tmp/uffd.err" "$tmp/uffd.before"
		u1=$(counts "$tmp/uffd.before" | head -n 1)
		"$cub" ctl "$tmp/u.sock" pause >>"$tmp/uffd.out" 2>&1
		"$cub" ctl "$tmp/u.sock" rollback "$snap" >>"$tmp/uffd.out" 2>&1 && ur=$(scratch "$tmp/u.sock")
	fi
	kill -TERM $p 2>/dev/null
	wait $p 2>/dev/null
	got=$?
	if { [ "$u1" = "$s" ] || [ "$u1" = $((s + 1)) ]; } && [ "$ur" = "$s" ] && [ $got = 143 ] &&
	   consecutive "$tmp/uffd.before" && ! grep -q 'memory lost' "$tmp/uffd.err"; then
		ok "restore --mem-backend uffd: counts on from $u1, pattern intact (every page came through the handler); rolled back in place to $ur; SIGTERM 143"
	else
		tail -n 8 "$tmp/uffd.err" >>"$tmp/uffd.out"
		echo "# first count ${u1:-none}, after the rollback ${ur:-none}, status $got" >>"$tmp/uffd.out"
		notok "the Uffd memory backend" "$tmp/uffd.out"
	fi
fi

# 5. Diff snapshots (machine.track_dirty_pages): a Full one, the guest runs
#    on, a Diff holds only the pages written since (KVM's log); SIGKILL;
#    restore from the Diff goes on from its count; in that process, rollback
#    to the Full one and to the Diff again (the chain laid over the Full).
if [ -n "$s" ]; then
	mkcfg tracked counter long 1
	"$cub" run "$tmp/tracked.cfg" --api-sock "$tmp/t.sock" --set machine.track_dirty_pages=true \
		>/dev/null 2>"$tmp/tracked.err" </dev/null &
	pid=$!
	sf= sd=
	if wait_line $pid "$tmp/tracked.err" 'guest: count 3$' &&
	   "$cub" ctl "$tmp/t.sock" pause >"$tmp/diff.out" 2>&1 && sf=$(scratch "$tmp/t.sock") &&
	   "$cub" snapshot "$tmp/t.sock" "$tmp/d-full" >>"$tmp/diff.out" 2>&1 &&
	   "$cub" ctl "$tmp/t.sock" resume >>"$tmp/diff.out" 2>&1 &&
	   wait_line $pid "$tmp/tracked.err" "guest: count $((sf + 5))\$" &&
	   "$cub" ctl "$tmp/t.sock" pause >>"$tmp/diff.out" 2>&1 && sd=$(scratch "$tmp/t.sock") &&
	   "$cub" ctl "$tmp/t.sock" snapshot "$tmp/d-diff" --diff >>"$tmp/diff.out" 2>&1; then
		:
	else
		notok "Diff: making the Full and the Diff snapshot failed" "$tmp/diff.out"
		sd=
	fi
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	if [ -n "$sd" ]; then
		full_kb=$(du -k "$tmp/d-full/memory" | cut -f1)
		diff_kb=$(du -k "$tmp/d-diff/memory" | cut -f1)
		"$cub" restore "$tmp/d-diff" --api-sock "$tmp/dr.sock" >/dev/null 2>"$tmp/drestored.err" </dev/null &
		rpid=$!
		first= r1= r2=
		if wait_line $rpid "$tmp/drestored.err" "guest: count $((sd + 2))\$"; then
			first=$(counts "$tmp/drestored.err" | head -n 1)
			"$cub" ctl "$tmp/dr.sock" pause >>"$tmp/diff.out" 2>&1
			"$cub" ctl "$tmp/dr.sock" rollback "$tmp/d-full" >>"$tmp/diff.out" 2>&1 &&
				r1=$(scratch "$tmp/dr.sock")
			"$cub" ctl "$tmp/dr.sock" rollback "$tmp/d-diff" >>"$tmp/diff.out" 2>&1 &&
				r2=$(scratch "$tmp/dr.sock")
		fi
		if { [ "$first" = "$sd" ] || [ "$first" = $((sd + 1)) ]; } && [ "$r1" = "$sf" ] &&
		   [ "$r2" = "$sd" ] && [ "$diff_kb" -lt "$full_kb" ] &&
		   ! grep -q 'memory lost' "$tmp/drestored.err"; then
			ok "Diff: Full at count $sf ($full_kb KiB), Diff at $sd ($diff_kb KiB on disk); restored from the Diff: counts on from $first, pattern intact; rolled back to the Full ($r1) and to the Diff ($r2)"
		else
			echo "# Full at $sf ($full_kb KiB), Diff at $sd ($diff_kb KiB); restored first count ${first:-none}; rollbacks ${r1:-?} ${r2:-?}" >>"$tmp/diff.out"
			notok "Diff snapshots" "$tmp/diff.out"
		fi
		kill -TERM $rpid 2>/dev/null
		wait $rpid 2>/dev/null
	fi
fi

# 4. Damaged snapshots: refused with one line naming the file, at once.
if [ -n "$s" ]; then
	bad_snap() { # NAME REGEX [ARG...]: restore $tmp/NAME must fail (1) with REGEX
		bs_name=$1 bs_re=$2
		shift 2
		timeout -k 5 30 "$cub" restore "$tmp/$bs_name" "$@" >/dev/null 2>"$tmp/$bs_name.err" </dev/null
		got=$?
		if [ $got = 1 ] && grep -Eq "$bs_re" "$tmp/$bs_name.err"; then
			ok "restore of a $bs_name snapshot: refused ($(head -c 160 "$tmp/$bs_name.err"))"
		else
			notok "restore of a $bs_name snapshot: status $got, wanted 1 and /$bs_re/" "$tmp/$bs_name.err"
		fi
	}
	cp -r "$snap" "$tmp/truncated" && truncate -s 1M "$tmp/truncated/memory"
	bad_snap truncated 'truncated/memory: 1048576 bytes; the manifest says 16777216'
	cp -r "$snap" "$tmp/corrupt" &&
		printf '\377' | dd of="$tmp/corrupt/state" bs=1 seek=200 conv=notrunc 2>/dev/null
	bad_snap corrupt 'corrupt/state: checksum mismatch'
	cp -r "$snap" "$tmp/foreign" && sed -i 's/"arch": "x86_64"/"arch": "aarch64"/' "$tmp/foreign/manifest.json"
	bad_snap foreign 'made on aarch64; this cubicle runs x86_64 guests'
	cp -r "$snap" "$tmp/future" && sed -i 's/"version": "1.0"/"version": "2.0"/' "$tmp/future/manifest.json"
	bad_snap future 'snapshot format version 2.0; this cubicle reads 1.x'
	# Overrides: the machine must stay the snapshot's, ids must exist.
	ln -s "$snap" "$tmp/more-vcpus"
	bad_snap more-vcpus 'says 2 vCPUs and 16 MiB; the snapshot has 1 and 16' --set machine.vcpus=2
	ln -s "$snap" "$tmp/no-such-device"
	bad_snap no-such-device "no device with id 'nope'" --set devices.nope.max_log=1
	# A clone's own setting: its testdev passes on 16 bytes of guest log.
	nice -n 19 "$cub" restore "$snap" --set devices.mmio.max_log=16 >/dev/null \
		2>"$tmp/override.err" </dev/null &
	p=$!
	if wait_line $p "$tmp/override.err" 'guest log reached max_log \(16 bytes\)'; then
		ok "restore --set devices.mmio.max_log=16: the clone runs with it (its log stops at 16 bytes)"
	else
		notok "restore --set: the override did not reach the device" "$tmp/override.err"
	fi
	kill -TERM $p 2>/dev/null
	wait $p 2>/dev/null
fi

# 6. Writable disks.
# Sector 1 of FILE as "TAG COUNT NOTCOUNT" (signed 64-bit: ~COUNT is -COUNT-1).
sector1() { od -An -td8 -w24 -j512 -N24 "$1" 2>/dev/null | awk '{ print $1, $2, $3 }'; }
if [ -n "$s" ]; then
	extra_dev=',
  { type = "virtio-blk"; id = "disk"; transport = "mmio";
    backend = { type = "raw"; path = "'"$tmp"'/dc.img"; size = "1M"; }; }'
	mkcfg dc diskcount long 1
	extra_dev=
	"$cub" run "$tmp/dc.cfg" --api-sock "$tmp/dc.sock" >/dev/null 2>"$tmp/dc.err" </dev/null &
	pid=$!
	sk= ds="$tmp/snap-disk"
	if wait_line $pid "$tmp/dc.err" 'guest: count 3$' && grep -q 'guest: tag 0$' "$tmp/dc.err" &&
	   "$cub" ctl "$tmp/dc.sock" pause >"$tmp/dsnap.out" 2>&1 && sk=$(scratch "$tmp/dc.sock") &&
	   "$cub" snapshot "$tmp/dc.sock" "$ds" >>"$tmp/dsnap.out" 2>&1; then
		m0=$(md5sum <"$ds/disk-disk")
		set -- $(sector1 "$ds/disk-disk")
		# The copy holds what the guest wrote last: this count or the one before.
		if [ "${1:-x}" = 0 ] && { [ "${2:-x}" = "$sk" ] || [ "${2:-x}" = $((sk - 1)) ]; } &&
		   cmp -s "$ds/disk-disk" "$tmp/dc.img"; then
			ok "snapshot of a VM with a writable disk: its copy disk-disk is the disk at count $sk (sector 1: tag $1, count $2)"
		else
			notok "disk snapshot: sector 1 of the copy is '$*', wanted tag 0 and count $sk or $((sk - 1))" "$tmp/dsnap.out"
			sk=
		fi
	else
		notok "disk snapshot: the diskcount guest, pause or snapshot failed" "$tmp/dsnap.out"
		cat "$tmp/dc.err" >>"$tmp/dsnap.out"
		sk=
	fi
	# Rollback x100 in the running VM: the disk is the copy again each time.
	if [ -n "$sk" ]; then
		"$cub" ctl "$tmp/dc.sock" resume >"$tmp/drb.out" 2>&1
		wait_line $pid "$tmp/dc.err" "guest: count $((sk + 3))\$"
		moved=no
		cmp -s "$ds/disk-disk" "$tmp/dc.img" || moved=yes
		# The first rollback maps the snapshot's memory file where the
		# RAM was anonymous (machine.thp): one fd more, once. The
		# hundred after it must add none.
		first=ok
		"$cub" ctl "$tmp/dc.sock" rollback "$ds" >"$tmp/drb.first" 2>&1 ||
			{ first=failed; cat "$tmp/drb.first" >>"$tmp/drb.out"; }
		fd0=$(fds $pid)
		rss0=$(kib $pid VmRSS)
		rollback_100 "$tmp/dc.sock" "$ds" "$tmp/drb"
		fd1=$(fds $pid)
		rss1=$(kib $pid VmRSS)
		"$cub" ctl "$tmp/dc.sock" pause >>"$tmp/drb.out" 2>&1
		"$cub" ctl "$tmp/dc.sock" rollback "$ds" >>"$tmp/drb.out" 2>&1 || bad=$((bad + 1))
		# The disk is the copy again, but for sector 1 when the guest's
		# write of count $sk was in flight at the snapshot: the rollback
		# hands that request back to the device, which completes it.
		back=no rbsec=$(sector1 "$tmp/dc.img")
		if cmp -s -n 512 "$ds/disk-disk" "$tmp/dc.img" && cmp -s -i 1024 "$ds/disk-disk" "$tmp/dc.img"; then
			case "$(sector1 "$tmp/dc.img")" in
			"$(sector1 "$ds/disk-disk")" | "0 $sk $((-sk - 1))") back=yes ;;
			*) echo "# sector 1 after the rollback: $rbsec; the copy's: $(sector1 "$ds/disk-disk")" >>"$tmp/drb.out" ;;
			esac
		fi
		s2=$(scratch "$tmp/dc.sock")
		n_before=$(counts "$tmp/dc.err" | wc -l)
		"$cub" ctl "$tmp/dc.sock" resume >>"$tmp/drb.out" 2>&1
		# three rounds on from the rollback: sector 1 holds a count it
		# wrote since (a count is logged before its round's write)
		wait_count_after $pid "$tmp/dc.err" "$n_before" $((sk + 3))
		set -- $(sector1 "$tmp/dc.img")
		rss_ok=yes
		[ $((rss1 - rss0)) -lt 4096 ] || grep -qa '__asan_init' "$cub" 2>/dev/null || rss_ok=no
		if [ $bad = 0 ] && [ $first = ok ] && [ $moved = yes ] && [ $back = yes ] && [ "$s2" = "$sk" ] &&
		   [ "$fd1" = "$fd0" ] && [ $rss_ok = yes ] && [ "$(md5sum <"$ds/disk-disk")" = "$m0" ] &&
		   [ "${2:-0}" -ge "$sk" ] && ! grep -q 'memory lost' "$tmp/dc.err"; then
			ok "disk rollback x100 in one process ($(( (t1 - t0) / 100 )) ms each): the disk had moved on, after the rollbacks it is the snapshot's copy byte for byte (cmp; sector 1 with the write the guest had in flight, if any), scratch back to $sk; the guest writes on (sector 1 count $2); fds $fd0 -> $fd1, RSS $rss0 -> $rss1 KiB; the copy unchanged (md5)"
		else
			echo "# bad=$bad first rollback $first moved=$moved back=$back scratch=$s2 (want $sk) fds $fd0->$fd1 rss $rss0->$rss1 sector1='$*'" >>"$tmp/drb.out"
			notok "disk rollback" "$tmp/drb.out"
		fi
	fi
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	# A restore never overwrites a disk: dc.img exists, so without a path
	# of its own the restore is refused and dc.img is left as it was.
	if [ -n "$sk" ]; then
		before=$(md5sum <"$tmp/dc.img")
		timeout -k 5 30 "$cub" restore "$ds" >/dev/null 2>"$tmp/dexists.err" </dev/null
		got=$?
		if [ $got = 1 ] && grep -q "dc.img exists: a restore gives device disk its own copy.*--set devices.disk.backend.path=FILE" "$tmp/dexists.err" &&
		   [ "$(md5sum <"$tmp/dc.img")" = "$before" ]; then
			ok "restore onto an existing disk file: refused, the file untouched ($(head -c 200 "$tmp/dexists.err"))"
		else
			notok "restore onto an existing disk: status $got" "$tmp/dexists.err"
		fi
	fi
	# Clones, each with its own disk: restored paused, a tag written into
	# clone i's file (sector 0), resumed: clone i reads tag i + 1 and writes
	# it with its count into its own file alone.
	if [ -n "$sk" ]; then
		n=${CUBICLE_CLONES:-50}
		pids= i=0
		while [ $i -lt $n ]; do
			nice -n 19 "$cub" restore "$ds" --paused --api-sock "$tmp/dcl$i.sock" \
				--set "devices.disk.backend.path=$tmp/dclone$i.img" >/dev/null \
				2>"$tmp/dclone$i.err" </dev/null &
			pids="$pids $!"
			i=$((i + 1))
		done
		c=0 good=0 bad_clone= t0=$(now_ms)
		for p in $pids; do
			# restored once it says so ("restored DIR: ...; paused":
			# its API listens before the restore is done); a log
			# line, not `cubicle ctl info` polled (50 VMMs restoring
			# at once in the nested L1 made each poll slow)
			wait_line $p "$tmp/dclone$c.err" "restored .*; paused\$"
			t=$((c + 1))
			[ -f "$tmp/dclone$c.img" ] &&
				printf "\\$(printf %03o $((t % 256)))\\$(printf %03o $((t / 256)))" |
				dd of="$tmp/dclone$c.img" bs=1 conv=notrunc 2>/dev/null
			"$cub" ctl "$tmp/dcl$c.sock" resume >>"$tmp/dclone$c.err" 2>&1
			c=$((c + 1))
		done
		t1=$(now_ms)
		# (a clone seen writing is stopped, as the clones above)
		c=0
		for p in $pids; do
			t=$((c + 1))
			if wait_line $p "$tmp/dclone$c.err" "guest: tag $t\$" &&
			   wait_line $p "$tmp/dclone$c.err" "guest: count $((sk + 2))\$" &&
			   ! grep -q 'memory lost' "$tmp/dclone$c.err"; then
				good=$((good + 1))
			else
				bad_clone=$c
			fi
			kill -STOP $p 2>/dev/null
			c=$((c + 1))
		done
		for p in $pids; do kill -TERM $p 2>/dev/null; kill -CONT $p 2>/dev/null; done
		for p in $pids; do wait $p 2>/dev/null; done
		# Each file: its own tag and a count past the snapshot's.
		c=0 own=0 sums=
		while [ $c -lt $n ]; do
			set -- $(sector1 "$tmp/dclone$c.img")
			if [ "${1:-x}" = $((c + 1)) ] && [ "${2:-0}" -ge "$sk" ] &&
			   [ "${3:-x}" = $((-${2:-0} - 1)) ]; then
				own=$((own + 1))
			else
				echo "# clone $c: sector 1 is '$*'" >>"$tmp/dclones.out"
			fi
			sums="$sums$(md5sum <"$tmp/dclone$c.img" | cut -c1-32)
"
			c=$((c + 1))
		done
		distinct=$(printf '%s' "$sums" | sort -u | grep -c .)
		if [ $good = $n ] && [ $own = $n ] && [ "$distinct" = $n ] &&
		   [ "$(md5sum <"$ds/disk-disk")" = "$m0" ]; then
			ok "$n clones with a disk each: clone i read the tag written into its own file and wrote it with its count there ($n distinct md5s); the snapshot's copy unchanged (md5); all restored, tagged and resumed in $((t1 - t0)) ms"
		else
			echo "# $good of $n clones read their tag; $own of $n files hold their own; $distinct distinct" >>"$tmp/dclones.out"
			[ -n "$bad_clone" ] && tail -n 15 "$tmp/dclone$bad_clone.err" >>"$tmp/dclones.out"
			notok "clones with disks" "$tmp/dclones.out"
		fi
	fi
fi

# 7. A jailed restore (--jail, issue 14): the diskcount snapshot restored as
#    uid 65534 in namespaces of its own and a cgroup, the snapshot folder
#    bound in read-only, the clone's disk copy and its API socket made inside
#    the jail (ROOT/PATH from outside). It counts on, is driven through that
#    socket, sees none of the host's files or processes; the snapshot's copy
#    is unchanged and the cgroup is gone after SIGTERM; a copy of the
#    snapshot naming another jail's disk is refused. Root and cgroup v2
#    only (in the nested harness's L1, which mounts none, cgroup2 is mounted
#    here).
[ "$nested_l1" = 1 ] && ! [ -e /sys/fs/cgroup/cgroup.controllers ] &&
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
if [ -n "${sk:-}" ] && { [ "$(id -u)" != 0 ] || { ! [ -e /sys/fs/cgroup/cgroup.controllers ] &&
     ! [ -e /sys/fs/cgroup/unified/cgroup.controllers ]; }; }; then
	echo "# restore --jail: skipped (it needs root and a cgroup v2 hierarchy)"
elif [ -n "${sk:-}" ]; then
	jr=$tmp/jail-root
	mkdir -p "$jr" && chown 65534:65534 "$jr"
	# Under ASan, LeakSanitizer's exit check ptraces the process from a
	# forked task: the jail refuses that (ASan then aborts). Leaks are
	# checked everywhere else; here the jail is what is tested.
	jenv=
	[ $asan = 1 ] && jenv="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	env $jenv "$cub" restore "$ds" --jail "$jr" --jail-probe --api-sock "$tmp/jr.sock" -l info \
		--set "devices.disk.backend.path=$tmp/jclone.img" >/dev/null 2>"$tmp/jrestore.err" </dev/null &
	p=$!
	jsk= probe=
	if wait_line $p "$tmp/jrestore.err" "guest: count $((sk + 2))\$" &&
	   "$cub" ctl "$jr$tmp/jr.sock" pause >>"$tmp/jrestore.out" 2>&1 &&
	   jsk=$(scratch "$jr$tmp/jr.sock") &&
	   "$cub" ctl "$jr$tmp/jr.sock" resume >>"$tmp/jrestore.out" 2>&1; then
		probe=$(sed -n 's/.*jail probe: //p' "$tmp/jrestore.err")
	fi
	cg=$(sed -n 's/.*jailed in .* cgroup \(.*\)$/\1/p' "$tmp/jrestore.err")
	# in the cgroup: the VMM and the namespace's init (both share the
	# memory the cgroup is charged for), not the supervisor.
	# A kernel thread KVM makes for the VM is listed apart: older kernels'
	# (6.1: L1's) NX huge page recovery worker, kvm-nx-lpage-recovery, is
	# a kthread moved into its creator's cgroups, so charged to the jail.
	cgprocs= cgkthreads=
	for cp in $(cat "$cg/cgroup.procs" 2>/dev/null); do
		fl=$(sed 's/.*) //' "/proc/$cp/stat" 2>/dev/null | cut -d' ' -f7)
		if [ $((${fl:-0} & 0x200000)) != 0 ]; then # PF_KTHREAD
			cgkthreads="$cgkthreads$cp ($(cat "/proc/$cp/comm" 2>/dev/null)) "
		else
			cgprocs="$cgprocs$cp "
		fi
	done
	kill -TERM $p 2>/dev/null
	# bounded: a jailed VMM that does not end must fail this test, not hang the run
	i=0
	while [ $i -lt 60 ] && kill -0 $p 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
	kill -0 $p 2>/dev/null && { echo "# still running 30 s after SIGTERM: SIGKILL" >>"$tmp/jrestore.out"; pkill -KILL -f "restore $ds --jail"; }
	wait $p 2>/dev/null
	got=$?
	set -- $(sector1 "$jr$tmp/jclone.img")
	if [ -n "$jsk" ] && [ $got = 143 ] &&
	   echo "$probe" | grep -q '^pid 2 uid 65534 gid 65534; / holds:.*; 2 processes: 1 2; network interfaces: lo; read-only binds: 1 of 1; network namespace [0-9]*$' &&
	   ! echo "$probe" | grep -Eq '/ holds:.* (etc|usr|bin|home|sys|lib)( |;)' &&
	   [ -n "$cg" ] && ! [ -e "$cg" ] && ! [ -e "$tmp/jclone.img" ] &&
	   [ "$(echo $cgprocs | wc -w)" = 2 ] && ! echo " $cgprocs" | grep -q " $p " &&
	   [ "${1:-x}" = 0 ] && [ "${2:-0}" -ge "$sk" ] && [ "$(md5sum <"$ds/disk-disk")" = "$m0" ]; then
		ok "restore --jail: counted on past $sk (scratch $jsk through the API socket inside the jail), sees '$probe'; its disk copy was made inside the jail (sector 1: tag $1, count $2); the snapshot's copy unchanged (md5); SIGTERM 143; the cgroup held pids $cgprocs(the VMM and the init)${cgkthreads:+ and the kernel threads $cgkthreads}and is gone"
	else
		tail -n 12 "$tmp/jrestore.err" >>"$tmp/jrestore.out"
		# last: notok shows the file's last 15 lines
		echo "# probe '$probe'; scratch ${jsk:-none}; status $got; cgroup '${cg:-?}' (pids '$cgprocs', kernel threads '$cgkthreads')$( [ -e "${cg:-/nonexistent}" ] && echo ' still there'); jail copy sector 1 '$*'; snapshot disk md5 $( [ "$(md5sum <"$ds/disk-disk")" = "$m0" ] && echo same || echo changed)" >>"$tmp/jrestore.out"
		notok "restore --jail" "$tmp/jrestore.out"
	fi
	# The jailed VMM is pid 2 beside the namespace's own init, both the
	# supervisor's children: a SIGABRT sent to it ends it (pid 1 of a
	# namespace would ignore it, and would not die of its own abort()); the
	# supervisor exits as it did.
	env $jenv "$cub" restore "$ds" --jail "$jr" --api-sock "$tmp/jr2.sock" -l info \
		--set "devices.disk.backend.path=$tmp/jclone2.img" >/dev/null 2>"$tmp/jabort.err" </dev/null &
	p=$!
	vmm= init=
	if wait_line $p "$tmp/jabort.err" "guest: count $((sk + 2))\$"; then
		# the namespace numbers them (NSpid's last field): 1 the init, 2 the VMM
		for c in $(cat "/proc/$p/task/$p/children" 2>/dev/null); do
			case $(awk '/^NSpid:/ { print $NF }' "/proc/$c/status" 2>/dev/null) in
			1) init=$c ;;
			2) vmm=$c ;;
			esac
		done
		[ -n "$init" ] && [ -n "$vmm" ] && kill -ABRT "$vmm"
	fi
	i=0
	while [ $i -lt 60 ] && kill -0 $p 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
	kill -0 $p 2>/dev/null && pkill -KILL -f "restore $ds --jail"
	wait $p 2>/dev/null
	got=$?
	cg=$(sed -n 's/.*jailed in .* cgroup \(.*\)$/\1/p' "$tmp/jabort.err")
	if [ -n "$vmm" ] && [ $got = 134 ] && [ -n "$cg" ] && ! [ -e "$cg" ]; then
		ok "restore --jail: the VMM is pid 2 beside the namespace's init (host pids $vmm, $init); SIGABRT to it ends the jail with status 134, the cgroup gone"
	else
		tail -n 15 "$tmp/jabort.err" >"$tmp/jabort.out"
		notok "restore --jail: SIGABRT to the VMM (init '$init', VMM '$vmm'): status $got, cgroup '${cg:-?}'" "$tmp/jabort.out"
	fi
	# forge_disk MANIFEST PATH: every disk's backend.path in MANIFEST
	# becomes PATH (a snapshot a VMM taken over by its guest could write)
	forge_disk() {
		python3 - "$1" "$2" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
for d in m["config"]["tree"]["devices"]:
    if isinstance(d.get("backend"), dict) and "path" in d["backend"]:
        d["backend"]["path"] = sys.argv[2]
json.dump(m, open(sys.argv[1], "w"))
EOF
	}
	# A jailed VMM writes its snapshot, so a jailed restore does not take
	# host paths from it on trust: a copy whose disk names another jail's
	# image (the jail's uid owns it; no --set names it) is refused before
	# anything starts, the path named, that image untouched, no cgroup made.
	fg=$tmp/forged
	rm -rf "$fg" && cp -a "$ds" "$fg" && mkdir -p "$tmp/otherjail" &&
		printf 'other tenant' >"$tmp/otherjail/disk.img" && chown -R 65534:65534 "$tmp/otherjail"
	forge_disk "$fg/manifest.json" "$tmp/otherjail/disk.img"
	env $jenv "$cub" restore "$fg" --jail "$jr" -l err >"$tmp/jforged.out" 2>"$tmp/jforged.err" </dev/null
	got=$?
	if [ $got = 1 ] && [ "$(wc -l <"$tmp/jforged.err")" = 1 ] &&
	   grep -q "$tmp/otherjail/disk.img: only the snapshot names it and the jail's uid owns it" "$tmp/jforged.err" &&
	   [ "$(cat "$tmp/otherjail/disk.img")" = "other tenant" ]; then
		ok "restore --jail: a snapshot naming another jail's disk (owned by the jail's uid, not given with --set) is refused before anything starts, the path named"
	else
		cat "$tmp/jforged.err" >>"$tmp/jforged.out"
		notok "restore --jail of a forged snapshot: status $got" "$tmp/jforged.out"
	fi
	# The same forgery naming root's world-readable file behind a folder
	# only root may pass (0700): the jail's uid could not reach it by
	# itself, and a bind would skip that folder: refused, the folder named.
	mkdir -p "$tmp/private" && chmod 0700 "$tmp/private" &&
		printf 'root only' >"$tmp/private/secret.img" && chmod 0644 "$tmp/private/secret.img"
	forge_disk "$fg/manifest.json" "$tmp/private/secret.img"
	env $jenv "$cub" restore "$fg" --jail "$jr" -l err >"$tmp/jhidden.out" 2>"$tmp/jhidden.err" </dev/null
	got=$?
	if [ $got = 1 ] && [ "$(wc -l <"$tmp/jhidden.err")" = 1 ] &&
	   grep -q "$tmp/private/secret.img: only the snapshot names it and the jail's uid could not reach it: $tmp/private is a folder it may not search" "$tmp/jhidden.err" &&
	   ! [ -e "$jr$tmp/private" ]; then
		ok "restore --jail: a snapshot naming root's file behind a 0700 folder (world-readable, not given with --set) is refused before anything starts, the folder named"
	else
		cat "$tmp/jhidden.err" >>"$tmp/jhidden.out"
		notok "restore --jail of a snapshot naming a file the jail's uid cannot reach: status $got" "$tmp/jhidden.out"
	fi
fi

# 9. machine.pit = false and machine.irqchip = "split" (issue 16): a VM
# made with the setting (--set $2) snapshots and restores with it (the PIT's
# record left out; cubicle's IOAPIC's state instead of KVM's chips) and
# counts on; its snapshot restored with the other (--set $3), and the plain
# counter's snapshot restored with the setting, are refused with a line
# saying why ($4 and $5 on them). $1 names the case, $6 describes it.
setting_case() {
	name=$1 on=$2 back=$3 re_back=$4 re_other=$5 what=$6
	snap=$tmp/snap-$name
	mkcfg "$name" counter long 1
	echo "api = { socket = \"$tmp/$name.sock\"; };" >>"$tmp/$name.cfg"
	"$cub" run "$tmp/$name.cfg" --set "$on" >/dev/null 2>"$tmp/$name.err" </dev/null &
	pid=$!
	if ! wait_line $pid "$tmp/$name.err" 'guest: count 3$' ||
	   ! "$cub" ctl "$tmp/$name.sock" pause >"$tmp/$name.out" 2>&1 ||
	   ! "$cub" snapshot "$tmp/$name.sock" "$snap" >>"$tmp/$name.out" 2>&1; then
		kill -9 $pid 2>/dev/null
		cat "$tmp/$name.err" >>"$tmp/$name.out"
		notok "$what: the VM or its snapshot failed" "$tmp/$name.out"
		return
	fi
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	"$cub" restore "$snap" >/dev/null 2>"$tmp/$name-r.err" </dev/null &
	rpid=$!
	c=$(counts "$tmp/$name.err" | tail -n 1)
	if ! wait_line $rpid "$tmp/$name-r.err" "guest: count $((c + 2))\$"; then
		kill -9 $rpid 2>/dev/null
		notok "$what: the restore did not count on past $c" "$tmp/$name-r.err"
		return
	fi
	kill -9 $rpid 2>/dev/null
	wait $rpid 2>/dev/null
	timeout -k 5 30 "$cub" restore "$snap" --set "$back" >"$tmp/$name-r2.err" 2>&1 </dev/null
	st1=$?
	timeout -k 5 30 "$cub" restore "$tmp/snap-counter" --set "$on" >"$tmp/$name-r3.err" 2>&1 </dev/null
	st2=$?
	if [ $st1 != 0 ] && grep -q "$re_back" "$tmp/$name-r2.err" && [ $st2 != 0 ] &&
	   grep -q "$re_other" "$tmp/$name-r3.err"; then
		ok "$what: snapshot and restore (counts on past $c); mismatched restores refused ($(head -n 1 "$tmp/$name-r2.err"))"
	else
		cat "$tmp/$name-r2.err" "$tmp/$name-r3.err" >>"$tmp/$name.out"
		notok "$what: mismatched restores (status $st1, $st2)" "$tmp/$name.out"
	fi
}
setting_case nopit machine.pit=false machine.pit=true 'has no PIT (machine.pit = false)' \
	'has a PIT and machine.pit is false' "machine.pit = false"
setting_case split machine.irqchip=split machine.irqchip=kernel 'has a split irqchip' \
	"has KVM's PIC and IOAPIC" 'machine.irqchip = "split"'

# 9b. machine.thp = true (issue 16; the default for a kernel, asked of a
# payload here): guest RAM is private anonymous memory at a 2 MiB boundary,
# advised huge pages ("hg" in smaps' VmFlags), not the memfd; its snapshot
# holds the pages the guest wrote and nothing of the rest (a sparse file of
# less than a megabyte of its 16), restores and counts on; a rollback in the
# running VM maps the snapshot over it and the guest counts on.
snap=$tmp/snap-thp
mkcfg thp counter long 1
echo "api = { socket = \"$tmp/thp.sock\"; };" >>"$tmp/thp.cfg"
"$cub" run "$tmp/thp.cfg" --set machine.thp=true >/dev/null 2>"$tmp/thp.err" </dev/null &
pid=$!
ram= memfd=
if wait_line $pid "$tmp/thp.err" 'guest: count 3$'; then
	# the mapping advised huge pages: its range, and whether a memfd is mapped
	ram=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { r = $1 } /^VmFlags:/ && / hg( |$)/ { print r }' "/proc/$pid/smaps")
	memfd=$(grep -c 'memfd:cubicle-guest-ram' "/proc/$pid/maps")
fi
lo=${ram%-*} hi=${ram#*-}
if [ -n "$ram" ] && [ "$memfd" = 0 ] && [ $((0x$hi - 0x$lo)) = $((16 << 20)) ] &&
   [ $((0x$lo % (2 << 20))) = 0 ] &&
   "$cub" ctl "$tmp/thp.sock" pause >"$tmp/thp.out" 2>&1 &&
   "$cub" snapshot "$tmp/thp.sock" "$snap" >>"$tmp/thp.out" 2>&1 &&
   "$cub" ctl "$tmp/thp.sock" resume >>"$tmp/thp.out" 2>&1; then
	c=$(counts "$tmp/thp.err" | tail -n 1)
	n_before=$(counts "$tmp/thp.err" | wc -l)
	"$cub" ctl "$tmp/thp.sock" rollback "$snap" >>"$tmp/thp.out" 2>&1
	rb=$?
	wait_count_after $pid "$tmp/thp.err" "$n_before" $((c + 1))
	rb_counts=$(counts "$tmp/thp.err" | tail -n +$((n_before + 1)) | tr '\n' ' ')
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	used=$(du -k "$snap/memory" | cut -f1)
	"$cub" restore "$snap" >/dev/null 2>"$tmp/thp-r.err" </dev/null &
	rpid=$!
	if [ $rb = 0 ] && [ -n "$rb_counts" ] && [ "$used" -lt 1024 ] &&
	   wait_line $rpid "$tmp/thp-r.err" "guest: count $((c + 2))\$"; then
		ok "machine.thp = true: RAM at $lo, 2 MiB aligned, advised huge pages, no memfd; its snapshot uses $used KiB of disk for 16 MiB; after a rollback in place it counts on ($rb_counts); the restore counts on past $c"
	else
		echo "# rollback status $rb, counts after it '$rb_counts'; memory file $used KiB on disk" >>"$tmp/thp.out"
		cat "$tmp/thp-r.err" >>"$tmp/thp.out"
		notok "machine.thp = true: snapshot, rollback or restore" "$tmp/thp.out"
	fi
	kill -9 $rpid 2>/dev/null
	wait $rpid 2>/dev/null
else
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	echo "# the hg mapping: '${ram:-none}'; memfds mapped: '${memfd:-?}'" >>"$tmp/thp.out"
	cat "$tmp/thp.err" >>"$tmp/thp.out"
	notok "machine.thp = true: RAM or snapshot" "$tmp/thp.out"
fi

# 10. Landlock (issue 14; where the kernel has it, as L1's does): once the
# guest runs, the control API reaches by path only the VM's own folders and
# api.paths. A snapshot into a folder elsewhere is refused (permission
# denied) and the VM runs on; with that folder in api.paths it is made.
ll_abi=$(python3 -c 'import ctypes; L = ctypes.c_long; print(ctypes.CDLL(None).syscall(L(444), None, L(0), L(1)))' 2>/dev/null)
if [ "${ll_abi:-0}" -ge 1 ] 2>/dev/null; then
	far=$(mktemp -d) # beside $tmp, not in it: no file of the VM is there
	mkcfg fenced counter long 1
	echo "api = { socket = \"$tmp/fenced.sock\"; };" >>"$tmp/fenced.cfg"
	# enforce said, as a sanitizer build's default is log (no Landlock)
	"$cub" run "$tmp/fenced.cfg" --seccomp=enforce >/dev/null 2>"$tmp/fenced.err" </dev/null &
	pid=$!
	"$cub" run "$tmp/fenced.cfg" --seccomp=enforce --api-sock "$tmp/fenced2.sock" --set "api.paths=$far" \
		>/dev/null 2>"$tmp/fenced2.err" </dev/null &
	pid2=$!
	if wait_line $pid "$tmp/fenced.err" 'guest: count 3$' && wait_line $pid2 "$tmp/fenced2.err" 'guest: count 3$' &&
	   "$cub" ctl "$tmp/fenced.sock" pause >"$tmp/fenced.out" 2>&1 &&
	   "$cub" ctl "$tmp/fenced2.sock" pause >>"$tmp/fenced.out" 2>&1; then
		"$cub" snapshot "$tmp/fenced.sock" "$far/snap" >"$tmp/fenced-snap.out" 2>&1
		st1=$?
		"$cub" snapshot "$tmp/fenced2.sock" "$far/snap2" >>"$tmp/fenced.out" 2>&1
		st2=$?
		c=$(counts "$tmp/fenced.err" | tail -n 1)
		"$cub" ctl "$tmp/fenced.sock" resume >>"$tmp/fenced.out" 2>&1
		if [ $st1 != 0 ] && grep -q 'Permission denied (not in a folder this VM may reach by path: add it to api.paths' \
			"$tmp/fenced-snap.out" && [ ! -e "$far/snap" ] &&
		   wait_line $pid "$tmp/fenced.err" "guest: count $((c + 2))\$" && [ $st2 = 0 ] && [ -s "$far/snap2/state" ]; then
			ok "Landlock (ABI $ll_abi): a snapshot into a folder that is not the VM's is refused ($(tail -n 1 "$tmp/fenced-snap.out")) and the VM counts on past $c; with the folder in api.paths it is made"
		else
			cat "$tmp/fenced-snap.out" >>"$tmp/fenced.out"
			ls -la "$far" >>"$tmp/fenced.out" 2>&1
			notok "Landlock: snapshot outside the VM's folders: status $st1 (want non-zero, 'Permission denied' and the api.paths hint), with api.paths $st2 (want 0)" "$tmp/fenced.out"
		fi
	else
		cat "$tmp/fenced.err" "$tmp/fenced2.err" >>"$tmp/fenced.out"
		notok "Landlock: the fenced counter guests did not start or pause" "$tmp/fenced.out"
	fi
	kill -9 $pid $pid2 2>/dev/null
	wait $pid $pid2 2>/dev/null
	rm -rf "$far"
else
	echo "# Landlock: this kernel has none (ABI '$ll_abi'): the control threads' fence is not tested here"
fi
