/* SPDX-License-Identifier: Apache-2.0 */
/* Prints "tick" on the testdev, then spins a while, forever: the pause test
 * (run_payloads.sh) checks that no tick comes while the VM is paused over
 * the control API, and that they come again after the resume. */
#include "hostile.inc"

	payload_entry
	trap_all
1:	say	msg
	mov	$2000000, %ecx
2:	pause
	dec	%ecx
	jnz	2b
	jmp	1b
	payload_exit msg			/* never reached; defines fail */
msg:	.asciz	"tick\n"
