/* SPDX-License-Identifier: Apache-2.0 */
/* arch_raw_syscall on arm64: `svc #0`, number in x8, arguments in x0-x5,
 * the result in x0. */
#include <sys/syscall.h>

#include "arch.h"

#define STR_(x) #x
#define STR(x) STR_(x)

long arch_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a1;
	register long x1 __asm__("x1") = a2;
	register long x2 __asm__("x2") = a3;
	register long x3 __asm__("x3") = a4;
	register long x4 __asm__("x4") = a5;
	register long x5 __asm__("x5") = a6;

	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}

/*
 * arch_clone_vm_split(ca: x0, size: x1, stack_top: x2, fn: x3, arg: x4).
 * The kernel keeps every register but x0 across `svc`, and the child
 * starts with the parent's registers and stack pointer: it returns to the
 * caller (0, or -errno in the caller). The parent takes its new stack
 * before it stores anything, so the caller's stack is the child's alone.
 */
__asm__(".pushsection .text\n"
	".globl arch_clone_vm_split\n"
	".type arch_clone_vm_split, %function\n"
	"arch_clone_vm_split:\n"
	"	mov x8, #" STR(SYS_clone3) "\n"
	"	svc #0\n"
	"	cmp x0, #0\n"
	"	b.gt 1f\n"
	"	ret\n"
	"1:	mov sp, x2\n"
	"	mov x1, x0\n"
	"	mov x0, x4\n"
	"	mov x29, xzr\n"
	"	mov x30, xzr\n"
	"	blr x3\n"
	"	brk #0\n"
	".size arch_clone_vm_split, .-arch_clone_vm_split\n"
	".popsection\n");

/*
 * arch_clone3_fn(ca: x0, size: x1, fn: x2, arg: x3): the child starts on
 * the stack clone3 gave it, calls fn(arg) and exits with its result; the
 * parent returns the pid or -errno.
 */
__asm__(".pushsection .text\n"
	".globl arch_clone3_fn\n"
	".type arch_clone3_fn, %function\n"
	"arch_clone3_fn:\n"
	"	mov x8, #" STR(SYS_clone3) "\n"
	"	svc #0\n"
	"	cbz x0, 1f\n"
	"	ret\n"
	"1:	mov x29, xzr\n"
	"	mov x30, xzr\n"
	"	mov x0, x3\n"
	"	blr x2\n"
	"	mov x8, #" STR(SYS_exit) "\n"
	"	svc #0\n"
	"	brk #0\n"
	".size arch_clone3_fn, .-arch_clone3_fn\n"
	".popsection\n");

void *arch_thread_pointer(void)
{
	void *tp;

	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
	return tp;
}
