/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload that drives a virtio-rng over virtio-mmio the way a
 * driver does: reset, features, one queue, DRIVER_OK, one writable buffer,
 * a kick (an ioeventfd where KVM has them), then polls the used ring and
 * checks InterruptStatus and its acknowledgement. A failed step exits with
 * its number. */
#include "testdev.h"

#define VM_BASE 0xd0100000 /* first generic MMIO slot (arch/x86_64/layout.h) */
#define VM_MAGIC 0x000
#define VM_VERSION 0x004
#define VM_DEVICE_ID 0x008
#define VM_DRV_FEATURES 0x020
#define VM_DRV_FEATURES_SEL 0x024
#define VM_QUEUE_SEL 0x030
#define VM_QUEUE_NUM_MAX 0x034
#define VM_QUEUE_NUM 0x038
#define VM_QUEUE_READY 0x044
#define VM_QUEUE_NOTIFY 0x050
#define VM_INT_STATUS 0x060
#define VM_INT_ACK 0x064
#define VM_STATUS 0x070
#define VM_DESC_LO 0x080
#define VM_DESC_HI 0x084
#define VM_DRIVER_LO 0x090
#define VM_DRIVER_HI 0x094
#define VM_DEVICE_LO 0x0a0
#define VM_DEVICE_HI 0x0a4

#define DESC 0x100000
#define AVAIL 0x101000
#define USED 0x102000
#define BUF 0x103000

	.code64
	.text
	.globl _start
_start:
	mov	$VM_BASE, %rbx
	mov	$1, %al
	cmpl	$0x74726976, VM_MAGIC(%rbx)
	jne	fail
	mov	$2, %al
	cmpl	$2, VM_VERSION(%rbx)
	jne	fail
	mov	$3, %al
	cmpl	$4, VM_DEVICE_ID(%rbx)		/* entropy */
	jne	fail
	/* reset, ACKNOWLEDGE, DRIVER */
	movl	$0, VM_STATUS(%rbx)
	mov	$4, %al
	cmpl	$0, VM_STATUS(%rbx)
	jne	fail
	movl	$1, VM_STATUS(%rbx)
	movl	$3, VM_STATUS(%rbx)
	/* accept VIRTIO_F_VERSION_1 only, then FEATURES_OK */
	movl	$1, VM_DRV_FEATURES_SEL(%rbx)
	movl	$1, VM_DRV_FEATURES(%rbx)
	movl	$0, VM_DRV_FEATURES_SEL(%rbx)
	movl	$0, VM_DRV_FEATURES(%rbx)
	movl	$0xb, VM_STATUS(%rbx)
	mov	$5, %al
	cmpl	$0xb, VM_STATUS(%rbx)
	jne	fail
	/* queue 0: 8 entries */
	movl	$0, VM_QUEUE_SEL(%rbx)
	mov	$6, %al
	cmpl	$8, VM_QUEUE_NUM_MAX(%rbx)
	jb	fail
	movl	$8, VM_QUEUE_NUM(%rbx)
	movl	$DESC, VM_DESC_LO(%rbx)
	movl	$0, VM_DESC_HI(%rbx)
	movl	$AVAIL, VM_DRIVER_LO(%rbx)
	movl	$0, VM_DRIVER_HI(%rbx)
	movl	$USED, VM_DEVICE_LO(%rbx)
	movl	$0, VM_DEVICE_HI(%rbx)
	movl	$1, VM_QUEUE_READY(%rbx)
	movl	$0xf, VM_STATUS(%rbx)
	mov	$7, %al
	cmpl	$0xf, VM_STATUS(%rbx)
	jne	fail
	/* one device-writable buffer of 16 bytes, made available */
	movq	$BUF, DESC
	movl	$16, DESC + 8
	movw	$2, DESC + 12			/* VIRTQ_DESC_F_WRITE */
	movw	$0, DESC + 14
	movw	$0, AVAIL + 4			/* ring[0] = head 0 */
	movw	$1, AVAIL + 2			/* idx = 1 (x86 keeps store order) */
	movl	$0, VM_QUEUE_NOTIFY(%rbx)
	/* wait for used->idx == 1 */
	mov	$200000000, %ecx
1:	cmpw	$1, USED + 2
	je	2f
	pause
	dec	%ecx
	jnz	1b
	mov	$8, %al
	jmp	fail
2:	mov	$9, %al
	cmpl	$0, USED + 4			/* used ring[0].id */
	jne	fail
	mov	$10, %al
	mov	USED + 8, %edx			/* .len: 1..16 bytes of entropy */
	test	%edx, %edx
	jz	fail
	cmp	$16, %edx
	ja	fail
	/* the used-buffer interrupt is pending until acknowledged */
	mov	$11, %al
	testl	$1, VM_INT_STATUS(%rbx)
	jz	fail
	movl	$1, VM_INT_ACK(%rbx)
	mov	$12, %al
	cmpl	$0, VM_INT_STATUS(%rbx)
	jne	fail
	/* reset again */
	movl	$0, VM_STATUS(%rbx)
	mov	$13, %al
	cmpl	$0, VM_STATUS(%rbx)
	jne	fail
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
msg:	.asciz	"virtio-mmio ok\n"
