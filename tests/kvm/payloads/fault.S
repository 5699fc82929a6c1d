/* SPDX-License-Identifier: Apache-2.0 */
/* A guest that triple-faults: load an empty IDT and raise an exception.
 * cubicle must end with status 4 (guest crash), not hang or crash itself. */
	.code64
	.text
	.globl _start
_start:
	lidt	idt(%rip)
	ud2
1:	jmp	1b
	.balign 8
idt:	.word	0
	.quad	0
