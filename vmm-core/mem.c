/* SPDX-License-Identifier: Apache-2.0 */
/* Guest RAM: a memfd (or a snapshot's memory file) mapped once; every
 * translation is bounds-checked. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "mem.h"

/* Check and copy the banks; their total must be @size. */
static int set_banks(struct guest_mem *m, uint64_t size, const struct mem_bank *banks, unsigned n)
{
	uint64_t off = 0;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	if (!size || !n || n > MEM_MAX_BANKS)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (!banks[i].size || banks[i].gpa + banks[i].size - 1 < banks[i].gpa)
			return -EINVAL;
		if (i && banks[i].gpa < banks[i - 1].gpa + banks[i - 1].size)
			return -EINVAL; /* banks must be sorted and disjoint */
		m->bank[i] = banks[i];
		m->bank[i].off = off;
		off += banks[i].size;
	}
	if (off != size)
		return -EINVAL;
	m->n_banks = n;
	return 0;
}

/* Map @fd over @size bytes (at @at with MAP_FIXED when not NULL). */
static void *map_ram(int fd, uint64_t size, int shared, void *at)
{
	/* MAP_NORESERVE: guest RAM is committed as the guest touches it. */
	return mmap(at, size, PROT_READ | PROT_WRITE,
		    shared | MAP_NORESERVE | (at ? MAP_FIXED : 0), fd, 0);
}

int mem_create(struct guest_mem *m, uint64_t size, const struct mem_bank *banks, unsigned n)
{
	int ret = set_banks(m, size, banks, n);
	void *p;

	if (ret)
		return ret;
	m->fd = memfd_create("cubicle-guest-ram", MFD_CLOEXEC);
	if (m->fd < 0)
		return -errno;
	if (ftruncate(m->fd, (off_t)size) < 0)
		goto fail;
	p = map_ram(m->fd, size, MAP_SHARED, NULL);
	if (p == MAP_FAILED)
		goto fail;
	m->host = p;
	m->size = size;
	return 0;
fail:
	ret = -errno;
	close(m->fd);
	m->fd = -1;
	return ret;
}

/* The huge page size KVM can map guest RAM with on x86 and arm64 (4 KiB
 * base pages). */
#define THP_SIZE (2ull << 20)
#ifndef PR_SET_VMA /* <linux/prctl.h>, Linux 5.17; not in every libc's <sys/prctl.h> */
#define PR_SET_VMA	     0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

void *mem_anon_aligned(uint64_t size)
{
	uint8_t *p, *at;
	uintptr_t skew;

	/* THP_SIZE more, then the unaligned ends cut off */
	if (size > UINT64_MAX - THP_SIZE)
		return errno = ENOMEM, MAP_FAILED;
	p = mmap(NULL, size + THP_SIZE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return MAP_FAILED;
	skew = (uintptr_t)p & (THP_SIZE - 1);
	at = skew ? p + (THP_SIZE - skew) : p;
	if (at > p)
		munmap(p, (size_t)(at - p));
	if (at + size < p + size + THP_SIZE)
		munmap(at + size, (size_t)(p + size + THP_SIZE - (at + size)));
	return at;
}

int mem_create_thp(struct guest_mem *m, uint64_t size, const struct mem_bank *banks, unsigned n)
{
	int ret = set_banks(m, size, banks, n);
	uint8_t *at;

	if (ret)
		return ret;
	at = mem_anon_aligned(size);
	if (at == MAP_FAILED)
		return -errno;
	/* A kernel built without THP refuses the advice: the memfd then, as
	 * without machine.thp. (THP built but off: the advice is taken, and
	 * the RAM works the same on 4 KiB pages.) The advice also marks the
	 * mapping "hg" in smaps' VmFlags, where tools tell guest RAM from the
	 * VMM's own memory on kernels that cannot name it (no
	 * CONFIG_ANON_VMA_NAME). */
	if (madvise(at, size, MADV_HUGEPAGE) < 0) {
		munmap(at, size);
		return mem_create(m, size, banks, n);
	}
	prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)at, (unsigned long)size,
	      (unsigned long)"cubicle-guest-ram");
	m->host = at;
	m->size = size;
	m->anon = true;
	return 0;
}

/*
 * A snapshot's memory file, private, at @at (MAP_FIXED) or anywhere: the
 * file's data extents mapped from the file, its holes anonymous. A guest
 * page first touched in a hole is then a zero page of this process's own;
 * mapped from the file, the fault would allocate the page in the file (on
 * tmpfs, in RAM: a 1 GiB write by a restored guest would cost 2 GiB, and
 * grow the file every clone shares). Extents less than a gap apart are
 * mapped as one, the gap doubling until at most MAP_RUNS mappings are
 * needed. A file that cannot tell its holes is mapped whole.
 */
#define MAP_GAP	 (2ull << 20)
#define MAP_RUNS 2048

/* The data runs of @fd in [0, size), joined across gaps up to @gap; with
 * @base, each is mapped there (MAP_FIXED; *@failed set if one could not
 * be). How many runs there are, or -1 (lseek failed). */
