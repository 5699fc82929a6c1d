/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the reflink storage backend (its .so through the real loader and the fake host), and a driver that calls its methods for the XFS test. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "plan.h"
#include "cubicle/storage.h"
#include "cunit_main.h"
#include "devices.h"
#include "fake_host.h"
#include "loader.h"

/*
 * FICLONE failures are faked by interposing ioctl(2): this executable
 * exports its ioctl (-Wl,--export-dynamic-symbol=ioctl), so the plugin's
 * calls land here first. fake_clone = 0 passes FICLONE to the kernel, > 0
 * fails it with that errno, FAKE_CLONE_EMULATE copies the file instead, as
 * a filesystem that can reflink would appear to.
 */
#define FAKE_CLONE_EMULATE (-1)
static int fake_clone;
static atomic_uint fake_clone_calls;

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (req == FICLONE && fake_clone) {
		int src = (int)(intptr_t)arg;
		struct stat st;
		loff_t in = 0, out = 0;

		atomic_fetch_add(&fake_clone_calls, 1);
		if (fake_clone > 0) {
			errno = fake_clone;
			return -1;
		}
		if (fstat(src, &st) < 0 || ftruncate(fd, st.st_size) < 0)
			return -1;
		while (in < st.st_size)
			if (copy_file_range(src, &in, fd, &out, (size_t)(st.st_size - in), 0) <= 0)
				return -1;
		return 0;
	}
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	return real(fd, req, arg);
}

static struct plugin *rl;
static struct fake_host fh;
static char dir[300];
static bool can_reflink; /* this folder's filesystem can (XFS runs of this suite) */
static const char *fs_name = "?";

#define MIB (1u << 20)

static const struct cub_storage_ops *ops(void)
{
	return rl->d->ops;
}

static char *in_dir(const char *name)
{
	static char bufs[8][512];
	static unsigned n;
	char *b = bufs[n++ % 8];

	snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
	return b;
}

/* A sparse image of size bytes with one MiB of byte b at 1 MiB. */
static void make_image(const char *path, off_t size, uint8_t b)
{
	static uint8_t buf[MIB];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(ftruncate(fd, size), 0);
	memset(buf, b, sizeof(buf));
	CU_ASSERT_EQUAL(pwrite(fd, buf, MIB, MIB), MIB);
	close(fd);
}

static bool same_file(const char *a, const char *b)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
	return system(cmd) == 0;
}

/* No "*.tmp-*" file was left in dir. */
static bool no_tmp_left(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool ok = true;

	while (d && (e = readdir(d)))
		if (strstr(e->d_name, ".tmp-"))
			ok = false;
	if (d)
		closedir(d);
	return ok;
}

static int open_kv(const char *const *kv, bool ro, void **priv, void **cfgp)
{
	void *cfg = fake_cfg_new(rl->d, kv);
	int err;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	fh.fail_msg[0] = '\0';
	err = ops()->open(fake_inst(&fh), &fh.ops, cfg, ro, priv);
	if (err)
		fake_cfg_free(rl->d, cfg);
	else
		*cfgp = cfg;
	return err;
}

static void close_kv(void *priv, void *cfg)
{
	ops()->close(priv);
	fake_cfg_free(rl->d, cfg);
}

static int64_t rw(void *priv, bool wr, uint64_t off, void *buf, size_t len)
{
	struct iovec v = { buf, len };

	return wr ? ops()->writev(priv, off, &v, 1) : ops()->readv(priv, off, &v, 1);
}

static bool all_byte(const uint8_t *p, size_t len, uint8_t b)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != b)
			return false;
	return true;
}

/* A method through the loader and libffi, as the control channel calls it. */
static int call(void *priv, const char *method, const char *arg, struct cub_reply *rep)
{
	char *args[1] = { (char *)arg };
	char err[256];

	memset(rep, 0, sizeof(*rep));
	return loader_call(rl, method, priv, rep, args, 1, err, sizeof(err));
}

static void expect_msg(const char *got, const char *want)
{
	if (!strstr(got, want))
		fprintf(stderr, "\n  got: %s\n  want: %s\n", got, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(got, want));
}

/* ---- tests ---- */

