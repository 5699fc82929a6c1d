/* SPDX-License-Identifier: Apache-2.0 */
/* filesystem.Filesystem: Stat, ListDir, MakeDir, Move, Remove and their EntryInfo. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "fsutil.h"
#include "http.h"

#define LIST_MAX 100000

static void perm_string(mode_t m, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'L' : S_ISCHR(m) ? 'c' : S_ISBLK(m) ? 'b' :
		S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 'S' : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (m & (0400 >> i)) ? rwx[i] : '-';
	if (m & S_ISUID)
		out[3] = (m & S_IXUSR) ? 's' : 'S';
	if (m & S_ISGID)
		out[6] = (m & S_IXGRP) ? 's' : 'S';
	if (m & S_ISVTX)
		out[9] = (m & S_IXOTH) ? 't' : 'T';
	out[10] = 0;
}

static void rfc3339(const struct timespec *ts, char *out, size_t len)
{
	struct tm tm;
	size_t n;

	gmtime_r(&ts->tv_sec, &tm);
	n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	if (ts->tv_nsec)
		snprintf(out + n, len - n, ".%09ldZ", (long)ts->tv_nsec);
	else
		snprintf(out + n, len - n, "Z");
}

json_t *fs_entry(const char *path)
{
	struct stat st;
	char perms[11], mtime[64], owner[64], group[64], sizebuf[32], target[PATH_MAX];
	const char *type, *base;
	json_t *e;

	if (lstat(path, &st))
		return NULL;
	type = S_ISDIR(st.st_mode) ? "FILE_TYPE_DIRECTORY" : S_ISLNK(st.st_mode) ? "FILE_TYPE_SYMLINK" :
		S_ISREG(st.st_mode) ? "FILE_TYPE_FILE" : "FILE_TYPE_UNSPECIFIED";
	base = strrchr(path, '/');
	base = base && base[1] ? base + 1 : path;
	perm_string(st.st_mode, perms);
	rfc3339(&st.st_mtim, mtime, sizeof(mtime));
	snprintf(sizebuf, sizeof(sizebuf), "%lld", (long long)st.st_size);
	e = json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:s}", "name", base, "type", type,
			"path", path, "size", sizebuf, "mode", (int)(st.st_mode & 07777),
			"permissions", perms, "owner", user_name(st.st_uid, owner, sizeof(owner)),
			"group", group_name(st.st_gid, group, sizeof(group)), "modifiedTime", mtime);
	if (e && S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n >= 0) {
			target[n] = 0;
			json_object_set_new(e, "symlinkTarget", json_string(target));
		}
	}
	if (e) {
		json_t *meta = fsu_meta_get(path);
		if (meta)
			json_object_set_new(e, "metadata", meta);
	}
	if (!e)
		errno = ENOMEM;
	return e;
}

/* The request's "KEY" as an absolute path for U; replies and returns -1 on errors. */
int fs_req_path(struct conn *c, json_t *req, const char *key, const struct user *u, char *out,
		size_t len)
{
	json_t *v = json_object_get(req, key);
	const char *s = json_string_value(v);

	if (!s || strlen(s) != json_string_length(v) || !*s) {
		rpc_error(c, "invalid_argument", "%s is required", key);
		return -1;
	}
	if (user_path(u, s, out, len)) {
		rpc_error(c, "invalid_argument", "%s is too long", key);
		return -1;
	}
	return 0;
}

static void reply_entry(struct conn *c, const char *path)
{
	json_t *e = fs_entry(path);

	if (!e) {
		rpc_error(c, rpc_errno_code(errno), "%s: %s", path, strerror(errno));
		return;
	}
	rpc_reply(c, json_pack("{s:o}", "entry", e));
}

void fs_stat(struct conn *c, json_t *req, const struct user *u)
{
	char path[PATH_MAX];

	if (!fs_req_path(c, req, "path", u, path, sizeof(path)))
		reply_entry(c, path);
}

