/* SPDX-License-Identifier: Apache-2.0 */
/* The installed fake host's h->storage->write_zeroes: the same steps as
 * vmm-core/storage.c's storage_write_zeroes, which cannot be linked alone
 * (storage.c needs the whole core). Drop this file once the helper has a
 * source file of its own. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "cubicle/storage.h"

int storage_write_zeroes(struct cub_storage *s, uint64_t off, uint64_t len, bool unmap);

int storage_write_zeroes(struct cub_storage *s, uint64_t off, uint64_t len, bool unmap)
{
	static const uint8_t zero[64 * 1024];

	if (s->ops->write_zeroes)
		return s->ops->write_zeroes(s->priv, off, len, unmap);
	while (len) {
		struct iovec v = { (void *)zero, len < sizeof(zero) ? (size_t)len : sizeof(zero) };
		int64_t n = s->ops->writev(s->priv, off, &v, 1);

		if (n != (int64_t)v.iov_len)
			return n < 0 ? (int)n : -EIO;
		off += v.iov_len;
		len -= v.iov_len;
	}
	return 0;
}
