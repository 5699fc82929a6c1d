/* SPDX-License-Identifier: Apache-2.0 */
/* Removing a folder and all it holds (serve's sandbox folders, template builds, OCI whiteouts);
 * taking over a folder another uid wrote (a jailed template build's snapshot, a fork's). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileclone.h"
#include "rmtree.h"

/* How deep rm_tree goes (a folder per level is open): deeper is left. */
#define RM_DEPTH 128

/* The first error of a removal, kept in *@e; ENOENT is none (gone already). */
static void rm_err(int *e)
{
	if (!*e && errno != ENOENT)
		*e = errno;
}

/*
 * Everything in the folder open as @dfd removed, depth first, by names
 * relative to its folder's fd: a name swapped for a link by whoever may
 * write there (a running VMM in its jail's folders) is removed as the link,
 * never followed, and nothing on another file system (a mount) is entered.
 * 0, or -1 with errno of the first failure (the rest is still tried).
 */
static int rm_in(int dfd, dev_t dev, unsigned depth)
{
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0), e = 0;
	struct dirent *d;
	struct stat st;
	DIR *dp;

	if (fd < 0 || !(dp = fdopendir(fd))) {
		e = errno;
		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	while ((d = readdir(dp))) {
		int sub;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rm_err(&e);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(dfd, d->d_name, 0) < 0)
				rm_err(&e);
			continue;
		}
		sub = openat(dfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			rm_err(&e);
			continue;
		}
		if (fstat(sub, &st) < 0 || st.st_dev != dev || depth >= RM_DEPTH) {
			errno = st.st_dev != dev ? EXDEV : depth >= RM_DEPTH ? ELOOP : errno;
			rm_err(&e);
		} else if (rm_in(sub, dev, depth + 1) < 0) {
			rm_err(&e);
		}
		close(sub);
		if (unlinkat(dfd, d->d_name, AT_REMOVEDIR) < 0)
			rm_err(&e);
	}
	closedir(dp);
	errno = e;
	return e ? -1 : 0;
}

int rm_tree(const char *path)
{
	char parent[PATH_MAX];
	const char *base;
	struct stat st;
	size_t n = strlen(path);
	int pfd, fd, e = 0;

	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n >= sizeof(parent)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(parent, path, n);
	parent[n] = '\0';
	base = strrchr(parent, '/');
	if (base)
		parent[base++ - parent] = '\0';
	else
		base = parent;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		errno = EINVAL;
		return -1;
	}
	/* the folder that holds it is named by the caller; from there on,
	 * nothing is looked up by name through a folder others may write */
	pfd = open(base == parent ? "." : parent[0] ? parent : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		e = errno;
	} else if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(pfd, base, 0) < 0)
			e = errno;
	} else if ((fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		e = errno;
	} else {
		if (fstat(fd, &st) < 0 || rm_in(fd, st.st_dev, 0) < 0)
			e = errno;
		close(fd);
		if (!e && unlinkat(pfd, base, AT_REMOVEDIR) < 0)
			e = errno;
	}
	close(pfd);
	errno = e;
	return e ? -1 : 0;
}

static char adopt_msg[600];

static int adopt_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	/* whoever wrote it may have left anything here: only folders and
	 * files with one name each are taken */
	if ((flag != FTW_F && flag != FTW_D) || (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) ||
	    (S_ISREG(st->st_mode) && st->st_nlink != 1)) {
		snprintf(adopt_msg, sizeof(adopt_msg),
			 "%s: not a folder or a file with one name (a link?): not taken",
			 p);
		return 1;
	}
	if (lchown(p, 0, 0) || chmod(p, st->st_mode & 0755)) {
		snprintf(adopt_msg, sizeof(adopt_msg), "%s: %s", p, strerror(errno));
		return 1;
	}
	return 0;
}

int adopt_tree(const char *from, const char *to, char *msg, size_t len)
{
	struct stat st;

	if (lstat(from, &st))
		return snprintf(msg, len, "%s: %s", from, strerror(errno)), -1;
	if (!S_ISDIR(st.st_mode))
		return snprintf(msg, len, "%s: not a folder (a link?): not taken",
				from), -1;
	if (rename(from, to))
		return snprintf(msg, len, "%s -> %s: %s", from, to, strerror(errno)), -1;
	adopt_msg[0] = '\0';
	if (nftw(to, adopt_one, 16, FTW_PHYS)) {
		snprintf(msg, len, "%s", adopt_msg[0] ? adopt_msg : strerror(errno));
		return -1;
	}
	return 0;
}

#define TAKE_MAX 256

/* Entry @name of the folder @dfd (@from in messages) copied to @to/@name. */
static int take_one(int dfd, const char *from, const char *name, const char *to, char *msg, size_t len)
{
	char src[600], dst[600], tmp[640], err[500];
	const struct fc_opts o = { .fallback = FC_FALLBACK_COPY };
	struct fc_result res;
	struct stat st;
	int fd, tfd, ret = -1;

	snprintf(src, sizeof(src), "%s/%s", from, name);
	snprintf(dst, sizeof(dst), "%s/%s", to, name);
	/* not following a link, not waiting on a fifo: what it is, is asked
	 * of the descriptor, which a swap of the name cannot change */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return snprintf(msg, len, "%s: %s", src, errno == ELOOP ? "a symbolic link: not taken" : strerror(errno)), -1;
	if (fstat(fd, &st)) {
		snprintf(msg, len, "%s: %s", src, strerror(errno));
	} else if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
		snprintf(msg, len, "%s: not a file with one name (a link, folder, device, fifo or socket?): not taken", src);
	} else if (fc_clone_tmp(fd, src, dst, &o, tmp, sizeof(tmp), &tfd, &res, err, sizeof(err))) {
		snprintf(msg, len, "%s", err);
	} else {
		if (fchmod(tfd, st.st_mode & 0755))
			snprintf(msg, len, "%s: %s", tmp, strerror(errno));
		else if (fc_commit(tmp, dst, true, err, sizeof(err)))
			snprintf(msg, len, "%s", err);
		else
			ret = 0;
		/* the original goes at once: a copy on a file system without
		 * reflinks (tmpfs) then needs room for one file more, not for
		 * the whole snapshot twice */
		if (!ret)
			unlinkat(dfd, name, 0);
		close(tfd);
		if (ret)
			unlink(tmp);
	}
	close(fd);
	return ret;
}

int take_copy(const char *from, const char *to, char *msg, size_t len)
{
	int dfd = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), ret = 0;
	unsigned n = 0;
	struct dirent *e;
	DIR *d;

	if (dfd < 0)
		return snprintf(msg, len, "%s: %s", from, errno == ENOTDIR || errno == ELOOP
				? "not a folder (a link?): not taken" : strerror(errno)), -1;
	if (mkdir(to, 0755)) {
		snprintf(msg, len, "%s: %s", to, strerror(errno));
		close(dfd);
		return -1;
	}
	d = fdopendir(dfd);
	if (!d) {
		snprintf(msg, len, "%s: %s", from, strerror(errno));
		close(dfd);
		rmdir(to);
		return -1;
	}
	while (!ret && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (++n > TAKE_MAX) {
			snprintf(msg, len, "%s: more than %u entries: not taken", from, TAKE_MAX);
			ret = -1;
		} else {
			ret = take_one(dirfd(d), from, e->d_name, to, msg, len);
		}
	}
	closedir(d);
	if (ret)
		rm_tree(to);
	return ret;
}
