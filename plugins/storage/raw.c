/* SPDX-License-Identifier: Apache-2.0 */
/* The raw storage backend: a disk image file or a host block device, byte for byte. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cubicle/storage.h>

#include "fileclone.h"
#include "iov.h"

/*
 * Reads and writes are preadv/pwritev on the caller's thread (no submit op:
 * the device runs them on its own worker threads). The image is locked with
 * an OFD lock (shared when read-only, exclusive otherwise), so two VMs never
 * write one image.
 *
 * direct = true opens a second descriptor with O_DIRECT and uses it when a
 * request's offset, length and buffers are aligned as the file system asks
 * (statx STATX_DIOALIGN). Misaligned buffers go through an aligned bounce
 * buffer; a misaligned offset or length falls back to the buffered
 * descriptor (the kernel keeps the two coherent: a direct write invalidates
 * the cached pages, a direct read first writes dirty ones back). The block
 * size reported to the guest is the direct-I/O granularity, so a well
 * behaved guest never needs the fallback.
 *
 * snapshot and rollback (VM snapshots: the VM is paused and the disk
 * quiet) work on image files, not block devices: snapshot makes DEST a
 * FICLONE of the image where the file system can (XFS, btrfs), else a
 * sparse copy; rollback makes such a clone of SRC beside the image, renames
 * it over the image and dup3()s it onto the descriptors in use, so a
 * request running on another thread finishes against one file or the other,
 * never a closed descriptor.
 */

#define SECTOR 512u
#define ZERO_CHUNK (256u << 10) /* write_zeroes fallback: zeroes per write */
#define BOUNCE_MAX (1u << 18)   /* direct I/O bounce buffer: bytes per chunk */

struct raw_cfg {
	const char *path;
	bool read_only;
	bool direct;
	uint64_t size;
};

struct raw {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct raw_cfg *cfg;
	int fd;  /* buffered; always open */
	int dfd; /* O_DIRECT, or -1 */
	bool ro, blk;
	uint64_t size;
	uint32_t block_size;
	uint32_t mem_align, off_align; /* direct I/O constraints */
	uint8_t *zeroes;               /* ZERO_CHUNK zero bytes, aligned */
	atomic_bool no_zero_range, no_punch;
	/* direct = true: the bounce buffer (BOUNCE_MAX), a mapping of its own */
	pthread_mutex_t bounce_lock;
	struct bbuf { uint8_t *base, *p; size_t maplen; } bounce;
};

/* An aligned buffer of @len bytes in a mapping of its own, never malloc's:
 * glibc keeps freed chunks of this size (its mmap threshold follows the
 * largest freed mapping), so a flood of misaligned requests would leave
 * each thread's arena bigger. 0 or -ENOMEM. */
static int bbuf_map(struct bbuf *b, size_t len, uint32_t align)
{
	uintptr_t a = align > 4096 ? align : 4096;

	b->maplen = len + (a > 4096 ? a : 0);
	b->base = mmap(NULL, b->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->base == MAP_FAILED) {
		b->base = NULL;
		return -ENOMEM;
	}
	b->p = (uint8_t *)(((uintptr_t)b->base + a - 1) & ~(a - 1));
	return 0;
}

static void bbuf_unmap(struct bbuf *b)
{
	if (b->base)
		munmap(b->base, b->maplen);
	b->base = NULL;
}

static bool mem_aligned(const struct raw *r, const struct iovec *iov, int cnt)
{
	for (int i = 0; i < cnt; i++)
		if (((uintptr_t)iov[i].iov_base | iov[i].iov_len) & (r->mem_align - 1) ||
		    iov[i].iov_len % r->off_align)
			return false;
	return true;
}

/* @len bytes at @off through @buf (@bsz), chunk after chunk; the bytes
 * moved in *@done. 0, or -errno. */
