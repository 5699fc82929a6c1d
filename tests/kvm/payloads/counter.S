/* SPDX-License-Identifier: Apache-2.0 */
/* Counts in memory, for the snapshot tests (run_snapshot.sh): each round
 * adds one to COUNT (a quadword in guest RAM), writes it to the testdev's
 * scratch register, prints "count N" (decimal), checks that the 64 KiB
 * pattern it wrote at start is intact (else "guest: memory lost at N" and
 * exit 1), then spins SPIN times. Restored from a snapshot it goes on from
 * its count; rolled back, it goes back to the snapshot's. */
#include "hostile.inc"

#define COUNT 0x200000
#define PATTERN 0x210000
#define PATTERN_QWORDS 8192 /* 64 KiB */
#define SPIN 100000 /* plain dec/jnz: a PAUSE would exit to the host under nested SVM */

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
