/* SPDX-License-Identifier: Apache-2.0 */
/* The reflink storage backend: a VM's disk that is a copy-on-write clone (FICLONE) of a golden image, with O(1) snapshots and rollback on XFS or btrfs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cubicle/storage.h>

#include "fileclone.h"
#include "iov.h"

/*
 * I/O is raw's: preadv/pwritev on the caller's thread, an OFD lock so two
 * VMs never write one disk. What differs is where the file comes from (a
 * clone of base when path is absent) and that the file can change under a
 * running device: rollback swaps in a fresh clone.
 *
 * Locking: every I/O op holds lock for reading while it uses fd, so they run
 * in parallel. snapshot and rollback take it for writing: in-flight requests
 * finish on the old file first, and later ones see the new one. The slow part
 * of a rollback (the clone, or a copy) happens before, outside the lock.
 */

#define SECTOR 512u
#define ZERO_CHUNK (64u << 10)

enum { FB_FAIL, FB_COPY };

struct reflink_cfg {
	const char *base;
	const char *path;
	int fallback;
	bool read_only;
};

struct reflink {
	struct cub_inst *in;
	const struct cub_host *h;
	const struct reflink_cfg *cfg;
	pthread_rwlock_t lock; /* read: I/O on fd; write: replacing or cloning it */
	int fd;
	bool ro;
	uint64_t size;
	atomic_bool no_zero_range, no_punch;
};

static const struct fc_opts *clone_opts(const struct reflink *r)
{
	static const struct fc_opts fail = {
		.fallback = FC_FALLBACK_FAIL,
		.hint = "set fallback = \"copy\" to copy instead, or use XFS (reflink=1) or btrfs",
	};
	static const struct fc_opts copy = { .fallback = FC_FALLBACK_COPY };

	return r->cfg->fallback == FB_COPY ? &copy : &fail;
}

static void log_clone(struct reflink *r, const char *what, const char *src, const char *dst,
		      const struct fc_result *res)
{
	if (res->copied)
		r->h->log(r->in, CUB_LOG_WARN,
			  "%s: no reflink because %s; copied %s to %s (%llu of %llu bytes are data, %.1f ms)",
			  what, res->why, src, dst, (unsigned long long)res->data_bytes,
			  (unsigned long long)res->size, res->clone_us / 1000.0);
	else
		r->h->log(r->in, CUB_LOG_INFO, "%s: %s is a reflink clone of %s (%llu bytes, %llu us)",
			  what, dst, src, (unsigned long long)res->size,
			  (unsigned long long)res->clone_us);
}

/* ---- I/O ---- */

static int64_t rl_rw(struct reflink *r, bool wr, uint64_t off, const struct iovec *iov, int cnt)
{
	bool overflow;
	uint64_t len = iov_total(iov, cnt, &overflow);
	int64_t n;

	if (cnt < 0 || overflow || off > r->size || len > r->size - off)
		return -EINVAL;
	if (wr && r->ro)
		return -EROFS;
	if (!len)
		return 0;
	pthread_rwlock_rdlock(&r->lock);
	n = fullio_iov(r->fd, wr, off, iov, cnt, 0, SIZE_MAX);
	pthread_rwlock_unlock(&r->lock);
	return n;
}

static int64_t rl_readv(void *priv, uint64_t off, const struct iovec *iov, int cnt)
{
	return rl_rw(priv, false, off, iov, cnt);
}

static int64_t rl_writev(void *priv, uint64_t off, const struct iovec *iov, int cnt)
{
	return rl_rw(priv, true, off, iov, cnt);
}

