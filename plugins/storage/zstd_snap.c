/* SPDX-License-Identifier: Apache-2.0 */
/* The zstd-snap storage backend: a read-only zstd seekable base image under a sparse copy-on-write delta with a crash-safe allocation map. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <zstd.h>

#include <cubicle/storage.h>

#include "iov.h"
#include "zseek.h"

/*
 * Layout. The disk is the base's decompressed bytes, in 4 KiB blocks. A
 * block whose bit is set in the allocation map lives in the delta (a sparse
 * file as large as the disk, at the same offset); any other block is read
 * from the base, decompressing only the frames a request touches, through
 * a small LRU cache of decompressed frames (cache_frames).
 *
 * Writes. A write to a block already in the delta goes straight there. A
 * write that allocates takes alloc_lock: full blocks are written as they
 * are, a partial block is first filled from the base (read-modify-write),
 * and only after the delta write returns is the block's bit set (atomic),
 * so a reader that sees the bit finds the data. Allocating writes are
 * serialized; the lock makes two partial writes to different sectors of one
 * new block safe. Writes to allocated blocks run in parallel.
 *
 * Crash safety (DELTA.map: a header, then the bitmap, see zseek.h). Bits
 * only ever go from 0 to 1, so the map is updated in place with no journal:
 * flush (1) copies the bitmap pages that changed since the last flush,
 * (2) fdatasyncs the delta, (3) writes those copies over their pages in the
 * map, (4) fdatasyncs the map. Every bit copied in (1) belongs to a write
 * that had completed, which (2) makes durable before (3) can persist the
 * bit. A crash at any point leaves each map byte old or new (a torn page
 * mixes them), and every new bit points at synced data: the disk reads as
 * it was at some point after the previous flush, and a write acknowledged
 * before a completed flush survives kill -9 or power loss. Creation is
 * ordered too: the map (written as MAP.tmp, fsynced, renamed, directory
 * fsynced) before the delta, and a leftover map with no bits set and no
 * delta, or an empty delta without a map, is simply completed.
 *
 * Discard is not offered: clearing a bit would make the block read the
 * base's old bytes again (neither the written data nor zeroes), and
 * punching the delta while keeping the bit gains little for a short-lived
 * sandbox. The guest sees no discard feature.
 *
 * Read-ahead. A read that spans several frames, or that starts where the
 * previous base read ended, queues the frames after its first (and, when
 * sequential, up to `readahead` frames past its end) for helper threads,
 * started on first need (`readahead_threads`, each confined as a worker
 * with thread_enter). A queued frame sits in its slot as SLOT_QUEUED: a
 * helper claims it (LOADING) and decompresses it, or a reader that gets
 * there first claims it and decompresses it itself, so a reader never
 * waits behind the queue, only behind a frame already being decompressed.
 * At most half the cache is ever queued, so readers always find slots.
 *
 * A corrupt or truncated frame fails only the requests that need it
 * (-EIO), and the log (rate-limited) names the frame and its offsets.
 */

#define BLOCK ZMAP_BLOCK
#define SECTOR 512u
#define MAX_FRAME (64u << 20)  /* refuse bases with larger frames */
#define MAX_SLOTS 4096u
#define MAX_RA_THREADS 16u

struct zsnap_cfg {
	const char *base;
	const char *delta;
	uint64_t cache_frames;
	uint64_t readahead;
	uint64_t readahead_threads;
	bool read_only;
};

/* EMPTY -> QUEUED (read-ahead) -> LOADING (a helper or a reader) -> READY */
enum slot_state { SLOT_EMPTY, SLOT_QUEUED, SLOT_LOADING, SLOT_READY };

struct slot {
	uint32_t frame;
	enum slot_state state;
	unsigned refs;
	uint64_t used; /* LRU tick */
	uint8_t *buf;  /* frame_max bytes, allocated on first use */
	int32_t next;  /* the next slot in its hash chain, -1 at the end */
};

