/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile virtio-vsock guest: it opens two connections to the host peer
 * (tests/kvm/vsockpeer.c flood), then never gives a receive buffer back
 * while the peer writes into the first (port 5100) as fast as it can, and
 * floods the second (port 5101, where the peer never reads) with 4 KiB
 * packets forever, ignoring the credit the device gave it. The device must
 * stop reading the first socket, reset the second, and keep what it holds
 * for the RSTs it cannot deliver bounded; the VMM must stay responsive. */
#include "vsock.inc"

#define GO 0x600d

	payload_entry
	trap_all
	movl	$QS, RX_N
	movl	$0x1000, RX_LEN
	call	dev_init
	/* the runner takes cubicle's memory as it is now, then writes GO to
	 * the testdev's scratch register */
	print	s_up
	mov	$TD_MMIO, %edi
1:	mov	$1000, %ecx
2:	pause
	loop	2b
	cmpl	$GO, TD_SCRATCH(%rdi)
	jne	1b
	connect	$1025, $5101, 10
	connect	$1024, $5100, 11, balloc=$0x40000000
	/* no receive buffer is given back from here on */
	mov	$TXD, %edi
	mov	$4096, %ecx
	mov	$0x79, %al			/* 'y' */
	rep stosb
	pkt	OP_RW, $1025, $5101, len=$4096
	movq	$TXH, TXQ
	movl	$HDR, TXQ + 8
	movw	$F_NEXT, TXQ + 12
	movw	$1, TXQ + 14
	movq	$TXD, TXQ + 16
	movl	$4096, TXQ + 24
	movw	$0, TXQ + 28
	print	s_run
	/* every avail slot names chain 0: keep QS of them in flight; say once
	 * when the device has used up every receive buffer */
	xor	%r15d, %r15d
3:	movzwl	TXQ + QU + 2, %eax
	add	$QS, %eax
	movw	%ax, TXQ + QA + 2
	movl	$1, VM_QUEUE_NOTIFY(%rbx)
	pause
	test	%r15d, %r15d
	jnz	3b
	mov	RX_AVAIL, %eax
	cmpw	%ax, RXQ + QU + 2
	jne	3b
	inc	%r15d
	print	s_full
	jmp	3b
	payload_exit s_run			/* never reached; defines fail */

	vsock_routines
s_up:	.asciz	"hostile vsock: device up, waiting for GO\n"
s_run:	.asciz	"hostile vsock running\n"
s_full:	.asciz	"hostile vsock: every receive buffer used, none given back\n"
