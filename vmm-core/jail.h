/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail (cubicle run/restore --jail DIR): the VMM in new pid, mount,
 * ipc, uts, user and (without a tap) net namespaces, its root a folder
 * holding only what its plan names, as an unprivileged uid/gid, in a cgroup
 * v2 of its own with limits, with rlimits. See cubicle(1), JAIL.
 */
#ifndef CUBICLE_JAIL_H
#define CUBICLE_JAIL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct plan;

#define JAIL_MAX_PATHS 128
#define JAIL_MAX_TRUSTED 8

struct jail_cfg {
	const char *dir;     /* the new root; made if missing */
	uid_t uid;           /* default: DIR's owner */
	gid_t gid;
	bool have_uid, have_gid;
	bool new_net;        /* a net namespace of its own (no tap) */
	const char *netns_pool; /* --jail-netns-pool DIR; NULL: none */
	unsigned netns_pool_size; /* the namespaces it is kept at (0: 4) */
	const char *cgroup;  /* the parent cgroup folder; NULL: /sys/fs/cgroup/cubicle */
	const char *cpu_max, *memory_max, *pids_max, *io_max; /* NULL: not set */
	uint64_t nofile;     /* RLIMIT_NOFILE; 0: 4096 */
	uint64_t fsize;      /* RLIMIT_FSIZE in bytes; 0: unlimited */
	/* Files bound in at their own paths (made absolute by jail_add). */
	char *paths[JAIL_MAX_PATHS];
	bool read_only[JAIL_MAX_PATHS]; /* bound read-only (jail_add_read_only) */
	unsigned n_paths;
	const char *skip;    /* a path never bound (the API socket: made inside) */
	/*
	 * A restore's paths the snapshot alone names (its plan's, its Diff
	 * parents): a VMM writes its snapshot, so one a guest took over could
	 * name another jail's files there. jail_add marks what it adds while
	 * @adding_untrusted, unless a --set VALUE (@confirmed, "KEY=VALUE")
	 * names the same path; jail_enter checks them (jail_check_untrusted).
	 */
	bool untrusted[JAIL_MAX_PATHS];
	bool adding_untrusted;
	char *const *confirmed;
	unsigned n_confirmed;
	const char *snap_dir; /* the snapshot folder the command line names */
	/* paths added while @adding_snapshot: the snapshot folder and its Diff
	 * parents (what they hold is not asked to be reachable) */
	bool snapshot[JAIL_MAX_PATHS];
	bool adding_snapshot;
	/* --jail-trust DIR: folders whose contents a restore's snapshot may
	 * name without the jail's uid reaching them (the caller vouches for
	 * what is there; what that uid could have made is still refused) */
	const char *trusted[JAIL_MAX_TRUSTED];
	unsigned n_trusted;
	/* Other jails' uids and gids (--jail-foreign-ids FIRST-LAST: serve's
	 * range, one uid per sandbox): an untrusted path one of them owns is
	 * refused as one the jail's own uid owns. */
	bool have_foreign;
	uint32_t foreign_first, foreign_last;
	bool probe;          /* log what the jailed process sees (tests) */
	/* Called in the jailed child before the pivot, still root with the
	 * host's files in view, while the supervisor makes the network
	 * namespace (what would otherwise run before the fork); may be NULL. */
	void (*before_pivot)(void *arg);
	void *before_pivot_arg;
};

/* Add @path (and nothing if NULL or ""): 0 or -errno with a message. */
int jail_add(struct jail_cfg *j, const char *path, char *err, size_t errlen);
/* The same, bound read-only (a snapshot a restore only reads). */
int jail_add_read_only(struct jail_cfg *j, const char *path, char *err, size_t errlen);
/* Add every path a plan names: its kernel and initrd (not for a restore's
 * plan, plan.restoring: it reads neither), every path parameter of its
 * devices and their backends; and whether it has a tap (new_net false
 * then). */