struct zsnap {
	struct cub_inst *in;
	const struct cub_host *h;
	int bfd, dfd, mfd; /* base, delta, map; -1 when absent */
	struct zseek z;
	bool ro;
	uint64_t size, n_blocks;
	/* The allocation map: bits in words, dirty flags per 4 KiB map page. */
	_Atomic uint64_t *bits;
	uint64_t *shadow;
	atomic_uchar *dirty;
	uint8_t *pending;
	size_t n_words, n_pages;
	pthread_mutex_t alloc_lock, flush_lock;
	/* The frame cache. */
	pthread_mutex_t cache_lock;
	pthread_cond_t cache_cond;
	struct slot *slots;
	unsigned n_slots;
	int32_t *bucket; /* frame -> first slot of its chain (every slot not EMPTY) */
	uint32_t bucket_mask;
	uint64_t tick;
	struct zseek_dctx **dctx; /* free decompression contexts */
	unsigned n_dctx;
	/* Read-ahead (cache_lock): frames queued for the helpers, a ring. */
	unsigned ra_frames, ra_want;   /* the configuration: frames ahead, helpers */
	unsigned ra_threads, ra_started; /* helpers that may run, that were started */
	bool ra_quit;
	uint32_t *ra_q;
	unsigned ra_head, ra_len;
	_Atomic uint64_t ra_next; /* where the last base read ended */
	_Atomic uint64_t ra_upto; /* sequential: frames below it were queued */
	pthread_cond_t ra_cond;
	pthread_t ra_tid[MAX_RA_THREADS];
	char *base_path, *delta_path, *map_path;
};

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

/* The ordered sync described at the top of this file. */
static int zs_flush(void *priv)
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

/* ---- the frame cache ---- */

static void cache_put(struct zsnap *s, struct slot *sl)
{
	pthread_mutex_lock(&s->cache_lock);
	if (!--sl->refs)
		pthread_cond_broadcast(&s->cache_cond);
	pthread_mutex_unlock(&s->cache_lock);
}

/* The least recently used slot nobody holds (empty ones first), or NULL. */
static struct slot *victim(struct zsnap *s)
{
	struct slot *v = NULL;

	for (unsigned i = 0; i < s->n_slots; i++) {
		struct slot *sl = &s->slots[i];

		if (sl->refs || sl->state == SLOT_LOADING || sl->state == SLOT_QUEUED)
			continue;
		if (sl->state == SLOT_EMPTY)
			return sl;
		if (!v || sl->used < v->used)
			v = sl;
	}
	return v;
}

static int32_t *chain(struct zsnap *s, uint32_t frame)
{
	return &s->bucket[(frame * 2654435761u) & s->bucket_mask];
}

static struct slot *find(struct zsnap *s, uint32_t frame)
{
	for (int32_t k = *chain(s, frame); k >= 0; k = s->slots[k].next)
		if (s->slots[k].frame == frame)
			return &s->slots[k];
	return NULL;
}

/* Take @sl out of the index (it becomes EMPTY). */
static void slot_clear(struct zsnap *s, struct slot *sl)
{
	int32_t me = (int32_t)(sl - s->slots);

	if (sl->state == SLOT_EMPTY)
		return;
	for (int32_t *k = chain(s, sl->frame); *k >= 0; k = &s->slots[*k].next)
		if (*k == me) {
			*k = sl->next;
			break;
		}
	sl->state = SLOT_EMPTY;
}

/* Give @sl (EMPTY, or READY and unheld) to @frame in @state. */
static void slot_assign(struct zsnap *s, struct slot *sl, uint32_t frame, enum slot_state state)
{
	int32_t *head = chain(s, frame);

	slot_clear(s, sl);
	sl->frame = frame;
	sl->state = state;
	sl->next = *head;
	*head = (int32_t)(sl - s->slots);
}

/* Decompress frame @i into slot @sl (marked LOADING, held); cache lock not held. */
static int load(struct zsnap *s, struct slot *sl, uint32_t i, struct zseek_dctx **dc)
{
	char why[256];
	int err;

	if (!sl->buf && !(sl->buf = malloc(s->z.frame_max ? s->z.frame_max : 1)))
		return -ENOMEM;
	if (!*dc && !(*dc = zseek_dctx_new()))
		return -ENOMEM;
	err = zseek_frame_read(&s->z, *dc, i, sl->buf, why, sizeof(why));
	if (err)
		s->h->log_ratelimited(s->in, CUB_LOG_ERR, "base %s: %s: reads of those disk bytes fail with EIO",
				      s->base_path, why);
	return err;
}

