/* SPDX-License-Identifier: Apache-2.0 */
/* What a jail holds: the paths a plan names (its kernel, initrd, every path
 * parameter of its devices and their backends), bound in by jail.c. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>

#include "jail.h"
#include "loader.h"
#include "log.h"
#include "plan.h"

/* @path made absolute (the working folder's, for a relative one): a new
 * string, or NULL with errno. */
static char *absolute(const char *path)
{
	char cwd[PATH_MAX], *abs;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	abs = malloc(strlen(cwd) + strlen(path) + 2);
	if (abs)
		sprintf(abs, "%s/%s", cwd, path);
	return abs;
}

/* Whether a --set VALUE names @abs too. */
static bool confirmed(const struct jail_cfg *j, const char *abs)
{
	for (unsigned i = 0; i < j->n_confirmed; i++) {
		const char *v = strchr(j->confirmed[i], '=');
		char *a = v && v[1] ? absolute(v + 1) : NULL;
		bool same = a && !strcmp(a, abs);

		free(a);
		if (same)
			return true;
	}
	return false;
}

int jail_add(struct jail_cfg *j, const char *path, char *err, size_t errlen)
{
	char *abs;

	if (!path || !*path)
		return 0;
	if (j->n_paths == JAIL_MAX_PATHS)
		return errf(err, errlen, -E2BIG, "jail: more than %d paths", JAIL_MAX_PATHS);
	if (!(abs = absolute(path)))
		return errf(err, errlen, -errno, "jail: %s: %s", path, strerror(errno));
	j->read_only[j->n_paths] = false;
	j->untrusted[j->n_paths] = j->adding_untrusted && !confirmed(j, abs);
	j->snapshot[j->n_paths] = j->adding_snapshot;
	j->paths[j->n_paths++] = abs;
	return 0;
}

/* The folder holding @path's real location, into @out (PATH_MAX): false if
 * it cannot be resolved. */
static bool real_home(const char *path, char *out)
{
	char *slash;

	if (!realpath(path, out))
		return false;
	slash = strrchr(out, '/');
	if (slash)
		slash[slash == out] = '\0'; /* "/" for one at the top */
	return true;
}

/*
 * A file's or folder's POSIX access ACL: its "system.posix_acl_access"
 * attribute (linux/posix_acl_xattr.h: a version word, then entries of tag,
 * permission and id). 1 with its entries in @a, 0 when it has none (its
 * mode says all), -1 when it has one cubicle cannot read (more than
 * ACL_MAX entries, or not one): the callers then assume the worst.
 */
#define ACL_XATTR "system.posix_acl_access"
#define ACL_MAX 64

struct acl {
	unsigned n;
	unsigned mask; /* ACL_MASK's bits (rwx when it has none) */
	struct {
		unsigned tag, perm;
		uint32_t id;
	} e[ACL_MAX];
};

static int acl_read(const char *path, struct acl *a)
{
	uint8_t raw[sizeof(struct posix_acl_xattr_header) +
		    ACL_MAX * sizeof(struct posix_acl_xattr_entry)];
	const size_t hdr = sizeof(struct posix_acl_xattr_header);
	ssize_t len = getxattr(path, ACL_XATTR, raw, sizeof(raw));
	uint32_t ver;

	if (len < 0)
		return errno == ENODATA || errno == ENOTSUP ? 0 : -1;
	if ((size_t)len < hdr || ((size_t)len - hdr) % sizeof(struct posix_acl_xattr_entry))
		return -1;
	memcpy(&ver, raw, sizeof(ver));
	if (le32toh(ver) != POSIX_ACL_XATTR_VERSION)
		return -1;
	a->n = (unsigned)(((size_t)len - hdr) / sizeof(struct posix_acl_xattr_entry));
	a->mask = ACL_READ | ACL_WRITE | ACL_EXECUTE;
	for (unsigned i = 0; i < a->n; i++) {
		struct posix_acl_xattr_entry x;

		memcpy(&x, raw + hdr + i * sizeof(x), sizeof(x));
		a->e[i].tag = le16toh(x.e_tag);
		a->e[i].perm = le16toh(x.e_perm);
		a->e[i].id = le32toh(x.e_id);
		if (a->e[i].tag == ACL_MASK)
			a->mask = a->e[i].perm;
	}
	return 1;
}