static void test_descriptor(void)
{
	CU_ASSERT_STRING_EQUAL(rl->d->name, "reflink");
	CU_ASSERT_EQUAL(rl->d->kind, CUB_KIND_STORAGE);
	CU_ASSERT(rl->d->abi_minor >= 2);
	CU_ASSERT_PTR_NOT_NULL(ops()->snapshot);
	CU_ASSERT_PTR_NOT_NULL(ops()->rollback);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fake_method_find(rl->d, "snapshot"));
	CU_ASSERT_STRING_EQUAL(fake_method_find(rl->d, "snapshot")->sig, "s");
	CU_ASSERT_STRING_EQUAL(fake_method_find(rl->d, "rollback")->sig, "s");
}

/* This machine's filesystem, no faking: ext4, overlay and tmpfs refuse
 * FICLONE (EOPNOTSUPP); XFS with reflink=1 clones. */
static void test_fallback_fail_here(void)
{
	const char *base = in_dir("golden.img"), *path = in_dir("vm-fail.img");
	void *priv, *cfg;
	int err;

	make_image(base, 8 * MIB, 0x42);
	unlink(path);
	err = open_kv((const char *[]){ "base", base, "path", path, NULL }, false, &priv, &cfg);
	if (can_reflink) {
		CU_ASSERT_EQUAL_FATAL(err, 0);
		CU_ASSERT(fake_log_has(&fh, "is a reflink clone of"));
		CU_ASSERT(same_file(base, path));
		close_kv(priv, cfg);
		return;
	}
	CU_ASSERT_EQUAL(err, -EOPNOTSUPP);
	expect_msg(fh.fail_msg, fs_name);
	expect_msg(fh.fail_msg, "FICLONE: Operation not supported");
	expect_msg(fh.fail_msg, "fallback = \"copy\"");
	CU_ASSERT(access(path, F_OK) && errno == ENOENT);
	CU_ASSERT(no_tmp_left());
}

static void test_fallback_copy_here(void)
{
	const char *base = in_dir("golden.img"), *path = in_dir("vm-copy.img");
	struct cub_storage_info info;
	struct stat sb, sp;
	uint8_t buf[4096];
	void *priv, *cfg;

	make_image(base, 8 * MIB, 0x42);
	unlink(path);
	fake_log_clear(&fh);
	CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", base, "path", path, "fallback",
						      "copy", NULL }, false, &priv, &cfg), 0);
	ops()->info(priv, &info);
	CU_ASSERT_EQUAL(info.size, 8 * MIB);
	CU_ASSERT(!info.read_only && info.can_flush && info.can_discard);
	CU_ASSERT(same_file(base, path));
	CU_ASSERT(fake_log_has(&fh, can_reflink ? "is a reflink clone of" : "copied "));
	if (!can_reflink)
		CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, fs_name), 1);
	/* the copy skipped the holes */
	CU_ASSERT(!stat(base, &sb) && !stat(path, &sp) && sp.st_blocks <= sb.st_blocks + 64);
	CU_ASSERT_EQUAL(rw(priv, false, MIB, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT(all_byte(buf, sizeof(buf), 0x42));
	/* writes stay in the clone */
	memset(buf, 0x77, sizeof(buf));
	CU_ASSERT_EQUAL(rw(priv, true, MIB, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT_EQUAL(ops()->flush(priv), 0);
	CU_ASSERT(!same_file(base, path));
	close_kv(priv, cfg);
	/* an existing disk is used as it is, and locked */
	CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", base, "path", path, NULL }, false,
				      &priv, &cfg), 0);
	CU_ASSERT_EQUAL(rw(priv, false, MIB, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT(all_byte(buf, sizeof(buf), 0x77));
	{
		void *p2, *c2;

		CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", base, "path", path, NULL }, false,
					&p2, &c2), -EBUSY);
		expect_msg(fh.fail_msg, "in use by another VM");
	}
	close_kv(priv, cfg);
}

static void test_open_errors(void)
{
	const char *base = in_dir("golden.img");
	void *priv, *cfg;

	make_image(base, 8 * MIB, 0x42);
	CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", in_dir("none.img"), "path",
						  in_dir("vm-none.img"), "fallback", "copy", NULL },
				false, &priv, &cfg), -ENOENT);
	expect_msg(fh.fail_msg, "none.img");
	CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", base, "path", base, NULL }, false, &priv,
				&cfg), -EINVAL);
	expect_msg(fh.fail_msg, "path and base are the same file");
	make_image(in_dir("odd.img"), 8 * MIB, 1);
	truncate(in_dir("odd.img"), 1000);
	CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", base, "path", in_dir("odd.img"), NULL },
				false, &priv, &cfg), -EINVAL);
	expect_msg(fh.fail_msg, "multiple of 512");
	CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", base, "path", dir, NULL }, true, &priv,
				&cfg), -EINVAL);
	expect_msg(fh.fail_msg, "not a regular file");
}

