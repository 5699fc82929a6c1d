/* SPDX-License-Identifier: Apache-2.0 */
/* The zstd-snap storage backend: a read-only zstd seekable base image under a sparse copy-on-write delta with a crash-safe allocation map. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include <cubicle/storage.h>

#include "iov.h"
#include "zseek.h"
#include "zstd_snap.h"

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

#define MAX_FRAME (64u << 20)  /* refuse bases with larger frames */
#define MAX_SLOTS 4096u

struct zsnap_cfg {
	const char *base;
	const char *delta;
	uint64_t cache_frames;
	uint64_t readahead;
	uint64_t readahead_threads;
	bool read_only;
};

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