static long data_runs(int fd, uint64_t size, uint64_t gap, void *base, bool *failed)
{
	uint64_t at = 0, rs = 0, re = 0;
	long n = 0;

	while (at < size) {
		off_t d = lseek(fd, (off_t)at, SEEK_DATA), h;

		if (d < 0 && errno == ENXIO)
			break; /* holes to the end */
		if (d < 0)
			return -1;
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return -1;
		d &= ~(off_t)(MEM_PAGE - 1);
		at = ((uint64_t)h + MEM_PAGE - 1) & ~(uint64_t)(MEM_PAGE - 1);
		if (at > size)
			at = size;
		if (n && (uint64_t)d <= re + gap) {
			re = at; /* joins the run */
			continue;
		}
		if (n && base && mmap((uint8_t *)base + rs, re - rs, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED, fd,
				      (off_t)rs) == MAP_FAILED)
			*failed = true;
		rs = (uint64_t)d;
		re = at;
		n++;
	}
	if (n && base && mmap((uint8_t *)base + rs, re - rs, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED, fd, (off_t)rs) == MAP_FAILED)
		*failed = true;
	return n;
}

static void *map_snapshot_file(int fd, uint64_t size, void *at)
{
	uint64_t gap = MAP_GAP;
	bool failed = false;
	long n;
	void *p;

	while ((n = data_runs(fd, size, gap, NULL, NULL)) > MAP_RUNS)
		gap *= 2;
	if (n < 0)
		return map_ram(fd, size, MAP_PRIVATE, at);
	p = mmap(at, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (at ? MAP_FIXED : 0), -1, 0);
	if (p == MAP_FAILED)
		return p;
	if (data_runs(fd, size, gap, p, &failed) >= 0 && !failed)
		return p;
	/* Out of mappings after all: the file whole, over the same range. */
	if (map_ram(fd, size, MAP_PRIVATE, p) != MAP_FAILED)
		return p;
	if (!at)
		munmap(p, size);
	return MAP_FAILED;
}

int mem_create_file(struct guest_mem *m, int fd, uint64_t size, const struct mem_bank *banks,
		    unsigned n)
{
	int ret = set_banks(m, size, banks, n);
	void *p;

	if (ret) {
		close(fd);
		return ret;
	}
	p = map_snapshot_file(fd, size, NULL);
	if (p == MAP_FAILED) {
		ret = -errno;
		close(fd);
		return ret;
	}
	m->fd = fd;
	m->host = p;
	m->size = size;
	m->private_file = true;
	return 0;
}

int mem_remap_file(struct guest_mem *m, int fd)
{
	int ret;

	if (!m->host) {
		close(fd);
		return -EINVAL;
	}
	if (map_snapshot_file(fd, m->size, m->host) == MAP_FAILED) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (m->fd >= 0)
		close(m->fd);
	m->fd = fd;
	m->private_file = true;
	m->anon = false;
	return 0;
}

int mem_dirty_enable(struct guest_mem *m)
{
	if (!m->dirty)
		m->dirty = calloc((m->size / MEM_PAGE + 63) / 64, sizeof(uint64_t));
	return m->dirty ? 0 : -ENOMEM;
}

void mem_mark_dirty(const struct guest_mem *m, const void *host, uint64_t len)
{
	uintptr_t at = (uintptr_t)host, base = (uintptr_t)m->host;
	uint64_t first, last;

	if (!m->dirty || !len || at < base || at - base >= m->size || len > m->size - (at - base))
		return;
	first = (at - base) / MEM_PAGE;
	last = (at - base + len - 1) / MEM_PAGE;
	for (uint64_t p = first; p <= last; p++)
		__atomic_fetch_or(&m->dirty[p / 64], 1ull << (p % 64), __ATOMIC_RELAXED);
}

void mem_mark_all_dirty(const struct guest_mem *m)
{
	if (m->dirty)
		mem_mark_dirty(m, m->host, m->size);
}

void mem_take_dirty(struct guest_mem *m, uint64_t *out)
{
	if (!m->dirty)
		return;
	for (uint64_t i = 0; i < (m->size / MEM_PAGE + 63) / 64; i++)
		out[i] |= __atomic_exchange_n(&m->dirty[i], 0, __ATOMIC_RELAXED);
}

void mem_put_dirty(struct guest_mem *m, const uint64_t *bits)
{
	if (!m->dirty)
		return;
	for (uint64_t i = 0; i < (m->size / MEM_PAGE + 63) / 64; i++)
		__atomic_fetch_or(&m->dirty[i], bits[i], __ATOMIC_RELAXED);
}

void mem_destroy(struct guest_mem *m)
{
	if (m->host)
		munmap(m->host, m->size);
	if (m->fd >= 0)
		close(m->fd);
	free(m->dirty);
	m->dirty = NULL;
	m->host = NULL;
	m->fd = -1;
}

int mem_write(const struct guest_mem *m, uint64_t gpa, const void *src, uint64_t len)
{
	void *p = mem_map(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(p, src, len);
	return 0;
}

int mem_read(const struct guest_mem *m, uint64_t gpa, void *dst, uint64_t len)
{
	const void *p = mem_map(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(dst, p, len);
	return 0;
}

uint64_t mem_end(const struct guest_mem *m)
{
	if (!m->n_banks)
		return 0;
	return m->bank[m->n_banks - 1].gpa + m->bank[m->n_banks - 1].size;
}
