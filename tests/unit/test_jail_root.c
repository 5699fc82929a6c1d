/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the jail's root (vmm-core/jail_root.c): paths below the jail
 * folder are resolved and made without following a symbolic link (the
 * jailed uid owns the folder and could leave one pointing anywhere), with
 * openat2 and with the walk a kernel without it takes; as root, binds in a
 * mount namespace of the test's own, and the paths a restore's snapshot
 * alone names that the jail's uid could have made, and the links on the
 * plan's own paths that it could have put there (jail_paths.c); the
 * split by which the jail's VMM keeps its caller's memory and stack
 * (arch_clone_vm_split, rawsys.c). */
#include <dirent.h>
#include <endian.h>
#include <linux/sched.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "arch.h"
#include "cunit_main.h"
#include "jail.h"

static char dir[] = "/tmp/cubicle-test-jailroot-XXXXXX";
static char jdir[300], outside[300];
static int root = -1;

static void put(const char *rel, const char *text)
{
	char p[400];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* Nothing made in @path (the folder links point to). */
static bool empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return false;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n == 0;
}

static void test_rel(void)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "/a/b", "a/b" },	   { "/", "" },		 { "/a/./b//c/", "a/b/c" },
		{ "/a/../../b", "b" },	   { "/x/y/..", "x" },	 { "/..", "" },
		{ "/a/.../b", "a/.../b" }, { "//a//", "a" },
	};
	char out[16], big[64];

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CU_ASSERT_EQUAL(jail_rel(out, sizeof(out), cases[i].in), 0);
		CU_ASSERT_STRING_EQUAL(out, cases[i].out);
	}
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	CU_ASSERT_EQUAL(jail_rel(out, sizeof(out), big), -ENAMETOOLONG);
}

