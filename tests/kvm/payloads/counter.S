/* SPDX-License-Identifier: Apache-2.0 */
/* Counts in memory, for the snapshot tests (run_snapshot.sh): each round
 * adds one to COUNT (a quadword in guest RAM), writes it to the testdev's
 * scratch register, prints "count N" (decimal), checks that the 64 KiB
 * pattern it wrote at start is intact (else "guest: memory lost at N" and
 * exit 1), then spins SPIN times. Restored from a snapshot it goes on from
 * its count; rolled back, it goes back to the snapshot's.
 *
 * Built with DISK (diskcount.S) it also drives a virtio-blk disk over
 * virtio-mmio: each round reads sector 0's first quadword (the TAG: the
 * test writes one into a clone's own disk while it is paused), writes
 * sector 1 = { TAG, COUNT, ~COUNT } and, when TAG differs from the last
 * one it saw, prints "tag N". */
#include "hostile.inc"

#define COUNT 0x200000
#define PATTERN 0x210000
#define PATTERN_QWORDS 8192 /* 64 KiB */
#define SPIN 100000 /* plain dec/jnz: a PAUSE would exit to the host under nested SVM */
#ifdef DISK
#define LASTTAG 0x200008
#define AIDX 0x200010		/* the available ring's next index */
#define HDR_IN 0x230000		/* read sector 0 */
#define HDR_OUT 0x230010	/* write sector 1 */
#define STAT 0x230100		/* 2 status bytes */
#define TAGBUF 0x231000		/* sector 0 */
#define OUTBUF 0x232000		/* sector 1 */
#define QN 16
#endif

	payload_entry
	trap_all
	movq	$0, COUNT
	mov	$PATTERN, %rdi				/* pattern[i] = i * golden */
	xor	%ecx, %ecx
	movabs	$0x9e3779b97f4a7c15, %rdx
	xor	%eax, %eax
1:	mov	%rax, (%rdi,%rcx,8)
	add	%rdx, %rax
	inc	%ecx
	cmp	$PATTERN_QWORDS, %ecx
	jne	1b
	mov	%rax, %r15				/* what the check will sum up to */
#ifdef DISK
	vm_probe 2					/* block */
	vm_begin
	vm_features 0, 4				/* VERSION_1 alone */
	vm_queue 0, QN, 6
	vm_driver_ok 7
	movq	$0, HDR_IN				/* VIRTIO_BLK_T_IN, sector 0 */
	movq	$0, HDR_IN + 8
	movq	$1, HDR_OUT				/* VIRTIO_BLK_T_OUT, sector 1 */
	movq	$1, HDR_OUT + 8
	desc	0, HDR_IN, 16, F_NEXT, 1
	desc	1, TAGBUF, 512, F_WRITE | F_NEXT, 2
	desc	2, STAT, 1, F_WRITE, 0
	desc	3, HDR_OUT, 16, F_NEXT, 4
	desc	4, OUTBUF, 512, F_NEXT, 5
	desc	5, STAT + 1, 1, F_WRITE, 0
	movw	$0, AIDX
	movq	$-1, LASTTAG
#endif
round:
	incq	COUNT
	mov	COUNT, %rax
	mov	$TD_MMIO, %rbx
	movl	%eax, TD_SCRATCH(%rbx)
	say	s_count
	mov	COUNT, %rax
	call	put_dec
	movb	$'\n', TD_PUTC(%rbx)
	/* The pattern: every entry is the previous plus golden. */
	mov	$PATTERN, %rdi
	xor	%ecx, %ecx
	xor	%eax, %eax
	movabs	$0x9e3779b97f4a7c15, %rdx
2:	cmp	(%rdi,%rcx,8), %rax
	jne	lost
	add	%rdx, %rax
	inc	%ecx
	cmp	$PATTERN_QWORDS, %ecx
	jne	2b
	cmp	%rax, %r15				/* a register survived too */
	jne	lost
#ifdef DISK
	movb	$0xff, STAT
	xor	%edi, %edi				/* chain 0: read the tag */
	call	blk_req
	mov	$20, %al
	cmpb	$0, STAT
	jne	fail
	mov	TAGBUF, %rax
	mov	%rax, OUTBUF
	mov	COUNT, %rax
	mov	%rax, OUTBUF + 8
	not	%rax
	mov	%rax, OUTBUF + 16
	movb	$0xff, STAT + 1
	mov	$3, %edi				/* chain 3: write sector 1 */
	call	blk_req
	mov	$21, %al
	cmpb	$0, STAT + 1
	jne	fail
	mov	TAGBUF, %rax
	cmp	LASTTAG, %rax
	je	6f
	mov	%rax, LASTTAG
	mov	$TD_MMIO, %rbx
	say	s_tag
	mov	LASTTAG, %rax
	call	put_dec
	movb	$'\n', TD_PUTC(%rbx)
6:
#endif
	mov	$SPIN, %ecx
3:	dec	%ecx
	jnz	3b
	jmp	round

lost:	say	s_lost
	mov	COUNT, %rax
	call	put_dec
	movb	$'\n', TD_PUTC(%rbx)
	mov	$1, %al
	jmp	fail

#ifdef DISK
/* Make chain %edi available, kick, wait until the device used it (step 22
 * when it never does). Clobbers %rax, %rbx, %rcx, %rdx. */
blk_req:
	mov	$VM_BASE, %rbx
	movzwl	AIDX, %eax
	mov	%eax, %edx
	and	$QN - 1, %edx
	mov	%di, AVAIL + 4(,%rdx,2)
	inc	%eax
	mov	%ax, AIDX
	mov	%ax, AVAIL + 2				/* x86 keeps store order */
	movl	$0, VM_QUEUE_NOTIFY(%rbx)
	mov	$200000000, %ecx
7:	cmp	%ax, USED + 2
	je	8f
	dec	%ecx
	jnz	7b
	mov	$22, %al
	jmp	fail
8:	mov	$TD_MMIO, %rbx
	ret
#endif

/* %rax in decimal on the testdev (%rbx); clobbers %rax, %rcx, %rdx, %rsi. */
put_dec:
	mov	$STACK_TOP - 64, %rsi			/* digits, backwards */
	mov	$10, %ecx
4:	xor	%edx, %edx
	div	%rcx
	add	$'0', %dl
	dec	%rsi
	mov	%dl, (%rsi)
	test	%rax, %rax
	jnz	4b
5:	mov	(%rsi), %al
	movb	%al, TD_PUTC(%rbx)
	inc	%rsi
	cmp	$STACK_TOP - 64, %rsi
	jne	5b
	ret

	payload_exit s_never			/* defines fail */
s_count: .asciz	"count "
s_lost:	.asciz	"memory lost at "
s_never: .asciz	"never"
#ifdef DISK
s_tag:	.asciz	"tag "
#endif
