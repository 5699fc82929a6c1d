/* SPDX-License-Identifier: Apache-2.0 */
/* What the VMM keeps resident once its setup is over. */
#ifndef CUBICLE_RESIDENT_H
#define CUBICLE_RESIDENT_H

#include <stddef.h>

/*
 * Called once the VM is made and sealed, before the guest's first
 * instruction: gives back the heap that setup freed (malloc_trim) and drops
 * this process's page-table entries for the read-only segments of every
 * loaded ELF object (cubicle, ld.so, libc, the plugins and their libraries).
 * Those pages are the files' own, untouched (never written: writable and
 * RELRO segments are left alone), still in the page cache, and come back on
 * the next touch: what setup alone ran (the dynamic linker, libconfig's
 * parser, libseccomp's filter compiler, the plugin loader) stops counting
 * in the VMM's resident set, and the kernel's fault-around no longer keeps
 * 64 KiB around each page it ran. Returns the KiB of mappings it dropped
 * (not all of which were resident).
 */
size_t resident_trim(void);

#endif
