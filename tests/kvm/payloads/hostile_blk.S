/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile virtio-blk guest (issue 10): every avail slot names one chain, a
 * 1000 MiB read into 250 aliased, misaligned 4 MiB segments, and avail->idx
 * is kept ahead of used->idx forever. Over virtio-mmio or virtio-pci. The
 * VMM must stay responsive (SIGTERM) and bounded in memory (direct = true). */
#include "hostile.inc"

#define HDR 0x103000
#define STAT 0x103800
#define DATA 0x400001			/* misaligned on purpose */
#define SEG 0x400000
#define NSEG 250

	payload_entry
	trap_all
	hostile_setup 2, 0, 256
	movl	$0, HDR				/* VIRTIO_BLK_T_IN, sector 0 */
	movl	$0, HDR + 4
	movq	$0, HDR + 8
	desc	0, HDR, 16, F_NEXT, 1
	mov	$1, %ecx			/* descriptors 1..NSEG: the data */
	mov	$(DESC + 16), %rdi
1:	movq	$DATA, (%rdi)
	movl	$SEG, 8(%rdi)
	movw	$(F_WRITE | F_NEXT), 12(%rdi)
	lea	1(%rcx), %eax
	movw	%ax, 14(%rdi)
	add	$16, %rdi
	inc	%ecx
	cmp	$(NSEG + 1), %ecx
	jne	1b
	desc	(NSEG + 1), STAT, 1, F_WRITE, 0
	say	idle				/* the RSS baseline is taken now */
	mov	$20000000, %ecx
2:	pause
	dec	%ecx
	jnz	2b
	say	msg
	hostile_loop 128
	payload_exit msg			/* never reached; defines fail */
msg:	.asciz	"hostile blk running\n"
idle:	.asciz	"hostile blk idle\n"
