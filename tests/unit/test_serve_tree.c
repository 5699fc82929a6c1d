/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of tools/serve/rmtree.c: rm_tree (a folder and all it holds,
 * by names relative to open folders: links removed, not followed, mounts
 * not entered), unix_connect_nofollow (a socket, not a link to one) and adopt_tree (a folder another uid wrote, a jailed
 * template build's snapshot, taken over: moved, then only folders and
 * files with one name, made root's and writable by root alone) and
 * take_copy (a flat folder a running VMM wrote, copied into new root files
 * of checked entries: a descriptor it kept writes only its old files).
 * Needs root (chown); skipped with a message otherwise.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cunit_main.h"
#include "rmtree.h"
#include "unixconn.h"

#define OWNER 65534

static char top[256];

static const char *tmp(const char *name)
{
	static char b[4][512];
	static unsigned i;

	i = (i + 1) % 4;
	snprintf(b[i], sizeof(b[i]), "%s/%s", top, name);
	return b[i];
}

/* A file of @text, owned by OWNER, mode @mode. */
static void put(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	CU_ASSERT_EQUAL(chown(path, OWNER, OWNER), 0);
	CU_ASSERT_EQUAL(chmod(path, mode), 0);
}

static void dir(const char *path, mode_t mode)
{
	CU_ASSERT_EQUAL(mkdir(path, mode), 0);
	CU_ASSERT_EQUAL(chown(path, OWNER, OWNER), 0);
	CU_ASSERT_EQUAL(chmod(path, mode), 0);
}

/* Folder @d (0777) holding "memory" of mode @mode, OWNER's: a snapshot as a jailed VMM leaves one. */
static void snap_dir(const char *d, mode_t mode)
{
	char p[600];

	dir(d, 0777);
	snprintf(p, sizeof(p), "%s/memory", d);
	put(p, "guest ram", mode);
}

/* A snapshot folder as a jailed VMM writes one: a file, a sub-folder. */
static void snapshot(const char *d)
{
	char p[600];

	snap_dir(d, 0666);
	snprintf(p, sizeof(p), "%s/disks", d);
	dir(p, 0700);
	snprintf(p, sizeof(p), "%s/disks/root.img", d);
	put(p, "disk", 0600);
}

static void owned_by_root(const char *p, mode_t want)
{
	struct stat st;

	CU_ASSERT_EQUAL_FATAL(lstat(p, &st), 0);
	CU_ASSERT_EQUAL(st.st_uid, 0);
	CU_ASSERT_EQUAL(st.st_gid, 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, want);
}

static void test_adopt(void)
{
	char msg[700];

	snapshot(tmp("j-snap"));
	CU_ASSERT_EQUAL(adopt_tree(tmp("j-snap"), tmp("snap"), msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(access(tmp("j-snap"), F_OK), -1);
	/* the read and execute bits stay; the write bits go but root's */
	owned_by_root(tmp("snap"), 0755);
	owned_by_root(tmp("snap/memory"), 0644);
	owned_by_root(tmp("snap/disks"), 0700);
	owned_by_root(tmp("snap/disks/root.img"), 0600);
	CU_ASSERT_EQUAL(rm_tree(tmp("snap")), 0);
	CU_ASSERT_EQUAL(access(tmp("snap"), F_OK), -1);
}

/* Leaves at @at what a guest that took its VMM over could ("symlink" to
 * tmp("outside"), a "hardlink" of it, a "fifo", a "socket", a "folder"):
 * true, or false for another @kind (the caller's own). */
static bool plant(const char *kind, const char *at)
{
	if (!strcmp(kind, "symlink")) {
		CU_ASSERT_EQUAL(symlink(tmp("outside"), at), 0);
	} else if (!strcmp(kind, "hardlink")) {
		CU_ASSERT_EQUAL(link(tmp("outside"), at), 0);
	} else if (!strcmp(kind, "fifo")) {
		CU_ASSERT_EQUAL(mkfifo(at, 0600), 0);
	} else if (!strcmp(kind, "socket")) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", at);
		CU_ASSERT_EQUAL(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		close(fd);
	} else if (!strcmp(kind, "folder")) {
		dir(at, 0755);
	} else {
		return false;
	}
	return true;
}

/* Each thing a guest that took its VMM over could leave: refused, named. */
static void test_adopt_refused(void)
{
	static const char *const kinds[] = { "symlink", "hardlink", "fifo", "socket", "toplink" };
	char msg[700], p[600];

	for (unsigned i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		const char *k = kinds[i], *bad = tmp("j-snap/disks/x");

		snapshot(tmp("j-snap"));
		put(tmp("outside"), "the host's", 0644);
		if (!plant(k, bad)) {
			/* the folder itself a link to one elsewhere */
			CU_ASSERT_EQUAL(rename(tmp("j-snap"), tmp("elsewhere")), 0);
			CU_ASSERT_EQUAL(symlink(tmp("elsewhere"), tmp("j-snap")), 0);
		}
		msg[0] = '\0';
		CU_ASSERT_EQUAL(adopt_tree(tmp("j-snap"), tmp("snap"), msg, sizeof(msg)), -1);
		if (!strcmp(k, "toplink")) {
			CU_ASSERT_PTR_NOT_NULL(strstr(msg, "j-snap: not a folder"));
			CU_ASSERT_EQUAL(access(tmp("snap"), F_OK), -1); /* not moved */
			CU_ASSERT_EQUAL(rm_tree(tmp("j-snap")), 0);
			/* the link went, not what it led to */
			CU_ASSERT_EQUAL(access(tmp("elsewhere/memory"), F_OK), 0);
			CU_ASSERT_EQUAL(rm_tree(tmp("elsewhere")), 0);
		} else {
			snprintf(p, sizeof(p), "%s: not a folder or a file with one name", tmp("snap/disks/x"));
			if (!strstr(msg, p))
				printf("\n  %s: %s\n", k, msg);
			CU_ASSERT_PTR_NOT_NULL(strstr(msg, p));
			CU_ASSERT_EQUAL(rm_tree(tmp("snap")), 0);
		}
		/* what the link led to is untouched: still OWNER's, as it was */
		{
			struct stat st;

			CU_ASSERT_EQUAL(lstat(tmp("outside"), &st), 0);
			CU_ASSERT_EQUAL(st.st_uid, OWNER);
			CU_ASSERT_EQUAL(st.st_mode & 07777, 0644);
		}
		CU_ASSERT_EQUAL(unlink(tmp("outside")), 0);
	}
	CU_ASSERT_EQUAL(adopt_tree(tmp("nothing"), tmp("snap"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "nothing: No such file"));
}

/* A fork's snapshot as a running jailed VMM leaves it: flat, OWNER's. */
static void flat(const char *d)
{
	char p[600];

	snap_dir(d, 0600);
	snprintf(p, sizeof(p), "%s/manifest.json", d);
	put(p, "{}", 0644);
}

static void read_is(const char *path, const char *want)
{
	char buf[64] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(read(fd, buf, sizeof(buf) - 1) >= 0);
	close(fd);
	CU_ASSERT_STRING_EQUAL(buf, want);
}

static void test_take_copy(void)
{
	char msg[700] = "";
	int kept;

	flat(tmp("j-fork"));
	/* the writer keeps a descriptor of what it wrote */
	kept = open(tmp("j-fork/memory"), O_RDWR | O_CLOEXEC);
	CU_ASSERT_FATAL(kept >= 0);
	CU_ASSERT_EQUAL(take_copy(tmp("j-fork"), tmp("fork"), msg, sizeof(msg)), 0);
	if (*msg)
		printf("\n  %s\n", msg);
	owned_by_root(tmp("fork"), 0755);
	owned_by_root(tmp("fork/manifest.json"), 0644);
	owned_by_root(tmp("fork/memory"), 0600);
	read_is(tmp("fork/memory"), "guest ram");
	/* what it writes later through that descriptor is not in the copy */
	CU_ASSERT_EQUAL(pwrite(kept, "forged", 6, 0), 6);
	{
		char back[16] = "";

		CU_ASSERT_EQUAL(pread(kept, back, sizeof(back) - 1, 0), 9);
		CU_ASSERT_STRING_EQUAL(back, "forgedram"); /* it did write */
	}
	close(kept);
	read_is(tmp("fork/memory"), "guest ram");
	/* each name taken is gone from the source (its room freed at once) */
	CU_ASSERT_EQUAL(access(tmp("j-fork/manifest.json"), F_OK), -1);
	CU_ASSERT_EQUAL(access(tmp("j-fork/memory"), F_OK), -1);
	CU_ASSERT_EQUAL(rm_tree(tmp("j-fork")), 0);
	CU_ASSERT_EQUAL(rm_tree(tmp("fork")), 0);
}

static void test_take_copy_refused(void)
{
	static const char *const kinds[] = { "symlink", "hardlink", "fifo", "folder", "toplink", "many" };
	char msg[700], p[700], bad[600];

	for (unsigned i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		const char *k = kinds[i];

		snprintf(bad, sizeof(bad), "%s", tmp("j-fork/x")); /* tmp's buffers are reused */

		flat(tmp("j-fork"));
		put(tmp("outside"), "the host's", 0644);
		if (plant(k, bad)) {
			/* (a fifo is opened without waiting on it) */
		} else if (!strcmp(k, "many")) {
			for (unsigned j = 0; j < 300; j++) {
				snprintf(p, sizeof(p), "%s/f%u", tmp("j-fork"), j);
				put(p, "", 0644);
			}
		} else {
			CU_ASSERT_EQUAL(rename(tmp("j-fork"), tmp("elsewhere")), 0);
			CU_ASSERT_EQUAL(symlink(tmp("elsewhere"), tmp("j-fork")), 0);
		}
		msg[0] = '\0';
		CU_ASSERT_EQUAL(take_copy(tmp("j-fork"), tmp("fork"), msg, sizeof(msg)), -1);
		if (!strcmp(k, "toplink"))
			snprintf(p, sizeof(p), "%s: not a folder", tmp("j-fork"));
		else if (!strcmp(k, "many"))
			snprintf(p, sizeof(p), "%s: more than 256 entries", tmp("j-fork"));
		else if (!strcmp(k, "symlink"))
			snprintf(p, sizeof(p), "%s: a symbolic link", bad);
		else
			snprintf(p, sizeof(p), "%s: not a file with one name", bad);
		if (!strstr(msg, p))
			printf("\n  %s: %s\n", k, msg);
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, p));
		/* nothing half-taken is left */
		CU_ASSERT_EQUAL(access(tmp("fork"), F_OK), -1);
		CU_ASSERT_EQUAL(rm_tree(tmp("j-fork")), 0);
		rm_tree(tmp("elsewhere"));
		read_is(tmp("outside"), "the host's");
		CU_ASSERT_EQUAL(unlink(tmp("outside")), 0);
	}
	CU_ASSERT_EQUAL(take_copy(tmp("nothing"), tmp("fork"), msg, sizeof(msg)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "nothing: No such file"));
}

/* rm_tree: links inside are removed, not followed; a link named is
 * removed itself; a mount inside is left (EXDEV) with the folders to it,
 * and the rest goes; a missing path is ENOENT. */
static void test_rm_tree(void)
{
	CU_ASSERT_EQUAL_FATAL(mkdir(tmp("kept"), 0755), 0);
	put(tmp("kept/file"), "the host's", 0644);
	dir(tmp("r"), 0777);
	dir(tmp("r/a"), 0777);
	dir(tmp("r/a/b"), 0700);
	put(tmp("r/a/b/f"), "x", 0600);
	put(tmp("r/f"), "x", 0600);
	CU_ASSERT_EQUAL(symlink(tmp("kept"), tmp("r/a/dirlink")), 0);
	CU_ASSERT_EQUAL(symlink(tmp("kept/file"), tmp("r/filelink")), 0);
	CU_ASSERT_EQUAL(rm_tree(tmp("r")), 0);
	CU_ASSERT_EQUAL(access(tmp("r"), F_OK), -1);
	read_is(tmp("kept/file"), "the host's");
	/* the path itself a link: the link goes */
	CU_ASSERT_EQUAL(symlink(tmp("kept"), tmp("l")), 0);
	CU_ASSERT_EQUAL(rm_tree(tmp("l/")), 0);
	CU_ASSERT_EQUAL(access(tmp("l"), F_OK), -1);
	read_is(tmp("kept/file"), "the host's");
	/* a mount inside is not entered */
	dir(tmp("m"), 0755);
	dir(tmp("m/mnt"), 0755);
	put(tmp("m/other"), "x", 0600);
	if (mount("tmpfs", tmp("m/mnt"), "tmpfs", 0, "size=64k") == 0) {
		put(tmp("m/mnt/in-mount"), "kept", 0600);
		errno = 0;
		CU_ASSERT_EQUAL(rm_tree(tmp("m")), -1);
		CU_ASSERT_EQUAL(errno, EXDEV);
		read_is(tmp("m/mnt/in-mount"), "kept");
		CU_ASSERT_EQUAL(access(tmp("m/other"), F_OK), -1);
		CU_ASSERT_EQUAL(umount(tmp("m/mnt")), 0);
	} else {
		printf("\n  (no tmpfs mount here: %s; the mount case is not checked)\n",
		       strerror(errno));
	}
	CU_ASSERT_EQUAL(rm_tree(tmp("m")), 0);
	CU_ASSERT_EQUAL(access(tmp("m"), F_OK), -1);
	errno = 0;
	CU_ASSERT_EQUAL(rm_tree(tmp("nothing")), -1);
	CU_ASSERT_EQUAL(errno, ENOENT);
	CU_ASSERT_EQUAL(rm_tree(tmp("kept")), 0);
}

/* unix_connect_nofollow (serve reaches a jailed VMM's sockets so): the
 * socket itself connects; a link to it, a file, nothing: refused. */
static void test_connect_nofollow(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), c;

	CU_ASSERT_FATAL(l >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", tmp("s.sock"));
	CU_ASSERT_EQUAL_FATAL(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	CU_ASSERT_EQUAL_FATAL(listen(l, 4), 0);
	c = unix_connect_nofollow(tmp("s.sock"));
	CU_ASSERT(c >= 0);
	if (c >= 0)
		close(c);
	CU_ASSERT_EQUAL(symlink(tmp("s.sock"), tmp("link.sock")), 0);
	errno = 0;
	CU_ASSERT_EQUAL(unix_connect_nofollow(tmp("link.sock")), -1);
	CU_ASSERT_EQUAL(errno, ELOOP);
	c = unix_connect(tmp("link.sock")); /* (the plain one follows it) */
	CU_ASSERT(c >= 0);
	if (c >= 0)
		close(c);
	put(tmp("file.sock"), "x", 0600);
	errno = 0;
	CU_ASSERT_EQUAL(unix_connect_nofollow(tmp("file.sock")), -1);
	CU_ASSERT_EQUAL(errno, ENOTSOCK);
	errno = 0;
	CU_ASSERT_EQUAL(unix_connect_nofollow(tmp("none.sock")), -1);
	CU_ASSERT_EQUAL(errno, ENOENT);
	close(l);
	unlink(tmp("s.sock"));
	unlink(tmp("link.sock"));
	unlink(tmp("file.sock"));
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "rm_tree: links removed, not followed; a mount inside left", test_rm_tree },
		{ "unix_connect_nofollow: the socket, not a link to it", test_connect_nofollow },
		{ "adopt_tree: a folder another uid wrote, made root's", test_adopt },
		{ "adopt_tree: links, fifos, sockets refused and named", test_adopt_refused },
		{ "take_copy: new root files, a kept descriptor writes only the old", test_take_copy },
		{ "take_copy: links, fifos, folders, too many refused and named", test_take_copy_refused },
		{ NULL, NULL },
	};
	const char *t = getenv("TMPDIR");
	int ret;

	if (geteuid() != 0) {
		printf("test_serve_tree: skipped: taking a folder over needs root (chown)\n");
		return 77;
	}
	snprintf(top, sizeof(top), "%s/cubicle-tree-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(top))
		return perror("mkdtemp"), 1;
	ret = cu_run("serve_tree", tests);
	rm_tree(top);
	return ret;
}
