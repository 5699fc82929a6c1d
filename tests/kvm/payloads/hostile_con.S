/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile virtio-console guest (issue 10): the transmit queue kept full of
 * one 64 KiB buffer forever. The console file must stop at max_size and the
 * VMM must stay responsive (SIGTERM). Over virtio-mmio or virtio-pci. */
#include "hostile.inc"

#define BUF 0x400000
#define LEN 0x10000

	payload_entry
	trap_all
	hostile_setup 3, 1, 256
	mov	$BUF, %rdi			/* the output: 'x' ... '\n' */
	mov	$LEN, %ecx
	mov	$0x78, %al			/* 'x' */
	rep stosb
	movb	$0x0a, BUF + LEN - 1
	desc	0, BUF, LEN, 0, 0
	say	msg
	hostile_loop 128
	payload_exit msg
msg:	.asciz	"hostile console running\n"
