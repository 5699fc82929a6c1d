/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-vsock payload: a raw driver that connects both ways, checks credit,
 * RSTs, malformed packets, the connection limit and device resets against a
 * host peer (tests/kvm/vsockpeer.c script), in lock step with it. Each stage says what it saw on the testdev
 * (lines the runner checks); a failed step exits with its number, naming
 * the packet it did not expect. Guest CID 3; pat(k) = k ^ (k >> 8). */
#include "vsock.inc"

	payload_entry
	trap_all
	movl	$QS, RX_N
	movl	$0x1000, RX_LEN
	movl	$2000, PROBE_PORT
	call	dev_init
	print	s_up

/* (a) guest-initiated: 100 bytes to host port 5001, echoed back + 1 */
	send	OP_REQUEST, $1024, $5001
	expect	OP_RESPONSE, $5001, $1024, 10
	mov	H_BUF(%rsi), %r14d
	mov	H_FWD(%rsi), %r11d
	call	rx_repost
	mov	%r14d, %eax
	report	s_a1
	mov	$11, %al
	test	%r11d, %r11d
	jnz	fail
	mov	$100, %ecx
	call	fill_pat
	send	OP_RW, $1024, $5001, $100
	mov	$5001, %r12d
	mov	$1024, %r13d
	xor	%r14d, %r14d
	mov	$1, %r10d
	movl	$100, LIMIT
1:	call	rx_rw
	cmp	$100, %r14d
	jb	1b
	mov	%r11d, %eax			/* the device's fwd_cnt: our 100 bytes */
	report	s_a1b
	shut	$1024, $5001, 12
	print	s_a1c

/* host-initiated: the peer's CONNECT 6000; we give it 4096 bytes of credit */
	accept	$6000, 13
	send	OP_RESPONSE, $6000, %r12d, balloc=$4096
	mov	%r12d, %eax
	report	s_a2

/* (b) the peer writes 64 KiB at once: 4096 bytes may come, no more (two
 * probes' round trips later), then 4096 more after a CREDIT_UPDATE */
	mov	$6000, %r13d
	xor	%r14d, %r14d
	xor	%r10d, %r10d
	movl	$4096, LIMIT
2:	call	rx_rw
	cmp	$4096, %r14d
	jb	2b
	xor	%r15d, %r15d
	mov	$14, %r9b			/* an RW now: past the credit */
	call	probe
	call	probe
	mov	%r14d, %eax
	report	s_b1
	send	OP_CREDIT_UPDATE, $6000, %r12d, balloc=$4096, fwd=$4096
	movl	$8192, LIMIT
3:	call	rx_rw
	cmp	$8192, %r14d
	jb	3b
	mov	$15, %r9b
	call	probe
	call	probe
	mov	%r14d, %eax
	report	s_b2
	mov	N_CREQ, %eax
	report	s_b3

/* guest -> host on the host's connection: 50 bytes (the credit we give
 * unchanged), then our CREDIT_REQUEST is answered with fwd_cnt 50 */
	mov	$50, %ecx
	call	fill_pat
	send	OP_RW, $6000, %r12d, $50, balloc=$4096, fwd=$4096
	send	OP_CREDIT_REQUEST, $6000, %r12d, balloc=$4096, fwd=$4096
	movl	$1, RAW_CREDIT
5:	call	rx_next
	mov	$37, %r9b
	cmpl	%r12d, H_SPORT(%rsi)
	jne	fail_pkt
	cmpl	$6000, H_DPORT(%rsi)
	jne	fail_pkt
	cmpw	$OP_CREDIT_REQUEST, H_OP(%rsi)	/* still stalled: said again */
	jne	6f
	call	rx_repost
	jmp	5b
6:	cmpw	$OP_CREDIT_UPDATE, H_OP(%rsi)
	jne	fail_pkt
	mov	H_FWD(%rsi), %r14d
	call	rx_repost
	movl	$0, RAW_CREDIT
	mov	%r14d, %eax
	report	s_a3

