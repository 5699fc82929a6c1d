/* SPDX-License-Identifier: Apache-2.0 */
/* Restore's Uffd memory backend: guest RAM anonymous and private, each
 * page filled on its first touch (by the guest, KVM or a device) by a
 * handler thread with userfaultfd: UFFDIO_COPY of the snapshot memory
 * file's page, UFFDIO_ZEROPAGE where it holds zeroes. The alternative to
 * the File backend's private mapping of the file: the pages are this
 * process's own from the start (no page cache shared with clones), and a
 * handler decides where each comes from. */
#ifndef CUBICLE_UFFD_H
#define CUBICLE_UFFD_H

#include <stddef.h>

struct vm;

/* On a VM whose RAM mem_create_file mapped from a file (vm->mem.fd): map
 * anonymous memory over it, register it with a new userfaultfd and start
 * the handler, which takes over the file. 0, or -errno with err (the RAM
 * is then unusable: destroy the VM). */
int uffd_start(struct vm *vm, char *err, size_t errlen);
/* Stop the handler and close its descriptors (vm_destroy, before the RAM
 * goes; no vCPU or device thread runs). No-op without one. */
void uffd_stop(struct vm *vm);

#endif
