/* SPDX-License-Identifier: Apache-2.0 */
/* 64-bit long-mode payload (cubicle's identity page tables): MMIO with 1-,
 * 2-, 4- and 8-byte accesses, port I/O, then exit PASS through MMIO; a failed
 * check exits with its step number. */
#include "testdev.h"
	.code64
	.text
	.globl _start
_start:
	mov	$TD_MMIO, %rbx
	/* 1: magic, 32-bit MMIO */
	mov	TD_MAGIC(%rbx), %eax
	cmp	$TD_MAGIC_VALUE, %eax
	mov	$1, %al
	jne	fail
	/* 2: 16-bit MMIO read of the magic's low half */
	movzwl	TD_MAGIC(%rbx), %eax
	cmp	$(TD_MAGIC_VALUE & 0xffff), %eax
	mov	$2, %al
	jne	fail
	/* 3: byte write then 32-bit read of scratch */
	movl	$0, TD_SCRATCH(%rbx)
	movb	$0x7e, TD_SCRATCH(%rbx)
	mov	TD_SCRATCH(%rbx), %eax
	cmp	$0x7e, %eax
	mov	$3, %al
	jne	fail
	/* 4: port I/O still works in long mode */
	mov	$(TD_PIO + TD_MAGIC), %dx
	in	(%dx), %eax
	cmp	$TD_MAGIC_VALUE, %eax
	mov	$4, %al
	jne	fail
	/* the PIT's counter 0 (in the kernel's PIT: no exit; with machine.pit
	 * = false the read reaches cubicle, which logs it at debug level) */
	in	$0x40, %al
	/* say hello through MMIO PUTC */
	lea	msg(%rip), %rsi
1:	lodsb
	test	%al, %al
	jz	2f
	movb	%al, TD_PUTC(%rbx)
	jmp	1b
2:	mov	$PASS, %al
fail:
	movb	%al, TD_EXIT(%rbx)
3:	jmp	3b
msg:	.asciz	"long mode ok\n"
