/* SPDX-License-Identifier: Apache-2.0 */
/* A virtqueue chain built by a test's driver: a buffer appended the way a device would see it (the fake host's and the vsock fuzzer's). */
#ifndef CUBICLE_TESTS_VQ_CHAIN_H
#define CUBICLE_TESTS_VQ_CHAIN_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "cubicle/virtio.h"

/* Append len bytes at p to c, device-writable or not (writable ones come
 * last); -EINVAL when c is full or a readable one would follow a writable. */
static inline int vq_chain_add(struct cub_vq_chain *c, void *p, size_t len, bool writable)
{
	unsigned n = (unsigned)c->n_out + c->n_in;

	if (n == CUB_VQ_MAX_SEGS || (!writable && c->n_in))
		return -EINVAL;
	c->iov[n].iov_base = p;
	c->iov[n].iov_len = len;
	if (writable) {
		c->n_in++;
		c->in_len += len;
	} else {
		c->n_out++;
		c->out_len += len;
	}
	c->out = c->iov;
	c->in = c->iov + c->n_out;
	return 0;
}

#endif
