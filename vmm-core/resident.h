/* SPDX-License-Identifier: Apache-2.0 */
/* What the VMM keeps resident once its setup is over. */
#ifndef CUBICLE_RESIDENT_H
#define CUBICLE_RESIDENT_H

#include <stddef.h>

/* Ranges dropped at most (one per read-only segment: cubicle with its
 * plugins and their libraries have ~30; IOV_MAX is 1024). */
#define RESIDENT_MAX_RANGES 256
/* process_madvise's pidfd for the calling process (PIDFD_SELF_THREAD_GROUP
 * in linux/pidfd.h from Linux 6.15; older headers lack it). The seccomp
 * lists allow process_madvise with this pidfd only. */
#define RESIDENT_PIDFD_SELF (-10001)

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
