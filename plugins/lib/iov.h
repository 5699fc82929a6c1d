/* SPDX-License-Identifier: Apache-2.0 */
/* iovec arithmetic and full positional I/O (loops over EINTR and short transfers), for plugins and tools. */
#ifndef CUBICLE_IOV_H
#define CUBICLE_IOV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The bytes iov describes; *overflow when cnt < 0 or they do not fit in 64 bits. */
uint64_t iov_total(const struct iovec *iov, int cnt, bool *overflow);

/* Copy len bytes from the iov's bytes at pos into buf (iov_to_buf), or from
 * buf into them (iov_from_buf). Returns the bytes copied: less than len only
 * where the iov ends. */
size_t iov_to_buf(const struct iovec *iov, int cnt, size_t pos, void *buf, size_t len);
size_t iov_from_buf(const struct iovec *iov, int cnt, size_t pos, const void *buf, size_t len);

/*
 * fullio_iov - the iov's bytes [pos, pos + len) at file offset off on fd
 * (pwritev when wr, else preadv), restarting after EINTR and short
 * transfers; len SIZE_MAX means up to the iov's end. Returns the bytes moved,
 * fewer than asked only when a read reaches end of file or the iov ends, or
 * -errno (-EIO for a write that moves nothing, -EINVAL past INT64_MAX).
 */
int64_t fullio_iov(int fd, bool wr, uint64_t off, const struct iovec *iov, int cnt, size_t pos,
		   size_t len);

/* All len bytes at off: 0, -EIO at end of file (a read) or when nothing is
 * written, or -errno. */
int fullio_pread(int fd, void *buf, size_t len, uint64_t off);
int fullio_pwrite(int fd, const void *buf, size_t len, uint64_t off);

/* All len bytes at the file position (a pipe, a file being appended to): 0 or -errno. */
int fullio_write(int fd, const void *buf, size_t len);

/* Up to len bytes at off, short only at end of file: the bytes read or -errno. */
int64_t fullio_pread_upto(int fd, void *buf, size_t len, uint64_t off);

/* fdatasync, restarted after EINTR: 0 or -errno. */
int fullio_datasync(int fd);

#endif
