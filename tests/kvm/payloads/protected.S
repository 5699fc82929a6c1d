/* SPDX-License-Identifier: Apache-2.0 */
/* 32-bit protected-mode payload (flat segments set up by cubicle): port I/O
 * and MMIO to two testdev instances, then exit PASS; a failed check exits
 * with its step number. */
#include "testdev.h"
	.code32
	.text
	.globl _start
_start:
	/* 1: magic over port I/O */
	mov	$(TD_PIO + TD_MAGIC), %dx
	in	(%dx), %eax
	cmp	$TD_MAGIC_VALUE, %eax
	mov	$1, %al
	jne	fail
	/* 2: magic over MMIO */
	mov	(TD_MMIO + TD_MAGIC), %eax
	cmp	$TD_MAGIC_VALUE, %eax
	mov	$2, %al
	jne	fail
	/* 3: MMIO scratch round trip; the PIO instance's scratch stays 0 */
	movl	$0xcafef00d, (TD_MMIO + TD_SCRATCH)
	mov	(TD_MMIO + TD_SCRATCH), %eax
	cmp	$0xcafef00d, %eax
	mov	$3, %al
	jne	fail
	mov	$(TD_PIO + TD_SCRATCH), %dx
	in	(%dx), %eax
	test	%eax, %eax
	mov	$4, %al
	jne	fail
	/* 5: RAM works: write and read back high in guest memory */
	movl	$0x5a5a1234, 0x800000
	mov	0x800000, %eax
	cmp	$0x5a5a1234, %eax
	mov	$5, %al
	jne	fail
	mov	$msg, %esi
1:	lodsb
	test	%al, %al
	jz	2f
	movb	%al, (TD_MMIO + TD_PUTC)
	jmp	1b
2:	mov	$PASS, %al
fail:
	mov	$(TD_PIO + TD_EXIT), %dx
	out	%al, (%dx)
3:	jmp	3b
msg:	.asciz	"protected mode ok\n"