/* The same cases with openat2 and with the component walk. */
static void resolve_cases(const char *tag)
{
	char a[64], p[400];
	struct stat st, want;
	int fd;

	/* made, owned by the uid asked (our own), then found again */
	snprintf(a, sizeof(a), "%s/b/c", tag);
	fd = jail_mkdir_beneath(root, a, getuid(), getgid());
	CU_ASSERT_FATAL(fd >= 0);
	snprintf(p, sizeof(p), "%s/%s", jdir, a);
	CU_ASSERT_EQUAL_FATAL(stat(p, &want), 0);
	CU_ASSERT_TRUE(S_ISDIR(want.st_mode) && want.st_uid == getuid());
	CU_ASSERT_EQUAL(fstat(fd, &st), 0);
	CU_ASSERT_EQUAL(st.st_ino, want.st_ino);
	close(fd);
	fd = jail_mkdir_beneath(root, a, getuid(), getgid());
	CU_ASSERT(fd >= 0);
	CU_ASSERT(fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == want.st_ino);
	if (fd >= 0)
		close(fd);
	/* a link to outside, on the way and at the end: refused, nothing made there */
	snprintf(p, sizeof(p), "%s/%s/out", jdir, tag);
	CU_ASSERT_EQUAL_FATAL(symlink(outside, p), 0);
	snprintf(a, sizeof(a), "%s/out/x/y", tag);
	CU_ASSERT_EQUAL(jail_mkdir_beneath(root, a, getuid(), getgid()), -ELOOP);
	snprintf(a, sizeof(a), "%s/out", tag);
	CU_ASSERT_EQUAL(jail_mkdir_beneath(root, a, getuid(), getgid()), -ELOOP);
	CU_ASSERT_EQUAL(jail_open_beneath(root, a, 0), -ELOOP);
	CU_ASSERT_TRUE(empty(outside));
	/* a link to a folder inside is refused as well */
	snprintf(p, sizeof(p), "%s/%s/in", jdir, tag);
	CU_ASSERT_EQUAL_FATAL(symlink("b", p), 0);
	snprintf(a, sizeof(a), "%s/in/c", tag);
	CU_ASSERT_EQUAL(jail_open_beneath(root, a, O_DIRECTORY), -ELOOP);
	/* a file where a folder should be */
	snprintf(p, sizeof(p), "jail/%s/f", tag);
	put(p, "x");
	snprintf(a, sizeof(a), "%s/f/x", tag);
	CU_ASSERT_EQUAL(jail_mkdir_beneath(root, a, getuid(), getgid()), -ENOTDIR);
	/* a file found, not a folder */
	snprintf(a, sizeof(a), "%s/f", tag);
	fd = jail_open_beneath(root, a, 0);
	CU_ASSERT(fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	if (fd >= 0)
		close(fd);
	CU_ASSERT(jail_open_beneath(root, a, O_DIRECTORY) == -ENOTDIR);
}

static void test_openat2(void)
{
	jail_root_walk_only(false);
	resolve_cases("o2");
}

static void test_walk(void)
{
	jail_root_walk_only(true);
	resolve_cases("walk");
	jail_root_walk_only(false);
}

/* As root, in a mount namespace of its own (a child): a file bound, a file
 * bound read-only, a folder made for a path not there yet, a proc, and a
 * bind refused for a link on the way. The child's exit status: the number
 * of the first check that failed. */
static int bind_child(void)
{
	char err[512], src[400], p[400], out[400];
	struct stat st;
	FILE *f;
	int r;

	/* the fd opened in the new namespace: mounts go where it is */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    (r = open(jdir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 1;
	snprintf(src, sizeof(src), "%s/src", dir);
	if (jail_bind(r, jdir, src, false, false, 0, 0, NULL, false, err, sizeof(err))) {
		printf("\n  # %s", err);
		return 2;
	}
	snprintf(p, sizeof(p), "%s%s", jdir, src);
	if (!(f = fopen(p, "r")) || !fgets(out, sizeof(out), f) || strcmp(out, "host file"))
		return 3;
	fclose(f);
	snprintf(src, sizeof(src), "%s/ro", dir);
	if (jail_bind(r, jdir, src, false, true, 0, 0, NULL, false, err, sizeof(err)))
		return 4;
	snprintf(p, sizeof(p), "%s%s", jdir, src);
	if (open(p, O_WRONLY | O_CLOEXEC) >= 0 || errno != EROFS)
		return 5;
	snprintf(src, sizeof(src), "%s/later/sock", dir);
	snprintf(p, sizeof(p), "%s%s/later", jdir, dir);
	if (jail_bind(r, jdir, src, false, false, 0, 0, NULL, false, err, sizeof(err)) || stat(p, &st) < 0 ||
	    !S_ISDIR(st.st_mode))
		return 6;
	if (jail_mount_proc(r, jdir, err, sizeof(err)))
		return 7;
	snprintf(p, sizeof(p), "%s/proc/self/status", jdir);
	if (access(p, R_OK) < 0)
		return 8;
	/* DIR/<first component of dir> -> outside: refused, named, nothing made */
	snprintf(p, sizeof(p), "%s/via", jdir);
	if (symlink(outside, p) < 0)
		return 9;
	if (jail_bind(r, jdir, "/via/x/file", false, false, 0, 0, NULL, false, err, sizeof(err)) != -ELOOP ||
	    !strstr(err, "a symbolic link on the way") || !strstr(err, "/via/x/file") || !empty(outside))
		return 10;
	if (jail_make_dir(r, jdir, "/via/x", 0, 0, err, sizeof(err)) != -ELOOP || !empty(outside))
		return 11;
	/* a path only a snapshot names: checked on the fd it is bound from */
	{
		struct jail_cfg jc = { .dir = jdir, .uid = 65534, .gid = 65534 };

		snprintf(src, sizeof(src), "%s/src", dir);
		snprintf(p, sizeof(p), "%s/theirs", dir);
		if (chown(p, 65534, 65534) < 0)
			return 12;
		if (jail_bind(r, jdir, p, false, false, 0, 0, &jc, true, err, sizeof(err)) != -EPERM ||
		    !strstr(err, "only the snapshot names it and the jail's uid owns it"))
			return 13;
		snprintf(out, sizeof(out), "%s%s", jdir, p);
		if (access(out, F_OK) == 0)
			return 14; /* refused before anything was made for it */
		if (jail_bind(r, jdir, src, false, false, 0, 0, &jc, true, err, sizeof(err)))
			return 15; /* root's file: bound, from the fd */
		snprintf(p, sizeof(p), "%s%s", jdir, src);
		if (!(f = fopen(p, "r")) || !fgets(out, sizeof(out), f) || strcmp(out, "host file"))
			return 16;
		fclose(f);
	}
	close(r);
	return 0;
}

static void test_bind(void)
{
	int status;
	pid_t pid;

	if (geteuid() != 0) {
		printf("\n  # binds: skipped (not root: no mount namespace)\n");
		return;
	}
	put("src", "host file");
	put("ro", "read only");
	put("theirs", "another jail's");
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		_exit(bind_child());
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFEXITED(status));
	if (WEXITSTATUS(status))
		printf("\n  # bind check %d failed\n", WEXITSTATUS(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
}

/* @path's check alone, as a restore's snapshot-only path (not confirmed
 * unless @confirm), for a jail of uid:gid 65534 whose snapshot folder is
 * DIR/snaps/this: 0 or the error, its message in @err. */
/* --jail-foreign-ids for the next untrusted() calls (0: none given). */
static uint32_t foreign_first, foreign_last;
/* --jail-trust for them (NULL: none) */
static const char *trust;

/* An ACL entry: tag (1 owner, 2 a uid, 4 the owning group, 8 a gid, 16
 * the mask, 32 others), permission bits (4 read, 2 write, 1 search), id. */
struct ace {
	uint16_t tag, perm;
	uint32_t id;
};

/* Give @path the POSIX access ACL @e (the attribute's layout, as setfacl
 * writes it: the kernel wants the entries in tag order, then id order). */
static int set_acl(const char *path, const struct ace *e, unsigned n)
{
	uint8_t buf[4 + 8 * 8];
	uint32_t v = htole32(2);

	CU_ASSERT_FATAL(n <= 8);
	memcpy(buf, &v, 4);
	for (unsigned i = 0; i < n; i++) {
		uint16_t t = htole16(e[i].tag), p = htole16(e[i].perm);
		uint32_t id = htole32(e[i].id);

		memcpy(buf + 4 + 8 * i, &t, 2);
		memcpy(buf + 6 + 8 * i, &p, 2);
		memcpy(buf + 8 + 8 * i, &id, 4);
	}
	return setxattr(path, "system.posix_acl_access", buf, 4 + 8 * n, 0);
}

/* owner rwx, uid @uid @named, owning group @grp, mask @mask, others @oth */
#define ACL5(named, uid, grp, mask, oth)                                                    \
	(const struct ace[]){ { 1, 7, ~0u }, { 2, named, uid }, { 4, grp, ~0u }, { 16, mask, ~0u }, \
			      { 32, oth, ~0u } },                                              \
		5

static int untrusted(const char *path, const char *confirm, char *err, size_t errlen)
{
	char snap[400], set[450];
	char *const sets[] = { set };
	struct jail_cfg j = { .dir = jdir, .uid = 65534, .gid = 65534 };
	int ret;

	if (foreign_first) {
		j.uid = j.gid = foreign_first + 1; /* this jail's, in the range */
		j.have_foreign = true;
		j.foreign_first = foreign_first;
		j.foreign_last = foreign_last;
	}

	if (trust)
		j.trusted[j.n_trusted++] = trust;
	snprintf(snap, sizeof(snap), "%s/snaps/this", dir);
	snprintf(set, sizeof(set), "devices.disk.backend.path=%s", confirm ? confirm : "");
	j.snap_dir = snap;
	j.confirmed = sets;
	j.n_confirmed = confirm ? 1 : 0;
	/* as a restore adds them: the snapshot folder, then what it names */
	j.adding_snapshot = true;
	CU_ASSERT_EQUAL_FATAL(jail_add_read_only(&j, snap, err, errlen), 0);
	j.adding_snapshot = false;
	j.adding_untrusted = true;
	CU_ASSERT_EQUAL_FATAL(jail_add(&j, path, err, errlen), 0);
	j.adding_untrusted = false;
	ret = jail_check_untrusted(&j, err, errlen);
	jail_paths_free(&j);
	return ret;
}

static void test_untrusted(void)
{
	static const char *const made[] = { "snaps", "snaps/this", "snaps/parent", "other",
					    "other/snap" };
	char p[400], q[400], err[1024] = "";
	bool have_acls = true;

	if (geteuid() != 0) {
		printf("\n  # snapshot paths: skipped (not root: cannot chown to 65534)\n");
		return;
	}
	for (unsigned i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, made[i]);
		CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
		CU_ASSERT_EQUAL_FATAL(chown(p, 65534, 65534), 0);
	}
	put("nobody.img", "");
	put("root.img", "");
	put("world.img", "");
	put("group.img", "");
	snprintf(p, sizeof(p), "%s/nobody.img", dir);
	CU_ASSERT_EQUAL_FATAL(chown(p, 65534, 0), 0);
	snprintf(q, sizeof(q), "%s/group.img", dir);
	CU_ASSERT_EQUAL_FATAL(chown(q, 0, 65534), 0);
	/* another jail's file (the jail's uid owns it): refused, named */
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, p));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "only the snapshot names it and the jail's uid owns it"));
	CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "the jail's gid owns it"));
	/* ... unless the command line names it too (--set) */
	CU_ASSERT_EQUAL(untrusted(p, p, err, sizeof(err)), 0);
	/* root's file is bound (the jail reads it as others may) */
	snprintf(p, sizeof(p), "%s/root.img", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/world.img", dir);
	CU_ASSERT_EQUAL_FATAL(chmod(p, 0666), 0);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "anyone may write it"));
	/* not there: nothing is bound (it is made inside) */
	snprintf(p, sizeof(p), "%s/none.img", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	/* a Diff's parent beside the snapshot: its owner's own */
	snprintf(p, sizeof(p), "%s/snaps/parent", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	/* one elsewhere, or a link beside it leading there: refused */
	snprintf(p, sizeof(p), "%s/other/snap", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	snprintf(q, sizeof(q), "%s/snaps/link", dir);
	CU_ASSERT_EQUAL_FATAL(symlink(p, q), 0);
	CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, q));
	/*
	 * A file the jail's uid could not reach on the host (a folder on the
	 * way it may not search: 0700 root's): a bind would skip that folder,
	 * so it is refused, the folder named, unless --set names it. What the
	 * snapshot folder holds is not asked, however deep; below the
	 * snapshot's home (DIR/snaps) each folder is.
	 */
	static const char *const closed[] = { "private", "priv", "snaps/this/deep", "snaps/closed" };
	for (unsigned i = 0; i < sizeof(closed) / sizeof(closed[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, closed[i]);
		CU_ASSERT_EQUAL_FATAL(mkdir(p, 0700), 0);
	}
	put("private/secret.img", "");
	put("snaps/this/deep/disk.img", "");
	put("snaps/closed/disk.img", "");
	put("snaps/open.img", "");
	snprintf(p, sizeof(p), "%s/private/secret.img", dir);
	snprintf(q, sizeof(q), "%s/private is a folder it may not search", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, p));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "only the snapshot names it and the jail's uid could not reach it"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, q));
	CU_ASSERT_EQUAL(untrusted(p, p, err, sizeof(err)), 0); /* named by --set */
	snprintf(q, sizeof(q), "%s/private", dir); /* its folder by --jail-trust */
	trust = q;
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	snprintf(q, sizeof(q), "%s/priv", dir); /* a folder named like it: not it */
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	trust = NULL;
	snprintf(p, sizeof(p), "%s/snaps/this/deep/disk.img", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/snaps/open.img", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/snaps/closed/disk.img", dir);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "snaps/closed is a folder it may not search"));
	/* the folder searchable by the jail's gid (its group, mode 0710): reached */
	snprintf(q, sizeof(q), "%s/snaps/closed", dir);
	CU_ASSERT_EQUAL_FATAL(chown(q, 0, 65534), 0);
	CU_ASSERT_EQUAL_FATAL(chmod(q, 0710), 0);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);

	/*
	 * The folder's POSIX ACL decides where it has one, as the kernel's
	 * check would: an entry naming the jail's uid without search (the
	 * mode's 0755 lets others search) refuses; one granting it passes a
	 * 0700 folder unless the mask takes it away; the owning group's entry
	 * without search refuses though the mode's group bits (the mask) have it.
	 */
	snprintf(p, sizeof(p), "%s/snaps/acl", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
	put("snaps/acl/disk.img", "");
	snprintf(q, sizeof(q), "%s/snaps/acl/disk.img", dir);
	CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), 0);
	if (set_acl(p, ACL5(0, 65534, 05, 07, 05)) < 0) {
		printf("\n  # ACLs: skipped (%s holds none here: %s)\n", dir, strerror(errno));
		have_acls = false;
	} else {
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "snaps/acl is a folder it may not search"));
		CU_ASSERT_EQUAL_FATAL(chmod(p, 0700), 0);
		CU_ASSERT_EQUAL_FATAL(set_acl(p, ACL5(01, 65534, 0, 01, 0)), 0);
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL_FATAL(set_acl(p, ACL5(01, 65534, 0, 0, 0)), 0); /* masked */
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
		CU_ASSERT_EQUAL_FATAL(chown(p, 0, 65534), 0);
		CU_ASSERT_EQUAL_FATAL(set_acl(p, (const struct ace[]){ { 1, 7, ~0u }, { 4, 04, ~0u },
							       { 16, 05, ~0u }, { 32, 0, ~0u } },
					      4), 0);
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
		CU_ASSERT_EQUAL_FATAL(set_acl(p, (const struct ace[]){ { 1, 7, ~0u }, { 4, 05, ~0u },
							       { 16, 05, ~0u }, { 32, 0, ~0u } },
					      4), 0);
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), 0);
		/*
		 * A file whose ACL lets the jail's uid or gid write it: the
		 * uid could have changed it, as if it owned it; not when the
		 * mask takes the write away.
		 */
		CU_ASSERT_EQUAL_FATAL(set_acl(q, ACL5(06, 65534, 04, 06, 04)), 0);
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "an ACL lets the jail's uid write it"));
		CU_ASSERT_EQUAL_FATAL(set_acl(q, ACL5(06, 65534, 04, 04, 04)), 0);
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL_FATAL(set_acl(q, (const struct ace[]){ { 1, 6, ~0u }, { 4, 04, ~0u },
							       { 8, 06, 65534 }, { 16, 06, ~0u },
							       { 32, 04, ~0u } },
					      5), 0);
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "an ACL lets the jail's gid write it"));
		CU_ASSERT_EQUAL_FATAL(removexattr(q, "system.posix_acl_access"), 0);
		CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), 0);
	}

	/*
	 * A uid per jail (serve's range, --jail-foreign-ids): this jail is
	 * 100001; a file another jail of the range owns (uid 100005, or gid
	 * 100009) is refused as its own would be; one of a uid outside the
	 * range (100010) passes, as does the range's file without the option.
	 */
	put("jail5.img", "");
	put("jail9.img", "");
	put("outside.img", "");
	snprintf(p, sizeof(p), "%s/jail5.img", dir);
	CU_ASSERT_EQUAL_FATAL(chown(p, 100005, 0), 0);
	snprintf(q, sizeof(q), "%s/jail9.img", dir);
	CU_ASSERT_EQUAL_FATAL(chown(q, 0, 100009), 0);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	foreign_first = 100000;
	foreign_last = 100009;
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, p));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "only the snapshot names it and another jail's uid owns it"));
	CU_ASSERT_EQUAL(untrusted(q, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "another jail's gid owns it"));
	CU_ASSERT_EQUAL(untrusted(p, p, err, sizeof(err)), 0); /* named by --set */
	snprintf(p, sizeof(p), "%s/outside.img", dir);
	CU_ASSERT_EQUAL_FATAL(chown(p, 100010, 100010), 0);
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), 0);
	/* another jail's uid may write it by an ACL: refused as well */
	if (have_acls) {
		CU_ASSERT_EQUAL_FATAL(set_acl(p, ACL5(06, 100005, 04, 06, 04)), 0);
		CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "an ACL lets another jail's uid write it"));
		CU_ASSERT_EQUAL_FATAL(removexattr(p, "system.posix_acl_access"), 0);
	}
	snprintf(p, sizeof(p), "%s/jail5.img", dir);
	CU_ASSERT_EQUAL_FATAL(chown(p, 100001, 100001), 0); /* this jail's own */
	CU_ASSERT_EQUAL(untrusted(p, NULL, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "the jail's uid owns it"));
	foreign_first = foreign_last = 0;
}