static int64_t xfer_chunks(struct raw *r, bool wr, uint64_t off, const struct iovec *iov, int cnt,
			   uint64_t len, uint8_t *buf, size_t bsz, uint64_t *done)
{
	while (*done < len) {
		size_t n = len - *done < bsz ? (size_t)(len - *done) : bsz;
		struct iovec b = { buf, n };
		int64_t got;

		if (wr)
			iov_to_buf(iov, cnt, (size_t)*done, buf, n);
		got = fullio_iov(r->dfd, wr, off + *done, &b, 1, 0, SIZE_MAX);
		if (got < 0)
			return got;
		if (!wr)
			iov_from_buf(iov, cnt, (size_t)*done, buf, (size_t)got);
		*done += (uint64_t)got;
		if ((size_t)got < n)
			break; /* end of file */
	}
	return 0;
}

/* O_DIRECT with a bounce buffer: the request's offset and length are aligned,
 * its buffers are not. The buffer is at most BOUNCE_MAX, reused chunk after
 * chunk: a guest's request size never sets the host's allocation. It is the
 * device's own (mapped at open) unless another thread holds that one; then
 * a mapping of its own for this request, gone after it. */
static int64_t xfer_bounce(struct raw *r, bool wr, uint64_t off, const struct iovec *iov,
			   int cnt, uint64_t len)
{
	size_t bsz = len < BOUNCE_MAX ? (size_t)len : BOUNCE_MAX;
	struct bbuf tmp = { 0 };
	bool mine = !pthread_mutex_trylock(&r->bounce_lock);
	uint64_t done = 0;
	int64_t ret;
	uint8_t *buf;

	if (!mine && bbuf_map(&tmp, bsz, r->mem_align))
		return -ENOMEM;
	buf = mine ? r->bounce.p : tmp.p;
	ret = xfer_chunks(r, wr, off, iov, cnt, len, buf, bsz, &done);
	if (mine)
		pthread_mutex_unlock(&r->bounce_lock);
	else
		bbuf_unmap(&tmp);
	return ret < 0 ? ret : (int64_t)done;
}

static int64_t raw_rw(struct raw *r, bool wr, uint64_t off, const struct iovec *iov, int cnt)
{
	bool overflow;
	uint64_t len = iov_total(iov, cnt, &overflow);

	if (cnt < 0 || overflow || off > r->size || len > r->size - off)
		return -EINVAL;
	if (wr && r->ro)
		return -EROFS;
	if (!len)
		return 0;
	if (r->dfd >= 0 && !(off % r->off_align) && !(len % r->off_align)) {
		if (mem_aligned(r, iov, cnt))
			return fullio_iov(r->dfd, wr, off, iov, cnt, 0, SIZE_MAX);
		return xfer_bounce(r, wr, off, iov, cnt, len);
	}
	return fullio_iov(r->fd, wr, off, iov, cnt, 0, SIZE_MAX);
}

static int64_t raw_readv(void *priv, uint64_t off, const struct iovec *iov, int cnt)
{
	return raw_rw(priv, false, off, iov, cnt);
}

static int64_t raw_writev(void *priv, uint64_t off, const struct iovec *iov, int cnt)
{
	return raw_rw(priv, true, off, iov, cnt);
}

