/* SPDX-License-Identifier: Apache-2.0 */
/* iovec arithmetic and full positional I/O (loops over EINTR and short transfers), for plugins and tools. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "iov.h"

uint64_t iov_total(const struct iovec *iov, int cnt, bool *overflow)
{
	uint64_t t = 0;

	*overflow = cnt < 0;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > UINT64_MAX - t)
			*overflow = true;
		t += iov[i].iov_len;
	}
	return t;
}

static size_t copy(const struct iovec *iov, int cnt, size_t pos, void *buf, size_t len,
		   bool to_iov)
{
	uint8_t *p = buf;
	size_t done = 0;

	for (int i = 0; i < cnt && done < len; i++) {
		size_t l = iov[i].iov_len, n;

		if (pos >= l) {
			pos -= l;
			continue;
		}
		n = l - pos < len - done ? l - pos : len - done;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + pos, p + done, n);
		else
			memcpy(p + done, (uint8_t *)iov[i].iov_base + pos, n);
		done += n;
		pos = 0;
	}
	return done;
}

size_t iov_to_buf(const struct iovec *iov, int cnt, size_t pos, void *buf, size_t len)
{
	return copy(iov, cnt, pos, buf, len, false);
}

size_t iov_from_buf(const struct iovec *iov, int cnt, size_t pos, const void *buf, size_t len)
{
	return copy(iov, cnt, pos, (void *)buf, len, true);
}

/* The general case of fullio_iov: the slice [pos, pos + len) is rebuilt in
 * cur, IOV_MAX entries at a time, and restarted after short transfers. */
static int64_t __attribute__((noinline))
fullio_slice(int fd, bool wr, uint64_t off, const struct iovec *iov, int cnt, size_t pos,
	     size_t len)
{
	struct iovec cur[IOV_MAX];
	size_t done = 0;
	int i = 0;

	while (i < cnt && pos >= iov[i].iov_len) { /* also skips empty entries */
		pos -= iov[i].iov_len;
		i++;
	}
	while (i < cnt && done < len) {
		const struct iovec *v = iov + i;
		int n = cnt - i;
		ssize_t r;

		if (pos || n > IOV_MAX || len != SIZE_MAX) {
			size_t want = 0;

			n = 0;
			for (int j = i; j < cnt && n < IOV_MAX && want < len - done; j++) {
				size_t skip = j == i ? pos : 0, l = iov[j].iov_len - skip;

				if (l > len - done - want)
					l = len - done - want;
				cur[n].iov_base = (uint8_t *)iov[j].iov_base + skip;
				cur[n++].iov_len = l;
				want += l;
			}
			v = cur;
		}
		if (off + done > (uint64_t)INT64_MAX)
			return -EINVAL;
		if (n == 1) /* the common 4 KiB request: no iovec for the kernel to copy in */
			r = wr ? pwrite(fd, v->iov_base, v->iov_len, (off_t)(off + done)) :
				 pread(fd, v->iov_base, v->iov_len, (off_t)(off + done));
		else
			r = wr ? pwritev(fd, v, n, (off_t)(off + done)) :
				 preadv(fd, v, n, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return wr ? -EIO : (int64_t)done; /* end of file */
		done += (size_t)r;
		pos += (size_t)r;
		while (i < cnt && pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			i++;
		}
	}
	return (int64_t)done;
}

/* See iov.h. The hot path of a disk request (the whole iov, one segment or
 * a few, moved by one call) passes the iov to the kernel as it is, with no
 * slice built on the stack; the rest, and a short transfer's remainder, go
 * through fullio_slice. */
int64_t fullio_iov(int fd, bool wr, uint64_t off, const struct iovec *iov, int cnt, size_t pos,
		   size_t len)
{
	size_t want;
	ssize_t r;

	if (pos || len != SIZE_MAX || cnt < 1 || cnt > IOV_MAX || off > (uint64_t)INT64_MAX)
		return fullio_slice(fd, wr, off, iov, cnt, pos, len);
	if (cnt == 1) { /* the common 4 KiB request: no iovec for the kernel to copy in */
		want = iov->iov_len;
		r = wr ? pwrite(fd, iov->iov_base, want, (off_t)off) :
			 pread(fd, iov->iov_base, want, (off_t)off);
	} else {
		want = 0;
		for (int i = 0; i < cnt; i++) {
			if (iov[i].iov_len > SSIZE_MAX - want) /* the kernel would refuse it */
				return fullio_slice(fd, wr, off, iov, cnt, pos, len);
			want += iov[i].iov_len;
		}
		r = wr ? pwritev(fd, iov, cnt, (off_t)off) : preadv(fd, iov, cnt, (off_t)off);
	}
	if (r >= 0 && (size_t)r == want)
		return r;
	if (r < 0 && errno != EINTR)
		return -errno;
	if (r == 0 && want)
		return wr ? -EIO : 0; /* end of file */
	/* short, or interrupted: the slice's loop takes the rest */
	if (r < 0)
		r = 0;
	{
		int64_t more = fullio_slice(fd, wr, off + (uint64_t)r, iov, cnt, (size_t)r, SIZE_MAX);

		return more < 0 ? more : r + more;
	}
}

int64_t fullio_pread_upto(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (off + got > (uint64_t)INT64_MAX)
			return -EINVAL;
		n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			break;
		got += (size_t)n;
	}
	return (int64_t)got;
}

int fullio_pread(int fd, void *buf, size_t len, uint64_t off)
{
	int64_t n = fullio_pread_upto(fd, buf, len, off);

	return n < 0 ? (int)n : (size_t)n == len ? 0 : -EIO; /* the file shrank under us */
}

int fullio_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n;

		if (off > (uint64_t)INT64_MAX)
			return -EINVAL;
		n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int fullio_write(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fullio_datasync(int fd)
{
	while (fdatasync(fd) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}
