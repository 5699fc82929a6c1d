/* SPDX-License-Identifier: Apache-2.0 */
/* Removing a folder and all it holds (serve's sandbox folders, template builds, OCI whiteouts);
 * taking over a folder another uid wrote (a jailed template build's snapshot, a fork's). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileclone.h"
#include "rmtree.h"

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT ? -1 : 0;
}

int rm_tree(const char *path)
{
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
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
