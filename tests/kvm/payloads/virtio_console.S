/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload that drives virtio-console over virtio-mmio: only the
 * transmit queue, one buffer of output, then an emergency write; the script
 * checks what reached the console file. A failed step exits with its number. */
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

#define DESC 0x100000
#define AVAIL 0x101000
#define USED 0x102000

	.code64
	.text
	.globl _start
_start:
	mov	$VM_BASE, %rbx
	mov	$1, %al
	cmpl	$0x74726976, VM_MAGIC(%rbx)
	jne	fail
	mov	$2, %al
	cmpl	$3, VM_DEVICE_ID(%rbx)		/* console */
	jne	fail
	movl	$0, VM_STATUS(%rbx)
	movl	$1, VM_STATUS(%rbx)
	movl	$3, VM_STATUS(%rbx)
	/* EMERG_WRITE (2) offered; accept it and VERSION_1 */
	movl	$0, VM_DEV_FEATURES_SEL(%rbx)
	mov	$3, %al
	testl	$4, VM_DEV_FEATURES(%rbx)
	jz	fail
	movl	$1, VM_DRV_FEATURES_SEL(%rbx)
	movl	$1, VM_DRV_FEATURES(%rbx)
	movl	$0, VM_DRV_FEATURES_SEL(%rbx)
	movl	$4, VM_DRV_FEATURES(%rbx)
	movl	$0xb, VM_STATUS(%rbx)
	mov	$4, %al
	cmpl	$0xb, VM_STATUS(%rbx)
	jne	fail
	/* queue 1 (transmitq) only */
	movl	$1, VM_QUEUE_SEL(%rbx)
	mov	$5, %al
	cmpl	$8, VM_QUEUE_NUM_MAX(%rbx)
	jb	fail
	movl	$8, VM_QUEUE_NUM(%rbx)
	movl	$DESC, VM_DESC_LO(%rbx)
	movl	$AVAIL, VM_DRIVER_LO(%rbx)
	movl	$USED, VM_DEVICE_LO(%rbx)
	movl	$1, VM_QUEUE_READY(%rbx)
	movl	$0xf, VM_STATUS(%rbx)
	mov	$6, %al
	cmpl	$0xf, VM_STATUS(%rbx)
	jne	fail
	/* one device-readable buffer: the text, in two segments */
	lea	text(%rip), %rdx
	mov	%rdx, DESC
	movl	$6, DESC + 8
	movw	$1, DESC + 12			/* NEXT */
	movw	$1, DESC + 14
	add	$6, %rdx
	mov	%rdx, DESC + 16
	movl	$4, DESC + 24
	movw	$0, DESC + 28
	movw	$0, AVAIL + 4
	movw	$1, AVAIL + 2
	movl	$1, VM_QUEUE_NOTIFY(%rbx)
	mov	$200000000, %ecx
1:	cmpw	$1, USED + 2
	je	2f
	pause
	dec	%ecx
	jnz	1b
	mov	$7, %al
	jmp	fail
2:	movl	$0x45, VM_CONFIG + 8(%rbx)	/* emerg_wr: 'E' */
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
msg:	.asciz	"virtio-console ok\n"
text:	.ascii	"hello hvc\n"
