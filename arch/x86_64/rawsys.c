/* SPDX-License-Identifier: Apache-2.0 */
/* arch_raw_syscall on x86_64: the `syscall` instruction, number in rax,
 * arguments in rdi, rsi, rdx, r10, r8, r9; rcx and r11 are clobbered. */
#include "arch.h"

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
