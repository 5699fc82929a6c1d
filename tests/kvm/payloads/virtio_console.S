/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload that drives virtio-console over virtio-mmio: only the
 * transmit queue, one buffer of output, then an emergency write; the script
 * checks what reached the console file. A failed step exits with its number. */
#include "virtio_mmio.inc"

	payload_entry
	vm_probe 3				/* console */
	vm_begin
	/* EMERG_WRITE (2) offered; accept it and VERSION_1 */
	movl	$0, VM_DEV_FEATURES_SEL(%rbx)
	mov	$3, %al
	testl	$4, VM_DEV_FEATURES(%rbx)
	jz	fail
	vm_features 4, 4
	/* queue 1 (transmitq) only */
	vm_queue 1, 8, 5
	vm_driver_ok 6
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
	avail	0, 0
	vm_kick	1, q=1
	wait_used $1, 7
	movl	$0x45, VM_CONFIG + 8(%rbx)	/* emerg_wr: 'E' */
	vm_reset
	payload_exit msg
msg:	.asciz	"virtio-console ok\n"
text:	.ascii	"hello hvc\n"
