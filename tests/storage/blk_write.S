/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload for run_xfs_reflink.sh: over virtio-blk (MMIO) it writes 1 MiB of 0xC5 at byte 1 MiB in 64 KiB requests, flushes, reads the last sector back and checks it; a failed step exits with its number. */
#include "testdev.h"

#define VM_BASE 0xd0100000 /* first generic MMIO slot (arch/x86_64/layout.h) */
#define VM_MAGIC 0x000
#define VM_DEVICE_ID 0x008
#define VM_DRV_FEATURES 0x020
#define VM_DRV_FEATURES_SEL 0x024
#define VM_QUEUE_SEL 0x030
#define VM_QUEUE_NUM_MAX 0x034
#define VM_QUEUE_NUM 0x038
#define VM_QUEUE_READY 0x044
#define VM_QUEUE_NOTIFY 0x050
#define VM_STATUS 0x070
#define VM_DESC_LO 0x080
#define VM_DRIVER_LO 0x090
#define VM_DEVICE_LO 0x0a0

#define QN 16
#define DESC 0x100000
#define AVAIL 0x101000
#define USED 0x102000
#define HDR 0x103000
#define STAT 0x103800
#define BACK 0x104000
#define DATA 0x110000	/* 64 KiB */
#define CHUNK 0x10000
#define FIRST 2048	/* sector of byte 1 MiB */
#define COUNT 16	/* requests of CHUNK bytes: 1 MiB */

#define F_NEXT 1
#define F_WRITE 2

.macro desc i, addr, len, flags, next
	movq	$\addr, DESC + 16 * \i
	movl	$\len, DESC + 16 * \i + 8
	movw	$\flags, DESC + 16 * \i + 12
	movw	$\next, DESC + 16 * \i + 14
.endm

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
	mov	$200000000, %ecx
1:	cmpw	%dx, USED + 2
	je	2f
	pause
	dec	%ecx
	jnz	1b
	mov	$\step, %al
	jmp	fail
2:	inc	%r8d
	mov	$(\step + 1), %al
	cmpb	$0, STAT
	jne	fail
.endm

	.code64
	.text
	.globl _start
_start:
	mov	$VM_BASE, %rbx
	mov	$1, %al
	cmpl	$0x74726976, VM_MAGIC(%rbx)
	jne	fail
	mov	$2, %al
	cmpl	$2, VM_DEVICE_ID(%rbx)		/* block */
	jne	fail
	movl	$0, VM_STATUS(%rbx)
	movl	$1, VM_STATUS(%rbx)
	movl	$3, VM_STATUS(%rbx)
	movl	$1, VM_DRV_FEATURES_SEL(%rbx)	/* VERSION_1 */
	movl	$1, VM_DRV_FEATURES(%rbx)
	movl	$0, VM_DRV_FEATURES_SEL(%rbx)
	movl	$0x200, VM_DRV_FEATURES(%rbx)	/* FLUSH */
	movl	$0xb, VM_STATUS(%rbx)
	mov	$3, %al
	cmpl	$0xb, VM_STATUS(%rbx)
	jne	fail
	movl	$0, VM_QUEUE_SEL(%rbx)
	mov	$4, %al
	cmpl	$QN, VM_QUEUE_NUM_MAX(%rbx)
	jb	fail
	movl	$QN, VM_QUEUE_NUM(%rbx)
	movl	$DESC, VM_DESC_LO(%rbx)
	movl	$AVAIL, VM_DRIVER_LO(%rbx)
	movl	$USED, VM_DEVICE_LO(%rbx)
	movl	$1, VM_QUEUE_READY(%rbx)
	movl	$0xf, VM_STATUS(%rbx)

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

	movl	$0, VM_STATUS(%rbx)
	mov	$TD_MMIO, %rbx
	lea	msg(%rip), %rsi
4:	lodsb
	test	%al, %al
	jz	5f
	movb	%al, TD_PUTC(%rbx)
	jmp	4b
5:	mov	$PASS, %al
fail:
	mov	$TD_MMIO, %rbx
	movb	%al, TD_EXIT(%rbx)
6:	jmp	6b
msg:	.asciz	"blk write ok\n"
