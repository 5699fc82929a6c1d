/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail's root: the folders, files and mounts made in the jail folder
 * by root before the pivot, without following a symbolic link anywhere
 * below it. The jailed VMM runs as the uid that owns that folder, so a VMM
 * a guest took over could leave a link there (DIR/work -> /etc) for the
 * next jailed start to follow as root: every path below the folder is
 * resolved from its fd with openat2's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
 * (Linux 5.6; before that, one component at a time with O_NOFOLLOW), and
 * mounts land on what those fds hold (through /proc/self/fd), not on a
 * path looked up again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cnode.h"
#include "jail.h"

/* 0 until openat2 was found missing (ENOSYS: a kernel before 5.6). */
static bool no_openat2;

void jail_root_walk_only(bool on)
{
	no_openat2 = on;
}

int jail_rel(char *out, size_t len, const char *path)
{
	size_t n = 0;

	if (len == 0)
		return -ENAMETOOLONG;
	out[0] = '\0';
	while (*path) {
		const char *end;
		size_t l;

		while (*path == '/')
			path++;
		end = strchrnul(path, '/');
		l = (size_t)(end - path);
		if (l == 0 || (l == 1 && path[0] == '.')) {
			/* nothing, or "." */
		} else if (l == 2 && path[0] == '.' && path[1] == '.') {
			/* "..": up one, never above the top (as at "/") */
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
			out[n] = '\0';
		} else {
			if (n + (n > 0) + l >= len)
				return -ENAMETOOLONG;
			if (n > 0)
				out[n++] = '/';
			memcpy(out + n, path, l);
			n += l;
			out[n] = '\0';
		}
		path = end;
	}
	return 0;
}

/* One component @name below the folder @dfd, not followed if a link:
 * an O_PATH fd or -errno (-ELOOP for a link). */
static int step(int dfd, const char *name, int flags)
{
	struct stat st;
	int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC | flags);

	if (fd < 0) {
		int e = errno;

		/* O_DIRECTORY on a link says ENOTDIR: say what it is */
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			return -ELOOP;
		return -e;
	}
	if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode)) {
		close(fd);
		return -ELOOP;
	}
	return fd;
}

/* The folder fd @dfd itself, again (the caller closes what it gets). */
static int again(int dfd)
{
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);

	return fd < 0 ? -errno : fd;
}

int jail_open_no_links(const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	if (no_openat2)
		return -ENOSYS;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS)
		no_openat2 = true;
	return fd < 0 ? -errno : fd;
}