/*
 * Decompress frame @i into @sl, which the caller has marked LOADING. Called
 * and returns with cache_lock held (dropped while decompressing); the slot
 * ends READY, or EMPTY on an error (returned as -errno).
 */
static int fill(struct zsnap *s, struct slot *sl, uint32_t i)
{
	struct zseek_dctx *dc = s->n_dctx ? s->dctx[--s->n_dctx] : NULL;
	int err;

	pthread_mutex_unlock(&s->cache_lock);
	err = load(s, sl, i, &dc);
	pthread_mutex_lock(&s->cache_lock);
	if (dc && s->n_dctx < s->n_slots + MAX_RA_THREADS)
		s->dctx[s->n_dctx++] = dc;
	else
		zseek_dctx_free(dc);
	if (err)
		slot_clear(s, sl);
	else
		sl->state = SLOT_READY;
	sl->used = ++s->tick;
	pthread_cond_broadcast(&s->cache_cond);
	return err;
}

/* Hold decompressed frame @i: 0 and *out (release with cache_put), or
 * -errno. Unless @wait, a frame another thread is decompressing is
 * -EINPROGRESS at once. */
static int cache_get(struct zsnap *s, uint32_t i, struct slot **out, bool wait)
{
	struct slot *sl;
	int err;

	pthread_mutex_lock(&s->cache_lock);
	for (;;) {
		sl = find(s, i);
		if (sl && sl->state == SLOT_READY) {
			sl->refs++;
			sl->used = ++s->tick;
			pthread_mutex_unlock(&s->cache_lock);
			*out = sl;
			return 0;
		}
		if (sl && sl->state == SLOT_QUEUED)
			break; /* queued for a helper: decompress it here instead */
		if (!sl && (sl = victim(s)))
			break;
		if (!wait && sl && sl->state == SLOT_LOADING) {
			pthread_mutex_unlock(&s->cache_lock);
			return -EINPROGRESS;
		}
		/* Loading elsewhere, or every slot held for a moment: wait. */
		pthread_cond_wait(&s->cache_cond, &s->cache_lock);
	}
	if (sl->state == SLOT_QUEUED)
		sl->state = SLOT_LOADING;
	else
		slot_assign(s, sl, i, SLOT_LOADING);
	sl->refs = 1;
	err = fill(s, sl, i);
	if (err)
		sl->refs = 0;
	pthread_mutex_unlock(&s->cache_lock);
	if (!err)
		*out = sl;
	return err;
}

/* ---- read-ahead ---- */

/* Forget every queued frame (no helper will take them): cache_lock held. */
static void ra_drain(struct zsnap *s)
{
	for (unsigned k = 0; k < s->n_slots; k++)
		if (s->slots[k].state == SLOT_QUEUED)
			slot_clear(s, &s->slots[k]);
	s->ra_len = 0;
	pthread_cond_broadcast(&s->cache_cond);
}

/* A helper: decompress queued frames until the disk closes. */
static void *ra_worker(void *arg)
{
	struct zsnap *s = arg;
	sigset_t all;
	bool ok;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	ok = !CUB_HOST_HAS(s->h, thread_enter) || !s->h->thread_enter(s->in, "zstd-readahead");
	pthread_mutex_lock(&s->cache_lock);
	if (!ok) {
		/* The host has said why; the others (if any) go on. */
		if (!--s->ra_threads)
			ra_drain(s);
	}
	while (ok && !s->ra_quit) {
		struct slot *sl;
		uint32_t f;

		if (!s->ra_len) {
			pthread_cond_wait(&s->ra_cond, &s->cache_lock);
			continue;
		}
		f = s->ra_q[s->ra_head];
		s->ra_head = (s->ra_head + 1) % s->n_slots;
		s->ra_len--;
		sl = find(s, f);
		if (!sl || sl->state != SLOT_QUEUED)
			continue; /* a reader took it */
		sl->state = SLOT_LOADING;
		fill(s, sl, f);
	}
	pthread_mutex_unlock(&s->cache_lock);
	return NULL;
}