int jail_add_plan(struct jail_cfg *j, const struct plan *p, char *err, size_t errlen);
/*
 * The paths marked untrusted that the jail's uid could have made or
 * changed: one that uid or the jail's gid owns (or another jail's, of the
 * foreign range), or anyone may write, is
 * refused (a folder beside the snapshot folder the command line names, a
 * Diff's parent, excepted: its owner could write that one too); and one
 * the uid could not reach on the host by itself (a folder on the way it
 * may not search, below the snapshot's home or from / elsewhere): a bind
 * would skip that folder. One not there is fine (nothing is bound: it is
 * made inside). Call once the uid and gid are known. 0, or -EPERM with a
 * message naming the path.
 */
int jail_check_untrusted(const struct jail_cfg *j, char *err, size_t errlen);
/* The same for one such path, on what it is now: an O_PATH fd of it to bind
 * from (the check and the bind see the same file; *@st is its fstat),
 * -ENOENT when it is not there (or not to be opened), or -errno with a
 * message. */
/* A path the plan itself names (trusted), resolved one component at a time
 * as root would: a symbolic link is followed only when the folder holding
 * it is one the jail's uid (or gid, another jail's, anyone) cannot write,
 * else refused (the jail's uid could point it at any host file, bound into
 * its jail). An O_PATH fd of it to bind from (*@st its fstat), -ENOENT when
 * it is not there, or -errno with a message. */
int jail_open_trusted(const struct jail_cfg *j, const char *path, struct stat *st, char *err,
		      size_t errlen);
int jail_open_untrusted(const struct jail_cfg *j, const char *path, struct stat *st, char *err,
			size_t errlen);
/* Forget the paths added (a jail not entered). */
void jail_paths_free(struct jail_cfg *j);

/*
 * The jail folder's contents, made before the pivot (jail_root.c) without
 * following a symbolic link below the folder's fd @root (the jailed uid owns
 * the folder: a link there would lead root anywhere on the host).
 */
/* @path, absolute, as a path below the jail's root: "." and ".." taken
 * lexically, never above the top ("" for "/"). 0 or -ENAMETOOLONG. */
int jail_rel(char *out, size_t len, const char *path);
/* O_PATH fd of @rel below the folder fd @root (O_DIRECTORY etc. in
 * @flags), no link followed on the way or at the end (-ELOOP): or -errno. */
int jail_open_beneath(int root, const char *rel, int flags);
/* O_PATH fd of @path if no symbolic link is on its way (openat2's
 * RESOLVE_NO_SYMLINKS), -ELOOP if one is, -ENOSYS without openat2 (or
 * jail_root_walk_only), or another -errno. */
int jail_open_no_links(const char *path);
/* The same for a folder, making what is missing (owned by @uid:@gid). */
int jail_mkdir_beneath(int root, const char *rel, uid_t uid, gid_t gid);
/*
 * @path (absolute) opened from / one folder at a time, following no link,
 * through folders only root can change: each root's and writable by no one
 * else, a sticky one (/tmp) excepted but for the one that holds @path when
 * @strict_parent (when @path itself is another uid's, whom the sticky bit
 * lets rename it). Missing folders are made when @create (0755, @path
 * itself @mode). @path is opened with @flags (O_PATH or O_RDONLY, O_DIRECTORY
 * and O_NOFOLLOW added); what it is itself is the caller's to check. Its
 * fd, -ENOENT when missing (no message), or -errno with a message in @err
 * naming the folder at fault and @opt (the option that named @path) and
 * @what (what it is, in "the @what must lie on a path only root can
 * change"): a folder another uid could change, a symbolic link, not a
 * folder, not absolute, "/" or with . or .. in it.
 */
int jail_open_root_path(const char *path, int flags, bool create, mode_t mode, bool strict_parent,
			const char *opt, const char *what, char *err, size_t errlen);
/* "/proc/self/fd/FD", or with @name "/proc/self/fd/FD/NAME", into @buf
 * (returned): what @fd holds, for the calls that take a path only (mount,
 * umount2), reached through the fd and not by a name someone could change. */
