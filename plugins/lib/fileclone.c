/* SPDX-License-Identifier: Apache-2.0 */
/* Make a file a copy-on-write clone of another (FICLONE) or, where the filesystem cannot, a sparse copy; shared by the reflink backend and `cubicle disk clone`. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "fileclone.h"
#include "iov.h"

#define COPY_CHUNK (64u << 20) /* bytes per copy_file_range call: progress granularity */
#define RW_CHUNK (1u << 20)    /* the read/write fallback's buffer */

static const struct {
	unsigned long magic;
	const char *name;
	const char *why; /* completes "X is on NAME, which ..." after EOPNOTSUPP */
} fs_table[] = {
	{ 0x58465342, "xfs", "was made without reflink support (mkfs.xfs -m reflink=1)" },
	{ 0xef53, "ext4", "cannot share extents between files" },
	{ 0x01021994, "tmpfs", "keeps files in memory and cannot share extents" },
	{ 0x858458f6, "ramfs", "keeps files in memory and cannot share extents" },
	{ 0x794c7630, "overlay", "passes reflinks through only when its upper layer can make them" },
	{ 0x9123683e, "btrfs", "refused to share extents here" },
	{ 0x6969, "nfs", "cannot clone on this server or protocol version" },
	{ 0x65735546, "fuse", "does not implement reflinks" },
	{ 0x01021997, "9p", "does not implement reflinks" },
	{ 0x2fc12fc1, "zfs", "does not implement FICLONE on this version" },
	{ 0xf2f52010, "f2fs", "cannot share extents between files" },
	{ 0xca451a4e, "bcachefs", "refused to share extents here" },
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int fs_index(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return -1;
	for (unsigned i = 0; i < sizeof(fs_table) / sizeof(fs_table[0]); i++)
		if ((unsigned long)sf.f_type == fs_table[i].magic)
			return (int)i;
	return -2 - (int)(sf.f_type & 0x3fffffff);
}

const char *fc_fs_name(int fd, char *buf, size_t len)
{
	struct statfs sf;
	int i = fs_index(fd);

	if (i >= 0)
		return fs_table[i].name;
	if (fstatfs(fd, &sf) < 0)
		snprintf(buf, len, "an unknown filesystem");
	else
		snprintf(buf, len, "a filesystem of type 0x%lx", (unsigned long)sf.f_type);
	return buf;
}

/* Why FICLONE failed with err, as one clause naming the filesystems. */
static void refusal(int err, int src_fd, int dst_fd, char *why, size_t len)
{
	char b1[64], b2[64];
	const char *sfs = fc_fs_name(src_fd, b1, sizeof(b1));
	const char *dfs = fc_fs_name(dst_fd, b2, sizeof(b2));
	int i = fs_index(dst_fd);

	if (err == EXDEV)
		snprintf(why, len,
			 "they are on two filesystems (%s, %s) and a reflink shares blocks only within one (FICLONE: %s)",
			 sfs, dfs, strerror(err));
	else if (err == EOPNOTSUPP)
		snprintf(why, len, "both are on %s, which %s (FICLONE: %s)", dfs,
			 i >= 0 ? fs_table[i].why : "does not support reflinks", strerror(err));
	else
		snprintf(why, len,
			 "%s refused to clone them (FICLONE: %s): not regular files, or files it cannot share",
			 dfs, strerror(err));
}

int fc_probe(char *buf, size_t len)
{
	char a[] = ".cubicle-reflink-XXXXXX", b[] = ".cubicle-reflink-XXXXXX", cwd[PATH_MAX];
	char why[400], fsb[64];
	int fa, fb = -1, err = 0;

	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), ".");
	fa = mkstemp(a);
	if (fa >= 0)
		fb = mkstemp(b);
	if (fa < 0 || fb < 0) {
		err = -errno;
		snprintf(buf, len, "unknown (cannot create a file in %s: %s)", cwd,
			 strerror(-err));
	} else if (write(fa, "cubicle", 7) != 7) {
		err = errno ? -errno : -EIO;
		snprintf(buf, len, "unknown (cannot write a file in %s: %s)", cwd,
			 strerror(-err));
	} else if (ioctl(fb, FICLONE, fa) < 0) {
		err = -errno;
		refusal(-err, fa, fb, why, sizeof(why));
		snprintf(buf, len, "no (in %s: %s)", cwd, why);
	} else {
		snprintf(buf, len, "yes (in %s, %s)", cwd, fc_fs_name(fb, fsb, sizeof(fsb)));
	}
	if (fb >= 0) {
		close(fb);
		unlink(b);
	}
	if (fa >= 0) {
		close(fa);
		unlink(a);
	}
	return err;
}