/* Start the helpers not yet started: false when there are none. cache_lock held. */
static bool ra_start(struct zsnap *s)
{
	while (s->ra_started < s->ra_threads) {
		int err = pthread_create(&s->ra_tid[s->ra_started], NULL, ra_worker, s);

		if (err) {
			s->h->log(s->in, CUB_LOG_WARN, "base %s: cannot start a read-ahead thread (%s); %u run",
				  s->base_path, strerror(err), s->ra_started);
			s->ra_threads = s->ra_started;
			break;
		}
		if (!s->ra_started++)
			s->h->log(s->in, CUB_LOG_INFO, "base %s: a reader went sequential: read-ahead of %u frames on %u threads",
				  s->base_path, s->ra_frames, s->ra_threads);
	}
	return s->ra_threads > 0;
}

/* Queue frames [lo, hi] that are not cached, while half the cache is free
 * for readers: cache_lock held. Returns the first frame not queued. */
static uint32_t ra_queue(struct zsnap *s, uint32_t lo, uint32_t hi)
{
	uint32_t f = lo;
	bool any = false;

	if (hi >= s->z.n_frames)
		hi = s->z.n_frames - 1;
	if (!ra_start(s))
		return lo;
	for (; f <= hi && s->ra_len < s->n_slots / 2; f++) {
		struct slot *v;

		if (find(s, f))
			continue;
		if (!(v = victim(s)))
			break;
		slot_assign(s, v, f, SLOT_QUEUED);
		v->refs = 0;
		s->ra_q[(s->ra_head + s->ra_len++) % s->n_slots] = f;
		any = true;
	}
	if (any)
		pthread_cond_broadcast(&s->ra_cond);
	return f;
}

/*
 * Before a base read of [off, off+len): the frames after its first go to
 * the helpers, and when it starts where the last one ended, up to
 * ra_frames more past its end.
 */
