/* SPDX-License-Identifier: Apache-2.0 */
/* Removing a folder and all it holds (serve's sandbox folders, template builds, OCI whiteouts);
 * taking over a folder another uid wrote (a jailed template build's snapshot). */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
