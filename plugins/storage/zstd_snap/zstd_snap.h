/* SPDX-License-Identifier: Apache-2.0 */
/* The zstd-snap plugin's private header (not installed): the disk's state and the functions its files share. */
#ifndef CUBICLE_ZSTD_SNAP_H
#define CUBICLE_ZSTD_SNAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <cubicle/storage.h>

#include "zseek.h"

/* The design: the comment at the top of zstd_snap.c. */

#define BLOCK ZMAP_BLOCK
#define SECTOR 512u
#define MAX_RA_THREADS 16u

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

/* cache.c: the frame cache and read-ahead */
int zs_cache_get(struct zsnap *s, uint32_t i, struct slot **out, bool wait);
void zs_cache_put(struct zsnap *s, struct slot *sl);
void zs_ra_before(struct zsnap *s, uint64_t off, uint64_t len);

/* io.c: the allocation map, reads, writes and flush */
int zs_flush(void *priv);
int64_t zs_readv(void *priv, uint64_t off, const struct iovec *iov, int cnt);
int64_t zs_writev(void *priv, uint64_t off, const struct iovec *iov, int cnt);

#endif
