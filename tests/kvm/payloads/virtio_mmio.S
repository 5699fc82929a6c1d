/* SPDX-License-Identifier: Apache-2.0 */
/* Long-mode payload that drives a virtio-rng over virtio-mmio the way a
 * driver does: reset, features, one queue, DRIVER_OK, one writable buffer,
 * a kick (an ioeventfd where KVM has them), then polls the used ring and
 * checks InterruptStatus and its acknowledgement. A failed step exits with
 * its number. */
#include "virtio_mmio.inc"

#define BUF 0x103000

	payload_entry
	vm_probe 4, version=1			/* entropy */
	/* reset, ACKNOWLEDGE, DRIVER */
	vm_begin 4
	/* accept VIRTIO_F_VERSION_1 only, then FEATURES_OK */
	vm_features 0, 5
	/* queue 0: 8 entries */
	vm_queue 0, 8, 6, hi=1
	vm_driver_ok 7
	/* one device-writable buffer of 16 bytes, made available */
	desc	0, BUF, 16, F_WRITE, 0
	avail	0, 0
	vm_kick	1
	/* wait for used->idx == 1 */
	wait_used $1, 8
	mov	$9, %al
	cmpl	$0, USED + 4			/* used ring[0].id */
	jne	fail
	mov	$10, %al
	mov	USED + 8, %edx			/* .len: 1..16 bytes of entropy */
	test	%edx, %edx
	jz	fail
	cmp	$16, %edx
	ja	fail
	/* the used-buffer interrupt is pending until acknowledged; the device
	 * publishes used->idx first and raises it just after, so poll a while
	 * (a slow host, e.g. ASan in a nested L1, shows the gap) */
	mov	$11, %al
	mov	$200000, %ecx
3:	testl	$1, VM_INT_STATUS(%rbx)
	jnz	4f
	pause
	dec	%ecx
	jnz	3b
	jmp	fail
4:	movl	$1, VM_INT_ACK(%rbx)
	vm_expect 12, VM_INT_STATUS, 0
	/* reset again */
	vm_reset 13
	payload_exit msg
msg:	.asciz	"virtio-mmio ok\n"
