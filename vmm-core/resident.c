// SPDX-License-Identifier: Apache-2.0
/* What the VMM keeps resident once its setup is over: resident.h. */
#include "resident.h"

#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

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
	size_t *dropped = data;

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
		if (!madvise((void *)start, end - start, MADV_DONTNEED))
			*dropped += (end - start) >> 10;
	}
	return 0;
}

size_t resident_trim(void)
{
	size_t dropped = 0;

	malloc_trim(0);
	dl_iterate_phdr(drop_object, &dropped);
	return dropped;
}
