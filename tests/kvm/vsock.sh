# SPDX-License-Identifier: Apache-2.0
# virtio-vsock payload tests (issue 13), sourced by run_payloads.sh (its
# helpers and $tmp): payloads/vsock.S speaks raw virtio-vsock to the device
# in lock step with tests/kvm/vsockpeer (script) on the host side: connects
# both ways, credit, RSTs, malformed packets, max_connections, resets (the
# stages (a)-(g) of its lines). payloads/hostile_vsock.S
# never reads while the peer writes 64 MiB, and floods past its credit: the
# peer must block, cubicle's memory stay bounded, SIGTERM end it.
vsockpeer=$bd/tests/kvm/vsockpeer

# vs_want FILE REGEX: count a line of FILE that REGEX misses in vs_miss.
vs_want() {
	if ! grep -Eq -- "$2" "$1"; then
		vs_miss="$vs_miss
#   missing: /$2/"
	fi
}
# vs_group NAME WHAT: ok when nothing was missed since the last group.
vs_group() {
	if [ -z "$vs_miss" ]; then
		ok "vsock $1: $2"
	else
		echo "not ok - vsock $1: $2$vs_miss"
		fail=$((fail + 1))
	fi
	vs_miss=
}

if ! [ -x "$vsockpeer" ] || ! [ -s "$pl/vsock.bin" ] || ! [ -s "$pl/hostile_vsock.bin" ]; then
	notok "vsock: tests/kvm/vsockpeer, payloads/vsock.bin or payloads/hostile_vsock.bin is not built"
else
	vs=$tmp/v.sock fail0=$fail
	"$vsockpeer" script "$vs" >"$tmp/vsockpeer.out" 2>&1 &
	vpeer=$!
	wait_line $vpeer "$tmp/vsockpeer.out" '^listening$'
	extra_dev=',
  { type = "virtio-vsock"; id = "vsock0"; transport = "mmio"; guest_cid = 3;
    uds_path = "'"$vs"'"; buffer_size = "128K"; max_connections = 16; }'
	run_limit=300
	t0=$(now_ms)
	run vsock vsock long 1 42 'testdev\[mmio\]: guest: vsock ok'
	vs_ms=$(($(now_ms) - t0))
	run_limit=60
	extra_dev=
	# The peer ends on its own once the guest closed its last connection
	# (20 s at most: it waits longer only when the guest stopped short).
	n=$(($(now_ms) + 20000))
	while [ "$(now_ms)" -lt $n ] && kill -0 $vpeer 2>/dev/null; do
		sleep 0.1
	done
	kill $vpeer 2>/dev/null
	wait $vpeer
	vs_prc=$?
	g=$tmp/vsock.err p=$tmp/vsockpeer.out
	vs_miss=
	# (a) both directions, data and fwd_cnt
	hport=$(sed -n 's/^6000: OK \([0-9]*\)$/\1/p' "$p")
	vs_want "$g" 'guest: a1: connected to host port 5001; its buf_alloc 131072$'
	vs_want "$g" "guest: a1: 100 bytes sent, 100 came back \(\+1\); the device's fwd_cnt 100$"
	vs_want "$g" 'guest: a1: SHUTDOWN answered by RST$'
	vs_want "$p" '^5001: 100 bytes as sent, echoed \+1; then 0 more bytes and EOF$'
	vs_want "$g" "guest: a2: host connected to port 6000 from port ${hport:-none}\$"
	vs_want "$g" 'guest: a3: 50 bytes to the host on 6000; our CREDIT_REQUEST answered with fwd_cnt 50$'
	vs_want "$p" "^6000: 65536 bytes written; then 50 bytes read \(the guest's pattern\) and (EOF|Connection reset by peer)\$"
	vs_group a "guest->host 5001: 100 bytes there and back, fwd_cnt 100, SHUTDOWN then RST; host->guest CONNECT 6000: OK ${hport:-?} (the port the guest saw), 64 KiB to the guest (b), 50 bytes back, fwd_cnt 50 on request; the device's buf_alloc 128 KiB in every packet"
	# (b) credit
	vs_want "$g" 'guest: b: credit 4096: bytes delivered before two probes 4096$'
	vs_want "$g" 'guest: b: CREDIT_UPDATE fwd_cnt 4096: bytes delivered in all, two probes later 8192$'
	vs_group b "the host wrote 64 KiB: 4096 bytes (the guest's credit) reached it, 8192 after its CREDIT_UPDATE, each pattern-checked"
	# (c) RSTs
	vs_want "$g" "guest: c: RST sent on 6000; the host's connection to 6001 refused with RST$"
	vs_want "$g" 'guest: c: REQUEST to 5999 \(no listener\): RSTs 1$'
	vs_want "$p" "^BOGUS: 0 bytes of reply \(''\) and (EOF|Connection reset by peer)$"
	vs_want "$p" "^6001: 0 bytes of reply \(''\) and (EOF|Connection reset by peer)$"
	vs_want "$p" "^CONNECT 2\^32: 0 bytes of reply \(''\) and (EOF|Connection reset by peer)$"
	vs_want "$p" "^63 bytes, no newline: 0 bytes of reply \(''\) and (EOF|Connection reset by peer)$"
	vs_group c "the guest's RST closed the host's socket; a refused CONNECT, a bogus line, a port past 2^32-1 and 63 bytes with no newline closed with no reply (the guest saw no REQUEST); no listener: RST"
	# (e) malformed packets
	for e in 'e1 RW len 4096 in a 16-byte buffer: RSTs 1' 'e2 RW len 0xffffffff: RSTs 1' \
		'e3 20-byte header: RSTs 0' 'e4 header in a device-writable buffer: RSTs 0' \
		'e3/e4: the connection lived on: 10 bytes, SHUTDOWN, RST' \
		'e5 type SEQPACKET \(not offered\): RSTs 1' 'e6 type 0x99: RSTs 1' \
		'e7 src_cid 7: RSTs 1' 'e8 dst_cid 0x100000002: RSTs 1' 'e9 dst_cid 3 \(its own\): RSTs 1' \
		'e10 op 0x63: RSTs 1' 'e11 REQUEST with 16 bytes of payload: RSTs 1' \
		'e12 RW without a connection: RSTs 1' 'e13 RST without a connection: RSTs 0' \
		'e14 REQUEST header split 20\+4\+20 bytes: RSTs 1'; do
		vs_want "$g" "guest: $e\$"
	done
	vs_want "$p" '^5002 #1: 0 bytes and EOF$'
	vs_want "$p" '^5002 #2: 0 bytes and EOF$'
	vs_want "$p" "^5002 #3: 10 bytes \(the guest's pattern\) and EOF$"
	vs_want "$p" '^5003: no connection$'
	vs_want "$g" 'malformed packet'
	vs_group e "14 malformed packets: bad lengths reset their connection (the host got none of their bytes), bad type/CID/op answered by RST with nothing connected, short or writable headers dropped, a split header parsed"
	# (g) max_connections
	vs_want "$g" 'guest: g: 20 REQUESTs with max_connections 16: RESPONSEs 16$'
	vs_want "$g" 'guest: g: and RSTs 4$'
	vs_want "$p" '^5004: 16 connections came$'
	vs_group g "max_connections = 16: of 20 REQUESTs 16 connected (the host's backlog got 16), 4 reset"
	# (f) resets
	vs_want "$g" 'guest: f: reset with 5001 open; a 16-byte receive buffer: the device needs reset$'
	vs_want "$g" 'guest: f: reset again: connected to 5001, 3 bytes sent, SHUTDOWN, RST$'
	vs_want "$p" '^5001 #2: 0 bytes and EOF$'
	vs_want "$p" "^5001 #3: 3 bytes \(the guest's pattern\) and EOF$"
	vs_want "$p" '^script done$'
	[ "$vs_prc" = 0 ] || vs_miss="$vs_miss