int jail_open_beneath(int root, const char *rel, int flags)
{
	char buf[PATH_MAX], *s, *next;
	int dfd, fd;

	if (!*rel)
		return again(root);
	if (!no_openat2) {
		struct open_how how = {
			.flags = (uint64_t)(O_PATH | O_CLOEXEC | flags),
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
		if (fd >= 0)
			return fd;
		if (errno != ENOSYS && errno != EAGAIN)
			return -errno;
		if (errno == ENOSYS)
			no_openat2 = true;
	}
	if (strlen(rel) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, rel);
	dfd = root;
	for (s = buf; s; s = next) {
		next = strchr(s, '/');
		if (next)
			*next++ = '\0';
		fd = step(dfd, s, next ? O_DIRECTORY : flags);
		if (dfd != root)
			close(dfd);
		if (fd < 0)
			return fd;
		dfd = fd;
	}
	return dfd;
}

int jail_mkdir_beneath(int root, const char *rel, uid_t uid, gid_t gid)
{
	char buf[PATH_MAX], *s, *next;
	int dfd, fd = jail_open_beneath(root, rel, O_DIRECTORY);

	if (fd != -ENOENT)
		return fd; /* there already, or what stands in the way */
	if (strlen(rel) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, rel);
	dfd = root;
	for (s = buf; s; s = next) {
		bool made;

		next = strchr(s, '/');
		if (next)
			*next++ = '\0';
		made = mkdirat(dfd, s, 0755) == 0;
		fd = made || errno == EEXIST ? step(dfd, s, O_DIRECTORY) : -errno;
		if (dfd != root)
			close(dfd);
		if (fd < 0)
			return fd;
		/* on the fd: the name may be something else by now */
		if (made && fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		dfd = fd;
	}
	return dfd;
}

/*
 * Whether a folder above a path that must stay put is one only root can
 * change: root's, and writable by no one else unless sticky (as /tmp: there
 * no one else may rename or remove what root made), when @sticky_ok.
 */
static bool root_only(const struct stat *st, bool sticky_ok)
{
	return st->st_uid == 0 && (!(st->st_mode & 022) || (sticky_ok && (st->st_mode & S_ISVTX)));
}

/* The walk of jail_open_root_path: its fd, or -errno with @at naming the
 * folder at fault (see there). */
static int root_path_walk(const char *path, int flags, bool create, mode_t mode,
			  bool strict_parent, char *at, size_t atlen)
{
	const int how = O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	char p[PATH_MAX];
	struct stat st;
	int fd, nfd, e;
	size_t i;

	snprintf(at, atlen, "%s", path);
	if (path[0] != '/' || snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -EINVAL;
	if (!p[strspn(p, "/")])
		return -EINVAL;
	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	for (i = strspn(p, "/"); p[i];) {
		size_t j = i + strcspn(p + i, "/"), k = j + strspn(p + j, "/");
		bool last = !p[k];
		char c = p[j];

		p[j] = '\0'; /* p: the path so far, p + i: this folder's name */
		snprintf(at, atlen, "%s", p);
		/* the folder that holds this one: could another uid swap it? */
		if (fstat(fd, &st) < 0) {
			e = errno;
			close(fd);
			return -e;
		}
		if (!root_only(&st, !(last && strict_parent))) {
			close(fd);
			if (i > 1 && i - 1 < atlen) /* @at: that folder */
				at[i - 1] = '\0';
			else
				snprintf(at, atlen, "/");
			return -EPERM;
		}
		if (!strcmp(p + i, ".") || !strcmp(p + i, "..")) {
			close(fd);
			return -EINVAL;
		}
		nfd = openat(fd, p + i, how | (last ? flags : O_PATH));
		if (nfd < 0 && errno == ENOENT && create &&
		    (!mkdirat(fd, p + i, last ? mode : 0755) || errno == EEXIST))
			nfd = openat(fd, p + i, how | (last ? flags : O_PATH));
		e = errno;
		close(fd);
		if (nfd < 0) {
			if (e == ENOTDIR) {
				struct stat l;

				if (!lstat(p, &l) && S_ISLNK(l.st_mode))
					e = ELOOP;
			}
			return -e;
		}
		fd = nfd;
		p[j] = c;
		i = k;
	}
	return fd;
}

int jail_open_root_path(const char *path, int flags, bool create, mode_t mode, bool strict_parent,
			const char *opt, const char *what, char *err, size_t errlen)
{
	char at[PATH_MAX];
	int fd = root_path_walk(path, flags, create, mode, strict_parent, at, sizeof(at));

	switch (fd) {
	case -ENOENT:
		return fd; /* (the caller's to say, or not) */
	case -EPERM:
		return errf(err, errlen, fd,
			    "%s %s: %s is not root's, or others may write it: the %s must lie on a path only root can change",
			    opt, path, at, what);
	case -ELOOP:
	case -ENOTDIR:
		return errf(err, errlen, fd,
			    "%s %s: %s is %s: name the %s by a path of folders without links (realpath(1))",
			    opt, path, at, fd == -ELOOP ? "a symbolic link" : "not a folder", what);
	case -EINVAL:
		return errf(err, errlen, fd, "%s %s: not a folder for the %s (an absolute path, without . or ..)",
			    opt, path, what);
	}
	if (fd < 0)
		return errf(err, errlen, fd, "%s %s: %s: %s", opt, path, at, strerror(-fd));
	return fd;
}

const char *jail_fd_path(char *buf, size_t len, int fd, const char *name)
{
	snprintf(buf, len, "/proc/self/fd/%d%s%s", fd, name ? "/" : "", name ? name : "");
	return buf;
}

/* The message for -@e about DIR/@rel. */
static int fail(char *err, size_t errlen, int e, const char *dir, const char *rel,
		const char *what)
{
	if (e == -ELOOP)
		return errf(err, errlen, e,
			    "jail: %s/%s: a symbolic link on the way (%s): refused; the jailed uid owns %s, so cubicle follows no link in it: remove it",
			    dir, rel, what, dir);
	if (e == -ENOTDIR)
		return errf(err, errlen, e, "jail: %s/%s: something other than a folder on the way (%s)",
			    dir, rel, what);
	return errf(err, errlen, e, "jail: %s/%s (%s): %s", dir, rel, what, strerror(-e));
}

int jail_bind(int root, const char *dir, const char *path, bool skip, bool ro, uid_t uid,
	      gid_t gid, const struct jail_cfg *j, bool untrusted, char *err, size_t errlen)
{
	char rel[PATH_MAX], proc[64], src_proc[64], *name;
	const char *src = path;
	int ret, pfd, fd, sfd = -1;
	struct stat st;

	if ((ret = jail_rel(rel, sizeof(rel), path)))
		return errf(err, errlen, ret, "jail: %s: path too long", path);
	if (!*rel)
		return errf(err, errlen, -EINVAL, "jail: %s: the host's root cannot be bound in", path);
	name = strrchr(rel, '/');
	if (name)
		*name++ = '\0';
	else
		name = rel;
	pfd = name == rel ? again(root) : jail_mkdir_beneath(root, rel, uid, gid);
	if (name != rel)
		name[-1] = '/'; /* @rel whole again, for messages */
	if (pfd < 0)
		return fail(err, errlen, pfd, dir, rel, "making its folder");
	/* the source opened once and bound from its fd: what was checked is
	 * what is bound */
	if (!skip) {
		if (!j) { /* (the host's /dev nodes) */
			sfd = open(path, O_PATH | O_CLOEXEC);
			if (sfd >= 0 && fstat(sfd, &st) < 0) {
				close(sfd);
				sfd = -1;
			}
			if (sfd < 0)
				sfd = -ENOENT;
		} else if (untrusted) {
			sfd = jail_open_untrusted(j, path, &st, err, errlen);
		} else {
			sfd = jail_open_trusted(j, path, &st, err, errlen);
		}
		if (sfd < 0 && sfd != -ENOENT) {
			close(pfd);
			return sfd;
		}
		if (sfd >= 0)
			src = jail_fd_path(src_proc, sizeof(src_proc), sfd, NULL);
	}
	if (skip || sfd < 0) {
		close(pfd); /* made inside */
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		fd = jail_mkdir_beneath(pfd, name, uid, gid);
	} else if (mknodat(pfd, name, S_IFREG | 0600, 0) < 0 && errno != EEXIST) {
		fd = -errno;
	} else {
		fd = jail_open_beneath(pfd, name, 0);
	}
	if (fd < 0) {
		if (sfd >= 0)
			close(sfd);
		close(pfd);
		return fail(err, errlen, fd, dir, rel, "where it is bound");
	}
	ret = mount(src, jail_fd_path(proc, sizeof(proc), fd, NULL), NULL, MS_BIND | MS_REC,
		    NULL) < 0 ? -errno : 0;
	close(fd);
	if (sfd >= 0)
		close(sfd);
	if (ret) {
		close(pfd);
		return errf(err, errlen, ret, "jail: binding %s: %s", path, strerror(-ret));
	}
	if (ro) {
		/* the name again: now the new mount's root */
		fd = jail_open_beneath(pfd, name, 0);
		ret = fd < 0 ? fd
		      : mount(NULL, jail_fd_path(proc, sizeof(proc), fd, NULL), NULL,
			      MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0
			      ? -errno : 0;
		if (fd >= 0)
			close(fd);
		if (ret) {
			close(pfd);
			return errf(err, errlen, ret, "jail: making %s read-only: %s", path,
				    strerror(-ret));
		}
	}
	close(pfd);
	return 0;
}

int jail_mount_proc(int root, const char *dir, char *err, size_t errlen)
{
	char proc[64];
	int fd = jail_mkdir_beneath(root, "proc", 0, 0), ret;

	if (fd < 0)
		return fail(err, errlen, fd, dir, "proc", "making it");
	ret = mount("proc", jail_fd_path(proc, sizeof(proc), fd, NULL), "proc",
		    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ? -errno : 0;
	close(fd);
	if (ret)
		return errf(err, errlen, ret, "jail: /proc: %s", strerror(-ret));
	return 0;
}

int jail_make_dir(int root, const char *dir, const char *path, uid_t uid, gid_t gid,
		  char *err, size_t errlen)
{
	char rel[PATH_MAX];
	int fd, ret;

	if ((ret = jail_rel(rel, sizeof(rel), path)))
		return errf(err, errlen, ret, "jail: %s: path too long", path);
	fd = jail_mkdir_beneath(root, rel, uid, gid);
	if (fd < 0)
		return fail(err, errlen, fd, dir, rel, "making it");
	return fd;
}
