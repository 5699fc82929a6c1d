/* SPDX-License-Identifier: Apache-2.0 */
/* Where the testdev plugin sits on x86 (arch/x86_64/layout.c) and its registers. */
#define TD_PIO 0x500
#define TD_MMIO 0xd0001000
#define TD_EXIT 0x0
#define TD_SCRATCH 0x4
#define TD_PUTC 0x8
#define TD_MAGIC 0xc
#define TD_MAGIC_VALUE 0x49425543 /* "CUBI" */
#define UNCLAIMED_PORT 0x5f0
#define PASS 42