/* EOPNOTSUPP, EXDEV, EINVAL faked: "fail" refuses saying why, "copy" copies. */
static void test_faked_failures(void)
{
	static const struct {
		int err;
		const char *msg;
	} cases[] = {
		{ EOPNOTSUPP, "which " },
		{ EXDEV, "are on two filesystems" },
		{ EINVAL, "refused to clone" },
	};
	const char *base = in_dir("golden.img"), *path = in_dir("vm-faked.img");
	void *priv, *cfg;

	make_image(base, 8 * MIB, 0x42);
	for (unsigned i = 0; i < CUB_ARRAY_SIZE(cases); i++) {
		unlink(path);
		fake_clone = cases[i].err;
		fake_clone_calls = 0;
		CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", base, "path", path, NULL }, false,
					&priv, &cfg), -cases[i].err);
		CU_ASSERT_EQUAL(fake_clone_calls, 1); /* the interposer saw the plugin's FICLONE */
		expect_msg(fh.fail_msg, cases[i].msg);
		expect_msg(fh.fail_msg, strerror(cases[i].err));
		expect_msg(fh.fail_msg, fs_name);
		CU_ASSERT(access(path, F_OK) && no_tmp_left());
		fake_log_clear(&fh);
		CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", base, "path", path,
							      "fallback", "copy", NULL },
					      false, &priv, &cfg), 0);
		CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, cases[i].msg), 1);
		CU_ASSERT(same_file(base, path));
		close_kv(priv, cfg);
	}
	/* any other error is not a reason to copy */
	unlink(path);
	fake_clone = EIO;
	CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", base, "path", path, "fallback", "copy",
						  NULL }, false, &priv, &cfg), -EIO);
	expect_msg(fh.fail_msg, "cannot reflink");
	/* a filesystem that can: no copy, no warning */
	fake_clone = FAKE_CLONE_EMULATE;
	fake_log_clear(&fh);
	CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", base, "path", path, NULL }, false,
				      &priv, &cfg), 0);
	CU_ASSERT(fake_log_has(&fh, "is a reflink clone of"));
	CU_ASSERT_EQUAL(fake_log_count(&fh, CUB_LOG_WARN, ""), 0);
	CU_ASSERT(same_file(base, path));
	close_kv(priv, cfg);
	fake_clone = 0;
}

/* Across two real filesystems (tmpfs in /dev/shm and this folder's). */
static void test_real_exdev(void)
{
	char base[] = "/dev/shm/cubicle-reflink-XXXXXX";
	const char *path = in_dir("vm-exdev.img");
	struct statfs a, b;
	void *priv, *cfg;
	int fd = mkstemp(base);

	if (fd < 0 || fstatfs(fd, &a) || statfs(dir, &b) || a.f_type == b.f_type) {
		fprintf(stderr, "\n  (no second filesystem in /dev/shm) ");
		if (fd >= 0)
			unlink(base);
		return;
	}
	close(fd);
	make_image(base, 4 * MIB, 0x5a);
	unlink(path);
	CU_ASSERT_EQUAL(open_kv((const char *[]){ "base", base, "path", path, NULL }, false, &priv,
				&cfg), -EXDEV);
	expect_msg(fh.fail_msg, "two filesystems (tmpfs, ");
	CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", base, "path", path, "fallback",
						      "copy", NULL }, false, &priv, &cfg), 0);
	CU_ASSERT(same_file(base, path));
	close_kv(priv, cfg);
	unlink(base);
}

