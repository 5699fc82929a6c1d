/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload that drives virtio-blk over virtio-mmio as a driver
 * would: features, capacity, one queue, then a write, a read-back, a flush,
 * GET_ID and a read beyond the end, all checked. A failed step exits with its
 * number; the script then checks the written sector in the image. */
#include "testdev.h"

#define VM_BASE 0xd0100000 /* first generic MMIO slot (arch/x86_64/layout.h) */
#define VM_MAGIC 0x000
#define VM_DEVICE_ID 0x008
#define VM_DEV_FEATURES 0x010
#define VM_DEV_FEATURES_SEL 0x014
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
#define VM_CONFIG 0x100

#define QN 16
#define DESC 0x100000
#define AVAIL 0x101000
#define USED 0x102000
#define HDRS 0x103000	/* 16 bytes per request */
#define STAT 0x103800	/* 1 byte per request */
#define DATA 0x104000	/* 512 bytes written */
#define BACK 0x105000	/* 512 bytes read back */
#define IDBUF 0x106000
#define SPARE 0x107000

#define F_NEXT 1
#define F_WRITE 2

.macro desc i, addr, len, flags, next
	movq	$\addr, DESC + 16 * \i
	movl	$\len, DESC + 16 * \i + 8
	movw	$\flags, DESC + 16 * \i + 12
	movw	$\next, DESC + 16 * \i + 14
.endm

.macro hdr n, type, sector
	movl	$\type, HDRS + 16 * \n
	movl	$0, HDRS + 16 * \n + 4
	movq	$\sector, HDRS + 16 * \n + 8
	movb	$0xff, STAT + \n
.endm

/* Wait until used->idx reaches n, else fail with step. */
.macro wait_used n, step
	mov	$200000000, %ecx
1:	cmpw	$\n, USED + 2
	je	2f
	pause
	dec	%ecx
	jnz	1b
	mov	$\step, %al
	jmp	fail
2:
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
	/* the device offers FLUSH (9) and BLK_SIZE (6) */
	movl	$0, VM_DEV_FEATURES_SEL(%rbx)
	mov	VM_DEV_FEATURES(%rbx), %edx
	mov	$3, %al
	and	$0x240, %edx
	cmp	$0x240, %edx
	jne	fail
	/* accept VERSION_1, FLUSH, BLK_SIZE, SEG_MAX */
	movl	$1, VM_DRV_FEATURES_SEL(%rbx)
	movl	$1, VM_DRV_FEATURES(%rbx)
	movl	$0, VM_DRV_FEATURES_SEL(%rbx)
	movl	$0x244, VM_DRV_FEATURES(%rbx)
	movl	$0xb, VM_STATUS(%rbx)
	mov	$4, %al
	cmpl	$0xb, VM_STATUS(%rbx)
	jne	fail
	/* capacity: 1 MiB = 2048 sectors; blk_size 512 */
	mov	$5, %al
	cmpl	$2048, VM_CONFIG(%rbx)
	jne	fail
	cmpl	$0, VM_CONFIG + 4(%rbx)
	jne	fail
	cmpl	$512, VM_CONFIG + 20(%rbx)
	jne	fail
	/* queue 0 */
	movl	$0, VM_QUEUE_SEL(%rbx)
	mov	$6, %al
	cmpl	$QN, VM_QUEUE_NUM_MAX(%rbx)
	jb	fail
	movl	$QN, VM_QUEUE_NUM(%rbx)
	movl	$DESC, VM_DESC_LO(%rbx)
	movl	$AVAIL, VM_DRIVER_LO(%rbx)
	movl	$USED, VM_DEVICE_LO(%rbx)
	movl	$1, VM_QUEUE_READY(%rbx)
	movl	$0xf, VM_STATUS(%rbx)
	mov	$7, %al
	cmpl	$0xf, VM_STATUS(%rbx)
	jne	fail

	/* data: byte i = i ^ 0x5a */
	xor	%ecx, %ecx
1:	mov	%ecx, %eax
	xor	$0x5a, %al
	mov	%al, DATA(%rcx)
	inc	%ecx
	cmp	$512, %ecx
	jne	1b

	/* write sector 2, read it back, flush: three requests, one kick */
	hdr	0, 1, 2
	desc	0, HDRS, 16, F_NEXT, 1
	desc	1, DATA, 512, F_NEXT, 2
	desc	2, STAT, 1, F_WRITE, 0
	hdr	1, 0, 2
	desc	3, HDRS + 16, 16, F_NEXT, 4
	desc	4, BACK, 512, F_WRITE | F_NEXT, 5
	desc	5, STAT + 1, 1, F_WRITE, 0
	hdr	2, 4, 0
	desc	6, HDRS + 32, 16, F_NEXT, 7
	desc	7, STAT + 2, 1, F_WRITE, 0
	movw	$0, AVAIL + 4
	movw	$3, AVAIL + 6
	movw	$6, AVAIL + 8
	movw	$3, AVAIL + 2			/* idx (x86 keeps store order) */
	movl	$0, VM_QUEUE_NOTIFY(%rbx)
	wait_used 3, 8
	mov	$9, %al
	cmpb	$0, STAT			/* VIRTIO_BLK_S_OK, three times */
	jne	fail
	cmpb	$0, STAT + 1
	jne	fail
	cmpb	$0, STAT + 2
	jne	fail
	mov	$10, %al
	cmpl	$3, USED + 4 + 8		/* the read came back second, 513 bytes written */
	jne	fail
	cmpl	$513, USED + 8 + 8
	jne	fail
	mov	$11, %al
	mov	$DATA, %esi
	mov	$BACK, %edi
	mov	$512, %ecx
	repe cmpsb
	jne	fail

	/* GET_ID into 20 bytes; then a read beyond the end must fail */
	hdr	3, 8, 0
	desc	8, HDRS + 48, 16, F_NEXT, 9
	desc	9, IDBUF, 20, F_WRITE | F_NEXT, 10
	desc	10, STAT + 3, 1, F_WRITE, 0
	hdr	4, 0, 2048
	desc	11, HDRS + 64, 16, F_NEXT, 12
	desc	12, SPARE, 512, F_WRITE | F_NEXT, 13
	desc	13, STAT + 4, 1, F_WRITE, 0
	movw	$8, AVAIL + 10
	movw	$11, AVAIL + 12
	movw	$5, AVAIL + 2
	movl	$0, VM_QUEUE_NOTIFY(%rbx)
	wait_used 5, 12
	mov	$13, %al
	cmpb	$0, STAT + 3
	jne	fail
	lea	serial(%rip), %rsi
	mov	$IDBUF, %edi
	mov	$20, %ecx
	repe cmpsb
	jne	fail
	mov	$14, %al
	cmpb	$1, STAT + 4			/* VIRTIO_BLK_S_IOERR */
	jne	fail
	mov	$15, %al
	cmpl	$1, USED + 4 + 4 * 8 + 4	/* only the status byte written */
	jne	fail

	movl	$0, VM_STATUS(%rbx)
	mov	$TD_MMIO, %rbx
	lea	msg(%rip), %rsi
3:	lodsb
	test	%al, %al
	jz	4f
	movb	%al, TD_PUTC(%rbx)
	jmp	3b
4:	mov	$PASS, %al
fail:
	mov	$TD_MMIO, %rbx
	movb	%al, TD_EXIT(%rbx)
5:	jmp	5b
msg:	.asciz	"virtio-blk ok\n"
serial:	.ascii	"payload-disk\0\0\0\0\0\0\0\0"
