/* SPDX-License-Identifier: Apache-2.0 */
/* File I/O loops shared by the storage backends that keep a disk in one file (raw, reflink). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rawio.h"

/* See rawio.h. */
int64_t rawio_xfer(int fd, bool wr, uint64_t off, const struct iovec *iov, int cnt)
{
	struct iovec cur[IOV_MAX];
	uint64_t done = 0;
	size_t skip = 0;
	int i = 0;

	while (i < cnt && !iov[i].iov_len)
		i++;
	while (i < cnt) {
		const struct iovec *v = iov + i;
		ssize_t r;
		int n = cnt - i;

		if (skip || n > IOV_MAX) {
			if (n > IOV_MAX)
				n = IOV_MAX;
			for (int j = 0; j < n; j++)
				cur[j] = iov[i + j];
			cur[0].iov_base = (uint8_t *)cur[0].iov_base + skip;
			cur[0].iov_len -= skip;
			v = cur;
		}
		if (off + done > (uint64_t)INT64_MAX)
			return -EINVAL;
		r = wr ? pwritev(fd, v, n, (off_t)(off + done)) : preadv(fd, v, n, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return wr ? -EIO : (int64_t)done; /* end of file */
		done += (uint64_t)r;
		for (size_t left = (size_t)r; left;) {
			size_t avail = iov[i].iov_len - skip;

			if (left < avail) {
				skip += left;
				break;
			}
			left -= avail;
			skip = 0;
			i++;
		}
		while (i < cnt && !skip && !iov[i].iov_len)
			i++;
	}
	return (int64_t)done;
}

/* See rawio.h. */
uint64_t rawio_iov_total(const struct iovec *iov, int cnt, bool *overflow)
{
	uint64_t t = 0;

	*overflow = false;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > UINT64_MAX - t)
			*overflow = true;
		t += iov[i].iov_len;
	}
	return t;
}