/* (c) RST: ours on 6000 (never answered), then the peer's CONNECT 6001
 * refused with one, then a REQUEST to a port nobody listens on */
	send	OP_RST, $6000, %r12d
	accept	$6001, 16
	send	OP_RST, $6001, %r12d
	print	s_c1
	send	OP_REQUEST, $1030, $5999
	probed	1030, s_c2, 17

/* (e) malformed packets. e1, e2 on live connections to 5002 (the device
 * must reset them: the peer sees 0 bytes) */
	connect	$1040, $5002, 18
	mov	$TXD, %edi			/* 16 bytes the peer must never see */
	mov	$16, %ecx
	mov	$0x58, %al
	rep stosb
	pkt	OP_RW, $1040, $5002, len=$4096
	txsend	$HDR, $16
	probed	1040, s_e1, 19
	connect	$1041, $5002, 20
	pkt	OP_RW, $1041, $5002, len=$0xffffffff
	txsend	$HDR, $16
	probed	1041, s_e2, 21
/* e3, e4 are dropped: the connection lives on and carries 10 good bytes */
	connect	$1042, $5002, 22
	pkt	OP_RW, $1042, $5002, len=$16
	mov	$20, %ecx			/* e3: a 20-byte header */
	xor	%edx, %edx
	call	tx_send
	probed	1042, s_e3, 23
	pkt	OP_RW, $1042, $5002, len=$16	/* e4: all device-writable */
	movq	$TXH, TXQ
	movl	$HDR, TXQ + 8
	movw	$(F_NEXT | F_WRITE), TXQ + 12
	movw	$1, TXQ + 14
	movq	$TXD, TXQ + 16
	movl	$16, TXQ + 24
	movw	$F_WRITE, TXQ + 28
	call	tx_go
	mov	$24, %r9b
	call	probe
	report	s_e4
	mov	$10, %ecx
	call	fill_pat
	send	OP_RW, $1042, $5002, $10
	shut	$1042, $5002, 25
	print	s_e4b
/* e5-e13 to port 5003: the peer listens there and must see no connection */
	bad	1043, s_e5, type=$2, step=26
	bad	1044, s_e6, type=$0x99
	bad	1045, s_e7, set=movq, val=$7, at=H_SCID
	bad	1046, s_e8, set=movl, val=$1, at=H_DCID+4
	bad	1047, s_e9, set=movq, val=$GUEST_CID, at=H_DCID
	bad	1048, s_e10, op=0x63
	bad	1049, s_e11, len=$16
	bad	1050, s_e12, op=OP_RW, len=$8
	bad	1051, s_e13, op=OP_RST
/* e14: a header split over three descriptors is still a header */
	pkt	OP_REQUEST, $1052, $5999
	movq	$TXH, TXQ
	movl	$20, TXQ + 8
	movw	$F_NEXT, TXQ + 12
	movw	$1, TXQ + 14
	movq	$(TXH + 20), TXQ + 16
	movl	$4, TXQ + 24
	movw	$F_NEXT, TXQ + 28
	movw	$2, TXQ + 30
	movq	$(TXH + 24), TXQ + 32
	movl	$20, TXQ + 40
	movw	$0, TXQ + 44
	call	tx_go
	probed	1052, s_e14

/* (g) with max_connections = 16, 20 REQUESTs to 5004 (the peer's backlog
 * takes them): 16 RESPONSEs, then RSTs; ours closes them again */
	xor	%r12d, %r12d			/* RESPONSEs */
	xor	%r13d, %r13d			/* RSTs */
	mov	$3000, %r14d
7:	send	OP_REQUEST, %r14d, $5004
	call	rx_next
	mov	$38, %r9b
	cmpl	$5004, H_SPORT(%rsi)
	jne	fail_pkt
	cmp	%r14d, H_DPORT(%rsi)
	jne	fail_pkt
	cmpw	$OP_RST, H_OP(%rsi)
	je	8f
	cmpw	$OP_RESPONSE, H_OP(%rsi)
	jne	fail_pkt
	inc	%r12d
	dec	%r13d