static char split_stack[16 << 10] __attribute__((aligned(16)));

/* The parent's side of the split, on split_stack: libc is the child's now.
 * It waits for the child, then exits 0x5a if the child ended with 0 after
 * writing 4242 into the word @arg points to on the stack it took over. */
static __attribute__((noreturn, no_sanitize("address", "undefined"))) void split_parent(void *arg,
											 long pid)
{
	volatile long *cookie = arg;
	int status = -1;

	arch_raw_syscall(SYS_wait4, pid, (long)&status, __WALL, 0, 0, 0);
	for (;;)
		arch_raw_syscall(SYS_exit_group, status == 0 && *cookie == 4242 ? 0x5a : 1, 0, 0,
				 0, 0, 0);
}

static void test_split(void)
{
	int st = 0;
	pid_t p = fork();

	CU_ASSERT_FATAL(p >= 0);
	if (p == 0) {
		/* a process of its own, whose first thread leaves at the split */
		struct clone_args ca = { .flags = CLONE_VM, .exit_signal = SIGCHLD };
		volatile long cookie = 17, local = 99;
		long r = arch_clone_vm_split(&ca, sizeof(ca), split_stack + sizeof(split_stack),
					     split_parent, (void *)&cookie);

		if (r == -ENOSYS || r == -EINVAL)
			_exit(0x33);
		if (r != 0)
			_exit(2);
		/* the child, in this frame, on this stack: its locals as they were */
		if (local != 99 || cookie != 17)
			_exit(3);
		cookie = 4242;
		_exit(0);
	}
	CU_ASSERT_EQUAL_FATAL(waitpid(p, &st, 0), p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0x33) {
		printf("\n  skipped: clone3 refuses a CLONE_VM child without its own stack here (qemu-user?) ");
		return;
	}
	CU_ASSERT(WIFEXITED(st));
	CU_ASSERT_EQUAL(WEXITSTATUS(st), 0x5a);
}

