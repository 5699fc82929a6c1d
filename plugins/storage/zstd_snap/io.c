/* SPDX-License-Identifier: Apache-2.0 */
/* zstd-snap: the allocation map and its flush, reads (delta or base) and copy-on-write writes. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "iov.h"
#include "zstd_snap.h"

/* ---- the allocation map ---- */

static bool bit_test(struct zsnap *s, uint64_t b)
{
	return s->bits && (atomic_load_explicit(&s->bits[b / 64], memory_order_acquire) >> (b % 64) & 1);
}

static void bit_set(struct zsnap *s, uint64_t b)
{
	atomic_fetch_or_explicit(&s->bits[b / 64], 1ull << (b % 64), memory_order_release);
	atomic_store(&s->dirty[b / 8 / ZMAP_BLOCK], 1);
}

/* The ordered sync described at the top of zstd_snap.c. */
int zs_flush(void *priv)
{
	struct zsnap *s = priv;
	bool any = false;
	int err;

	if (s->ro)
		return 0;
	pthread_mutex_lock(&s->flush_lock);
	for (size_t p = 0; p < s->n_pages; p++) {
		s->pending[p] = atomic_exchange(&s->dirty[p], 0);
		if (!s->pending[p])
			continue;
		any = true;
		for (size_t w = p * (BLOCK / 8); w < (p + 1) * (BLOCK / 8); w++)
			s->shadow[w] = atomic_load_explicit(&s->bits[w], memory_order_acquire);
	}
	err = fullio_datasync(s->dfd);
	for (size_t p = 0; any && !err && p < s->n_pages; p++)
		if (s->pending[p])
			err = fullio_pwrite(s->mfd, (uint8_t *)s->shadow + p * BLOCK, BLOCK,
					 ZMAP_HDR + p * BLOCK);
	if (any && !err)
		err = fullio_datasync(s->mfd);
	if (err) {
		for (size_t p = 0; p < s->n_pages; p++)
			if (s->pending[p])
				atomic_store(&s->dirty[p], 1);
		s->h->log_ratelimited(s->in, CUB_LOG_ERR, "flush of %s failed: %s", s->delta_path,
				      strerror(-err));
	}
	pthread_mutex_unlock(&s->flush_lock);
	return err;
}
/* The request's bytes [pos, pos+len) at file offset @off: 0 or -errno. */
static int fd_xfer(int fd, bool wr, uint64_t off, const struct iovec *iov, int cnt, size_t pos,
		   size_t len)
{
	int64_t r = fullio_iov(fd, wr, off, iov, cnt, pos, len);

	return r < 0 ? (int)r : (size_t)r == len ? 0 : -EIO; /* the delta is as large as the disk */
}

/* ---- reads ---- */

/* Base bytes [off, off+len) into the request's bytes from @pos. */
static int base_read(struct zsnap *s, uint64_t off, size_t len, const struct iovec *iov, int cnt,
		     size_t pos)
{
	if (s->ra_want && len)
		zs_ra_before(s, off, len);
	while (len) {
		/*
		 * Up to 64 frames at a time. The first pass takes what is
		 * cached and decompresses what nobody else is; a frame a helper
		 * is decompressing is left for the second pass, which waits for
		 * it. So the reader works beside the helpers instead of queueing
		 * behind them.
		 */
		uint64_t skipped = 0, o = off, chunk = 0;
		size_t p = pos;

		for (int pass = 0; pass < 2; pass++) {
			unsigned k = 0;

			o = off;
			p = pos;
			for (size_t left = len; left && k < 64; k++) {
				uint32_t i = zseek_frame_of(&s->z, o);
				const struct zseek_frame *f = &s->z.f[i];
				uint64_t in = o - f->doff, n = f->dsize - in;
				struct slot *sl;
				int err = 0;

				if (n > left)
					n = left;
				if (!pass || (skipped >> k & 1))
					err = zs_cache_get(s, i, &sl, pass == 1);
				else
					err = 1; /* copied in the first pass */
				if (err == -EINPROGRESS)
					skipped |= 1ull << k;
				else if (err < 0)
					return err;
				else if (!err) {
					iov_from_buf(iov, cnt, p, sl->buf + in, (size_t)n);
					zs_cache_put(s, sl);
				}
				o += n;
				p += (size_t)n;
				left -= (size_t)n;
			}
			chunk = o - off;
			if (!skipped)
				break;
		}
		off += chunk;
		pos += (size_t)chunk;
		len -= (size_t)chunk;
	}
	return 0;
}

