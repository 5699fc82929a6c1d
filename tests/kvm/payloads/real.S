/* SPDX-License-Identifier: Apache-2.0 */
/* Real-mode payload: port I/O to testdev (magic, scratch round trip, an
 * unclaimed port reading all-ones), a line of text, then exit PASS. Any
 * failed check exits with its step number. */
#include "testdev.h"
	.code16
	.text
	.globl _start
_start:
	cli
	mov	%cs, %ax
	mov	%ax, %ds
	/* 1: magic */
	mov	$(TD_PIO + TD_MAGIC), %dx
	in	(%dx), %eax
	cmp	$TD_MAGIC_VALUE, %eax
	mov	$1, %al
	jne	fail
	/* 2: scratch round trip, 32-bit */
	mov	$(TD_PIO + TD_SCRATCH), %dx
	mov	$0x12345678, %eax
	out	%eax, (%dx)
	xor	%eax, %eax
	in	(%dx), %eax
	cmp	$0x12345678, %eax
	mov	$2, %al
	jne	fail
	/* 3: an unclaimed port reads as all-ones */
	mov	$UNCLAIMED_PORT, %dx
	in	(%dx), %al
	cmp	$0xff, %al
	mov	$3, %al
	jne	fail
	/* say hello through PUTC */
	mov	$msg, %si
	mov	$(TD_PIO + TD_PUTC), %dx
1:	lodsb
	test	%al, %al
	jz	2f
	out	%al, (%dx)
	jmp	1b
2:	mov	$PASS, %al
fail:
	mov	$(TD_PIO + TD_EXIT), %dx
	out	%al, (%dx)
3:	jmp	3b	/* HLT would block with the in-kernel irqchip */
msg:	.asciz	"real mode ok\n"