static void ra_before(struct zsnap *s, uint64_t off, uint64_t len)
{
	uint32_t first = zseek_frame_of(&s->z, off), last = zseek_frame_of(&s->z, off + len - 1);
	bool seq = atomic_exchange_explicit(&s->ra_next, off + len, memory_order_relaxed) == off;
	uint64_t hi = (uint64_t)last + (seq ? s->ra_frames : 0);
	uint64_t lo = first + 1u;

	if (seq && atomic_load_explicit(&s->ra_upto, memory_order_relaxed) > lo)
		lo = atomic_load_explicit(&s->ra_upto, memory_order_relaxed);
	if (hi < lo || lo >= s->z.n_frames)
		return;
	pthread_mutex_lock(&s->cache_lock);
	if (!s->ra_quit && s->ra_threads)
		atomic_store_explicit(&s->ra_upto, ra_queue(s, (uint32_t)lo, (uint32_t)(hi < UINT32_MAX ? hi : UINT32_MAX)),
				      memory_order_relaxed);
	pthread_mutex_unlock(&s->cache_lock);
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
		ra_before(s, off, len);
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
					err = cache_get(s, i, &sl, pass == 1);
				else
					err = 1; /* copied in the first pass */
				if (err == -EINPROGRESS)
					skipped |= 1ull << k;
				else if (err < 0)
					return err;
				else if (!err) {
					iov_from_buf(iov, cnt, p, sl->buf + in, (size_t)n);
					cache_put(s, sl);
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

static int64_t zs_readv(void *priv, uint64_t off, const struct iovec *iov, int cnt)
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

static int64_t zs_writev(void *priv, uint64_t off, const struct iovec *iov, int cnt)
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

static void zs_info(void *priv, struct cub_storage_info *out)
{
	struct zsnap *s = priv;

	*out = (struct cub_storage_info){
		.size = s->size,
		.block_size = SECTOR,
		.read_only = s->ro,
		.can_flush = true,
	};
}

/* ---- open: the base, then the map and the delta ---- */

static int fsync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, err = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		err = -errno;
	close(fd);
	return err;
}

/* A fresh map for this base: MAP.tmp, written, fsynced, renamed over MAP. */
static int map_create(struct zsnap *s)
{
	struct zmap_hdr hdr;
	uint8_t page[ZMAP_HDR] = { 0 };
	char *tmp;
	int fd, err;

	if (asprintf(&tmp, "%s.tmp", s->map_path) < 0)
		return s->h->fail(s->in, -ENOMEM, "out of memory");
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = s->h->fail(s->in, -errno, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	zmap_hdr_init(&hdr, &s->z);
	memcpy(page, &hdr, sizeof(hdr));
	err = fullio_pwrite(fd, page, sizeof(page), 0);
	if (!err && ftruncate(fd, (off_t)(ZMAP_HDR + zmap_bitmap_bytes(s->n_blocks))) < 0)
		err = -errno;
	if (!err && fsync(fd) < 0)
		err = -errno;
	close(fd);
	if (!err && rename(tmp, s->map_path) < 0)
		err = -errno;
	if (!err)
		err = fsync_dir(s->map_path);
	if (err) {
		unlink(tmp);
		err = s->h->fail(s->in, err, "cannot write the map %s: %s", s->map_path,
				 strerror(-err));
	}
out:
	free(tmp);
	return err;
}

#define NOT_REGULAR (-EMEDIUMTYPE) /* open_file: the path is no regular file */

/*
 * open(2) that looks at the type before anything can block on it (a FIFO
 * opened for reading waits for a writer): the fd, -errno, or NOT_REGULAR
 * unless it is a regular file (or, with @blk_ok, a block device).
 */
static int open_file(const char *path, int flags, bool blk_ok)
{
	struct stat st;
	int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || (blk_ok && S_ISBLK(st.st_mode)))) {
		close(fd);
		return NOT_REGULAR;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* Open the map and read its bitmap; the header must describe this base. */
static int map_load(struct zsnap *s)
{
	struct zmap_hdr hdr;
	struct stat st;
	char why[256];
	int err;

	s->mfd = open_file(s->map_path, s->ro ? O_RDONLY : O_RDWR, false);
	if (s->mfd == -ENOENT)
		return -ENOENT; /* the caller decides what a missing map means */
	if (s->mfd == NOT_REGULAR)
		return s->h->fail(s->in, -EINVAL, "the map %s is not a regular file", s->map_path);
	if (s->mfd < 0)
		return s->h->fail(s->in, s->mfd, "cannot open the map %s: %s", s->map_path,
				  strerror(-s->mfd));
	if (fstat(s->mfd, &st) < 0)
		return s->h->fail(s->in, -errno, "cannot stat %s: %s", s->map_path, strerror(errno));
	err = fullio_pread(s->mfd, &hdr, sizeof(hdr), 0);
	if (err)
		return s->h->fail(s->in, -EINVAL, "%s: cannot read the map header: %s", s->map_path,
				  strerror(-err));
	err = zmap_hdr_check(&hdr, (uint64_t)st.st_size, why, sizeof(why));
	if (err)
		return s->h->fail(s->in, err, "%s: %s", s->map_path, why);
	if (hdr.disk_size != s->size || hdr.base_size != s->z.file_size ||
	    hdr.base_table != s->z.table_hash)
		return s->h->fail(s->in, -EINVAL,
				  "%s was made over a different base than %s (disk %llu bytes, base file %llu bytes, seek table %016llx; this base: %llu, %llu, %016llx)",
				  s->map_path, s->delta_path, (unsigned long long)hdr.disk_size,
				  (unsigned long long)hdr.base_size, (unsigned long long)hdr.base_table,
				  (unsigned long long)s->size, (unsigned long long)s->z.file_size,
				  (unsigned long long)s->z.table_hash);
	err = fullio_pread(s->mfd, (void *)s->bits, s->n_words * 8, ZMAP_HDR);
	if (err)
		return s->h->fail(s->in, err, "%s: cannot read the bitmap: %s", s->map_path,
				  strerror(-err));
	return 0;
}

static uint64_t bits_set(const struct zsnap *s)
{
	uint64_t n = 0;

	for (size_t w = 0; w < s->n_words; w++)
		n += (uint64_t)__builtin_popcountll(atomic_load(&s->bits[w]));
	return n;
}

static int delta_lock(struct zsnap *s)
{
	struct flock lk = { .l_whence = SEEK_SET, .l_type = s->ro ? F_RDLCK : F_WRLCK };

	if (!fcntl(s->dfd, F_OFD_SETLK, &lk))
		return 0;
	if (errno == EAGAIN || errno == EACCES)
		return s->h->fail(s->in, -EBUSY, "%s is in use by another VM (it holds a lock on it)",
				  s->delta_path);
	s->h->log(s->in, CUB_LOG_WARN, "cannot lock %s (%s); another VM could open it too",
		  s->delta_path, strerror(errno));
	return 0;
}

static int delta_open(struct zsnap *s)
{
	struct stat st;
	int err;

	s->dfd = open_file(s->delta_path, s->ro ? O_RDONLY : O_RDWR, false);
	if (s->dfd == NOT_REGULAR)
		return s->h->fail(s->in, -EINVAL, "the delta %s is not a regular file",
				  s->delta_path);
	if (s->dfd < 0 && (s->dfd != -ENOENT || s->ro))
		return s->h->fail(s->in, s->dfd, "cannot open the delta %s%s: %s", s->delta_path,
				  s->ro ? " read-only" : "", strerror(-s->dfd));
	if (s->dfd < 0) {
		/* A new delta: its map first, then the file itself. */
		err = map_load(s);
		if (err == -ENOENT)
			err = map_create(s) ?: map_load(s);
		if (err)
			return err;
		if (bits_set(s))
			return s->h->fail(s->in, -EINVAL, "%s says %llu blocks are in %s, which is missing",
					  s->map_path, (unsigned long long)bits_set(s),
					  s->delta_path);
		s->dfd = open(s->delta_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (s->dfd < 0)
			return s->h->fail(s->in, -errno, "cannot create the delta %s: %s",
					  s->delta_path, strerror(errno));
		err = ftruncate(s->dfd, (off_t)s->size) < 0 || fsync(s->dfd) < 0 ? -errno :
			fsync_dir(s->delta_path);
		if (err)
			return s->h->fail(s->in, err, "cannot size the delta %s: %s", s->delta_path,
					  strerror(-err));
		s->h->log(s->in, CUB_LOG_INFO, "new delta %s (sparse, %llu bytes)", s->delta_path,
			  (unsigned long long)s->size);
		return delta_lock(s);
	}
	if ((err = delta_lock(s)))
		return err;
	if (fstat(s->dfd, &st) < 0)
		return s->h->fail(s->in, -errno, "cannot stat %s: %s", s->delta_path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != s->size)
		return s->h->fail(s->in, -EINVAL, "the delta %s is %llu bytes; the base's disk is %llu",
				  s->delta_path, (unsigned long long)st.st_size,
				  (unsigned long long)s->size);
	err = map_load(s);
	if (err == -ENOENT && !s->ro && !st.st_blocks)
		err = map_create(s) ?: map_load(s); /* created, then interrupted: finish */
	else if (err == -ENOENT)
		return s->h->fail(s->in, -ENOENT, "the delta %s has no map %s: cannot tell which blocks are its own",
				  s->delta_path, s->map_path);
	return err;
}

static int base_open(struct zsnap *s, const char *path)
{
	struct flock lk = { .l_whence = SEEK_SET, .l_type = F_RDLCK };
	char why[256];
	int err;

	s->bfd = open_file(path, O_RDONLY, true);
	if (s->bfd == NOT_REGULAR)
		return s->h->fail(s->in, -EINVAL,
				  "the base %s is neither a regular file nor a block device", path);
	if (s->bfd < 0)
		return s->h->fail(s->in, s->bfd, "cannot open the base %s: %s", path,
				  strerror(-s->bfd));
	/* Shared: a raw backend opening it for writing would be refused. */
	(void)fcntl(s->bfd, F_OFD_SETLK, &lk);
	err = zseek_open(&s->z, s->bfd, why, sizeof(why));
	if (err)
		return s->h->fail(s->in, err, "base %s: %s (make one with `cubicle disk compress`)",
				  path, why);
	s->size = s->z.size;
	if (!s->size || s->size % SECTOR)
		return s->h->fail(s->in, -EINVAL, "base %s holds %llu bytes: not a whole number of 512-byte sectors",
				  path, (unsigned long long)s->size);
	if (s->z.frame_max > MAX_FRAME)
		return s->h->fail(s->in, -EINVAL, "base %s has frames of %u bytes; zstd-snap takes at most %u (recompress with --frame-size)",
				  path, s->z.frame_max, MAX_FRAME);
	return 0;
}

static void zs_close(void *priv)
{
	struct zsnap *s = priv;

	if (!s)
		return;
	pthread_mutex_lock(&s->cache_lock);
	s->ra_quit = true;
	pthread_cond_broadcast(&s->ra_cond);
	pthread_mutex_unlock(&s->cache_lock);
	for (unsigned i = 0; i < s->ra_started; i++)
		pthread_join(s->ra_tid[i], NULL);
	for (unsigned i = 0; s->slots && i < s->n_slots; i++)
		free(s->slots[i].buf);
	for (unsigned i = 0; i < s->n_dctx; i++)
		zseek_dctx_free(s->dctx[i]);
	free(s->slots);
	free(s->dctx);
	free(s->ra_q);
	free(s->bucket);
	zseek_close(&s->z);
	free((void *)s->bits);
	free(s->shadow);
	free(s->dirty);
	free(s->pending);
	if (s->bfd >= 0)
		close(s->bfd);
	if (s->dfd >= 0)
		close(s->dfd);
	if (s->mfd >= 0)
		close(s->mfd);
	pthread_mutex_destroy(&s->alloc_lock);
	pthread_mutex_destroy(&s->flush_lock);
	pthread_mutex_destroy(&s->cache_lock);
	pthread_cond_destroy(&s->cache_cond);
	pthread_cond_destroy(&s->ra_cond);
	free(s->base_path);
	free(s->delta_path);
	free(s->map_path);
	free(s);
}

static int alloc_state(struct zsnap *s, const struct zsnap_cfg *cfg)
{
	uint64_t bytes;

	s->n_blocks = (s->size + BLOCK - 1) / BLOCK;
	bytes = zmap_bitmap_bytes(s->n_blocks);
	s->n_words = (size_t)(bytes / 8);
	s->n_pages = (size_t)(bytes / BLOCK);
	s->n_slots = (unsigned)cfg->cache_frames;
	s->base_path = strdup(cfg->base);
	s->slots = calloc(s->n_slots, sizeof(*s->slots));
	s->dctx = calloc(s->n_slots + MAX_RA_THREADS, sizeof(*s->dctx));
	s->ra_frames = (unsigned)cfg->readahead;
	s->ra_want = s->ra_threads = cfg->readahead ? (unsigned)cfg->readahead_threads : 0;
	atomic_init(&s->ra_next, UINT64_MAX);
	atomic_init(&s->ra_upto, 0);
	s->ra_q = calloc(s->n_slots, sizeof(*s->ra_q));
	for (s->bucket_mask = 1; s->bucket_mask < 2 * s->n_slots; s->bucket_mask *= 2)
		;
	s->bucket = malloc(s->bucket_mask * sizeof(*s->bucket));
	s->bucket_mask--;
	if (!s->slots || !s->dctx || !s->base_path || !s->ra_q || !s->bucket)
		return -ENOMEM;
	memset(s->bucket, 0xff, (s->bucket_mask + 1) * sizeof(*s->bucket)); /* all -1 */
	if (!cfg->delta || !*cfg->delta)
		return 0;
	s->bits = calloc(s->n_words, 8);
	s->shadow = calloc(s->n_words, 8);
	s->dirty = calloc(s->n_pages, 1);
	s->pending = calloc(s->n_pages, 1);
	if (asprintf(&s->delta_path, "%s", cfg->delta) < 0)
		s->delta_path = NULL;
	if (asprintf(&s->map_path, "%s.map", cfg->delta) < 0)
		s->map_path = NULL;
	if (!s->bits || !s->shadow || !s->dirty || !s->pending || !s->delta_path || !s->map_path)
		return -ENOMEM;
	return 0;
}

static int zs_open(struct cub_inst *in, const struct cub_host *h, const void *cfgp, bool ro,
		   void **priv)
{
	const struct zsnap_cfg *cfg = cfgp;
	struct zsnap *s;
	int err;

	if (!cfg->base || !*cfg->base)
		return h->fail(in, -EINVAL, "base must name a zstd seekable image (`cubicle disk compress`)");
	if (cfg->cache_frames < 1 || cfg->cache_frames > MAX_SLOTS)
		return h->fail(in, -EINVAL, "cache_frames = %llu: expected 1 .. %u",
			       (unsigned long long)cfg->cache_frames, MAX_SLOTS);
	if (cfg->readahead > MAX_SLOTS)
		return h->fail(in, -EINVAL, "readahead = %llu: expected 0 .. %u frames",
			       (unsigned long long)cfg->readahead, MAX_SLOTS);
	if (cfg->readahead_threads > MAX_RA_THREADS)
		return h->fail(in, -EINVAL, "readahead_threads = %llu: expected 0 .. %u",
			       (unsigned long long)cfg->readahead_threads, MAX_RA_THREADS);
	ro = ro || cfg->read_only;
	if (!ro && (!cfg->delta || !*cfg->delta))
		return h->fail(in, -EINVAL, "delta must name this VM's copy-on-write file (or set read_only = true)");
	s = calloc(1, sizeof(*s));
	if (!s)
		return h->fail(in, -ENOMEM, "out of memory");
	s->in = in;
	s->h = h;
	s->ro = ro;
	s->bfd = s->dfd = s->mfd = -1;
	pthread_mutex_init(&s->alloc_lock, NULL);
	pthread_mutex_init(&s->flush_lock, NULL);
	pthread_mutex_init(&s->cache_lock, NULL);
	pthread_cond_init(&s->cache_cond, NULL);
	pthread_cond_init(&s->ra_cond, NULL);
	if ((err = base_open(s, cfg->base)))
		goto fail;
	if ((err = alloc_state(s, cfg))) {
		err = h->fail(in, err, "out of memory");
		goto fail;
	}
	if (s->delta_path && (err = delta_open(s)))
		goto fail;
	h->log(in, CUB_LOG_INFO, "base %s: %llu bytes in %u frames%s; delta %s: %llu blocks of its own",
	       cfg->base, (unsigned long long)s->size, s->z.n_frames, s->ro ? ", read-only" : "",
	       s->delta_path ? s->delta_path : "(none)",
	       (unsigned long long)(s->bits ? bits_set(s) : 0));
	*priv = s;
	return 0;
fail:
	zs_close(s);
	return err;
}

static const struct cub_param zs_params[] = {
	{ .name = "base", .type = CUB_P_PATH, .offset = offsetof(struct zsnap_cfg, base),
	  .doc = "the zstd seekable base image (`cubicle disk compress`); never written" },
	{ .name = "delta", .type = CUB_P_PATH, .offset = offsetof(struct zsnap_cfg, delta),
	  .def = "", .doc = "this VM's copy-on-write file (created sparse; its map is DELTA.map)" },
	{ .name = "cache_frames", .type = CUB_P_U64,
	  .offset = offsetof(struct zsnap_cfg, cache_frames), .def = "512",
	  .doc = "decompressed base frames kept in memory (LRU)" },
	{ .name = "readahead", .type = CUB_P_U64, .offset = offsetof(struct zsnap_cfg, readahead),
	  .def = "8", .doc = "frames decompressed ahead of a sequential reader (0: none; at most half the cache is queued)" },
	{ .name = "readahead_threads", .type = CUB_P_U64,
	  .offset = offsetof(struct zsnap_cfg, readahead_threads), .def = "2",
	  .doc = "helper threads decompressing ahead, started on first need (0: none)" },
	{ .name = "read_only", .type = CUB_P_BOOL, .offset = offsetof(struct zsnap_cfg, read_only),
	  .def = "false", .doc = "open read-only; writes fail (delta optional)" },
};

static const struct cub_storage_ops zs_ops = {
	.open = zs_open,
	.close = zs_close,
	.info = zs_info,
	.readv = zs_readv,
	.writev = zs_writev,
	.flush = zs_flush,
};

/* `cubicle check-host`: the libzstd this plugin runs with. */
static int zs_host_check(char *line, size_t len)
{
	snprintf(line, len, "libzstd %s", ZSTD_versionString());
	return 0;
}

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4),
	.kind = CUB_KIND_STORAGE,
	.name = "zstd-snap",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "compressed seekable base image (zstd) under a crash-safe copy-on-write delta",
	.cfg_size = sizeof(struct zsnap_cfg),
	.params = zs_params,
	.n_params = CUB_ARRAY_SIZE(zs_params),
	.ops = &zs_ops,
	.host_check = zs_host_check,
});