static int sync_fd(int fd)
{
	while (fdatasync(fd) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static int rl_flush(void *priv)
{
	struct reflink *r = priv;
	int err;

	if (r->ro)
		return 0;
	pthread_rwlock_rdlock(&r->lock);
	err = sync_fd(r->fd);
	pthread_rwlock_unlock(&r->lock);
	return err;
}

static int range_ok(const struct reflink *r, uint64_t off, uint64_t len)
{
	if (r->ro)
		return -EROFS;
	if (off > r->size || len > r->size - off || off > (uint64_t)INT64_MAX)
		return -EINVAL;
	return 0;
}

static int falloc(struct reflink *r, int mode, uint64_t off, uint64_t len, atomic_bool *no)
{
	int err = 0;

	if (atomic_load(no))
		return -EOPNOTSUPP;
	pthread_rwlock_rdlock(&r->lock);
	if (fallocate(r->fd, mode | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		err = -errno;
	pthread_rwlock_unlock(&r->lock);
	if (err == -EOPNOTSUPP || err == -EINVAL) {
		atomic_store(no, true);
		return -EOPNOTSUPP;
	}
	return err;
}

static int rl_discard(void *priv, uint64_t off, uint64_t len)
{
	struct reflink *r = priv;
	int err = range_ok(r, off, len);

	if (err || !len)
		return err;
	return falloc(r, FALLOC_FL_PUNCH_HOLE, off, len, &r->no_punch);
}

static int rl_write_zeroes(void *priv, uint64_t off, uint64_t len, bool unmap)
{
	struct reflink *r = priv;
	int err = range_ok(r, off, len);
	uint8_t *z;

	if (err || !len)
		return err;
	if (unmap && !falloc(r, FALLOC_FL_PUNCH_HOLE, off, len, &r->no_punch))
		return 0;
	err = falloc(r, FALLOC_FL_ZERO_RANGE, off, len, &r->no_zero_range);
	if (err != -EOPNOTSUPP)
		return err;
	z = calloc(1, ZERO_CHUNK);
	if (!z)
		return -ENOMEM;
	for (err = 0; len && !err;) {
		struct iovec v = { z, len < ZERO_CHUNK ? (size_t)len : ZERO_CHUNK };
		int64_t n = rl_rw(r, true, off, &v, 1);

		err = n < 0 ? (int)n : 0;
		off += v.iov_len;
		len -= v.iov_len;
	}
	free(z);
	return err;
}

static void rl_info(void *priv, struct cub_storage_info *out)
{
	struct reflink *r = priv;

	*out = (struct cub_storage_info){
		.size = r->size,
		.block_size = SECTOR,
		.read_only = r->ro,
		.can_discard = !r->ro,
		.can_write_zeroes = !r->ro,
		.can_flush = true,
	};
}

/* ---- snapshot and rollback ---- */

/* Put the reason in why, return err. */
__attribute__((format(printf, 4, 5)))
static int say(int err, char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return err;
}

/* One writer per file, across processes; readers may share. */
static int lock_file(int fd, bool ro)
{
	struct flock lk = { .l_whence = SEEK_SET, .l_type = ro ? F_RDLCK : F_WRLCK };

	if (!fcntl(fd, F_OFD_SETLK, &lk))
		return 0;
	return errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
}

/* dest becomes a point-in-time clone of the disk (flushed first). */
static int do_snapshot(struct reflink *r, const char *dest, struct fc_result *res, char *why,
		       size_t len)
{
	char tmp[PATH_MAX];
	int tfd, err;

	memset(res, 0, sizeof(*res));
	if (!dest || !*dest)
		return say(-EINVAL, why, len, "snapshot needs a destination file");
	if (!access(dest, F_OK))
		return say(-EEXIST, why, len, "snapshot: %s already exists", dest);
	pthread_rwlock_wrlock(&r->lock);
	err = r->ro ? 0 : sync_fd(r->fd);
	if (err)
		say(err, why, len, "snapshot: cannot flush %s: %s", r->cfg->path, strerror(-err));
	else
		err = fc_clone_tmp(r->fd, r->cfg->path, dest, clone_opts(r), tmp, sizeof(tmp), &tfd,
				   res, why, len);
	pthread_rwlock_unlock(&r->lock);
	if (err)
		return err;
	close(tfd);
	err = fc_commit(tmp, dest, true, why, len);
	if (err)
		unlink(tmp);
	return err;
}

/* The disk becomes a fresh clone of src (base when src is empty). */
static int do_rollback(struct reflink *r, const char *src, struct fc_result *res, char *why,
		       size_t len)
{
	const char *path = r->cfg->path;
	char tmp[PATH_MAX];
	struct stat st;
	int sfd, tfd, old, err;

	memset(res, 0, sizeof(*res));
	if (!src || !*src)
		src = r->cfg->base;
	if (r->ro)
		return say(-EROFS, why, len, "rollback: %s is read-only", path);
	sfd = open(src, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* type checked below */
	if (sfd < 0) {
		err = -errno;
		return say(err, why, len, "rollback: cannot open %s: %s", src, strerror(-err));
	}
	if (fstat(sfd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->size) {
		close(sfd);
		return say(-EINVAL, why, len,
			   "rollback: %s is not a regular file of %llu bytes, the disk's size (a running disk cannot change size)",
			   src, (unsigned long long)r->size);
	}
	/* The slow part, outside the lock: I/O goes on against the old file. */
	err = fc_clone_tmp(sfd, src, path, clone_opts(r), tmp, sizeof(tmp), &tfd, res, why, len);
	close(sfd);
	if (err)
		return err;
	err = lock_file(tfd, false);
	if (err == -EBUSY) { /* only without OFD locks is anything else possible */
		say(err, why, len, "rollback: cannot lock %s: %s", tmp, strerror(-err));
		goto fail;
	}
	pthread_rwlock_wrlock(&r->lock);
	err = fc_commit(tmp, path, false, why, len);
	if (err) {
		pthread_rwlock_unlock(&r->lock);
		goto fail;
	}
	old = r->fd;
	r->fd = tfd;
	pthread_rwlock_unlock(&r->lock);
	close(old); /* drops the old inode (now unlinked) and its lock */
	return 0;
fail:
	close(tfd);
	unlink(tmp);
	return err;
}

static int rl_snapshot(void *priv, const char *dest)
{
	struct reflink *r = priv;
	struct fc_result res;
	char why[512];
	int err = do_snapshot(r, dest, &res, why, sizeof(why));

	if (err)
		return r->h->fail(r->in, err, "%s", why);
	log_clone(r, "snapshot", r->cfg->path, dest, &res);
	return 0;
}

static int rl_rollback(void *priv, const char *src)
{
	struct reflink *r = priv;
	struct fc_result res;
	char why[512];
	int err = do_rollback(r, src, &res, why, sizeof(why));

	if (err)
		return r->h->fail(r->in, err, "%s", why);
	log_clone(r, "rollback", src && *src ? src : r->cfg->base, r->cfg->path, &res);
	return 0;
}

/* Control methods: the same, with the outcome in the reply. */
static void reply_clone(struct cub_reply *rep, int err, const char *why, const char *what,
			const char *dst, const struct fc_result *res)
{
	int n;

	if (err)
		n = snprintf(rep->text, sizeof(rep->text), "%s", why);
	else if (res->copied)
		n = snprintf(rep->text, sizeof(rep->text), "%s %s: copied %llu bytes in %.1f ms (%s)",
			     what, dst, (unsigned long long)res->data_bytes, res->clone_us / 1000.0,
			     res->why);
	else
		n = snprintf(rep->text, sizeof(rep->text), "%s %s: reflink of %llu bytes in %llu us",
			     what, dst, (unsigned long long)res->size,
			     (unsigned long long)res->clone_us);
	rep->len = n < 0 ? 0 : (size_t)n < sizeof(rep->text) ? (size_t)n : sizeof(rep->text) - 1;
}

static int m_snapshot(void *priv, struct cub_reply *rep, const char *dest)
{
	struct fc_result res;
	char why[512];
	int err = do_snapshot(priv, dest, &res, why, sizeof(why));

	reply_clone(rep, err, why, "snapshot", dest, &res);
	return err;
}

static int m_rollback(void *priv, struct cub_reply *rep, const char *src)
{
	struct reflink *r = priv;
	struct fc_result res;
	char why[512];
	int err = do_rollback(r, src, &res, why, sizeof(why));

	reply_clone(rep, err, why, "rollback", r->cfg->path, &res);
	return err;
}

/* ---- open ---- */

static void rl_free(struct reflink *r)
{
	if (r->fd >= 0)
		close(r->fd);
	pthread_rwlock_destroy(&r->lock);
	free(r);
}

/* path does not exist: make it a clone of base. */
static int create_clone(struct reflink *r)
{
	const struct reflink_cfg *cfg = r->cfg;
	struct fc_result res;
	char why[768];
	int err;

	if (!cfg->base || !*cfg->base)
		return r->h->fail(r->in, -EINVAL, "%s does not exist and base names no image to clone",
				  cfg->path);
	err = fc_clone_path(cfg->base, cfg->path, clone_opts(r), &res, why, sizeof(why));
	if (err == -EEXIST)
		return 0; /* another process made it first: use theirs */
	if (err)
		return r->h->fail(r->in, err, "%s", why);
	log_clone(r, "open", cfg->base, cfg->path, &res);
	return 0;
}

static int open_disk(struct reflink *r)
{
	const char *p = r->cfg->path;
	struct stat st, bst;
	int err;

	/* O_NONBLOCK until the type is known: a FIFO must not hang the open. */
	r->fd = open(p, (r->ro ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC);
	if (r->fd < 0)
		return r->h->fail(r->in, -errno, "cannot open %s%s: %s", p, r->ro ? " read-only" : "",
				  strerror(errno));
	if (fstat(r->fd, &st) < 0)
		return r->h->fail(r->in, -errno, "cannot stat %s: %s", p, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return r->h->fail(r->in, -EINVAL, "%s is not a regular file (a reflink disk is a file)",
				  p);
	fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_NONBLOCK);
	if (r->cfg->base && !stat(r->cfg->base, &bst) && bst.st_dev == st.st_dev &&
	    bst.st_ino == st.st_ino)
		return r->h->fail(r->in, -EINVAL, "path and base are the same file (%s): the VM would write the golden image",
				  p);
	err = lock_file(r->fd, r->ro);
	if (err == -EBUSY)
		return r->h->fail(r->in, -EBUSY, "%s is in use by another VM (it holds a lock on it)",
				  p);
	if (err) /* some file systems (9p, some NFS) have no OFD locks */
		r->h->log(r->in, CUB_LOG_WARN, "cannot lock %s (%s); another VM could open it too", p,
			  strerror(-err));
	r->size = (uint64_t)st.st_size;
	if (!r->size || r->size % SECTOR)
		return r->h->fail(r->in, -EINVAL, "%s is %llu bytes; a disk is a non-zero multiple of 512",
				  p, (unsigned long long)r->size);
	return 0;
}

static int rl_open(struct cub_inst *in, const struct cub_host *h, const void *cfgp, bool ro,
		   void **priv)
{
	const struct reflink_cfg *cfg = cfgp;
	struct reflink *r;
	int err;

	if (!cfg->path || !*cfg->path)
		return h->fail(in, -EINVAL, "path must name this VM's disk file");
	r = calloc(1, sizeof(*r));
	if (!r)
		return h->fail(in, -ENOMEM, "out of memory");
	r->in = in;
	r->h = h;
	r->cfg = cfg;
	r->fd = -1;
	r->ro = ro || cfg->read_only;
	atomic_init(&r->no_zero_range, false);
	atomic_init(&r->no_punch, false);
	if (pthread_rwlock_init(&r->lock, NULL)) {
		free(r);
		return h->fail(in, -ENOMEM, "out of memory");
	}
	err = access(cfg->path, F_OK) && errno == ENOENT ? create_clone(r) : 0;
	if (!err)
		err = open_disk(r);
	if (err) {
		rl_free(r);
		return err;
	}
	*priv = r;
	return 0;
}

static void rl_close(void *priv)
{
	rl_free(priv);
}

static const char *const fallback_choices[] = { "fail", "copy", NULL };

static const struct cub_param reflink_params[] = {
	{ .name = "base", .type = CUB_P_PATH, .offset = offsetof(struct reflink_cfg, base),
	  .doc = "golden image that path is cloned from (relative to the config file)" },
	{ .name = "path", .type = CUB_P_PATH, .offset = offsetof(struct reflink_cfg, path),
	  .doc = "this VM's disk; made a FICLONE of base when absent" },
	{ .name = "fallback", .type = CUB_P_ENUM, .offset = offsetof(struct reflink_cfg, fallback),
	  .def = "fail", .choices = fallback_choices,
	  .doc = "when the filesystem cannot reflink: refuse, or copy (and log it)" },
	{ .name = "read_only", .type = CUB_P_BOOL, .offset = offsetof(struct reflink_cfg, read_only),
	  .def = "false", .doc = "open read-only; writes fail" },
};

static const struct cub_method reflink_methods[] = {
	{ .name = "snapshot", .sig = "s", .doc = "flush, then clone the disk to a new file DEST",
	  .fn = (void (*)(void))m_snapshot },
	{ .name = "rollback", .sig = "s",
	  .doc = "make the disk a fresh clone of SRC (\"\": base) without stopping the device",
	  .fn = (void (*)(void))m_rollback },
};

static const struct cub_storage_ops reflink_ops = {
	.open = rl_open,
	.close = rl_close,
	.info = rl_info,
	.readv = rl_readv,
	.writev = rl_writev,
	.flush = rl_flush,
	.discard = rl_discard,
	.write_zeroes = rl_write_zeroes,
	.snapshot = rl_snapshot,
	.rollback = rl_rollback,
};

/* `cubicle check-host`: can the current folder (check-host --dir) reflink? */
static int rl_host_check(char *line, size_t len)
{
	return fc_probe(line, len);
}

CUB_PLUGIN({
	CUB_PLUGIN_ABI(4),
	.kind = CUB_KIND_STORAGE,
	.name = "reflink",
	.version = "1.0",
	.license = "Apache-2.0",
	.summary = "copy-on-write clone of a golden image (FICLONE: XFS, btrfs); O(1) snapshot and rollback",
	.cfg_size = sizeof(struct reflink_cfg),
	.params = reflink_params,
	.n_params = CUB_ARRAY_SIZE(reflink_params),
	.methods = reflink_methods,
	.n_methods = CUB_ARRAY_SIZE(reflink_methods),
	.ops = &reflink_ops,
	.host_check = rl_host_check,
});
