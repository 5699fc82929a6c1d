/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload that drives virtio-blk over virtio-mmio as a driver
 * would: features, capacity, one queue, then a write, a read-back, a flush,
 * GET_ID and a read beyond the end, all checked. A failed step exits with its
 * number; the script then checks the written sector in the image. */
#include "virtio_mmio.inc"

#define QN 16
#define HDRS 0x103000	/* 16 bytes per request */
#define STAT 0x103800	/* 1 byte per request */
#define DATA 0x104000	/* 512 bytes written */
#define BACK 0x105000	/* 512 bytes read back */
#define IDBUF 0x106000
#define SPARE 0x107000

.macro hdr n, type, sector
	movl	$\type, HDRS + 16 * \n
	movl	$0, HDRS + 16 * \n + 4
	movq	$\sector, HDRS + 16 * \n + 8
	movb	$0xff, STAT + \n
.endm

	payload_entry
	vm_probe 2				/* block */
	vm_begin
	/* the device offers FLUSH (9) and BLK_SIZE (6) */
	movl	$0, VM_DEV_FEATURES_SEL(%rbx)
	mov	VM_DEV_FEATURES(%rbx), %edx
	mov	$3, %al
	and	$0x240, %edx
	cmp	$0x240, %edx
	jne	fail
	/* accept VERSION_1, FLUSH, BLK_SIZE, SEG_MAX */
	vm_features 0x244, 4
	/* capacity: 1 MiB = 2048 sectors; blk_size 512 */
	vm_expect 5, VM_CONFIG, 2048
	cmpl	$0, VM_CONFIG + 4(%rbx)
	jne	fail
	cmpl	$512, VM_CONFIG + 20(%rbx)
	jne	fail
	/* queue 0 */
	vm_queue 0, QN, 6
	vm_driver_ok 7

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
	avail	0, 0
	avail	1, 3
	avail	2, 6
	vm_kick	3
	wait_used $3, 8
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
	avail	3, 8
	avail	4, 11
	vm_kick	5
	wait_used $5, 12
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

	vm_reset
	payload_exit msg
msg:	.asciz	"virtio-blk ok\n"
serial:	.ascii	"payload-disk\0\0\0\0\0\0\0\0"
