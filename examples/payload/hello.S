/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The smallest guest cubicle boots: a few hundred bytes of 16-bit code, no
 * kernel. It prints a line through the serial port (a 16550 UART at 0x3f8,
 * cubicle's serial8250 plugin) and resets the machine through the i8042
 * keyboard controller, which ends `cubicle run` with status 0. It runs on
 * any KVM, including the paravirtual PVM that cannot boot a stock kernel.
 *
 * Build: make (examples/payload/hello.bin and hello.cfg in the build folder)
 * Run:   cubicle run examples/payload/hello.cfg
 */
	.code16
	.text
	.globl _start
_start:
	cli
	mov	%cs, %ax		/* real mode: CS = load_addr >> 4, code at offset 0 */
	mov	%ax, %ds
	mov	$msg, %si
next:
	lodsb
	test	%al, %al
	jz	done
	mov	%al, %bl
wait:
	mov	$0x3fd, %dx		/* line status: wait until the transmitter is empty */
	in	(%dx), %al
	test	$0x20, %al
	jz	wait
	mov	$0x3f8, %dx		/* transmit holding register */
	mov	%bl, %al
	out	%al, (%dx)
	jmp	next
done:
	xor	%ax, %ax
	mov	%ax, %ds
	movw	$0, 0x472		/* a cold reset, not a warm one (which means panic) */
	mov	$0xfe, %al		/* i8042: pulse the CPU reset line */
	out	%al, $0x64
1:	jmp	1b			/* HLT would wait forever with the in-kernel irqchip */
msg:
	.asciz	"Hello from a cubicle payload guest: 16-bit code, a UART, an i8042 reset.\r\n"
