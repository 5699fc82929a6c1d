/* SPDX-License-Identifier: Apache-2.0 */
/* Guest RAM: a memfd mapped once; every translation is bounds-checked. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem.h"

int mem_create(struct guest_mem *m, uint64_t size, const struct mem_bank *banks, unsigned n)
{
	uint64_t off = 0;
	void *p;

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
	m->fd = memfd_create("cubicle-guest-ram", MFD_CLOEXEC);
	if (m->fd < 0)
		return -errno;
	if (ftruncate(m->fd, (off_t)size) < 0)
		goto fail;
	/* MAP_NORESERVE: guest RAM is committed as the guest touches it. */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, m->fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	m->host = p;
	m->size = size;
	return 0;
fail: {
	int e = -errno;

	close(m->fd);
	m->fd = -1;
	return e;
}
}

void mem_destroy(struct guest_mem *m)
{
	if (m->host)
		munmap(m->host, m->size);
	if (m->fd >= 0)
		close(m->fd);
	m->host = NULL;
	m->fd = -1;
}

void *mem_map(const struct guest_mem *m, uint64_t gpa, uint64_t len)
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
