/* SPDX-License-Identifier: Apache-2.0 */
/* A hostile payload: MMIO to unclaimed addresses and odd offsets of
 * testdev, string port I/O, all-width writes to the boot-timer. cubicle must
 * survive and the payload still exits PASS. */
#include "testdev.h"
	.code64
	.text
	.globl _start
_start:
	mov	$TD_MMIO, %rbx
	/* unclaimed MMIO reads all-ones */
	mov	$0xe0000000, %rcx
	mov	(%rcx), %eax
	cmp	$0xffffffff, %eax
	mov	$1, %al
	jne	fail
	/* writes to unclaimed MMIO and ports are dropped */
	movq	$-1, (%rcx)
	mov	$UNCLAIMED_PORT, %dx
	out	%eax, (%dx)
	/* misaligned and odd-width accesses to testdev must not break it */
	movl	$0x11223344, 1(%rbx)
	movq	$-1, 8(%rbx)
	movw	$0xffff, 0xe(%rbx)
	mov	TD_MAGIC(%rbx), %eax
	cmp	$TD_MAGIC_VALUE, %eax
	mov	$2, %al
	jne	fail
	/* rep outsb to PUTC: string I/O of many bytes in one exit */
	lea	msg(%rip), %rsi
	mov	$(msg_end - msg), %rcx
	mov	$(TD_PIO + TD_PUTC), %dx
	rep outsb
	/* rep insl from the magic register */
	lea	buf(%rip), %rdi
	mov	$4, %rcx
	mov	$(TD_PIO + TD_MAGIC), %dx
	rep insl
	cmpl	$TD_MAGIC_VALUE, buf+12(%rip)
	mov	$3, %al
	jne	fail
	mov	$PASS, %al
fail:
	movb	%al, TD_EXIT(%rbx)
1:	jmp	1b
msg:	.ascii	"string io ok\n"
msg_end:
	.balign 4
buf:	.fill	16, 1, 0