/* Why an ACL on @real lets the jail's uid or gid (or another jail's)
 * write it, or NULL. */
static const char *acl_writer(const struct jail_cfg *j, const char *real)
{
	struct acl a;
	int have = acl_read(real, &a);

	if (have < 0)
		return "it has an ACL cubicle cannot read";
	for (unsigned i = 0; have && i < a.n; i++) {
		uint32_t id = a.e[i].id;
		bool user = a.e[i].tag == ACL_USER, mine = user ? id == j->uid : id == j->gid;

		if ((a.e[i].tag != ACL_USER && a.e[i].tag != ACL_GROUP) ||
		    !(a.e[i].perm & a.mask & ACL_WRITE))
			continue;
		if (mine)
			return user ? "an ACL lets the jail's uid write it"
				    : "an ACL lets the jail's gid write it";
		if (j->have_foreign && id >= j->foreign_first && id <= j->foreign_last)
			return user ? "an ACL lets another jail's uid write it"
				    : "an ACL lets another jail's gid write it";
	}
	return NULL;
}

/* Why the jail's uid (or gid, another jail's, anyone) could make or change
 * what @st describes (@real: a path to it, for its ACL), or NULL. */
static const char *jail_writer(const struct jail_cfg *j, const char *real, const struct stat *st)
{
	if (st->st_uid == j->uid)
		return "the jail's uid owns it";
	if (st->st_gid == j->gid)
		return "the jail's gid owns it";
	if (j->have_foreign && st->st_uid >= j->foreign_first && st->st_uid <= j->foreign_last)
		return "another jail's uid owns it";
	if (j->have_foreign && st->st_gid >= j->foreign_first && st->st_gid <= j->foreign_last)
		return "another jail's gid owns it";
	if (st->st_mode & S_IWOTH)
		return "anyone may write it";
	return acl_writer(j, real);
}

/* Why the jail's uid could have made or changed what @st describes (at
 * @real, its real location), or NULL. */
static const char *could_have(const struct jail_cfg *j, const char *real, const struct stat *st)
{
	char home[PATH_MAX], here[PATH_MAX];

	if (S_ISDIR(st->st_mode) && j->snap_dir && real_home(j->snap_dir, home) &&
	    real_home(real, here) && !strcmp(here, home))
		return NULL; /* beside the snapshot: its owner's own */
	return jail_writer(j, real, st);
}

/*
 * Whether uid:gid (no other groups: the jail has none) may search the
 * folder @path (@st its stat), as the kernel's check would decide: with an
 * ACL, the owner by its entry; another uid an entry names by that entry,
 * under the mask; else the owning group's and named groups' entries that
 * match the gid, under the mask; else the others' entry. Without one, the
 * mode's bits.
 */
static bool searchable(const char *path, const struct stat *st, uid_t uid, gid_t gid)
{
	unsigned user_obj = 0, named = 0, grp = 0, other = 0;
	bool by_name = false, in_grp = false;
	struct acl a;
	int have = acl_read(path, &a);

	if (have < 0)
		return false;
	if (!have) {
		if (st->st_uid == uid)
			return st->st_mode & S_IXUSR;
		if (st->st_gid == gid)
			return st->st_mode & S_IXGRP;
		return st->st_mode & S_IXOTH;
	}
	for (unsigned i = 0; i < a.n; i++) {
		unsigned perm = a.e[i].perm;

		switch (a.e[i].tag) {
		case ACL_USER_OBJ:
			user_obj = perm;
			break;
		case ACL_USER:
			if (a.e[i].id == uid) {
				named = perm;
				by_name = true;
			}
			break;
		case ACL_GROUP_OBJ:
		case ACL_GROUP:
			if ((a.e[i].tag == ACL_GROUP_OBJ ? st->st_gid : a.e[i].id) == gid) {
				grp |= perm;
				in_grp = true;
			}
			break;
		case ACL_OTHER:
			other = perm;
			break;
		}
	}
	if (st->st_uid == uid)
		return user_obj & ACL_EXECUTE;
	if (by_name)
		return named & a.mask & ACL_EXECUTE;
	if (in_grp)
		return grp & a.mask & ACL_EXECUTE;
	return other & ACL_EXECUTE;
}

