/* SPDX-License-Identifier: Apache-2.0 */
/* Guest RAM: one memfd (or anonymous memory), mapped once, placed in
 * guest-physical banks. */
#ifndef CUBICLE_MEM_H
#define CUBICLE_MEM_H

#include <stdbool.h>
#include <stdint.h>

#define MEM_MAX_BANKS 4

struct mem_bank {
	uint64_t gpa;  /* guest-physical start */
	uint64_t size; /* bytes */
	uint64_t off;  /* offset into the memfd / host mapping */
};

struct guest_mem {
	int fd;          /* memfd, -1 if none */
	uint8_t *host;   /* mapping of the whole memfd */
	uint64_t size;   /* total RAM bytes */
	struct mem_bank bank[MEM_MAX_BANKS];
	unsigned n_banks;
	bool private_file; /* a private mapping of a file (a snapshot's memory) */
	bool anon;         /* private anonymous memory (mem_create_thp) */
	uint64_t *dirty;   /* pages the host wrote since the last mem_take_dirty, one bit
			    * per page of the mapping; NULL: not tracked */
};

/* Create size bytes of RAM laid out in the given banks (offsets are filled
 * in, contiguous in bank order). 0 or -errno. */
int mem_create(struct guest_mem *m, uint64_t size, const struct mem_bank *banks, unsigned n);
/* The same as private anonymous memory at a 2 MiB-aligned address, which
 * the kernel may back with transparent huge pages (MADV_HUGEPAGE): KVM then
 * maps the guest's RAM 2 MiB at a time, one fault where 4 KiB pages take
 * 512. Named "cubicle-guest-ram" in /proc/PID/maps where the kernel can
 * name anonymous memory. No fd (m->fd is -1). */
int mem_create_thp(struct guest_mem *m, uint64_t size, const struct mem_bank *banks, unsigned n);
/* @size bytes of private anonymous memory (MAP_NORESERVE) at a 2 MiB
 * boundary, where huge pages can back it; MAP_FAILED with errno set. */
void *mem_anon_aligned(uint64_t size);
/* The same over @fd (a file of exactly @size bytes), mapped MAP_PRIVATE:
 * reads fault in from the file, writes stay private. Takes @fd. */
int mem_create_file(struct guest_mem *m, int fd, uint64_t size, const struct mem_bank *banks,
		    unsigned n);
/* Replace the whole of RAM, in place (same host address: KVM's slots stay),
 * with a private mapping of @fd, which it takes; the old pages are dropped.
 * 0 or -errno (RAM then unchanged and @fd closed). */
int mem_remap_file(struct guest_mem *m, int fd);
void mem_destroy(struct guest_mem *m);
/*
 * Dirty tracking of the host's own writes (virtio devices'), beside KVM's
 * log of the guest's: enable allocates the bitmap (0 or -ENOMEM); mark
 * sets the bits of the pages [host, host+len) touches (any thread; nothing
 * when tracking is off or the range is not RAM); take ORs them into @out
 * (one bit per page of the mapping) and clears them.
 */
int mem_dirty_enable(struct guest_mem *m);
void mem_mark_dirty(const struct guest_mem *m, const void *host, uint64_t len);
void mem_mark_all_dirty(const struct guest_mem *m);
void mem_take_dirty(struct guest_mem *m, uint64_t *out);
/* Give bits taken back (a snapshot that failed): OR @bits into the bitmap. */
void mem_put_dirty(struct guest_mem *m, const uint64_t *bits);
#define MEM_PAGE 4096u
/* Host pointer for [gpa, gpa+len) if it lies wholly inside one bank, else
 * NULL (also on overflow and len == 0). Inline: every descriptor a device
 * pops goes through it. */
static inline void *mem_map(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	if (!len || gpa + len - 1 < gpa || !m->host)
		return NULL;
	for (unsigned i = 0; i < m->n_banks; i++) {
		const struct mem_bank *b = &m->bank[i];

		if (gpa >= b->gpa && gpa - b->gpa < b->size && len <= b->size - (gpa - b->gpa))
			return m->host + b->off + (gpa - b->gpa);
	}
	return NULL;
}
/* Copy into / out of guest RAM with the same checks: 0 or -EFAULT. */
int mem_write(const struct guest_mem *m, uint64_t gpa, const void *src, uint64_t len);
int mem_read(const struct guest_mem *m, uint64_t gpa, void *dst, uint64_t len);
/* One past the highest guest-physical RAM address. */
uint64_t mem_end(const struct guest_mem *m);

#endif
