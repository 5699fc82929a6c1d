/* SPDX-License-Identifier: Apache-2.0 */
/* Pulse the i8042 reset line the way Linux's reboot=k does: cubicle must end
 * with status 0. With -DPANIC, first set the BIOS warm-reset flag (0x1234 at
 * 0x472) as Linux does for reboot=panic_warm: cubicle must end with status 3. */
	.code16
	.text
	.globl _start
_start:
	cli
	xor	%ax, %ax
	mov	%ax, %ds
#ifdef PANIC
	movw	$0x1234, 0x472
#else
	movw	$0, 0x472
#endif
	mov	$0xfe, %al
	out	%al, $0x64
1:	jmp	1b