#   vsockpeer exited $vs_prc: $(grep 'error' "$p")"
	[ -e "$vs" ] && vs_miss="$vs_miss
#   $vs is still there after cubicle ended"
	vs_group f "a device reset closed the open connection; a receive buffer too short for a header: needs reset, and a reset brings it back; the socket file removed at exit (the whole run: $vs_ms ms)"
	[ -n "${CUBICLE_VSOCK_VERBOSE:-}" ] || [ $fail -ne $fail0 ] && sed 's/^/#   peer: /' "$p" && grep 'guest: ' "$g" | sed 's/^/#   /'

	# (d) a guest that never reads, while the host writes 64 MiB, and floods
	# past its credit: the peer must block, cubicle stay small.
	hv=$tmp/h.sock base= peak= hbytes= held= d0=$(now_ms)
	"$vsockpeer" flood "$hv" 64 >"$tmp/vsockflood.out" 2>&1 &
	fpeer=$!
	wait_line $fpeer "$tmp/vsockflood.out" '^listening$'
	extra_dev=',
  { type = "virtio-vsock"; id = "vsock0"; transport = "mmio"; guest_cid = 3;
    uds_path = "'"$hv"'"; buffer_size = "128K"; }'
	mkcfg hostile-vsock hostile_vsock long 1
	echo "api = { socket = \"$tmp/hv-api.sock\"; };" >>"$tmp/hostile-vsock.cfg"
	extra_dev=
	"$cub" run "$tmp/hostile-vsock.cfg" >"$tmp/hostile-vsock.out" 2>"$tmp/hostile-vsock.err" </dev/null &
	pid=$!
	(sleep 300; kill -9 $pid) 2>/dev/null &
	dog=$!
	# cubicle's memory with the device up, before any connection; then GO
	wait_line $pid "$tmp/hostile-vsock.err" 'guest: hostile vsock: device up' &&
		base=$(kib $pid VmRSS) &&
		"$cub" ctl "$tmp/hv-api.sock" call mmio scratch $((0x600d)) >"$tmp/hv-go.out" 2>&1
	d_up=$(($(now_ms) - d0))
	if ! wait_line $pid "$tmp/hostile-vsock.err" 'guest: hostile vsock running'; then
		kill -9 $pid 2>/dev/null
		wait $pid 2>/dev/null
		notok "hostile-vsock: the guest never reported running" "$tmp/hostile-vsock.err"
	else
		# The peer says so after 2 s without progress: a minute at most.
		n=$(($(now_ms) + 60000))
		while [ "$(now_ms)" -lt $n ] && kill -0 $pid 2>/dev/null &&
		      ! grep -q '^flood: blocked after' "$tmp/vsockflood.out"; do
			sleep 0.2
		done
		d_blk=$(($(now_ms) - d0))
		wait_line $pid "$tmp/hostile-vsock.err" 'guest: hostile vsock: every receive buffer used'
		d_full=$(($(now_ms) - d0))
		sleep 2
		peak=$(kib $pid VmHWM)
		# The device's counters: what it read from host sockets for the
		# guest can be no more than the 8 receive buffers held (8 x 4052
		# bytes), and it holds nothing for a connection it reset.
		stats=$("$cub" ctl "$tmp/hv-api.sock" call vsock0 stats 2>&1)
		hbytes=$(echo "$stats" | sed -n 's/.* host_bytes \([0-9]*\) .*/\1/p')
		held=$(echo "$stats" | sed -n 's/.* buffered \([0-9]*\) .*/\1/p')
		t0=$(now_ms)
		kill -TERM $pid
		wait $pid
		got=$?
		ms=$(($(now_ms) - t0))
		vs_miss=
		kill -TERM $fpeer 2>/dev/null
		wait $fpeer
		wrote=$(sed -n 's/^flood: wrote \([0-9]*\) bytes; 5101 closed$/\1/p' "$tmp/vsockflood.out")
		blocked=$(sed -n 's/^flood: blocked after \([0-9]*\) bytes$/\1/p' "$tmp/vsockflood.out")
		[ -n "$blocked" ] || vs_miss="$vs_miss
