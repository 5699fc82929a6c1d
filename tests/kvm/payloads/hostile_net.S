/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile virtio-net guest (issue 10, item 7): mergeable receive buffers on
 * a receive queue of 8 entries, each a single 1 KiB buffer, re-posted as
 * soon as the device hands it back. A peer sends 65000-byte frames (more
 * than the whole queue holds) between 60-byte ones. The device must drop
 * each large frame (its buffers come back empty) and go on delivering the
 * small ones, never stall; the VMM must stay responsive (SIGTERM). Any
 * other used entry fails the guest: 7 (an id out of range), 8 (a length
 * other than 0 or header + 60), 9 (num_buffers not 1). */
#include "hostile.inc"

#define QN 8
#define BUF 0x400000			/* buffer i at BUF + i KiB */
#define BLEN 0x400
#define HDR 12				/* virtio_net_hdr_v1 (VERSION_1) */
#define SMALL 60
#define MRG_RXBUF 0x8000		/* feature bit 15 */

	payload_entry
	trap_all
	hostile_setup 1, 0, QN, MRG_RXBUF
	xor	%ecx, %ecx			/* post buffers 0..QN-1 */
1:	mov	%ecx, %eax
	shl	$10, %eax
	add	$BUF, %eax
	mov	%ecx, %edx
	shl	$4, %edx
	mov	%rax, DESC(%rdx)
	movl	$BLEN, DESC + 8(%rdx)
	movw	$F_WRITE, DESC + 12(%rdx)
	movw	$0, DESC + 14(%rdx)
	movw	%cx, AVAIL + 4(,%rcx,2)
	inc	%ecx
	cmp	$QN, %ecx
	jne	1b
	mov	$QN, %r15d			/* avail->idx */
	movw	%r15w, AVAIL + 2
	movl	%r13d, (%r12)
	xor	%r14d, %r14d			/* used entries seen */
	xor	%r9d, %r9d			/* buffers handed back empty */
	xor	%r10d, %r10d			/* small frames received */
	xor	%r11d, %r11d			/* "running" said */
2:	movzwl	USED + 2, %eax
	cmp	%r14w, %ax
	jne	3f
	pause
	jmp	2b
3:	mov	%r14d, %ecx
	and	$(QN - 1), %ecx
	mov	USED + 4(,%rcx,8), %edx		/* id */
	mov	USED + 8(,%rcx,8), %esi		/* len */
	mov	$7, %al
	cmp	$QN, %edx
	jae	fail
	test	%esi, %esi
	jnz	4f
	inc	%r9d
	jmp	5f
4:	mov	$8, %al
	cmp	$(HDR + SMALL), %esi
	jne	fail
	mov	%edx, %eax			/* num_buffers, at offset 10 */
	shl	$10, %eax
	cmpw	$1, BUF + 10(%rax)
	mov	$9, %al
	jne	fail
	inc	%r10d
5:	mov	%r15d, %ecx			/* give the buffer back */
	and	$(QN - 1), %ecx
	movw	%dx, AVAIL + 4(,%rcx,2)
	inc	%r15d
	movw	%r15w, AVAIL + 2
	movl	%r13d, (%r12)
	inc	%r14d
	test	%r11d, %r11d			/* two drops and two frames: say so */
	jnz	2b
	cmp	$(2 * QN), %r9d
	jb	2b
	cmp	$2, %r10d
	jb	2b
	mov	$1, %r11d
	say	msg
	jmp	2b
	payload_exit msg			/* never reached; defines fail */
msg:	.asciz	"hostile net running\n"