/* Whether @real lies in (or is) the folder @dir's real location. */
static bool beneath(const char *real, const char *dir)
{
	char rd[PATH_MAX];
	size_t n;

	if (!realpath(dir, rd))
		return false;
	n = strlen(rd);
	return !strncmp(real, rd, n) && (real[n] == '/' || !real[n] || n == 1);
}

/*
 * Whether the jail's uid could reach @real (a resolved absolute path) on
 * the host by itself: a bind mount skips the folders on the way, so a
 * snapshot that names a file behind a folder the uid may not search (a
 * world-readable file in root's 0700 home) would hand it to the guest.
 * What the snapshot folder and its Diff parents hold is not asked (the
 * operator named them), nor what a --jail-trust folder holds; below the
 * snapshot's home (the folder holding it) every folder on the way must let
 * the uid search it, and elsewhere every folder from / down. NULL, or why
 * not (in @why).
 */
static const char *unreachable(const struct jail_cfg *j, const char *real, const struct stat *want,
			       char *why, size_t len)
{
	char home[PATH_MAX], walk[PATH_MAX], proc[64];
	size_t from = 0, n = strlen(real), i = 0;
	const char *no = NULL;
	struct stat st;
	int fd, nfd;

	if (real[0] != '/' || n >= sizeof(walk))
		return snprintf(why, len, "its real location cannot be told"), why;
	for (unsigned k = 0; k < j->n_paths; k++)
		if (j->snapshot[k] && beneath(real, j->paths[k]))
			return NULL;
	for (unsigned k = 0; k < j->n_trusted; k++)
		if (beneath(real, j->trusted[k]))
			return NULL;
	if (j->snap_dir && real_home(j->snap_dir, home) && beneath(real, home))
		from = strlen(home) == 1 ? 1 : strlen(home) + 1; /* the folders below it */
	memcpy(walk, real, n + 1);
	/*
	 * Each folder on the way, held open from / down, following no link (a
	 * resolved path has none: one now means it changed): those from
	 * @from on (from 0: / itself first) must let the uid search them. With
	 * @want, what the walk reaches at the end must be that file.
	 */
	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return snprintf(why, len, "its real location cannot be told"), why;
	for (;;) {
		size_t end = i ? i : 1, next;
		char c = walk[end];

		walk[end] = '\0'; /* walk: the folder fd holds */
		if (i >= from && (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
				  !searchable(jail_fd_path(proc, sizeof(proc), fd, NULL), &st, j->uid,
					      j->gid))) {
			snprintf(why, len, "the jail's uid could not reach it: %s is a folder it may not search",
				 walk);
			no = why;
			break;
		}
		walk[end] = c;
		next = i + 1 + strcspn(real + i + 1, "/");
		walk[next] = '\0'; /* walk + i + 1: the next name */
		nfd = walk[i + 1] ? openat(fd, walk + i + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
		walk[next] = real[next];
		if (nfd < 0 || fstat(nfd, &st) < 0 || S_ISLNK(st.st_mode) ||
		    (real[next] && !S_ISDIR(st.st_mode))) {
			if (nfd >= 0 || walk[i + 1])
				no = "its real location changed as it was checked";
			if (nfd >= 0)
				close(nfd);
			break;
		}
		close(fd);
		fd = nfd;
		if (!real[next]) { /* the file itself */
			if (want && (st.st_dev != want->st_dev || st.st_ino != want->st_ino))
				no = "its real location changed as it was checked";
			break;
		}
		i = next;
	}
	close(fd);
	if (no && no != why)
		snprintf(why, len, "%s", no);
	return no ? why : NULL;
}

static int refuse(const struct jail_cfg *j, const char *path, const char *why, char *err,
		  size_t errlen)
{
	return errf(err, errlen, -EPERM,
		    "--jail %s: %s: only the snapshot names it and %s (uid %u gid %u): a jailed VMM writes its snapshot, and one a guest took over could name any file; if it is meant, name it with --set (a Diff's parents: keep them beside it)",
		    j->dir, path, why, (unsigned)j->uid, (unsigned)j->gid);
}

int jail_check_untrusted(const struct jail_cfg *j, char *err, size_t errlen)
{
	for (unsigned i = 0; i < j->n_paths; i++) {
		char real[PATH_MAX], why[PATH_MAX + 80];
		const char *no;
		struct stat st;

		if (!j->untrusted[i] || stat(j->paths[i], &st) < 0)
			continue; /* not there: nothing bound, it is made inside */
		if ((no = could_have(j, j->paths[i], &st)) ||
		    (no = realpath(j->paths[i], real) ? unreachable(j, real, NULL, why, sizeof(why))
						     : "its real location cannot be told"))
			return refuse(j, j->paths[i], no, err, errlen);
	}
	return 0;
}

int jail_open_untrusted(const struct jail_cfg *j, const char *path, struct stat *st, char *err,
			size_t errlen)
{
	char real[64], where[PATH_MAX], why[PATH_MAX + 80];
	const char *no;
	ssize_t n;
	int fd = open(path, O_PATH | O_CLOEXEC);

	if (fd < 0)
		return -ENOENT; /* not there (as stat failing was): made inside */
	snprintf(real, sizeof(real), "/proc/self/fd/%d", fd);
	if (fstat(fd, st) < 0) {
		int e = errno;

		close(fd);
		return errf(err, errlen, -e, "jail: %s: %s", path, strerror(e));
	}
	n = readlink(real, where, sizeof(where) - 1);
	where[n > 0 ? n : 0] = '\0';
	if ((no = could_have(j, real, st)) || (no = unreachable(j, where, st, why, sizeof(why)))) {
		close(fd);
		return refuse(j, path, no, err, errlen);
	}
	return fd;
}

/* How many symbolic links jail_open_trusted follows on one path. */
#define LINKS_MAX 40

int jail_open_trusted(const struct jail_cfg *j, const char *path, struct stat *st, char *err,
		      size_t errlen)
{
	char rest[2 * PATH_MAX], target[PATH_MAX], proc[64], *c, *next;
	unsigned links = 0;
	struct stat ds;
	const char *no;
	int fd, nfd, e;
	ssize_t n;

	if (path[0] != '/' || snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
		return errf(err, errlen, -EINVAL, "jail: %s: not an absolute path", path);
	/* no link on the way (the usual case): one call */
	fd = jail_open_no_links(path);
	if (fd == -ENOENT)
		return fd;
	if (fd >= 0) {
		if (fstat(fd, st) == 0)
			return fd;
		e = errno;
		close(fd);
		return errf(err, errlen, -e, "jail: %s: %s", path, strerror(e));
	}
	/* a link on the way (or no openat2): one component at a time */
	if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return errf(err, errlen, -errno, "jail: /: %s", strerror(errno));
	for (c = rest; *c;) {
		while (*c == '/')
			c++;
		if (!*c)
			break;
		next = c + strcspn(c, "/");
		if (*next)
			*next++ = '\0';
		if (!strcmp(c, ".")) {
			c = next;
			continue;
		}
		nfd = openat(fd, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 || fstat(nfd, st) < 0) {
			e = errno;
			if (nfd >= 0)
				close(nfd);
			close(fd);
			return e == ENOENT ? -ENOENT /* not there: made inside */
					   : errf(err, errlen, -e, "jail: %s: %s: %s", path, c, strerror(e));
		}
		if (!S_ISLNK(st->st_mode)) {
			close(fd);
			fd = nfd;
			c = next;
			continue;
		}
		/* A link: followed only where the jail's uid (or anyone but
		 * root) could not have put it, as root would read it for the
		 * bind: else it could point the bind at any host file. */
		no = fstat(fd, &ds) < 0 ? "its folder cannot be read"
					: jail_writer(j, jail_fd_path(proc, sizeof(proc), fd, NULL), &ds);
		n = no || ++links > LINKS_MAX ? -1 : readlinkat(nfd, "", target, sizeof(target) - 1);
		close(nfd);
		if (n <= 0 || (size_t)n + 1 + strlen(next) >= sizeof(rest)) {
			close(fd);
			if (no)
				return errf(err, errlen, -EPERM,
					    "--jail %s: %s: the symbolic link %s is in a folder %s (uid %u gid %u): the jail's uid could point it at any host file; name the file by its real path",
					    j->dir, path, c, no, (unsigned)j->uid, (unsigned)j->gid);
			return errf(err, errlen, -ELOOP, "jail: %s: %s: %s", path, c,
				    links > LINKS_MAX ? strerror(ELOOP) : "a link that cannot be read");
		}
		target[n] = '\0';
		/* what is left: the link's target, then the rest */
		memmove(rest + n + 1, next, strlen(next) + 1);
		memcpy(rest, target, (size_t)n);
		rest[n] = '/';
		if (target[0] == '/') {
			close(fd);
			if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
				return errf(err, errlen, -errno, "jail: /: %s", strerror(errno));
		}
		c = rest;
	}
	if (fstat(fd, st) < 0) {
		e = errno;
		close(fd);
		return errf(err, errlen, -e, "jail: %s: %s", path, strerror(e));
	}
	return fd;
}

int jail_add_read_only(struct jail_cfg *j, const char *path, char *err, size_t errlen)
{
	int ret = jail_add(j, path, err, errlen);

	if (!ret && path && *path)
		j->read_only[j->n_paths - 1] = true;
	return ret;
}

static int add_inst(struct jail_cfg *j, const struct plan_inst *pi, char *err, size_t errlen)
{
	const struct cub_plugin *d = pi->plugin->d;
	int ret;

	if (d->kind == CUB_KIND_NET && !strcmp(d->name, "tap")) {
		j->new_net = false;
		/* pins live in the host's bpffs, which the jail has not */
		for (unsigned i = 0; i < d->n_params; i++) {
			const struct cub_param *p = &pi->plugin->params[i];
			const char *v;

			if (strcmp(p->name, "policy.pin"))
				continue;
			memcpy(&v, (const char *)pi->cfg + p->offset, sizeof(v));
			if (v && *v)
				return errf(err, errlen, -ENOTSUP,
					    "%s: --jail with policy.pin: the jail has no bpffs to pin the tap's maps in; leave policy.pin out (the control API reads the counters: policy_stats)",
					    pi->where);
		}
	}
	for (unsigned i = 0; i < d->n_params; i++) {
		const struct cub_param *p = &pi->plugin->params[i];
		const char *v;

		if (p->type != CUB_P_PATH)
			continue;
		memcpy(&v, (const char *)pi->cfg + p->offset, sizeof(v));
		if ((ret = jail_add(j, v, err, errlen)))
			return ret;
	}
	for (unsigned b = 0; b < pi->n_backends; b++)
		if ((ret = add_inst(j, &pi->backends[b].inst, err, errlen)))
			return ret;
	return 0;
}

int jail_add_plan(struct jail_cfg *j, const struct plan *p, char *err, size_t errlen)
{
	int ret;

	j->new_net = true;
	/* a restore's plan (snap_plan) names boot files it never reads */
	if (!p->restoring && ((ret = jail_add(j, p->boot.kernel, err, errlen)) ||
			      (ret = jail_add(j, p->boot.initrd, err, errlen))))
		return ret;
	for (unsigned i = 0; i < p->n_devs; i++)
		if ((ret = add_inst(j, &p->devs[i], err, errlen)))
			return ret;
	/* a tap's per-CPU counters: libbpf counts the CPUs there */
	if (!j->new_net && !access("/sys/devices/system/cpu/possible", R_OK))
		return jail_add_read_only(j, "/sys/devices/system/cpu/possible", err, errlen);
	return 0;
}

void jail_paths_free(struct jail_cfg *j)
{
	for (unsigned i = 0; i < j->n_paths; i++)
		free(j->paths[i]);
	j->n_paths = 0;
	j->skip = NULL;
}