static int copy_range_rw(int dst, int src, off_t off, uint64_t len, uint8_t *buf)
{
	while (len) {
		size_t n = len < RW_CHUNK ? (size_t)len : RW_CHUNK;
		int err = fullio_pread(src, buf, n, (uint64_t)off); /* -EIO: the source shrank */

		if (!err)
			err = fullio_pwrite(dst, buf, n, (uint64_t)off);
		if (err)
			return err;
		off += (off_t)n;
		len -= n;
	}
	return 0;
}

/* copy_file_range, or read/write where the kernel cannot (across filesystems). */
static int copy_range(int dst, int src, off_t off, uint64_t len, bool *use_rw, uint8_t **buf)
{
	while (len && !*use_rw) {
		loff_t in = off, out = off;
		size_t n = len < COPY_CHUNK ? (size_t)len : COPY_CHUNK;
		ssize_t r = copy_file_range(src, &in, dst, &out, n, 0);

		if (r > 0) {
			off += r;
			len -= (uint64_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return -EIO;
		if (errno != EXDEV && errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL)
			return -errno;
		*use_rw = true;
	}
	if (!len)
		return 0;
	if (!*buf && !(*buf = malloc(RW_CHUNK)))
		return -ENOMEM;
	return copy_range_rw(dst, src, off, len, *buf);
}

/* Copy the data of src into dst (already size bytes long), skipping holes. */
static int sparse_copy(int dst, int src, uint64_t size, const struct fc_opts *o,
		       struct fc_result *res)
{
	bool use_rw = false;
	uint8_t *buf = NULL;
	off_t pos = 0;
	int err = 0;

	while ((uint64_t)pos < size) {
		off_t data = lseek(src, pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		if (data < 0) /* no SEEK_DATA here: everything is data */
			data = pos;
		hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > size)
			hole = (off_t)size;
		for (off_t at = data; at < hole;) {
			uint64_t n = (uint64_t)(hole - at) < COPY_CHUNK ? (uint64_t)(hole - at) : COPY_CHUNK;

			err = copy_range(dst, src, at, n, &use_rw, &buf);
			if (err)
				goto out;
			at += (off_t)n;
			res->data_bytes += n;
			if (o->progress)
				o->progress(o->arg, (uint64_t)at, size);
		}
		pos = hole;
	}
	if (o->progress)
		o->progress(o->arg, size, size);
out:
	free(buf);
	return err;
}

/* Reflink (or copy, per @o) src_fd into dst_fd. @tried: the errno FICLONE
 * already answered for this pair (clone_in_place), 0 to make the call. */
static int clone_into(int dst_fd, const char *dst, int src_fd, const char *src,
		      const struct fc_opts *o, int tried, struct fc_result *res, char *err,
		      size_t errlen)
{
	struct stat st;
	uint64_t t0;
	int e;

	if (fstat(src_fd, &st) < 0) {
		e = errno;
		snprintf(err, errlen, "cannot stat %s: %s", src, strerror(e));
		return -e;
	}
	res->size = (uint64_t)st.st_size;
	t0 = now_us();
	if (!tried && !ioctl(dst_fd, FICLONE, src_fd)) {
		res->clone_us = now_us() - t0;
		return 0;
	}
	e = tried ? tried : errno;
	if (e != EOPNOTSUPP && e != EXDEV && e != EINVAL && e != ENOTTY) {
		snprintf(err, errlen, "cannot reflink %s to %s: %s", src, dst, strerror(e));
		return -e;
	}
	if (e == ENOTTY) /* some stacked filesystems answer this for unknown ioctls */
		e = EOPNOTSUPP;
	refusal(e, src_fd, dst_fd, res->why, sizeof(res->why));
	if (o->fallback != FC_FALLBACK_COPY) {
		snprintf(err, errlen, "cannot reflink %s to %s: %s; %s", src, dst, res->why,
			 o->hint ? o->hint : "copy it instead");
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "cannot copy %s: not a regular file", src);
		return -EINVAL;
	}
	res->copied = true;
	t0 = now_us();
	if (ftruncate(dst_fd, st.st_size) < 0)
		e = errno;
	else
		e = -sparse_copy(dst_fd, src_fd, (uint64_t)st.st_size, o, res);
	if (e) {
		snprintf(err, errlen, "cannot copy %s to %s: %s", src, dst, strerror(e));
		return -e;
	}
	res->clone_us = now_us() - t0;
	return 0;
}

static int clone_tmp(int src_fd, const char *src, const char *dst, const struct fc_opts *o,
		     int tried, char *tmp, size_t tmplen, int *tmp_fd, struct fc_result *res,
		     char *err, size_t errlen)
{
	int fd, ret;

	memset(res, 0, sizeof(*res));
	*tmp_fd = -1;
	if ((size_t)snprintf(tmp, tmplen, "%s.tmp-XXXXXX", dst) >= tmplen) {
		snprintf(err, errlen, "%s: path too long", dst);
		return -ENAMETOOLONG;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot create a file beside %s: %s", dst, strerror(-ret));
		return ret;
	}
	fchmod(fd, 0644);
	ret = clone_into(fd, dst, src_fd, src, o, tried, res, err, errlen);
	if (!ret && fsync(fd) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot sync %s: %s", tmp, strerror(-ret));
	}
	if (ret) {
		close(fd);
		unlink(tmp);
		return ret;
	}
	*tmp_fd = fd;
	return 0;
}

int fc_clone_tmp(int src_fd, const char *src, const char *dst, const struct fc_opts *o,
		 char *tmp, size_t tmplen, int *tmp_fd, struct fc_result *res, char *err,
		 size_t errlen)
{
	return clone_tmp(src_fd, src, dst, o, 0, tmp, tmplen, tmp_fd, res, err, errlen);
}

int fc_commit(const char *tmp, const char *dst, bool noreplace, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int r, dfd;

	if (noreplace) {
		r = renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_NOREPLACE);
		if (r < 0 && errno == EINVAL) { /* no RENAME_NOREPLACE here: link refuses too */
			r = link(tmp, dst);
			if (!r)
				unlink(tmp);
		}
	} else {
		r = rename(tmp, dst);
	}
	if (r < 0) {
		r = -errno;
		snprintf(err, errlen, r == -EEXIST ? "%s already exists" : "cannot create %s: %s",
			 dst, strerror(-r));
		return r;
	}
	snprintf(dir, sizeof(dir), "%s", dst);
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* fc_clone_path without durability: dst made and reflinked in place. 0,
 * -errno with a message, or the errno FICLONE answered (dst removed again:
 * the caller goes the temporary file's way, which says why and copies when
 * allowed, without asking FICLONE twice). */
static int clone_in_place(int sfd, const struct stat *st, const char *dst, struct fc_result *res,
			  char *err, size_t errlen)
{
	int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), e;
	uint64_t t0;

	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, e == EEXIST ? "%s already exists" : "cannot create %s: %s", dst,
			 strerror(e));
		return -e;
	}
	res->size = (uint64_t)st->st_size;
	t0 = now_us();
	if (!ioctl(fd, FICLONE, sfd)) {
		res->clone_us = now_us() - t0;
		close(fd);
		return 0;
	}
	e = errno ? errno : EIO;
	close(fd);
	unlink(dst);
	return e;
}

