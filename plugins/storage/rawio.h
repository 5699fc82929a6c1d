/* SPDX-License-Identifier: Apache-2.0 */
/* File I/O loops shared by the storage backends that keep a disk in one file (raw, reflink). */
#ifndef CUBICLE_RAWIO_H
#define CUBICLE_RAWIO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * All of iov at off on fd (pwritev when wr, else preadv), restarting after
 * EINTR and short transfers. Returns the bytes moved (short only at end of
 * file, for reads) or -errno.
 */
int64_t rawio_xfer(int fd, bool wr, uint64_t off, const struct iovec *iov, int cnt);

/* The bytes iov describes; *overflow when they do not fit in 64 bits. */
uint64_t rawio_iov_total(const struct iovec *iov, int cnt, bool *overflow);

#endif
