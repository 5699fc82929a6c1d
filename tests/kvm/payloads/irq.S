/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Interrupts through the IOAPIC (KVM's, or cubicle's with machine.irqchip =
 * "split"): COM1's "transmitter empty" interrupt on pin 4, to the BSP's
 * LAPIC. The same guest must pass on both irqchips.
 *  1. Pin 4 level-triggered, vector 0x40: the first handler only EOIs (the
 *     UART still asserts its line), so the IOAPIC must send it again after
 *     the EOI; the next reads IIR (the line drops) and EOIs: 2 or more
 *     (under PVM an EOI is at times seen twice, and the line is then still
 *     up for a third), and none once the line is down.
 *  2. Pin 4 edge-triggered, vector 0x41: the handler EOIs and leaves the
 *     line up: with no new edge, exactly 1.
 * Status 42 and "irq ok", or 10 + level count (30 + it: more came after
 * the line dropped), 20 + edge count.
 */
#include "hostile.inc"

#define LAPIC 0xfee00000
#define IOAPIC 0xfec00000
#define COM1 0x3f8

.macro spin n
	mov	$\n, %ecx
80:	pause
	dec	%ecx
	jnz	80b
.endm

/* Pin 4's redirection entry := \lo (destination APIC 0). */
.macro pin4 lo
	movl	$0x19, (%r15)
	movl	$0, 0x10(%r15)
	movl	$0x18, (%r15)
	movl	$\lo, 0x10(%r15)
.endm

	payload_entry
	trap_all
	lea	on_level(%rip), %rax
	mov	$(IDT_BASE + 0x40 * 16), %rdi
	call	gate
	lea	on_edge(%rip), %rax
	mov	$(IDT_BASE + 0x41 * 16), %rdi
	call	gate
	mov	$LAPIC, %r14			/* the handlers' too */
	mov	$IOAPIC, %r15
	movl	$0, 0x80(%r14)			/* TPR */
	movl	$0x1ff, 0xf0(%r14)		/* SVR: enabled, spurious 0xff */
	sti

	pin4	0x8040				/* vector 0x40, level */
	mov	$(COM1 + 1), %dx
	mov	$2, %al				/* IER: THRI */
	out	%al, %dx
	spin	3000
	mov	n_level(%rip), %eax
	cmp	$2, %eax
	jae	1f
	add	$10, %al
	jmp	fail
1:	mov	%eax, %r13d			/* the line is down: no more */
	spin	3000
	mov	n_level(%rip), %eax
	cmp	%r13d, %eax
	je	4f
	add	$30, %al
	jmp	fail
4:	mov	$(COM1 + 1), %dx		/* IER off: the line drops */
	xor	%al, %al
	out	%al, %dx
	pin4	0x41
	mov	$(COM1 + 1), %dx
	mov	$2, %al				/* IER: THRI, a rising edge */
	out	%al, %dx
	spin	3000
	mov	n_edge(%rip), %eax
	cmp	$1, %eax
	je	2f
	add	$20, %al
	jmp	fail
2:	cli
	payload_exit msg

on_level:
	push	%rax
	push	%rdx
	incl	n_level(%rip)
	cmpl	$2, n_level(%rip)
	jb	3f
	mov	$(COM1 + 2), %dx		/* IIR: THRI read, the line drops */
	in	%dx, %al
3:	movl	$0, 0xb0(%r14)			/* EOI */
	pop	%rdx
	pop	%rax
	iretq

on_edge:
	incl	n_edge(%rip)
	movl	$0, 0xb0(%r14)
	iretq

gate:						/* IDT gate at %rdi to %rax */
	mov	%cs, %edx
	mov	%eax, %esi
	and	$0xffff, %esi
	shl	$16, %edx
	or	%edx, %esi
	mov	%esi, (%rdi)
	mov	%eax, %esi
	and	$0xffff0000, %esi
	or	$0x8e00, %esi
	mov	%esi, 4(%rdi)
	mov	%rax, %rsi
	shr	$32, %rsi
	mov	%esi, 8(%rdi)
	movl	$0, 12(%rdi)
	ret

	.balign	4
n_level: .long	0
n_edge:	.long	0
msg:	.asciz	"irq ok\n"