int fc_clone_path(const char *src, const char *dst, const struct fc_opts *o,
		  struct fc_result *res, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	uint64_t t0 = now_us();
	struct stat st;
	int sfd, tfd, ret;

	memset(res, 0, sizeof(*res));
	/* (in place, O_EXCL says so) */
	if (o->durable && !access(dst, F_OK)) {
		snprintf(err, errlen, "%s already exists", dst);
		return -EEXIST;
	}
	sfd = open(src, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not hang us */
	if (sfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot open %s: %s", src, strerror(-ret));
		return ret;
	}
	if (fstat(sfd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(sfd);
		snprintf(err, errlen, "%s is not a regular file (a FIFO, device or directory is refused)",
			 src);
		return -EINVAL;
	}
	ret = 0;
	if (!o->durable) {
		ret = clone_in_place(sfd, &st, dst, res, err, errlen);
		if (ret <= 0) {
			close(sfd);
			res->total_us = now_us() - t0;
			return ret;
		}
	}
	fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) & ~O_NONBLOCK); /* a copy reads it */
	ret = clone_tmp(sfd, src, dst, o, ret, tmp, sizeof(tmp), &tfd, res, err, errlen);
	close(sfd);
	if (ret)
		return ret;
	close(tfd);
	ret = fc_commit(tmp, dst, true, err, errlen);
	if (ret)
		unlink(tmp);
	res->total_us = now_us() - t0;
	return ret;
}
