/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-agent: mkdir -p and chown for files made on a user's behalf. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "fsutil.h"

void fsu_own(int fd, const char *path, const struct user *u)
{
	int rc;

	if (geteuid() != 0 || (u->uid == 0 && u->gid == 0))
		return;
	rc = fd >= 0 ? fchown(fd, u->uid, u->gid) : lchown(path, u->uid, u->gid);
	(void)rc; /* best effort: the file is there either way */
}

int fsu_mkdirs(const char *path, const struct user *u, bool last)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	char *p;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	if (!last) {
		p = strrchr(buf, '/');
		if (!p || p == buf)
			return 0;
		*p = 0;
	}
	for (p = buf + 1;; p++) {
		if (*p == '/' || !*p) {
			char save = *p;
			*p = 0;
			if (mkdir(buf, 0755) == 0) {
				fsu_own(-1, buf, u);
			} else if (errno != EEXIST) {
				return -errno;
			} else {
				struct stat st;
				if (stat(buf, &st) == 0 && !S_ISDIR(st.st_mode))
					return -ENOTDIR;
			}
			*p = save;
			if (!save)
				break;
		}
	}
	return 0;
}