/* Paths the plan names (trusted): resolved one component at a time; a
 * link is followed where neither the jail's uid nor anyone but root can
 * write its folder, refused where the jail's uid owns the folder or anyone
 * may write it; what is opened is what the link led to. With openat2 (a
 * path without links in one call) and without. */
static void test_trusted(void)
{
	static const struct { const char *rel, *says; int ret; } refused[] = {
		{ "tr-theirs/disk.img", "the symbolic link disk.img is in a folder the jail's uid owns it",
		  -EPERM },
		{ "tr-root/via", "the jail's uid owns it", -EPERM }, /* root's link to theirs */
		{ "tr-open/l", "anyone may write it", -EPERM },
		{ "tr-root/none", "", -ENOENT },
		{ "tr-root/loop", "Too many levels of symbolic links", -ELOOP },
	};
	struct jail_cfg jc = { .dir = jdir, .uid = 65534, .gid = 65534 };
	char p[400], q[400], file[400], err[1024] = "";
	struct stat st, want;
	int fd;

	if (geteuid() != 0) {
		printf("\n  # trusted paths: skipped (not root: cannot chown to 65534)\n");
		return;
	}
	put("tr-file", "host file");
	snprintf(file, sizeof(file), "%s/tr-file", dir);
	CU_ASSERT_EQUAL_FATAL(stat(file, &want), 0);
	/* root's folder: links (absolute, relative through .. and ., a loop) */
	snprintf(p, sizeof(p), "%s/tr-root", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
	snprintf(q, sizeof(q), "%s/tr-root/abs", dir);
	CU_ASSERT_EQUAL(symlink(file, q), 0);
	snprintf(q, sizeof(q), "%s/tr-root/rel", dir);
	CU_ASSERT_EQUAL(symlink("../tr-root/./abs", q), 0);
	snprintf(q, sizeof(q), "%s/tr-root/loop", dir);
	CU_ASSERT_EQUAL(symlink("loop", q), 0);
	/* the jail's uid's folder, with a link and a file; a folder anyone
	 * may write, with a link; root's link to the jail's uid's link */
	snprintf(p, sizeof(p), "%s/tr-theirs", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
	CU_ASSERT_EQUAL(chown(p, 65534, 65534), 0);
	snprintf(q, sizeof(q), "%s/tr-theirs/disk.img", dir);
	CU_ASSERT_EQUAL(symlink(file, q), 0);
	put("tr-theirs/own.img", "theirs");
	snprintf(q, sizeof(q), "%s/tr-root/via", dir);
	snprintf(p, sizeof(p), "%s/tr-theirs/disk.img", dir);
	CU_ASSERT_EQUAL(symlink(p, q), 0);
	snprintf(p, sizeof(p), "%s/tr-open", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
	CU_ASSERT_EQUAL(chmod(p, 01777), 0);
	snprintf(q, sizeof(q), "%s/tr-open/l", dir);
	CU_ASSERT_EQUAL(symlink(file, q), 0);
	for (int walk = 0; walk < 2; walk++) {
		jail_root_walk_only(walk);
		for (unsigned i = 0; i < 2; i++) {
			snprintf(q, sizeof(q), "%s/tr-root/%s", dir, i ? "rel" : "abs");
			fd = jail_open_trusted(&jc, q, &st, err, sizeof(err));
			CU_ASSERT(fd >= 0);
			CU_ASSERT(st.st_ino == want.st_ino && st.st_dev == want.st_dev);
			if (fd >= 0)
				close(fd);
		}
		for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
			snprintf(q, sizeof(q), "%s/%s", dir, refused[i].rel);
			err[0] = '\0';
			CU_ASSERT_EQUAL(jail_open_trusted(&jc, q, &st, err, sizeof(err)), refused[i].ret);
			CU_ASSERT_PTR_NOT_NULL(strstr(err, refused[i].says));
		}
		snprintf(q, sizeof(q), "%s/tr-theirs/own.img", dir);
		fd = jail_open_trusted(&jc, q, &st, err, sizeof(err));
		CU_ASSERT(fd >= 0 && S_ISREG(st.st_mode));
		if (fd >= 0)
			close(fd);
	}
	jail_root_walk_only(false);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "the VMM's split: the child goes on on the caller's stack, the caller on its own",
		  test_split },
		{ "paths taken lexically, never above the top", test_rel },
		{ "made and found with openat2; links refused", test_openat2 },
		{ "the same one component at a time (no openat2)", test_walk },
		{ "binds, read-only, proc, a link refused (root)", test_bind },
		{ "a restore's snapshot-only paths the jail's uid could have made or not reach (root)",
		  test_untrusted },
		{ "the plan's own paths: links followed only where the jail's uid cannot put one (root)",
		  test_trusted },
		{ NULL, NULL },
	};
	char cmd[400];
	int ret;

	/* 0711: the jails' uid (65534) may pass through it, as through /tmp,
	 * but not list it; test_untrusted makes a folder it may not pass */
	if (!mkdtemp(dir) || chmod(dir, 0711) < 0) {
		perror(dir);
		return 1;
	}
	snprintf(jdir, sizeof(jdir), "%s/jail", dir);
	snprintf(outside, sizeof(outside), "%s/outside", dir);
	if (mkdir(jdir, 0755) < 0 || mkdir(outside, 0755) < 0 ||
	    (root = open(jdir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		perror(jdir);
		return 1;
	}
	ret = cu_run("jail_root", tests);
	close(root);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return ret;
}
