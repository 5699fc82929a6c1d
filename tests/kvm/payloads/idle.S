/* SPDX-License-Identifier: Apache-2.0 */
/* Says "up" on the testdev, then halts with interrupts off, forever: with
 * the in-kernel irqchip the vCPU then sleeps in KVM_RUN and costs no CPU.
 * The VM the create/destroy cycles (tests/kvm/cycles.c) make and end. */
#include "hostile.inc"

	payload_entry
	say	msg
	cli
1:	hlt
	jmp	1b
	payload_exit msg			/* never reached; defines fail */
msg:	.asciz	"up\n"
