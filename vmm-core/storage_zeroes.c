/* SPDX-License-Identifier: Apache-2.0 */
/* h->storage->write_zeroes: the backend's own op, or zero buffers written
 * in bounded chunks. Alone in its file so the installed test harness
 * (libcubicle-plugin-test) links the host's own code. */
#include <errno.h>
#include <stdint.h>

#include "cubicle/storage.h"
#include "storage_zeroes.h"

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