static int list(const char *dir, unsigned depth, json_t *out)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char sub[PATH_MAX];
	int rc = 0;

	if (!d)
		return -errno;
	while (!rc && (de = readdir(d))) {
		json_t *e;
		int n;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n = snprintf(sub, sizeof(sub), "%s/%s", strcmp(dir, "/") ? dir : "", de->d_name);
		if (n < 0 || (size_t)n >= sizeof(sub))
			continue;
		if (json_array_size(out) >= LIST_MAX) {
			rc = -E2BIG;
			break;
		}
		e = fs_entry(sub);
		if (!e)
			continue; /* gone meanwhile */
		json_array_append_new(out, e);
		if (depth > 1 && !strcmp(json_string_value(json_object_get(e, "type")), "FILE_TYPE_DIRECTORY")) {
			int r = list(sub, depth - 1, out);
			if (r == -E2BIG)
				rc = r;
		}
	}
	closedir(d);
	return rc;
}

void fs_list_dir(struct conn *c, json_t *req, const struct user *u)
{
	char path[PATH_MAX];
	uint64_t depth = 1;
	struct stat st;
	json_t *out;
	int rc;

	if (fs_req_path(c, req, "path", u, path, sizeof(path)))
		return;
	if (json_object_get(req, "depth") && json_get_u64(json_object_get(req, "depth"), &depth)) {
		rpc_error(c, "invalid_argument", "depth must be a non-negative integer");
		return;
	}
	if (depth < 1)
		depth = 1;
	if (depth > 64)
		depth = 64;
	if (stat(path, &st)) {
		rpc_error(c, rpc_errno_code(errno), "%s: %s", path, strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		rpc_error(c, "invalid_argument", "%s is not a directory", path);
		return;
	}
	out = json_array();
	rc = list(path, (unsigned)depth, out);
	if (rc) {
		json_decref(out);
		if (rc == -E2BIG)
			rpc_error(c, "resource_exhausted", "more than %d entries", LIST_MAX);
		else
			rpc_error(c, rpc_errno_code(rc), "%s: %s", path, strerror(-rc));
		return;
	}
	rpc_reply(c, json_pack("{s:o}", "entries", out));
}

void fs_make_dir(struct conn *c, json_t *req, const struct user *u)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if (fs_req_path(c, req, "path", u, path, sizeof(path)))
		return;
	if (!lstat(path, &st)) {
		rpc_error(c, "already_exists", "%s already exists", path);
		return;
	}
	rc = fsu_mkdirs(path, u, true);
	if (rc) {
		rpc_error(c, rpc_errno_code(rc), "mkdir %s: %s", path, strerror(-rc));
		return;
	}
	reply_entry(c, path);
}

void fs_move(struct conn *c, json_t *req, const struct user *u)
{
	char src[PATH_MAX], dst[PATH_MAX];
	int rc;

	if (fs_req_path(c, req, "source", u, src, sizeof(src)) ||
			fs_req_path(c, req, "destination", u, dst, sizeof(dst)))
		return;
	rc = fsu_mkdirs(dst, u, false);
	if (!rc && rename(src, dst))
		rc = -errno;
	if (rc) {
		rpc_error(c, rpc_errno_code(rc), "move %s to %s: %s", src, dst, strerror(-rc));
		return;
	}
	reply_entry(c, dst);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) ? -1 : 0;
}

void fs_remove(struct conn *c, json_t *req, const struct user *u)
{
	char path[PATH_MAX];
	struct stat st;

	if (fs_req_path(c, req, "path", u, path, sizeof(path)))
		return;
	if (lstat(path, &st)) {
		rpc_error(c, rpc_errno_code(errno), "%s: %s", path, strerror(errno));
		return;
	}
	if (S_ISDIR(st.st_mode) ? nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) : unlink(path)) {
		rpc_error(c, rpc_errno_code(errno), "remove %s: %s", path, strerror(errno));
		return;
	}
	rpc_reply(c, NULL);
}
