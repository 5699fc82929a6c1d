/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail's pool of network namespaces (--jail-netns-pool DIR): a new
 * namespace costs 0.3-0.5 ms of the kernel's setup of every network
 * subsystem, the largest single step of a jailed start. The pool holds
 * namespaces made ahead, each kept alive by a bind mount of its nsfs file
 * on an empty file DIR/net-*, as ip-netns(8) keeps its own. A jailed start
 * takes one (jail_netns_take) where it would make one; its supervisor makes
 * the replacement once the VM runs (jail_netns_fill), off the start's path.
 *
 * DIR is root's and no one else's. Its flock serialises takers and
 * fillers: a taker holds it from its choice until the entry is unmounted
 * and removed (jail_handoff, just before the caller's exec releases it), so
 * no two jails ever get one namespace. A namespace in the pool was never
 * entered: nothing was configured in it (loopback is down, as in one a
 * jail makes), and it is owned by the host's user namespace, as the one
 * the supervisor would make is.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnode.h"
#include "jail.h"
#include "log.h"

#define ENTRY "net-"

/*
 * The pool folder, open and locked: its fd, -ENOENT when it (or a folder
 * above it) is missing and not to be made (@create: missing folders are
 * made, mode 0755, the pool's own 0700), or another -errno after a message
 * in @err. It is reached through folders only root can change
 * (jail_open_root_path: a path someone else could redirect, between this
 * check and a later use, to another folder of entries, ip-netns(8)'s
 * /run/netns say, is refused), and must itself be root's and writable by
 * root alone. What is done in the pool afterwards goes through this fd
 * (jail_fd_path), or by the path only root can change.
 */
static int pool_lock(const char *dir, bool create, char *err, size_t errlen)
{
	struct stat st;
	int fd = jail_open_root_path(dir, O_RDONLY, create, 0700, false, "--jail-netns-pool", "pool",
				     err, errlen), e;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		close(fd);
		return errf(err, errlen, -EPERM,
			    "--jail-netns-pool %s: the folder must be root's and writable by root alone",
			    dir);
	}
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			e = errno;
			close(fd);
			return errf(err, errlen, -e, "--jail-netns-pool %s: flock: %s", dir,
				    strerror(e));
		}
	}
	return fd;
}

/*
 * Through the entries of the locked folder @dfd: each entry's name to @fn
 * until it answers non-zero (returned); 0 at the end, -errno if the folder
 * cannot be read.
 */
static int pool_each(int dfd, int (*fn)(int dfd, const char *name, void *arg), void *arg)
{
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0), ret = 0;
	struct dirent *d;
	DIR *dp;

	if (fd < 0 || !(dp = fdopendir(fd))) {
		ret = -errno;
		if (fd >= 0)
			close(fd);
		return ret;
	}
	rewinddir(dp);
	while (!ret && (d = readdir(dp)))
		if (!strncmp(d->d_name, ENTRY, strlen(ENTRY)))
			ret = fn(dfd, d->d_name, arg);
	closedir(dp);
	return ret;
}

struct take {
	int ns;
	char name[256];
};

/* One entry to take: 1 with its namespace's fd in the struct take. An
 * entry that holds none (its filler died before the mount) is removed. */
static int take_one(int dfd, const char *name, void *arg)
{
	struct take *t = arg;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return 0;
	if (ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWNET) {
		t->ns = fd;
		snprintf(t->name, sizeof(t->name), "%s", name);
		return 1;
	}
	close(fd);
	log_debug("jail: %s in the network namespace pool holds none: removed", name);
	unlinkat(dfd, name, 0);
	return 0;
}

int jail_netns_take(const char *dir, struct jail_netns *c, char *err, size_t errlen)
{
	struct take t = { .ns = -1 };
	int dfd = pool_lock(dir, false, err, errlen), ret;

	c->ns = c->dir = -1;
	c->path[0] = c->entry[0] = '\0';
	if (dfd < 0)
		return dfd;
	ret = pool_each(dfd, take_one, &t);
	if (ret <= 0) {
		close(dfd); /* (the lock with it) */
		if (ret < 0)
			return errf(err, errlen, ret, "--jail-netns-pool %s: %s", dir,
				    strerror(-ret));
		return -ENOENT;
	}
	if (snprintf(c->path, sizeof(c->path), "%s/%s", dir, t.name) >= (int)sizeof(c->path)) {
		close(t.ns);
		close(dfd);
		return errf(err, errlen, -ENAMETOOLONG, "--jail-netns-pool %s: %s", dir,
			    strerror(ENAMETOOLONG));
	}
	jail_fd_path(c->entry, sizeof(c->entry), dfd, t.name);
	c->ns = t.ns;
	c->dir = dfd;
	return 0;
}

void jail_netns_drop(struct jail_netns *c)
{
	if (c->ns >= 0)
		close(c->ns);
	if (c->dir >= 0)
		close(c->dir);
	c->ns = c->dir = -1;
	c->path[0] = c->entry[0] = '\0';
}

static int count_one(int dfd, const char *name, void *arg)
{
	(void)dfd, (void)name;
	++*(unsigned *)arg;
	return 0;
}

/* Pin the calling thread's network namespace as a new entry of the locked
 * folder @dfd (@dir), named with the next free *@seq: 0 or -errno after a
 * log line. */
