/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload for run_xfs_reflink.sh: over virtio-blk (MMIO) it writes 1 MiB of 0xC5 at byte 1 MiB in 64 KiB requests, flushes, reads the last sector back and checks it; a failed step exits with its number. */
#include "virtio_mmio.inc"

#define QN 16
#define HDR 0x103000
#define STAT 0x103800
#define BACK 0x104000
#define DATA 0x110000	/* 64 KiB */
#define CHUNK 0x10000
#define FIRST 2048	/* sector of byte 1 MiB */
#define COUNT 16	/* requests of CHUNK bytes: 1 MiB */

/* Offer chain head \head as request number %r8w (0-based), kick, wait for
 * it, check its status byte; else fail with \step. */
.macro submit head, step
	movzwl	%r8w, %eax
	and	$(QN - 1), %eax
	movw	$\head, AVAIL + 4(, %rax, 2)
	lea	1(%r8), %edx
	movw	%dx, AVAIL + 2
	movb	$0xff, STAT
	movl	$0, VM_QUEUE_NOTIFY(%rbx)
	wait_used %dx, \step
	inc	%r8d
	mov	$(\step + 1), %al
	cmpb	$0, STAT
	jne	fail
.endm

	payload_entry
	vm_probe 2				/* block */
	vm_begin
	vm_features 0x200, 3			/* FLUSH */
	vm_queue 0, QN, 4
	vm_driver_ok

	/* the data: 64 KiB of 0xC5 */
	mov	$DATA, %edi
	mov	$CHUNK, %ecx
	mov	$0xc5, %al
	rep stosb

	/* COUNT writes: header, data, status; descriptors 0-2 reused */
	desc	0, HDR, 16, F_NEXT, 1
	desc	1, DATA, CHUNK, F_NEXT, 2
	desc	2, STAT, 1, F_WRITE, 0
	xor	%r8d, %r8d			/* requests submitted */
	mov	$FIRST, %r9d			/* sector */
3:	movl	$1, HDR				/* VIRTIO_BLK_T_OUT */
	movl	$0, HDR + 4
	movq	%r9, HDR + 8
	submit	0, 5
	add	$(CHUNK / 512), %r9d
	cmp	$COUNT, %r8d
	jne	3b

	/* flush */
	desc	3, HDR, 16, F_NEXT, 2
	movl	$4, HDR				/* VIRTIO_BLK_T_FLUSH */
	movq	$0, HDR + 8
	submit	3, 7

	/* read the last sector written back */
	desc	4, BACK, 512, F_WRITE | F_NEXT, 2
	movw	$4, DESC + 16 * 3 + 14
	movl	$0, HDR				/* VIRTIO_BLK_T_IN */
	movq	$(FIRST + COUNT * CHUNK / 512 - 1), HDR + 8
	submit	3, 9
	mov	$BACK, %edi
	mov	$512, %ecx
	mov	$0xc5, %al
	repe scasb
	mov	$11, %al
	jne	fail

	vm_reset
	payload_exit msg
msg:	.asciz	"blk write ok\n"
