// SPDX-License-Identifier: Apache-2.0
/* What the VMM keeps resident once its setup is over: resident.h. */
#include "resident.h"

#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The ranges to drop, gathered first and then dropped in one call. */
struct ranges {
	struct iovec iov[RESIDENT_MAX_RANGES];
	unsigned n;
	size_t bytes;
};

/* Whether the object has text relocations: its read-only segments were then
 * written by ld.so (privately), and dropping them would lose that. */
static int has_textrel(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const ElfW(Dyn) *d;

		if (ph->p_type != PT_DYNAMIC)
			continue;
		for (d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr); d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_TEXTREL ||
			    (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)))
				return 1;
	}
	return 0;
}

static int drop_object(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	struct ranges *r = data;

	(void)size;
	/* the vDSO is the kernel's own mapping, not a file's */
	for (int i = 0; vdso && i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_offset == 0 &&
		    info->dlpi_addr + info->dlpi_phdr[i].p_vaddr == vdso)
			return 0;
	if (has_textrel(info))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start, end;

		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || !ph->p_memsz)
			continue;
		/* Whole pages inside the segment only: a page it shares with
		 * a writable neighbour (mapped over it) is that one's. */
		start = (info->dlpi_addr + ph->p_vaddr + page - 1) & ~(page - 1);
		end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
		if (end <= start)
			continue;
		if (r->n == RESIDENT_MAX_RANGES)
			return 1; /* the rest stays: the trim is an economy */
		r->iov[r->n].iov_base = (void *)start;
		r->iov[r->n++].iov_len = end - start;
		r->bytes += end - start;
	}
	return 0;
}

/*
 * One process_madvise(2) on this process itself (PIDFD_SELF_THREAD_GROUP,
 * Linux 6.15) drops every range with one TLB flush, where a madvise(2) per
 * range flushes each time, and each flush interrupts the CPUs the other
 * threads ran on: dear on a nested or paravirtual host (28 ranges on a PVM
 * host: 128-218 us one by one, 78-96 us at once). A kernel that refuses it
 * (EBADF, EINVAL) gets one madvise per range.
 */
static size_t drop_ranges(const struct ranges *r)
{
	size_t dropped = 0;
	long done = r->n ? syscall(SYS_process_madvise, RESIDENT_PIDFD_SELF, r->iov, (size_t)r->n,
				   MADV_DONTNEED, 0u)
			 : 0;

	if (done == (long)r->bytes)
		return r->bytes >> 10;
	for (unsigned i = 0; i < r->n; i++)
		if (!madvise(r->iov[i].iov_base, r->iov[i].iov_len, MADV_DONTNEED))
			dropped += r->iov[i].iov_len >> 10;
	return dropped;
}

size_t resident_trim(void)
{
	static struct ranges r;

	r.n = 0;
	r.bytes = 0;
	malloc_trim(0);
	dl_iterate_phdr(drop_object, &r);
	return drop_ranges(&r);
}