static int pin(int dfd, const char *dir, unsigned *seq)
{
	char name[64], path[PATH_MAX];
	int fd, e;

	/* (a name a dead filler of the same pid left: the next one) */
	do {
		snprintf(name, sizeof(name), ENTRY "%d-%u", (int)getpid(), (*seq)++);
		fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
	} while (fd < 0 && errno == EEXIST && *seq < 1024);
	if (fd < 0) {
		e = errno;
		log_warn("jail: network namespace pool %s: cannot make %s: %s", dir, name,
			 strerror(e));
		return -e;
	}
	close(fd);
	jail_fd_path(path, sizeof(path), dfd, name);
	if (mount("/proc/thread-self/ns/net", path, NULL, MS_BIND, NULL) < 0) {
		e = errno;
		unlinkat(dfd, name, 0);
		log_warn("jail: network namespace pool %s: cannot pin a namespace on %s: %s", dir,
			 name, strerror(e));
		return -e;
	}
	return 0;
}

/* Whether @dir is the root of a mount: 1, 0, or -1 if unknown (the
 * kernel cannot say, before 5.8). */
static int mount_root(const char *dir)
{
	struct statx sx;

	if (statx(AT_FDCWD, dir, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) < 0 ||
	    !(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return -1;
	return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? 1 : 0;
}

/*
 * The pool folder a mount of its own, private: the namespaces pinned in it
 * then reach no other mount namespace (on a host whose / is shared, as
 * systemd makes it, each would otherwise be copied into every service's
 * namespace, and each unmount go after every copy). Best effort; a folder
 * that is a mount already is left as it is.
 */
static void make_private(const char *dir)
{
	if (mount_root(dir) != 0)
		return;
	if (mount(dir, dir, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, dir, NULL, MS_PRIVATE, NULL) < 0)
		log_warn("jail: network namespace pool %s: a private mount of its own: %s", dir,
			 strerror(errno));
}

int jail_netns_fill(const char *dir, unsigned size)
{
	char err[512] = "";
	unsigned made = 0, seq = 0, n = 0;
	int host, dfd, have, ret = 0;

	/* made if missing, on a path only root can change (pool_lock); one
	 * that exists is left as it is */
	if ((dfd = pool_lock(dir, true, err, sizeof(err))) < 0 ||
	    (ret = pool_each(dfd, count_one, &n)) < 0) {
		if (dfd >= 0)
			close(dfd);
		ret = dfd < 0 ? dfd : ret;
		log_warn("jail: %s", err[0] ? err : strerror(-ret));
		return ret;
	}
	close(dfd);
	have = (int)n;
	if ((unsigned)have >= size)
		return 0;
	make_private(dir);
	host = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (host < 0) {
		ret = -errno;
		log_warn("jail: network namespace pool: /proc/thread-self/ns/net: %s",
			 strerror(-ret));
		return ret;
	}
	while (!ret && (unsigned)have < size) {
		/* made outside the lock (the slow part), pinned inside if the
		 * pool still wants it (another filler may have been faster) */
		if (unshare(CLONE_NEWNET) < 0) {
			ret = -errno;
			log_warn("jail: network namespace pool %s: unshare: %s", dir, strerror(-ret));
			break;
		}
		if ((dfd = pool_lock(dir, false, err, sizeof(err))) < 0) {
			ret = dfd;
			log_warn("jail: %s", err[0] ? err : strerror(-dfd));
			break;
		}
		n = 0;
		ret = pool_each(dfd, count_one, &n);
		have = (int)n;
		if (!ret && n < size && !(ret = pin(dfd, dir, &seq))) {
			made++;
			have++;
		}
		close(dfd);
	}
	if (setns(host, CLONE_NEWNET) < 0)
		log_warn("jail: network namespace pool: back to its own network namespace: %s",
			 strerror(errno));
	close(host);
	if (made)
		log_debug("jail: %u network namespace%s made for the pool %s", made,
			  made == 1 ? "" : "s", dir);
	return ret < 0 ? ret : (int)made;
}

int jail_netns_count(const char *dir, char *err, size_t errlen)
{
	unsigned have = 0;
	int dfd = pool_lock(dir, false, err, errlen), ret;

	if (dfd < 0)
		return dfd;
	ret = pool_each(dfd, count_one, &have);
	close(dfd);
	if (ret < 0)
		return errf(err, errlen, ret, "--jail-netns-pool %s: %s", dir, strerror(-ret));
	return (int)have;
}

struct drain {
	unsigned removed;
	int err;
};

static int drain_one(int dfd, const char *name, void *arg)
{
	struct drain *d = arg;
	char path[PATH_MAX];

	jail_fd_path(path, sizeof(path), dfd, name);
	/* (an entry left unpinned by a dead filler has no mount: EINVAL) */
	if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL) {
		d->err = -errno;
		return 0;
	}
	if (unlinkat(dfd, name, 0) < 0) {
		d->err = -errno;
		return 0;
	}
	d->removed++;
	return 0;
}

int jail_netns_drain(const char *dir, char *err, size_t errlen)
{
	struct drain d = { 0 };
	int dfd = pool_lock(dir, false, err, errlen), ret;

	if (dfd < 0)
		return dfd;
	ret = pool_each(dfd, drain_one, &d);
	close(dfd);
	if (!ret)
		ret = d.err;
	if (ret < 0)
		return errf(err, errlen, ret, "--jail-netns-pool %s: %s", dir, strerror(-ret));
	/* the folder's own mount (make_private), then the folder */
	if (mount_root(dir) == 1)
		umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW);
	if (rmdir(dir) < 0)
		return errf(err, errlen, -errno, "%s: %s (what else it holds is left)", dir,
			    strerror(errno));
	return (int)d.removed;
}