int64_t zs_readv(void *priv, uint64_t off, const struct iovec *iov, int cnt)
{
	struct zsnap *s = priv;
	bool overflow;
	uint64_t len = iov_total(iov, cnt, &overflow), cur = off, end;

	if (overflow || off > s->size || len > s->size - off || len > SSIZE_MAX)
		return -EINVAL;
	end = off + len;
	while (cur < end) {
		bool in_delta = bit_test(s, cur / BLOCK);
		uint64_t run = cur;
		int err;

		/* The longest run of blocks from the same place. */
		do
			run = (run / BLOCK + 1) * BLOCK;
		while (run < end && bit_test(s, run / BLOCK) == in_delta);
		if (run > end)
			run = end;
		if (in_delta)
			err = fd_xfer(s->dfd, false, cur, iov, cnt, (size_t)(cur - off),
				      (size_t)(run - cur));
		else
			err = base_read(s, cur, (size_t)(run - cur), iov, cnt, (size_t)(cur - off));
		if (err)
			return err;
		cur = run;
	}
	return (int64_t)len;
}

/* ---- writes ---- */

/*
 * Blocks from @cur that are not in the delta, under alloc_lock: full ones
 * are written as a run; a partial one is filled from the base first. Returns
 * the bytes consumed or -errno.
 */
static int64_t alloc_write(struct zsnap *s, uint64_t cur, uint64_t end, const struct iovec *iov,
			   int cnt, size_t pos)
{
	uint64_t b = cur / BLOCK, bstart = b * BLOCK;
	uint64_t bend = bstart + BLOCK < s->size ? bstart + BLOCK : s->size;
	uint8_t blk[BLOCK];
	uint64_t run;
	int err;

	if (cur != bstart || end < bend) {
		/* Read-modify-write of one block. */
		err = base_read(s, bstart, (size_t)(bend - bstart),
				&(struct iovec){ blk, (size_t)(bend - bstart) }, 1, 0);
		if (err)
			return err;
		run = end < bend ? end : bend;
		iov_to_buf(iov, cnt, pos, blk + (cur - bstart), (size_t)(run - cur));
		err = fullio_pwrite(s->dfd, blk, (size_t)(bend - bstart), bstart);
		if (err)
			return err;
		bit_set(s, b);
		return (int64_t)(run - cur);
	}
	/* Whole blocks, as many as are wholly covered and still unallocated. */
	run = bend;
	while (run < end && !bit_test(s, run / BLOCK)) {
		uint64_t next = run + BLOCK < s->size ? run + BLOCK : s->size;

		if (next > end)
			break;
		run = next;
	}
	err = fd_xfer(s->dfd, true, cur, iov, cnt, pos, (size_t)(run - cur));
	if (err)
		return err;
	for (uint64_t x = b; x * BLOCK < run; x++)
		bit_set(s, x);
	return (int64_t)(run - cur);
}

int64_t zs_writev(void *priv, uint64_t off, const struct iovec *iov, int cnt)
{
	struct zsnap *s = priv;
	bool overflow;
	uint64_t len = iov_total(iov, cnt, &overflow), cur = off, end;

	if (overflow || off > s->size || len > s->size - off || len > SSIZE_MAX)
		return -EINVAL;
	if (s->ro)
		return -EROFS;
	end = off + len;
	while (cur < end) {
		uint64_t run = cur;
		int64_t n;

		if (bit_test(s, cur / BLOCK)) {
			do
				run = (run / BLOCK + 1) * BLOCK;
			while (run < end && bit_test(s, run / BLOCK));
			if (run > end)
				run = end;
			n = fd_xfer(s->dfd, true, cur, iov, cnt, (size_t)(cur - off),
				    (size_t)(run - cur));
			if (!n)
				n = (int64_t)(run - cur);
		} else {
			pthread_mutex_lock(&s->alloc_lock);
			/* Allocated meanwhile: go round again, on the fast path. */
			n = bit_test(s, cur / BLOCK) ? 0 :
				alloc_write(s, cur, end, iov, cnt, (size_t)(cur - off));
			pthread_mutex_unlock(&s->alloc_lock);
		}
		if (n < 0) {
			s->h->log_ratelimited(s->in, CUB_LOG_ERR, "write of %llu bytes at %llu to %s failed: %s",
					      (unsigned long long)len, (unsigned long long)off,
					      s->delta_path, strerror((int)-n));
			return n;
		}
		cur += (uint64_t)n;
	}
	return (int64_t)len;
}