static int raw_flush(void *priv)
{
	struct raw *r = priv;

	if (r->ro)
		return 0;
	while (fdatasync(r->fd) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static int range_ok(const struct raw *r, uint64_t off, uint64_t len)
{
	if (r->ro)
		return -EROFS;
	if (off > r->size || len > r->size - off || off > (uint64_t)INT64_MAX)
		return -EINVAL;
	return 0;
}

static int punch(struct raw *r, uint64_t off, uint64_t len)
{
	if (atomic_load(&r->no_punch))
		return -EOPNOTSUPP;
	if (r->blk) {
		uint64_t range[2] = { off, len };

		if (!ioctl(r->fd, BLKDISCARD, range))
			return 0;
	} else if (!fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			      (off_t)len)) {
		return 0;
	}
	if (errno == EOPNOTSUPP || errno == ENOTTY) {
		atomic_store(&r->no_punch, true);
		return -EOPNOTSUPP;
	}
	return -errno;
}

static int raw_discard(void *priv, uint64_t off, uint64_t len)
{
	struct raw *r = priv;
	int err = range_ok(r, off, len);

	if (err || !len)
		return err;
	return punch(r, off, len);
}

/* Zeroes the slow way, for file systems without FALLOC_FL_ZERO_RANGE. */
static int write_zero_bufs(struct raw *r, uint64_t off, uint64_t len)
{
	while (len) {
		struct iovec v = { r->zeroes, len < ZERO_CHUNK ? (size_t)len : ZERO_CHUNK };
		int64_t n = raw_rw(r, true, off, &v, 1);

		if (n < 0)
			return (int)n;
		off += v.iov_len;
		len -= v.iov_len;
	}
	return 0;
}

static int raw_write_zeroes(void *priv, uint64_t off, uint64_t len, bool unmap)
{
	struct raw *r = priv;
	int err = range_ok(r, off, len);

	if (err || !len)
		return err;
	/* A hole reads as zeroes on a file; a block device's discard may not. */
	if (unmap && !r->blk && !punch(r, off, len))
		return 0;
	if (!atomic_load(&r->no_zero_range)) {
		if (!fallocate(r->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			       (off_t)len))
			return 0;
		if (errno != EOPNOTSUPP && errno != EINVAL)
			return -errno;
		atomic_store(&r->no_zero_range, true);
	}
	return write_zero_bufs(r, off, len);
}

static void raw_info(void *priv, struct cub_storage_info *out)
{
	struct raw *r = priv;

	*out = (struct cub_storage_info){
		.size = r->size,
		.block_size = r->block_size,
		.read_only = r->ro,
		.can_discard = !r->ro,
		.can_write_zeroes = !r->ro,
		.can_flush = true,
	};
}

/* ---- snapshot and rollback ---- */

static const struct fc_opts clone_opts = { .fallback = FC_FALLBACK_COPY };

static void log_clone(struct raw *r, const char *what, const char *src, const char *dst,
		      const struct fc_result *res)
{
	if (res->copied)
		r->h->log(r->in, CUB_LOG_INFO,
			  "%s: copied %s to %s (no reflink: %s; %llu of %llu bytes are data, %.1f ms)",
			  what, src, dst, res->why, (unsigned long long)res->data_bytes,
			  (unsigned long long)res->size, res->clone_us / 1000.0);
	else
		r->h->log(r->in, CUB_LOG_DEBUG, "%s: %s is a reflink clone of %s (%llu us)", what,
			  dst, src, (unsigned long long)res->clone_us);
}

static int raw_snapshot(void *priv, const char *dest)
{
	struct raw *r = priv;
	struct fc_result res;
	char tmp[PATH_MAX], why[768];
	int tfd, err;

	if (r->blk)
		return r->h->fail(r->in, -ENOTSUP,
				  "%s is a block device: only image files can be snapshotted",
				  r->cfg->path);
	if (!r->ro && fdatasync(r->fd) < 0)
		return r->h->fail(r->in, -errno, "snapshot: cannot flush %s: %s", r->cfg->path,
				  strerror(errno));
	err = fc_clone_tmp(r->fd, r->cfg->path, dest, &clone_opts, tmp, sizeof(tmp), &tfd, &res,
			   why, sizeof(why));
	if (err)
		return r->h->fail(r->in, err, "snapshot: %s", why);
	close(tfd);
	err = fc_commit(tmp, dest, true, why, sizeof(why));
	if (err) {
		unlink(tmp);
		return r->h->fail(r->in, err, "snapshot: %s", why);
	}
	log_clone(r, "snapshot", r->cfg->path, dest, &res);
	return 0;
}

/* Put a new open of the image at the number fd holds. */
static int reopen_at(struct raw *r, int fd, int flags)
{
	int nfd = open(r->cfg->path, flags | O_CLOEXEC);
	int err = 0;

	if (nfd < 0)
		return -errno;
	if (dup3(nfd, fd, O_CLOEXEC) < 0)
		err = -errno;
	close(nfd);
	return err;
}

static int raw_rollback(void *priv, const char *src)
{
	struct raw *r = priv;
	const char *path = r->cfg->path;
	struct flock lk = { .l_whence = SEEK_SET, .l_type = F_WRLCK };
	struct fc_result res;
	struct stat st;
	char tmp[PATH_MAX], why[768];
	int sfd, tfd, err;

	if (r->blk || r->ro)
		return r->h->fail(r->in, r->blk ? -ENOTSUP : -EROFS,
				  "rollback: %s is %s", path,
				  r->blk ? "a block device (only image files roll back)" : "read-only");
	if (!src || !*src)
		return r->h->fail(r->in, -EINVAL, "rollback needs a source image");
	sfd = open(src, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (sfd < 0)
		return r->h->fail(r->in, -errno, "rollback: cannot open %s: %s", src,
				  strerror(errno));
	if (fstat(sfd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->size) {
		close(sfd);
		return r->h->fail(r->in, -EINVAL,
				  "rollback: %s is not a regular file of %llu bytes, the disk's size",
				  src, (unsigned long long)r->size);
	}
	err = fc_clone_tmp(sfd, src, path, &clone_opts, tmp, sizeof(tmp), &tfd, &res, why,
			   sizeof(why));
	close(sfd);
	if (err)
		return r->h->fail(r->in, err, "rollback: %s", why);
	if (fcntl(tfd, F_OFD_SETLK, &lk) < 0 && (errno == EAGAIN || errno == EACCES)) {
		err = r->h->fail(r->in, -EBUSY, "rollback: %s is locked by another process", tmp);
		goto fail;
	}
	err = fc_commit(tmp, path, false, why, sizeof(why));
	if (err) {
		r->h->fail(r->in, err, "rollback: %s", why);
		goto fail;
	}
	/* The image's name is the new file now: move the descriptors over. The
	 * old file's lock goes with its last descriptor. */
	if (dup3(tfd, r->fd, O_CLOEXEC) < 0) {
		err = r->h->fail(r->in, -errno, "rollback: %s", strerror(errno));
		close(tfd);
		return err;
	}
	close(tfd);
	if (r->dfd >= 0 && (err = reopen_at(r, r->dfd, O_RDWR | O_DIRECT)))
		return r->h->fail(r->in, err, "rollback: reopening %s with O_DIRECT: %s", path,
				  strerror(-err));
	log_clone(r, "rollback", src, path, &res);
	return 0;
fail:
	close(tfd);
	unlink(tmp);
	return err;
}

/* ---- open ---- */

static void raw_free(struct raw *r)
{
	bbuf_unmap(&r->bounce);
	pthread_mutex_destroy(&r->bounce_lock);
	if (r->dfd >= 0)
		close(r->dfd);
	if (r->fd >= 0)
		close(r->fd);
	free(r->zeroes);
	free(r);
}

/* Fix the image size: the file's own, or cfg->size (creating or extending a
 * sparse file; never shrinking one). */
static int size_setup(struct raw *r, const struct raw_cfg *cfg, const struct stat *st)
{
	const char *p = cfg->path;

	if (cfg->size % SECTOR)
		return r->h->fail(r->in, -EINVAL, "size = %llu is not a multiple of 512",
				  (unsigned long long)cfg->size);
	if (r->blk) {
		if (cfg->size)
			return r->h->fail(r->in, -EINVAL,
					  "size applies to image files, not to block device %s", p);
		if (ioctl(r->fd, BLKGETSIZE64, &r->size) < 0)
			return r->h->fail(r->in, -errno, "cannot read the size of %s: %s", p,
					  strerror(errno));
	} else {
		r->size = (uint64_t)st->st_size;
		if (cfg->size && r->size > cfg->size)
			return r->h->fail(r->in, -EINVAL,
					  "%s is %llu bytes, larger than size = %llu (cubicle never shrinks an image)",
					  p, (unsigned long long)r->size,
					  (unsigned long long)cfg->size);
		if (cfg->size && r->size < cfg->size) {
			if (r->ro)
				return r->h->fail(r->in, -EROFS,
						  "%s is %llu bytes, smaller than size = %llu, and read-only",
						  p, (unsigned long long)r->size,
						  (unsigned long long)cfg->size);
			if (ftruncate(r->fd, (off_t)cfg->size) < 0)
				return r->h->fail(r->in, -errno, "cannot extend %s to %llu bytes: %s",
						  p, (unsigned long long)cfg->size,
						  strerror(errno));
			r->h->log(r->in, CUB_LOG_INFO, "%s: sparse image of %llu bytes (was %llu)", p,
				  (unsigned long long)cfg->size, (unsigned long long)r->size);
			r->size = cfg->size;
		}
	}
	if (!r->size)
		return r->h->fail(r->in, -EINVAL, "%s is empty (set size to make a sparse image)",
				  p);
	if (r->size % SECTOR)
		return r->h->fail(r->in, -EINVAL, "%s is %llu bytes, not a multiple of 512", p,
				  (unsigned long long)r->size);
	return 0;
}

static int direct_setup(struct raw *r, const struct raw_cfg *cfg)
{
	struct statx sx;
	int lbs = SECTOR;

	r->dfd = open(cfg->path, (r->ro ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC);
	if (r->dfd < 0)
		return r->h->fail(r->in, -errno, "direct = true, but %s cannot be opened with O_DIRECT: %s",
				  cfg->path, strerror(errno));
	if (r->blk && ioctl(r->fd, BLKSSZGET, &lbs) < 0)
		lbs = 4096;
	r->mem_align = r->off_align = r->blk ? (uint32_t)lbs : 4096; /* safe guesses */
	if (!statx(r->dfd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) &&
	    (sx.stx_mask & STATX_DIOALIGN)) {
		if (!sx.stx_dio_offset_align)
			return r->h->fail(r->in, -EINVAL, "direct = true, but %s does not support direct I/O",
					  cfg->path);
		r->mem_align = sx.stx_dio_mem_align;
		r->off_align = sx.stx_dio_offset_align;
	}
	if (r->off_align < SECTOR)
		r->off_align = SECTOR;
	if (r->mem_align < 1 || (r->mem_align & (r->mem_align - 1)) || r->off_align > 65536 ||
	    (r->off_align & (r->off_align - 1)))
		return r->h->fail(r->in, -EINVAL, "%s: unusable direct I/O alignment %u/%u",
				  cfg->path, r->mem_align, r->off_align);
	if (r->off_align > r->block_size)
		r->block_size = r->off_align;
	return 0;
}

static int raw_open(struct cub_inst *in, const struct cub_host *h, const void *cfgp, bool ro,
		    void **priv)
{
	const struct raw_cfg *cfg = cfgp;
	struct flock lk = { .l_whence = SEEK_SET };
	struct raw *r;
	struct stat st;
	int flags, err, lbs;

	if (!cfg->path || !*cfg->path)
		return h->fail(in, -EINVAL, "path must name an image file or a block device");
	r = calloc(1, sizeof(*r));
	if (!r)
		return h->fail(in, -ENOMEM, "out of memory");
	r->in = in;
	r->h = h;
	r->cfg = cfg;
	r->dfd = -1;
	r->ro = ro || cfg->read_only;
	r->block_size = SECTOR;
	atomic_init(&r->no_zero_range, false);
	atomic_init(&r->no_punch, false);
	pthread_mutex_init(&r->bounce_lock, NULL);
	/* O_NONBLOCK until the type is known: a FIFO must not hang the open. */
	flags = (r->ro ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC;
	if (cfg->size && !r->ro)
		flags |= O_CREAT;
	r->fd = open(cfg->path, flags, 0644);
	if (r->fd < 0) {
		err = h->fail(in, -errno, "cannot open %s%s: %s", cfg->path,
			      r->ro ? " read-only" : "", strerror(errno));
		goto fail;
	}
	if (fstat(r->fd, &st) < 0) {
		err = h->fail(in, -errno, "cannot stat %s: %s", cfg->path, strerror(errno));
		goto fail;
	}
	r->blk = S_ISBLK(st.st_mode);
	if (!r->blk && !S_ISREG(st.st_mode)) {
		err = h->fail(in, -EINVAL, "%s is neither a regular file nor a block device",
			      cfg->path);
		goto fail;
	}
	fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_NONBLOCK);
	/* One writer per image, across processes; readers may share. */
	lk.l_type = r->ro ? F_RDLCK : F_WRLCK;
	if (fcntl(r->fd, F_OFD_SETLK, &lk) < 0) {
		if (errno == EAGAIN || errno == EACCES) {
			err = h->fail(in, -EBUSY, "%s is in use by another VM (it holds a lock on it)",
				      cfg->path);
			goto fail;
		}
		/* Some file systems (9p, some NFS) have no OFD locks: go on unguarded. */
		h->log(in, CUB_LOG_WARN, "cannot lock %s (%s); another VM could open it too",
		       cfg->path, strerror(errno));
	}
	if ((err = size_setup(r, cfg, &st)))
		goto fail;
	if (r->blk && !ioctl(r->fd, BLKSSZGET, &lbs) && lbs >= (int)SECTOR && lbs <= 65536)
		r->block_size = (uint32_t)lbs;
	if (cfg->direct && (err = direct_setup(r, cfg)))
		goto fail;
	if (r->dfd >= 0 && bbuf_map(&r->bounce, BOUNCE_MAX, r->mem_align)) {
		err = h->fail(in, -ENOMEM, "out of memory");
		goto fail;
	}
	if (!r->ro && posix_memalign((void **)&r->zeroes, 4096, ZERO_CHUNK)) {
		err = h->fail(in, -ENOMEM, "out of memory");
		goto fail;
	}
	if (r->zeroes)
		memset(r->zeroes, 0, ZERO_CHUNK);
	*priv = r;
	return 0;
fail:
	raw_free(r);
	return err;
}

static void raw_close(void *priv)
{
	raw_free(priv);
}

static const struct cub_param raw_params[] = {
	{ .name = "path", .type = CUB_P_PATH, .offset = offsetof(struct raw_cfg, path),
	  .doc = "image file or block device (relative to the config file)" },
	{ .name = "read_only", .type = CUB_P_BOOL, .offset = offsetof(struct raw_cfg, read_only),
	  .def = "false", .doc = "open read-only; writes fail" },
	{ .name = "direct", .type = CUB_P_BOOL, .offset = offsetof(struct raw_cfg, direct),
	  .def = "false", .doc = "O_DIRECT: bypass the host page cache" },
	{ .name = "size", .type = CUB_P_SIZE, .offset = offsetof(struct raw_cfg, size),
	  .def = "0", .doc = "create or extend a sparse image file to this size (0: as it is)" },
};

static const struct cub_storage_ops raw_ops = {
	.open = raw_open,
	.close = raw_close,
	.info = raw_info,
	.readv = raw_readv,
	.writev = raw_writev,
	.flush = raw_flush,
	.discard = raw_discard,
	.write_zeroes = raw_write_zeroes,
	.snapshot = raw_snapshot,
	.rollback = raw_rollback,
};

/* Once the VM runs: discards on a block device. */
static const struct cub_syscall raw_syscalls[] = { CUB_SYSCALL_IOCTL(BLKDISCARD) };

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4),
	.kind = CUB_KIND_STORAGE,
	.name = "raw",
	.version = "1.1",
	.license = "Apache-2.0",
	.summary = "raw disk image file or host block device (sparse, discard, O_DIRECT)",
	.cfg_size = sizeof(struct raw_cfg),
	.params = raw_params,
	.n_params = CUB_ARRAY_SIZE(raw_params),
	.ops = &raw_ops,
	.syscalls = raw_syscalls,
	.n_syscalls = CUB_ARRAY_SIZE(raw_syscalls),
});