#   the peer's writes never blocked (or 5101 was not closed): $(tail -n 3 "$tmp/vsockflood.out")"
		[ -n "$wrote" ] && [ "$wrote" -le $((4 << 20)) ] || vs_miss="$vs_miss
#   the peer wrote ${wrote:-?} bytes (want at most 4 MiB of 64, and 5101 closed): $(tail -n 3 "$tmp/vsockflood.out")"
		vs_want "$tmp/hostile-vsock.err" 'past its credit; reset'
		vs_want "$tmp/hostile-vsock.err" 'guest: hostile vsock: every receive buffer used, none given back'
		[ -n "$hbytes" ] && [ "$hbytes" -le 32416 ] && [ "${held:-1}" = 0 ] || vs_miss="$vs_miss
#   stats: $stats (want host_bytes <= 32416, buffered 0)"
		if [ $got -ne 143 ] || [ $ms -gt "$term_ms" ]; then
			vs_miss="$vs_miss
#   SIGTERM: status $got after $ms ms (want 143 within $term_ms ms)"
		fi
		# 16 MiB of slack (48 under AddressSanitizer, whose shadow and
		# quarantine grow with what it sees allocated): far below the 64
		# MiB a device reading on would have to hold.
		slack=16
		grep -qa '__asan_init' "$cub" 2>/dev/null && slack=48
		if [ -n "${base:-}" ] && [ -n "${peak:-}" ] && [ $((peak - base)) -le $((slack << 10)) ]; then
			rss="peak RSS $peak KiB, $((peak - base)) KiB above its RSS before the connections ($base KiB; at most $slack MiB)"
		else
			rss="peak RSS ${peak:-?} KiB, ${base:-?} KiB before the connections: more than $slack MiB apart"
			vs_miss="$vs_miss
#   $rss"
		fi
		[ -n "$vs_miss" ] && vs_miss="$vs_miss
$(tail -n 8 "$tmp/hostile-vsock.err" | sed 's/^/#   /')"
		vs_group d "a guest that never reads: the host's writes blocked after ${blocked:-?} bytes of 64 MiB (${wrote:-?} in all), the device read $hbytes bytes for the guest (its receive buffers), holds $held; its flood past the credit reset (5101 closed); $rss; SIGTERM ended it in $ms ms (the whole run: $(($(now_ms) - d0)) ms)"
		[ -n "${CUBICLE_VSOCK_VERBOSE:-}" ] &&
			echo "#   (d) ms: GO given at $d_up, the peer blocked by $d_blk, receive queue used up by $d_full"
	fi
	kill $dog 2>/dev/null
	kill $fpeer 2>/dev/null
fi
