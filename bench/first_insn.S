/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark payload: the very first instruction tells the boot-timer (at
 * 0xd0000000 on x86) "booted"; then spin until the benchmark stops the VM. */
	.code32
	.text
	.globl _start
_start:
	movb	$123, 0xd0000000
1:	jmp	1b
