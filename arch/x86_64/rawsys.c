/* SPDX-License-Identifier: Apache-2.0 */
/* arch_raw_syscall on x86_64: the `syscall` instruction, number in rax,
 * arguments in rdi, rsi, rdx, r10, r8, r9; rcx and r11 are clobbered. */
#include <sys/syscall.h>

#include "arch.h"

#define STR_(x) #x
#define STR(x) STR_(x)

long arch_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/*
 * arch_clone_vm_split(ca: rdi, size: rsi, stack_top: rdx, fn: rcx, arg: r8).
 * The kernel keeps every register but rax, rcx and r11 across `syscall`,
 * and the child starts with the parent's registers and stack pointer: it
 * returns to the caller with `ret` (0, or -errno in the caller). The
 * parent takes its new stack before any push, so the caller's stack is
 * the child's alone from the first instruction after clone3.
 */
__asm__(".pushsection .text\n"
	".globl arch_clone_vm_split\n"
	".type arch_clone_vm_split, @function\n"
	"arch_clone_vm_split:\n"
	"	mov %rcx, %r9\n"
	"	mov $" STR(SYS_clone3) ", %eax\n"
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jg 1f\n"
	"	ret\n"
	"1:	mov %rdx, %rsp\n"
	"	mov %r8, %rdi\n"
	"	mov %rax, %rsi\n"
	"	xor %ebp, %ebp\n"
	"	call *%r9\n"
	"	ud2\n"
	".size arch_clone_vm_split, .-arch_clone_vm_split\n"
	".popsection\n");

/*
 * arch_clone3_fn(ca: rdi, size: rsi, fn: rdx, arg: rcx): the child starts
 * on the stack clone3 gave it (its top 16-byte aligned), calls fn(arg) and
 * exits with its result; the parent returns the pid or -errno.
 */
__asm__(".pushsection .text\n"
	".globl arch_clone3_fn\n"
	".type arch_clone3_fn, @function\n"
	"arch_clone3_fn:\n"
	"	mov %rcx, %r8\n"
	"	mov $" STR(SYS_clone3) ", %eax\n"
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jz 1f\n"
	"	ret\n"
	"1:	xor %ebp, %ebp\n"
	"	mov %r8, %rdi\n"
	"	call *%rdx\n"
	"	mov %eax, %edi\n"
	"	mov $" STR(SYS_exit) ", %eax\n"
	"	syscall\n"
	"	ud2\n"
	".size arch_clone3_fn, .-arch_clone3_fn\n"
	".popsection\n");

void *arch_thread_pointer(void)
{
	void *tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
}