8:	inc	%r13d
	call	rx_repost
	inc	%r14d
	cmp	$3020, %r14d
	jne	7b
	mov	%r12d, %eax
	report	s_g1
	mov	%r13d, %eax
	report	s_g2
	mov	$3000, %r14d
9:	send	OP_RST, %r14d, $5004
	inc	%r14d
	cmp	$3020, %r14d
	jne	9b

/* (f) a reset with a connection open (the peer sees it end), then a
 * receive buffer too short for a header: the device needs reset; after
 * one more reset it works again */
	connect	$1060, $5001, 27
	movl	$1, RX_N
	movl	$16, RX_LEN
	call	dev_init
	send	OP_REQUEST, $1061, $5999	/* its RST needs a receive buffer */
	call	set_deadline
4:	pause
	call	tick
	test	%eax, %eax
	jz	4b
	cmp	$2, %eax
	mov	$28, %al
	jne	fail
	print	s_f1
	movl	$QS, RX_N
	movl	$0x1000, RX_LEN
	call	dev_init
	connect	$1062, $5001, 29
	mov	$3, %ecx
	call	fill_pat
	send	OP_RW, $1062, $5001, $3
	shut	$1062, $5001, 36
	print	s_f2
	movl	$0, VM_STATUS(%rbx)
	payload_exit s_ok

	vsock_routines
s_up:	.asciz	"vsock: device up, guest_cid 3\n"
s_a1:	.asciz	"a1: connected to host port 5001; its buf_alloc "
s_a1b:	.asciz	"a1: 100 bytes sent, 100 came back (+1); the device's fwd_cnt "
s_a1c:	.asciz	"a1: SHUTDOWN answered by RST\n"
s_a2:	.asciz	"a2: host connected to port 6000 from port "
s_a3:	.asciz	"a3: 50 bytes to the host on 6000; our CREDIT_REQUEST answered with fwd_cnt "
s_b1:	.asciz	"b: credit 4096: bytes delivered before two probes "
s_b2:	.asciz	"b: CREDIT_UPDATE fwd_cnt 4096: bytes delivered in all, two probes later "
s_b3:	.asciz	"b: CREDIT_REQUESTs from the device "
s_c1:	.asciz	"c: RST sent on 6000; the host's connection to 6001 refused with RST\n"
s_c2:	.asciz	"c: REQUEST to 5999 (no listener): RSTs "
s_e1:	.asciz	"e1 RW len 4096 in a 16-byte buffer: RSTs "
s_e2:	.asciz	"e2 RW len 0xffffffff: RSTs "
s_e3:	.asciz	"e3 20-byte header: RSTs "
s_e4:	.asciz	"e4 header in a device-writable buffer: RSTs "
s_e4b:	.asciz	"e3/e4: the connection lived on: 10 bytes, SHUTDOWN, RST\n"
s_e5:	.asciz	"e5 type SEQPACKET (not offered): RSTs "
s_e6:	.asciz	"e6 type 0x99: RSTs "
s_e7:	.asciz	"e7 src_cid 7: RSTs "
s_e8:	.asciz	"e8 dst_cid 0x100000002: RSTs "
s_e9:	.asciz	"e9 dst_cid 3 (its own): RSTs "
s_e10:	.asciz	"e10 op 0x63: RSTs "
s_e11:	.asciz	"e11 REQUEST with 16 bytes of payload: RSTs "
s_e12:	.asciz	"e12 RW without a connection: RSTs "
s_e13:	.asciz	"e13 RST without a connection: RSTs "
s_e14:	.asciz	"e14 REQUEST header split 20+4+20 bytes: RSTs "
s_g1:	.asciz	"g: 20 REQUESTs with max_connections 16: RESPONSEs "
s_g2:	.asciz	"g: and RSTs "
s_f1:	.asciz	"f: reset with 5001 open; a 16-byte receive buffer: the device needs reset\n"
s_f2:	.asciz	"f: reset again: connected to 5001, 3 bytes sent, SHUTDOWN, RST\n"
s_ok:	.asciz	"vsock ok\n"
