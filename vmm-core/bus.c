/* SPDX-License-Identifier: Apache-2.0 */
/* Buses: a sorted array of ranges searched by bisection. Ranges change only
 * at setup and teardown; vCPUs take the read lock, so a range is never
 * removed while its handler runs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"

void bus_init(struct bus *b, const char *name)
{
	memset(b, 0, sizeof(*b));
	b->name = name;
	pthread_rwlock_init(&b->lock, NULL);
}

void bus_free(struct bus *b)
{
	free(b->r);
	b->r = NULL;
	b->n = b->cap = 0;
	pthread_rwlock_destroy(&b->lock);
}

/* Index of the first range whose end is above addr (locked by caller). */
static size_t lower_bound(const struct bus *b, uint64_t addr)
{
	size_t lo = 0, hi = b->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->r[mid].base + b->r[mid].len - 1 < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int bus_add(struct bus *b, uint64_t base, uint64_t len, cub_io_fn *io, void *priv,
	    const char *owner)
{
	size_t i;
	int ret = 0;

	if (!len || !io || base + len - 1 < base)
		return -EINVAL;
	pthread_rwlock_wrlock(&b->lock);
	i = lower_bound(b, base);
	if (i < b->n && b->r[i].base <= base + len - 1) {
		ret = -EEXIST;
		goto out;
	}
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 16;
		struct bus_range *r = realloc(b->r, cap * sizeof(*r));

		if (!r) {
			ret = -ENOMEM;
			goto out;
		}
		b->r = r;
		b->cap = cap;
	}
	memmove(&b->r[i + 1], &b->r[i], (b->n - i) * sizeof(b->r[0]));
	b->r[i] = (struct bus_range){ base, len, io, priv, owner };
	b->n++;
out:
	pthread_rwlock_unlock(&b->lock);
	return ret;
}

int bus_del(struct bus *b, uint64_t base)
{
	size_t i;
	int ret = -ENOENT;

	pthread_rwlock_wrlock(&b->lock);
	i = lower_bound(b, base);
	if (i < b->n && b->r[i].base == base) {
		memmove(&b->r[i], &b->r[i + 1], (b->n - i - 1) * sizeof(b->r[0]));
		b->n--;
		ret = 0;
	}
	pthread_rwlock_unlock(&b->lock);
	return ret;
}

bool bus_find(struct bus *b, uint64_t addr, struct bus_range *out)
{
	size_t i;
	bool found = false;

	pthread_rwlock_rdlock(&b->lock);
	i = lower_bound(b, addr);
	if (i < b->n && b->r[i].base <= addr) {
		*out = b->r[i];
		found = true;
	}
	pthread_rwlock_unlock(&b->lock);
	return found;
}

bool bus_access(struct bus *b, uint64_t addr, void *data, uint32_t len, bool is_write)
{
	const struct bus_range *r;
	size_t i;
	bool found = false;

	if (!len || addr + len - 1 < addr)
		return false;
	pthread_rwlock_rdlock(&b->lock);
	i = lower_bound(b, addr);
	if (i < b->n) {
		r = &b->r[i];
		/* The whole access must sit inside one range. */
		if (r->base <= addr && addr + len - 1 <= r->base + r->len - 1) {
			r->io(r->priv, addr - r->base, data, len, is_write);
			found = true;
		}
	}
	pthread_rwlock_unlock(&b->lock);
	return found;
}
