/* SPDX-License-Identifier: Apache-2.0 */
/* The guest of bench/snapshot (long mode, loaded at 0x10000): writes a
 * quadword (its own address: never zero) into every 4 KiB page from 2 MiB
 * to 98 MiB, so that a snapshot has 96 MiB of RAM to write whatever the
 * guest's size (128 MiB or more); prints "ready" on the testdev; then
 * forever tells the boot-timer "booted" (123), spins a little and reads
 * the testdev's scratch register. Restored or rolled back, it is in that
 * loop, and its next write is the "guest boot done" line the benchmark
 * waits for: the spin is short (a few thousand cycles) so that line comes
 * at once.
 * Scratch N, not zero (set by the benchmark through the testdev's
 * "scratch" method), asks for N MiB of dirty pages: the guest rewrites one
 * quadword (a pass count) in every page from 2 MiB to 2 + N MiB (N at most
 * 96), then writes 0 to scratch to say it is done, and idles again. */
#define TD_MMIO 0xd0001000
#define TD_SCRATCH 0x4
#define TD_PUTC 0x8
#define BOOT_TIMER 0xd0000000
#define BOOT_DONE 123
#define TOUCH_MIB 96
#define TOUCH_START 0x200000
#define TOUCH_END (TOUCH_START + (TOUCH_MIB << 20))
#define SPIN 2000

	.code64
	.text
	.globl _start
_start:
	mov	$TOUCH_START, %edi
1:	mov	%rdi, (%rdi)
	add	$4096, %rdi
	cmp	$TOUCH_END, %rdi
	jb	1b
	mov	$TD_MMIO, %ebx
	lea	ready(%rip), %rsi
2:	lodsb
	test	%al, %al
	jz	3f
	movb	%al, TD_PUTC(%rbx)
	jmp	2b
3:	mov	$BOOT_TIMER, %edx
	xor	%r8d, %r8d
4:	movb	$BOOT_DONE, (%rdx)
	mov	$SPIN, %ecx
5:	dec	%ecx
	jnz	5b
	mov	TD_SCRATCH(%rbx), %eax
	test	%eax, %eax
	jz	4b
	cmp	$TOUCH_MIB, %eax
	jbe	6f
	mov	$TOUCH_MIB, %eax
6:	shl	$20, %rax
	mov	$TOUCH_START, %edi
	add	%rdi, %rax
	inc	%r8
7:	mov	%r8, (%rdi)
	add	$4096, %rdi
	cmp	%rax, %rdi
	jb	7b
	movl	$0, TD_SCRATCH(%rbx)
	jmp	4b
ready:	.asciz	"ready\n"