const char *jail_fd_path(char *buf, size_t len, int fd, const char *name);
/* Bind the host's @path at the same path below @root (the folder @dir, for
 * messages); a path that does not exist yet (or @skip) gets its folder only;
 * @ro: read-only, nosuid, nodev. The source is opened once and bound from
 * its fd: with @j, by jail_open_untrusted (@untrusted: a path only a snapshot
 * names) or jail_open_trusted; without, as it is (the host's /dev nodes).
 * 0 or -errno with a message. */
int jail_bind(int root, const char *dir, const char *path, bool skip, bool ro, uid_t uid,
	      gid_t gid, const struct jail_cfg *j, bool untrusted, char *err, size_t errlen);
/* A new proc at DIR/proc. */
int jail_mount_proc(int root, const char *dir, char *err, size_t errlen);
/* The folder @path below @root (mkdir -p, new folders @uid:@gid): its
 * O_PATH fd, or -errno after a message. */
int jail_make_dir(int root, const char *dir, const char *path, uid_t uid, gid_t gid,
		  char *err, size_t errlen);
/* Tests: resolve one component at a time, as on a kernel without openat2. */
void jail_root_walk_only(bool on);

/*
 * Enter the jail. Needs root. The calling process makes the cgroup and
 * starts the namespace's init and the VMM's process, which goes on with the
 * caller's memory; the caller execs cubicle as the supervisor, which only
 * forwards SIGINT, SIGTERM and SIGHUP to the VMM, waits for it, ends the
 * init, removes the cgroup and exits with the VMM's status: this returns
 * only in the VMM's process, jailed, with 0, or in the caller with -errno
 * and a message when nothing was started. A failure in the VMM's process while
 * it sets the jail up is logged and ends it with status 1.
 */
int jail_enter(struct jail_cfg *j, char *err, size_t errlen);

/* A namespace taken from the pool (jail_netns.c). */
struct jail_netns {
	int ns;              /* the namespace's fd; -1: none */
	int dir;             /* the pool folder's, locked until the caller's exec */
	char path[PATH_MAX]; /* the entry, as messages name it */
	char entry[320];     /* the entry through @dir's /proc/self/fd link,
			      * unmounted and removed just before the exec */
};
/* A namespace from the pool folder @dir into @c: 0; -ENOENT when the pool
 * is empty or missing; another -errno after a message in @err. */
int jail_netns_take(const char *dir, struct jail_netns *c, char *err, size_t errlen);
/* @c let go unused: the entry stays in the pool. */
void jail_netns_drop(struct jail_netns *c);
/* Make namespaces in the pool @dir (made if missing, mode 0700, a private
 * mount of its own) until it holds @size: how many were made, or -errno
 * after a log line. */
int jail_netns_fill(const char *dir, unsigned size);
/* The entries the pool @dir holds, or -errno (-ENOENT: no pool) after a
 * message in @err. */
int jail_netns_count(const char *dir, char *err, size_t errlen);
/* Every entry of the pool @dir unpinned and removed, then the folder: how
 * many, or -errno after a message in @err. */
int jail_netns_drain(const char *dir, char *err, size_t errlen);
/* `cubicle __jail-supervise ...`: what jail_enter's caller execs itself as,
 * outside the jail (jail.c); its exit status is the VMM's. */
int jail_supervise_main(int argc, char **argv);

/*
 * A jail with a tap (new_net false) runs the VMM as the jail's uid with its
 * saved uid 0, CAP_NET_ADMIN, CAP_BPF and CAP_PERFMON (see jail.c), and no user namespace, so that
 * its setup can make the tap and attach the eBPF policy. jail_seal, before
 * the guest's first instruction, sets every id of every thread to the
 * jail's uid, which clears every capability, and checks. For every jail it
 * first checks that the supervisor has left the VMM's memory (its exec)
 * and that the namespace's init, which shares that memory, has its seccomp
 * filter. 0 (and nothing done outside a jail), or -errno with a message.
 */
int jail_seal(char *err, size_t errlen);
/* Whether jail_seal has work, and the uid it sets (the seccomp filters
 * allow each thread that one setresuid). */
bool jail_seal_pending(uid_t *uid);

#endif
