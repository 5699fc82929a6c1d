/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle-agent: mkdir -p and chown for files made on a user's behalf. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
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

/* PATH's xattr names (NUL-separated) in a malloc'd buffer; NULL with *len 0 when none. */
static char *xattr_names(const char *path, ssize_t *len)
{
	char *buf;

	*len = llistxattr(path, NULL, 0);
	if (*len <= 0)
		return NULL;
	buf = malloc((size_t)*len);
	if (!buf || (*len = llistxattr(path, buf, (size_t)*len)) < 0) {
		free(buf);
		*len = buf ? -1 : 0;
		return NULL;
	}
	return buf;
}

int fsu_meta_set(const char *path, json_t *meta)
{
	size_t plen = strlen(FSU_META_PREFIX);
	char name[300];
	const char *k;
	json_t *v;
	ssize_t len;
	char *names = xattr_names(path, &len);

	if (len < 0 && errno != ENOTSUP)
		return -errno;
	for (ssize_t off = 0; names && off < len; off += (ssize_t)strlen(names + off) + 1) {
		const char *n = names + off;
		if (!strncmp(n, FSU_META_PREFIX, plen) && !json_object_get(meta, n + plen))
			lremovexattr(path, n);
	}
	free(names);
	json_object_foreach(meta, k, v) {
		const char *val = json_string_value(v);
		if (snprintf(name, sizeof(name), "%s%s", FSU_META_PREFIX, k) >= (int)sizeof(name))
			return -ENAMETOOLONG;
		if (lsetxattr(path, name, val, strlen(val), 0))
			return -errno;
	}
	return 0;
}

json_t *fsu_meta_get(const char *path)
{
	size_t plen = strlen(FSU_META_PREFIX);
	json_t *meta = NULL;
	ssize_t len;
	char *names = xattr_names(path, &len);

	for (ssize_t off = 0; names && off < len; off += (ssize_t)strlen(names + off) + 1) {
		const char *n = names + off;
		char val[4097];
		ssize_t vl;

		if (strncmp(n, FSU_META_PREFIX, plen))
			continue;
		vl = lgetxattr(path, n, val, sizeof(val) - 1);
		if (vl < 0)
			continue;
		val[vl] = 0;
		if (!meta)
			meta = json_object();
		json_object_set_new(meta, n + plen, json_stringn(val, (size_t)vl));
	}
	free(names);
	return meta;
}
