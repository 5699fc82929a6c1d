/* SPDX-License-Identifier: Apache-2.0 */
/* A bus: sorted, non-overlapping address ranges dispatched to I/O handlers.
 * struct vm has two, one for port I/O and one for MMIO. */
#ifndef CUBICLE_BUS_H
#define CUBICLE_BUS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cubicle/plugin.h"

struct bus_range {
	uint64_t base, len;
	cub_io_fn *io;
	void *priv;
	const char *owner; /* for messages: "serial8250[com1]" */
};

struct bus {
	const char *name; /* "pio" or "mmio" */
	pthread_rwlock_t lock; /* writers: setup and teardown; readers: vCPUs */
	struct bus_range *r;
	size_t n, cap;
};

void bus_init(struct bus *b, const char *name);
void bus_free(struct bus *b);
/* 0, -EINVAL (empty or wrapping range), -EEXIST (overlap) or -ENOMEM. */
int bus_add(struct bus *b, uint64_t base, uint64_t len, cub_io_fn *io, void *priv,
	    const char *owner);
/* Remove the range starting at base: 0 or -ENOENT. */
int bus_del(struct bus *b, uint64_t base);
/* The range holding addr, or NULL. Caller holds no lock; the answer is a copy. */
bool bus_find(struct bus *b, uint64_t addr, struct bus_range *out);
/* Dispatch an access. false if no range holds all of [addr, addr+len):
 * the caller decides what an unclaimed access means (reads as all-ones). */
bool bus_access(struct bus *b, uint64_t addr, void *data, uint32_t len, bool is_write);

#endif