/* snapshot and rollback, through the methods (libffi) and the ops. */
static void test_snapshot_rollback(void)
{
	const char *base = in_dir("golden.img"), *path = in_dir("vm-snap.img");
	const char *snap = in_dir("snap1.img");
	struct cub_reply rep;
	uint8_t buf[4096];
	void *priv, *cfg;

	make_image(base, 8 * MIB, 0x42);
	unlink(path);
	unlink(snap);
	CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", base, "path", path, "fallback",
						      "copy", NULL }, false, &priv, &cfg), 0);
	memset(buf, 0xaa, sizeof(buf));
	CU_ASSERT_EQUAL(rw(priv, true, 3 * MIB, buf, sizeof(buf)), (int64_t)sizeof(buf));
	/* snapshot: the written data is in it (flushed first) */
	CU_ASSERT_EQUAL(call(priv, "snapshot", snap, &rep), 0);
	expect_msg(rep.text, can_reflink ? "reflink of" : "copied");
	CU_ASSERT(same_file(path, snap));
	CU_ASSERT_EQUAL(call(priv, "snapshot", snap, &rep), -EEXIST);
	expect_msg(rep.text, "already exists");
	CU_ASSERT_EQUAL(call(priv, "snapshot", "", &rep), -EINVAL);
	/* more writes, then back to the snapshot: the device sees it at once */
	memset(buf, 0xbb, sizeof(buf));
	CU_ASSERT_EQUAL(rw(priv, true, 3 * MIB, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT_EQUAL(call(priv, "rollback", snap, &rep), 0);
	CU_ASSERT_EQUAL(rw(priv, false, 3 * MIB, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT(all_byte(buf, sizeof(buf), 0xaa));
	CU_ASSERT(same_file(path, snap));
	/* "" is base; the file at path is base's bytes again */
	CU_ASSERT_EQUAL(ops()->rollback(priv, ""), 0);
	CU_ASSERT_EQUAL(rw(priv, false, 3 * MIB, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT(all_byte(buf, sizeof(buf), 0));
	CU_ASSERT(same_file(path, base));
	/* writes after a rollback reach the new file */
	memset(buf, 0xcc, sizeof(buf));
	CU_ASSERT_EQUAL(rw(priv, true, 0, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT_EQUAL(ops()->flush(priv), 0);
	CU_ASSERT(!same_file(path, base));
	/* refused: another size, a missing file */
	make_image(in_dir("small.img"), 4 * MIB, 1);
	CU_ASSERT_EQUAL(call(priv, "rollback", in_dir("small.img"), &rep), -EINVAL);
	expect_msg(rep.text, "cannot change size");
	CU_ASSERT_EQUAL(ops()->rollback(priv, in_dir("nope.img")), -ENOENT);
	expect_msg(fh.fail_msg, "nope.img");
	CU_ASSERT_EQUAL(ops()->snapshot(priv, snap), -EEXIST);
	CU_ASSERT(no_tmp_left());
	close_kv(priv, cfg);
	/* read-only: snapshots yes, rollback no */
	CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", base, "path", path, NULL }, true,
				      &priv, &cfg), 0);
	unlink(in_dir("snap2.img"));
	CU_ASSERT_EQUAL(ops()->snapshot(priv, in_dir("snap2.img")), can_reflink ? 0 : -EOPNOTSUPP);
	CU_ASSERT_EQUAL(ops()->rollback(priv, ""), -EROFS);
	CU_ASSERT_EQUAL(rw(priv, true, 0, buf, sizeof(buf)), -EROFS);
	close_kv(priv, cfg);
}

/* Readers never see an error or a torn block while rollbacks swap the file. */
struct reader {
	void *priv;
	atomic_bool *stop;
	unsigned reads, bad;
};

static void *reader_fn(void *arg)
{
	struct reader *rd = arg;
	static __thread uint8_t buf[65536];

	while (!atomic_load(rd->stop)) {
		int64_t n = rw(rd->priv, false, MIB, buf, sizeof(buf));

		rd->reads++;
		if (n != (int64_t)sizeof(buf) ||
		    !(all_byte(buf, sizeof(buf), 0x11) || all_byte(buf, sizeof(buf), 0x22)))
			rd->bad++;
	}
	return NULL;
}

static void test_rollback_under_io(void)
{
	const char *a = in_dir("a.img"), *b = in_dir("b.img"), *path = in_dir("vm-io.img");
	struct reader rd[3];
	pthread_t t[3];
	atomic_bool stop = false;
	void *priv, *cfg;
	unsigned rollbacks = 0, total = 0, bad = 0;

	make_image(a, 4 * MIB, 0x11);
	make_image(b, 4 * MIB, 0x22);
	unlink(path);
	CU_ASSERT_EQUAL_FATAL(open_kv((const char *[]){ "base", a, "path", path, "fallback",
						      "copy", NULL }, false, &priv, &cfg), 0);
	for (int i = 0; i < 3; i++) {
		rd[i] = (struct reader){ .priv = priv, .stop = &stop };
		pthread_create(&t[i], NULL, reader_fn, &rd[i]);
	}
	for (int i = 0; i < 40; i++)
		rollbacks += !ops()->rollback(priv, i % 2 ? a : b);
	atomic_store(&stop, true);
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		total += rd[i].reads;
		bad += rd[i].bad;
	}
	CU_ASSERT_EQUAL(rollbacks, 40);
	CU_ASSERT(total > 0);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(same_file(path, a)); /* the last one */
	close_kv(priv, cfg);
}

/* ---- the host side: storage.c exposes snapshot/rollback from 1.2 plugins only ---- */

static void test_host_abi_gate(void)
{
	static struct cub_plugin old_d;
	static struct plugin old;
	struct plugin *blk = NULL;
	struct plugin *list[3] = { rl, &old, NULL };
	struct registry reg = { .p = list, .n = 3 };
	struct plan plan = { 0 };
	struct cub_inst in = { .name = "virtio-blk[disk0]", .plan = &plan };
	struct cub_storage *s;
	char text[512], path[512], err[512];

	CU_ASSERT_EQUAL_FATAL(fake_plugin_path("virtio_blk", path, sizeof(path)), 0);
	CU_ASSERT_EQUAL_FATAL(loader_open(path, &blk, err, sizeof(err)), 0);
	list[2] = blk;
	make_image(in_dir("golden.img"), 8 * MIB, 0x42);
	unlink(in_dir("vm-host.img"));
	unlink(in_dir("vm-host2.img"));
	old_d = *rl->d;
	old_d.name = "reflink-1.1";
	old_d.abi_minor = 1;
	old = *rl;
	old.d = &old_d;
	/* relative base and path: from the config file's folder */
	snprintf(text, sizeof(text),
		 "devices = ( { type = \"virtio-blk\"; id = \"disk0\"; backend = { type = \"reflink\"; base = \"golden.img\";"
		 " path = \"vm-host.img\"; fallback = \"copy\"; }; },\n"
		 " { type = \"virtio-blk\"; id = \"disk1\"; backend = { type = \"reflink-1.1\"; base = \"golden.img\";"
		 " path = \"vm-host2.img\"; fallback = \"copy\"; }; } );");
	if (plan_devices_text(&plan, text, in_dir("unit.cfg"), dir, &reg, err, sizeof(err)))
		fprintf(stderr, "\n  %s\n", err);
	CU_ASSERT_EQUAL_FATAL(plan.n_devs, 2);
	in.pi = &plan.devs[0];
	CU_ASSERT_EQUAL_FATAL(devices_storage_host.open(&in, "backend", false, &s), 0);
	CU_ASSERT_STRING_EQUAL(s->name, "reflink[disk0]");
	CU_ASSERT_PTR_NOT_NULL(s->ops->snapshot);
	CU_ASSERT_PTR_NOT_NULL(s->ops->rollback);
	CU_ASSERT(same_file(in_dir("vm-host.img"), in_dir("golden.img")));
	CU_ASSERT_EQUAL(s->ops->rollback(s->priv, ""), 0);
	storage_close_all(&in);
	/* the same code, described as built for 1.1: its ops are cut there */
	in.pi = &plan.devs[1];
	CU_ASSERT_EQUAL_FATAL(devices_storage_host.open(&in, "backend", false, &s), 0);
	CU_ASSERT_PTR_NOT_NULL(s->ops->readv);
	CU_ASSERT_PTR_NOT_NULL(s->ops->write_zeroes);
	CU_ASSERT_PTR_NULL(s->ops->snapshot);
	CU_ASSERT_PTR_NULL(s->ops->rollback);
	storage_close_all(&in);
	plan_free(&plan);
	loader_close(blk);
}

/* ---- driver: `test_reflink call PATH BASE FALLBACK METHOD ARG` ---- */

static int driver(int argc, char **argv)
{
	struct cub_reply rep;
	void *priv, *cfg;
	int err;

	if (argc != 7) {
		fprintf(stderr, "usage: %s call PATH BASE fail|copy METHOD ARG\n", argv[0]);
		return 2;
	}
	cfg = fake_cfg_new(rl->d, (const char *[]){ "path", argv[2], "base", argv[3], "fallback",
						    argv[4], NULL });
	if (!cfg)
		return 2;
	err = ops()->open(fake_inst(&fh), &fh.ops, cfg, false, &priv);
	if (err) {
		fprintf(stderr, "open: %s\n", fh.fail_msg);
		return 1;
	}
	err = call(priv, argv[5], argv[6], &rep);
	printf("%s %s: %d: %s\n", argv[5], argv[6], err, rep.text);
	ops()->close(priv);
	fake_cfg_free(rl->d, cfg);
	return err ? 1 : 0;
}

/* Can this folder's filesystem reflink? Asked of the kernel, not the fake. */
static bool probe_reflink(void)
{
	const char *a = in_dir(".probe-a"), *b = in_dir(".probe-b");
	int fa = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644), fb = open(b, O_RDWR | O_CREAT, 0644);
	bool ok = fa >= 0 && fb >= 0 && write(fa, "x", 1) == 1 && !ioctl(fb, FICLONE, fa);

	close(fa);
	close(fb);
	unlink(a);
	unlink(b);
	return ok;
}

int main(int argc, char **argv)
{
	static const struct cu_test tests[] = {
		{ "descriptor: ABI 1.2 ops and methods", test_descriptor },
		{ "fallback = fail on this filesystem", test_fallback_fail_here },
		{ "fallback = copy on this filesystem", test_fallback_copy_here },
		{ "open errors", test_open_errors },
		{ "FICLONE failures faked", test_faked_failures },
		{ "EXDEV across two real filesystems", test_real_exdev },
		{ "snapshot and rollback (methods and ops)", test_snapshot_rollback },
		{ "rollback under concurrent reads", test_rollback_under_io },
		{ "host: snapshot/rollback only from ABI >= 1.2", test_host_abi_gate },
		{ NULL, NULL },
	};
	const char *top = getenv("CUBICLE_TEST_DIR");
	char path[512], e[512], cmd[700];
	static char fsbuf[64];
	struct statfs sf;
	int ret;

	fake_host_init(&fh);
	if (fake_plugin_path("reflink", path, sizeof(path)) ||
	    loader_open(path, &rl, e, sizeof(e))) {
		fprintf(stderr, "cannot load reflink: %s\n", e);
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "call")) {
		ret = driver(argc, argv);
		loader_close(rl);
		return ret;
	}
	snprintf(dir, sizeof(dir), "%s/cub-reflink-XXXXXX", top ? top : "/tmp");
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	can_reflink = probe_reflink();
	if (!statfs(dir, &sf)) {
		static const struct { unsigned long m; const char *n; } names[] = {
			{ 0x58465342, "xfs" }, { 0xef53, "ext4" }, { 0x01021994, "tmpfs" },
			{ 0x794c7630, "overlay" }, { 0x9123683e, "btrfs" },
		};

		snprintf(fsbuf, sizeof(fsbuf), "type 0x%lx", (unsigned long)sf.f_type);
		fs_name = fsbuf;
		for (unsigned i = 0; i < CUB_ARRAY_SIZE(names); i++)
			if ((unsigned long)sf.f_type == names[i].m)
				fs_name = names[i].n;
	}
	fprintf(stderr, "reflink tests in %s (%s, FICLONE %s)\n", dir, fs_name,
		can_reflink ? "works" : "refused");
	ret = cu_run("reflink", tests);
	loader_close(rl);
	fake_host_fini(&fh);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
