/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the raw storage backend (its .so through the real loader) and
 * of the host side that opens backends from a device's config (storage.c). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "plan.h"
#include "cubicle/storage.h"
#include "cunit_main.h"
#include "devices.h"
#include "fake_host.h"
#include "loader.h"

static struct plugin *raw;
static struct fake_host fh;
static char dir[] = "/tmp/cubicle-test-raw-XXXXXX";

static const struct cub_storage_ops *ops(void)
{
	return raw->d->ops;
}

static void path_in_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void make_file(const char *path, off_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(ftruncate(fd, size), 0);
	close(fd);
}

/* Open raw with params kv (path given separately) through the fake host. */
static int raw_open_kv(const char *path, bool ro, const char *const *kv, void **priv,
		       void **cfgp)
{
	const char *all[16] = { 0 };
	unsigned n = 0;
	void *cfg;
	int err;

	if (path) {
		all[n++] = "path";
		all[n++] = path;
	}
	for (; kv && *kv; kv++)
		all[n++] = *kv;
	cfg = fake_cfg_new(raw->d, all);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cfg);
	fh.fail_msg[0] = '\0';
	err = ops()->open(fake_inst(&fh), &fh.ops, cfg, ro, priv);
	if (err)
		fake_cfg_free(raw->d, cfg);
	else
		*cfgp = cfg;
	return err;
}

static void raw_close(void *priv, void *cfg)
{
	ops()->close(priv);
	fake_cfg_free(raw->d, cfg);
}

static int64_t rw(void *priv, bool wr, uint64_t off, void *buf, size_t len)
{
	struct iovec v = { buf, len };

	return wr ? ops()->writev(priv, off, &v, 1) : ops()->readv(priv, off, &v, 1);
}

static uint64_t blocks(const char *path)
{
	struct stat st;

	CU_ASSERT_EQUAL(stat(path, &st), 0);
	return (uint64_t)st.st_blocks;
}

static bool all_byte(const uint8_t *p, size_t len, uint8_t b)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != b)
			return false;
	return true;
}

/* ---- the backend ---- */

static void test_descriptor(void)
{
	CU_ASSERT_STRING_EQUAL(raw->d->name, "raw");
	CU_ASSERT_EQUAL(raw->d->kind, CUB_KIND_STORAGE);
	CU_ASSERT_PTR_NOT_NULL(ops()->open);
	CU_ASSERT_PTR_NOT_NULL(ops()->discard);
	CU_ASSERT_PTR_NOT_NULL(ops()->write_zeroes);
	CU_ASSERT_PTR_NULL(ops()->submit); /* the device's workers run the blocking ops */
}

static void test_open_errors(void)
{
	char p[256];
	void *priv, *cfg;

	/* missing path: required by the param table, refused by open too */
	CU_ASSERT_EQUAL(raw_open_kv(NULL, false, NULL, &priv, &cfg), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "path"));
	path_in_dir(p, sizeof(p), "nope.img");
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &priv, &cfg), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, p));
	/* size not a multiple of 512 */
	path_in_dir(p, sizeof(p), "odd.img");
	make_file(p, 1000);
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &priv, &cfg), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "1000 bytes, not a multiple of 512"));
	CU_ASSERT_EQUAL(raw_open_kv(p, false, (const char *[]){ "size", "4000", NULL }, &priv,
				    &cfg), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "size = 4000 is not a multiple of 512"));
	/* empty */
	path_in_dir(p, sizeof(p), "empty.img");
	make_file(p, 0);
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &priv, &cfg), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "is empty"));
	/* never shrinks */
	path_in_dir(p, sizeof(p), "big.img");
	make_file(p, 1 << 20);
	CU_ASSERT_EQUAL(raw_open_kv(p, false, (const char *[]){ "size", "4096", NULL }, &priv,
				    &cfg), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "never shrinks"));
	/* not a file */
	CU_ASSERT_EQUAL(raw_open_kv(dir, true, NULL, &priv, &cfg), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "neither a regular file nor a block device"));
	/* a FIFO, read-only or not: refused at once, not waited on for a writer */
	path_in_dir(p, sizeof(p), "fifo.img");
	CU_ASSERT_EQUAL_FATAL(mkfifo(p, 0600), 0);
	CU_ASSERT_EQUAL(raw_open_kv(p, true, NULL, &priv, &cfg), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "neither a regular file nor a block device"));
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &priv, &cfg), -EINVAL);
	unlink(p);
}

static void test_size_creates_sparse(void)
{
	struct cub_storage_info info;
	char p[256];
	void *priv, *cfg;
	struct stat st;

	path_in_dir(p, sizeof(p), "new.img");
	unlink(p);
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, false, (const char *[]){ "size", "64M", NULL }, &priv,
					  &cfg), 0);
	ops()->info(priv, &info);
	CU_ASSERT_EQUAL(info.size, 64 << 20);
	CU_ASSERT_EQUAL(info.block_size, 512);
	CU_ASSERT(!info.read_only && info.can_discard && info.can_write_zeroes && info.can_flush);
	CU_ASSERT_EQUAL(stat(p, &st), 0);
	CU_ASSERT_EQUAL(st.st_size, 64 << 20);
	CU_ASSERT(st.st_blocks < 64); /* sparse */
	raw_close(priv, cfg);
	/* read-only and too small: cannot extend */
	path_in_dir(p, sizeof(p), "small.img");
	make_file(p, 4096);
	CU_ASSERT_EQUAL(raw_open_kv(p, true, (const char *[]){ "size", "8192", NULL }, &priv, &cfg),
			-EROFS);
}

static void test_read_write_flush(void)
{
	static uint8_t a[8192], b[4096], c[16384];
	struct iovec v[3] = { { a, 512 }, { b, 4096 }, { a + 512, 1024 } };
	char p[256];
	void *priv, *cfg;

	path_in_dir(p, sizeof(p), "rw.img");
	make_file(p, 1 << 20);
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, false, NULL, &priv, &cfg), 0);
	memset(a, 0x11, sizeof(a));
	memset(b, 0x22, sizeof(b));
	CU_ASSERT_EQUAL(ops()->writev(priv, 4096, v, 3), 512 + 4096 + 1024);
	CU_ASSERT_EQUAL(rw(priv, false, 4096, c, 512 + 4096 + 1024), 512 + 4096 + 1024);
	CU_ASSERT(all_byte(c, 512, 0x11));
	CU_ASSERT(all_byte(c + 512, 4096, 0x22));
	CU_ASSERT(all_byte(c + 4608, 1024, 0x11));
	CU_ASSERT_EQUAL(ops()->flush(priv), 0);
	/* the last sector, and past the end */
	CU_ASSERT_EQUAL(rw(priv, true, (1 << 20) - 512, a, 512), 512);
	CU_ASSERT_EQUAL(rw(priv, false, (1 << 20) - 512, c, 1024), -EINVAL);
	CU_ASSERT_EQUAL(rw(priv, false, UINT64_MAX - 511, c, 512), -EINVAL);
	CU_ASSERT_EQUAL(rw(priv, true, 1 << 20, a, 512), -EINVAL);
	/* zero-length and many iovecs (more than IOV_MAX) */
	CU_ASSERT_EQUAL(rw(priv, false, 0, c, 0), 0);
	{
		static struct iovec many[1500];

		for (int i = 0; i < 1500; i++) {
			many[i].iov_base = c + (i % 16) * 8;
			many[i].iov_len = 8;
		}
		CU_ASSERT_EQUAL(ops()->readv(priv, 0, many, 1500), 12000);
	}
	raw_close(priv, cfg);
}

static void test_discard_punches_hole(void)
{
	static uint8_t buf[1 << 20], back[4096];
	uint64_t before, after;
	char p[256];
	void *priv, *cfg;
	int fd;

	path_in_dir(p, sizeof(p), "hole.img");
	make_file(p, 2 << 20);
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, false, NULL, &priv, &cfg), 0);
	memset(buf, 0x5a, sizeof(buf));
	CU_ASSERT_EQUAL(rw(priv, true, 0, buf, sizeof(buf)), (int64_t)sizeof(buf));
	CU_ASSERT_EQUAL(ops()->flush(priv), 0);
	fd = open(p, O_RDONLY);
	fsync(fd);
	close(fd);
	before = blocks(p);
	CU_ASSERT(before >= 2048);
	CU_ASSERT_EQUAL(ops()->discard(priv, 0, 512 << 10), 0);
	after = blocks(p);
	CU_ASSERT(after <= before - 1000);
	CU_ASSERT_EQUAL(rw(priv, false, 4096, back, sizeof(back)), (int64_t)sizeof(back));
	CU_ASSERT(all_byte(back, sizeof(back), 0));
	CU_ASSERT_EQUAL(rw(priv, false, 600 << 10, back, sizeof(back)), (int64_t)sizeof(back));
	CU_ASSERT(all_byte(back, sizeof(back), 0x5a));
	CU_ASSERT_EQUAL(ops()->discard(priv, 2 << 20, 512), -EINVAL);
	CU_ASSERT_EQUAL(ops()->discard(priv, 0, 0), 0);

	/* write zeroes keeps blocks allocated, unless unmap */
	before = blocks(p);
	CU_ASSERT_EQUAL(ops()->write_zeroes(priv, 600 << 10, 64 << 10, false), 0);
	CU_ASSERT_EQUAL(rw(priv, false, 600 << 10, back, sizeof(back)), (int64_t)sizeof(back));
	CU_ASSERT(all_byte(back, sizeof(back), 0));
	CU_ASSERT(blocks(p) >= before - 8);
	CU_ASSERT_EQUAL(ops()->write_zeroes(priv, 700 << 10, 128 << 10, true), 0);
	CU_ASSERT(blocks(p) <= before - 200);
	CU_ASSERT_EQUAL(rw(priv, false, 700 << 10, back, sizeof(back)), (int64_t)sizeof(back));
	CU_ASSERT(all_byte(back, sizeof(back), 0));
	/* unaligned zeroing falls back gracefully */
	CU_ASSERT_EQUAL(ops()->write_zeroes(priv, 900 << 10, 3, false), 0);
	raw_close(priv, cfg);
}

static void test_read_only(void)
{
	static uint8_t buf[4096];
	struct cub_storage_info info;
	char p[256];
	void *priv, *cfg;

	path_in_dir(p, sizeof(p), "ro.img");
	make_file(p, 1 << 20);
	/* the device asks for read-only */
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, true, NULL, &priv, &cfg), 0);
	ops()->info(priv, &info);
	CU_ASSERT(info.read_only && !info.can_discard && !info.can_write_zeroes);
	CU_ASSERT_EQUAL(rw(priv, true, 0, buf, sizeof(buf)), -EROFS);
	CU_ASSERT_EQUAL(ops()->discard(priv, 0, 4096), -EROFS);
	CU_ASSERT_EQUAL(ops()->write_zeroes(priv, 0, 4096, false), -EROFS);
	CU_ASSERT_EQUAL(ops()->flush(priv), 0);
	CU_ASSERT_EQUAL(rw(priv, false, 0, buf, sizeof(buf)), (int64_t)sizeof(buf));
	raw_close(priv, cfg);
	/* the config asks for it; a file without write permission works read-only */
	chmod(p, 0444);
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, false, (const char *[]){ "read_only", "true", NULL },
					  &priv, &cfg), 0);
	CU_ASSERT_EQUAL(rw(priv, true, 0, buf, sizeof(buf)), -EROFS);
	raw_close(priv, cfg);
}

static void test_lock(void)
{
	char p[256];
	void *p1, *c1, *p2, *c2;

	path_in_dir(p, sizeof(p), "lock.img");
	make_file(p, 1 << 20);
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, false, NULL, &p1, &c1), 0);
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &p2, &c2), -EBUSY);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "in use by another VM"));
	CU_ASSERT_EQUAL(raw_open_kv(p, true, NULL, &p2, &c2), -EBUSY);
	raw_close(p1, c1);
	/* readers share */
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, true, NULL, &p1, &c1), 0);
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, true, NULL, &p2, &c2), 0);
	raw_close(p1, c1);
	raw_close(p2, c2);
}

static void test_direct(void)
{
	static uint8_t abuf[16384] __attribute__((aligned(4096)));
	static uint8_t ubuf[16384 + 1];
	struct cub_storage_info info;
	char p[256];
	void *priv, *cfg;
	int err;

	path_in_dir(p, sizeof(p), "direct.img");
	make_file(p, 1 << 20);
	err = raw_open_kv(p, false, (const char *[]){ "direct", "true", NULL }, &priv, &cfg);
	if (err == -EINVAL && strstr(fh.fail_msg, "direct")) {
		fprintf(stderr, "\n  (no O_DIRECT here: %s) ", fh.fail_msg);
		return;
	}
	CU_ASSERT_EQUAL_FATAL(err, 0);
	ops()->info(priv, &info);
	CU_ASSERT(info.block_size >= 512 && !(info.block_size & (info.block_size - 1)));
	/* aligned */
	memset(abuf, 0x33, sizeof(abuf));
	CU_ASSERT_EQUAL(rw(priv, true, 8192, abuf, 8192), 8192);
	memset(abuf, 0, sizeof(abuf));
	CU_ASSERT_EQUAL(rw(priv, false, 8192, abuf, 8192), 8192);
	CU_ASSERT(all_byte(abuf, 8192, 0x33));
	/* misaligned memory: bounced */
	memset(ubuf + 1, 0x44, 8192);
	CU_ASSERT_EQUAL(rw(priv, true, 16384, ubuf + 1, 8192), 8192);
	memset(ubuf, 0, sizeof(ubuf));
	CU_ASSERT_EQUAL(rw(priv, false, 16384, ubuf + 1, 8192), 8192);
	CU_ASSERT(all_byte(ubuf + 1, 8192, 0x44));
	/* misaligned offset and length: the buffered fallback, coherent with direct reads */
	memset(ubuf, 0x55, 100);
	CU_ASSERT_EQUAL(rw(priv, true, 16384 + 3, ubuf, 100), 100);
	CU_ASSERT_EQUAL(rw(priv, false, 16384, abuf, 4096), 4096);
	CU_ASSERT(all_byte(abuf, 3, 0x44));
	CU_ASSERT(all_byte(abuf + 3, 100, 0x55));
	CU_ASSERT(all_byte(abuf + 103, 4096 - 103, 0x44));
	CU_ASSERT_EQUAL(ops()->write_zeroes(priv, 16384, 4096, false), 0);
	CU_ASSERT_EQUAL(rw(priv, false, 16384, abuf, 4096), 4096);
	CU_ASSERT(all_byte(abuf, 4096, 0));
	raw_close(priv, cfg);
}

/* Threads bouncing at once: one holds the device's bounce buffer, the others
 * get mappings of their own; each thread's data comes back its own. */
struct bouncer {
	void *priv;
	unsigned id;
	int bad;
};

static void *bounce_thread(void *arg)
{
	struct bouncer *b = arg;
	uint8_t *mem = malloc(65536 + 1), *back = malloc(65536 + 1);

	for (unsigned round = 0; mem && back && round < 50; round++) {
		uint64_t off = (uint64_t)b->id << 20 | (uint64_t)(round % 8) << 16;

		memset(mem + 1, (int)(b->id * 16 + round % 16), 65536);
		if (rw(b->priv, true, off, mem + 1, 65536) != 65536 ||
		    rw(b->priv, false, off, back + 1, 65536) != 65536 ||
		    memcmp(mem + 1, back + 1, 65536))
			b->bad++;
	}
	if (!mem || !back)
		b->bad++;
	free(mem);
	free(back);
	return NULL;
}

static void test_direct_bounce_threads(void)
{
	struct bouncer b[4];
	pthread_t t[4];
	char p[256];
	void *priv, *cfg;
	int err;

	path_in_dir(p, sizeof(p), "bounce-threads.img");
	make_file(p, 4 << 20);
	err = raw_open_kv(p, false, (const char *[]){ "direct", "true", NULL }, &priv, &cfg);
	if (err == -EINVAL && strstr(fh.fail_msg, "direct")) {
		fprintf(stderr, "\n  (no O_DIRECT here: %s) ", fh.fail_msg);
		return;
	}
	CU_ASSERT_EQUAL_FATAL(err, 0);
	for (unsigned i = 0; i < 4; i++) {
		b[i] = (struct bouncer){ priv, i, 0 };
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, bounce_thread, &b[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT_EQUAL(b[i].bad, 0);
	}
	raw_close(priv, cfg);
}

/* A misaligned request larger than the bounce buffer (256 KiB) goes through
 * it chunk by chunk, segments straddling the chunk edges. */
static void test_direct_bounce_chunks(void)
{
	const size_t len = (5u << 20) / 2; /* 2.5 MiB */
	uint8_t *mem = malloc(len + 1), *back = malloc(len + 1);
	struct iovec iov[3];
	char p[256];
	void *priv, *cfg;
	int err;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
	CU_ASSERT_PTR_NOT_NULL_FATAL(back);
	path_in_dir(p, sizeof(p), "bounce.img");
	make_file(p, 4 << 20);
	err = raw_open_kv(p, false, (const char *[]){ "direct", "true", NULL }, &priv, &cfg);
	if (err == -EINVAL && strstr(fh.fail_msg, "direct")) {
		fprintf(stderr, "\n  (no O_DIRECT here: %s) ", fh.fail_msg);
		free(mem);
		free(back);
		return;
	}
	CU_ASSERT_EQUAL_FATAL(err, 0);
	for (size_t i = 0; i < len; i++)
		mem[1 + i] = (uint8_t)(i * 7 + (i >> 12));
	/* odd-sized, misaligned segments adding up to an aligned length */
	iov[0] = (struct iovec){ mem + 1, 1000001 };
	iov[1] = (struct iovec){ mem + 1 + 1000001, 777777 };
	iov[2] = (struct iovec){ mem + 1 + 1777778, len - 1777778 };
	CU_ASSERT_EQUAL(ops()->writev(priv, 65536, iov, 3), (int64_t)len);
	iov[0].iov_base = back + 1;
	iov[1].iov_base = back + 1 + 1000001;
	iov[2].iov_base = back + 1 + 1777778;
	memset(back, 0, len + 1);
	CU_ASSERT_EQUAL(ops()->readv(priv, 65536, iov, 3), (int64_t)len);
	CU_ASSERT(!memcmp(back + 1, mem + 1, len));
	raw_close(priv, cfg);
	free(mem);
	free(back);
}

/* ---- the host side: storage.c ---- */

/* The bytes of @path at @off. */
static uint8_t file_byte(const char *path, off_t off)
{
	uint8_t b = 0;
	int fd = open(path, O_RDONLY);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(pread(fd, &b, 1, off), 1);
	close(fd);
	return b;
}

/* Snapshot copies the disk as it is; rollback brings it back, through both
 * descriptors (buffered and O_DIRECT); the copy never changes. */
static void snap_rollback(bool direct)
{
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	char p[256], copy[256], small[256];
	void *priv, *cfg;
	int err;

	path_in_dir(p, sizeof(p), direct ? "srd.img" : "sr.img");
	path_in_dir(copy, sizeof(copy), direct ? "srd.copy" : "sr.copy");
	path_in_dir(small, sizeof(small), "sr.small");
	unlink(copy);
	make_file(p, 64 << 10);
	make_file(small, 32 << 10);
	err = raw_open_kv(p, false, (const char *[]){ "direct", direct ? "true" : "false", NULL },
			  &priv, &cfg);
	if (direct && err == -EINVAL && strstr(fh.fail_msg, "direct")) {
		fprintf(stderr, "\n  (no O_DIRECT here: %s) ", fh.fail_msg);
		return;
	}
	CU_ASSERT_EQUAL_FATAL(err, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ops()->snapshot);
	memset(buf, 'A', sizeof(buf));
	CU_ASSERT_EQUAL(rw(priv, true, 4096, buf, 4096), 4096);
	CU_ASSERT_EQUAL(ops()->snapshot(priv, copy), 0);
	CU_ASSERT_EQUAL(file_byte(copy, 4096), 'A');
	CU_ASSERT_EQUAL(file_byte(copy, 8191), 'A');
	/* never over an existing file */
	CU_ASSERT_EQUAL(ops()->snapshot(priv, copy), -EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "snapshot: "));
	memset(buf, 'B', sizeof(buf));
	CU_ASSERT_EQUAL(rw(priv, true, 4096, buf, 4096), 4096);
	CU_ASSERT_EQUAL(file_byte(copy, 4096), 'A');
	/* a copy of another size is refused, the disk unchanged */
	CU_ASSERT_EQUAL(ops()->rollback(priv, small), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "the disk's size"));
	CU_ASSERT_EQUAL(ops()->rollback(priv, "/nonexistent/copy"), -ENOENT);
	CU_ASSERT_EQUAL(rw(priv, false, 4096, buf, 4096), 4096);
	CU_ASSERT(all_byte(buf, 4096, 'B'));
	/* back to the copy, again and again: the same bytes, the copy as it was */
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(ops()->rollback(priv, copy), 0);
		memset(buf, 0, sizeof(buf));
		CU_ASSERT_EQUAL(rw(priv, false, 4096, buf, 4096), 4096);
		CU_ASSERT(all_byte(buf, 4096, 'A'));
		CU_ASSERT_EQUAL(file_byte(p, 4096), 'A'); /* the image file itself */
		memset(buf, 'C' + i, sizeof(buf));
		CU_ASSERT_EQUAL(rw(priv, true, 4096, buf, 4096), 4096);
		CU_ASSERT_EQUAL(file_byte(p, 4096), 'C' + i); /* writes reach the new file */
		CU_ASSERT_EQUAL(file_byte(copy, 4096), 'A');
	}
	CU_ASSERT_EQUAL(ops()->flush(priv), 0);
	raw_close(priv, cfg);
	/* closed, the new image opens again (its lock went with the close) */
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &priv, &cfg), 0);
	raw_close(priv, cfg);
	/* read-only: rollback refused */
	CU_ASSERT_EQUAL(raw_open_kv(p, true, NULL, &priv, &cfg), 0);
	CU_ASSERT_EQUAL(ops()->rollback(priv, copy), -EROFS);
	raw_close(priv, cfg);
}

static void test_snapshot_rollback(void)
{
	snap_rollback(false);
}

static void test_snapshot_rollback_direct(void)
{
	snap_rollback(true);
}

/* After a rollback the image holds the lock: another writer is refused. */
static void test_rollback_keeps_lock(void)
{
	char p[256], copy[256];
	void *priv, *cfg, *priv2, *cfg2;

	path_in_dir(p, sizeof(p), "lk.img");
	path_in_dir(copy, sizeof(copy), "lk.copy");
	make_file(p, 8192);
	unlink(copy);
	CU_ASSERT_EQUAL_FATAL(raw_open_kv(p, false, NULL, &priv, &cfg), 0);
	CU_ASSERT_EQUAL(ops()->snapshot(priv, copy), 0);
	CU_ASSERT_EQUAL(ops()->rollback(priv, copy), 0);
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &priv2, &cfg2), -EBUSY);
	raw_close(priv, cfg);
	CU_ASSERT_EQUAL(raw_open_kv(p, false, NULL, &priv2, &cfg2), 0);
	raw_close(priv2, cfg2);
}

static struct registry reg;
static struct plan plan;
static char err[1024];
static int plan_ret;

/* A device instance for devices[0] of this config text, planned as the
 * core plans it; NULL (plan_ret and err set) when the plan refuses it. */
static struct cub_inst *inst_for(const char *text, const char *type)
{
	static char cfgpath[300];
	struct cub_inst *in;

	(void)type;
	memset(&plan, 0, sizeof(plan));
	snprintf(cfgpath, sizeof(cfgpath), "%s/unit.cfg", dir);
	plan_ret = plan_devices_text(&plan, text, cfgpath, dir, &reg, err, sizeof(err));
	if (plan_ret) {
		plan_free(&plan);
		return NULL;
	}
	in = calloc(1, sizeof(*in));
	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	in->plugin = plan.devs[0].plugin;
	in->name = plan.devs[0].name;
	in->plan = &plan;
	in->pi = &plan.devs[0];
	return in;
}

static void inst_done(struct cub_inst *in)
{
	storage_close_all(in);
	free(in);
	plan_free(&plan);
}

/* The plan refuses the config, or (if it takes it) the backend's open fails:
 * either way with want and one message containing what. */
static void expect_open_err(const char *text, int want, const char *what)
{
	struct cub_inst *in = inst_for(text, "virtio-blk");
	struct cub_storage *s = (void *)1;
	const char *msg = err;

	if (in) {
		CU_ASSERT_EQUAL(devices_storage_host.open(in, "backend", false, &s), want);
		CU_ASSERT_PTR_NULL(s);
		CU_ASSERT(in->err_full);
		CU_ASSERT_PTR_NULL(in->storages);
		msg = in->err;
	} else {
		CU_ASSERT_EQUAL(plan_ret, want);
	}
	if (!strstr(msg, what))
		fprintf(stderr, "\n  got: %s\n  want: %s\n", msg, what);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, what));
	if (in)
		inst_done(in);
}

static void test_host_open(void)
{
	struct cub_inst *in;
	struct cub_storage *s, *first;
	char p[256];
	uint8_t buf[512];
	struct iovec v = { buf, sizeof(buf) };

	path_in_dir(p, sizeof(p), "host.img");
	make_file(p, 4 << 20);
	/* relative to the config file's folder */
	in = inst_for("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = {\n type = \"raw\";\n"
		      " path = \"host.img\"; read_only = true; }; } );", "virtio-blk");
	CU_ASSERT_EQUAL_FATAL(devices_storage_host.open(in, "backend", false, &s), 0);
	CU_ASSERT_STRING_EQUAL(s->name, "raw[disk0]");
	CU_ASSERT_EQUAL(s->info.size, 4 << 20);
	CU_ASSERT(s->info.read_only);
	CU_ASSERT_EQUAL(s->ops->readv(s->priv, 0, &v, 1), 512);
	CU_ASSERT_EQUAL(s->ops->writev(s->priv, 0, &v, 1), -EROFS);
	CU_ASSERT_EQUAL(backend_check_unused(in, err, sizeof(err)), 0);
	/* twice is refused; closed, it is gone; the device's ro wins below */
	first = s;
	CU_ASSERT_EQUAL(devices_storage_host.open(in, "backend", false, &s), -EBUSY);
	CU_ASSERT_PTR_NOT_NULL(strstr(in->err, "already open"));
	devices_storage_host.close(in, first);
	CU_ASSERT_PTR_NULL(in->storages);
	inst_done(in);

	in = inst_for("devices = ( { type = \"virtio-blk\"; id = \"disk0\"; backend = { type = \"raw\";"
		      " path = \"host.img\"; }; } );", "virtio-blk");
	CU_ASSERT_EQUAL_FATAL(devices_storage_host.open(in, "backend", true, &s), 0);
	CU_ASSERT(s->info.read_only);
	CU_ASSERT_EQUAL(s->ops->writev(s->priv, 0, &v, 1), -EROFS);
	inst_done(in); /* storage_close_all closes it */
}

static void test_host_errors(void)
{
	char p[256], text[512];

	path_in_dir(p, sizeof(p), "host.img");
	make_file(p, 4 << 20);
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\"; } );", -EINVAL,
			"unit.cfg:1: virtio-blk[disk0]: 'backend' is required");
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = \"raw\"; } );", -EINVAL,
			"unit.cfg:2: virtio-blk[disk0]: 'backend' must be a storage backend group");
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = { path = \"x\"; }; } );",
			-EINVAL, "unit.cfg:2: virtio-blk[disk0]: 'backend' needs type = ");
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = { type = \"qcow9\"; }; } );",
			-ENOENT, "unit.cfg:2: virtio-blk[disk0]: no storage plugin named 'qcow9'");
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = { type = \"raw\"; }; } );",
			-EINVAL, "unit.cfg:2: raw[disk0]: 'path' is required");
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = { type = \"raw\";\n"
			" path = \"host.img\";\n sise = 5; }; } );",
			-EINVAL, "unit.cfg:4: raw[disk0]: unknown parameter 'sise'; raw takes path, read_only, direct, size");
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = { type = \"raw\";\n"
			" path = \"host.img\";\n read_only = 1; }; } );",
			-EINVAL, "unit.cfg:4: raw[disk0]: 'read_only' must be true or false");
	expect_open_err("devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = { type = \"raw\";\n"
			" path = \"host.img\"; id = \"x\"; }; } );",
			-EINVAL, "raw[disk0]: a backend takes no 'id'");
	snprintf(text, sizeof(text), "devices = ( { type = \"virtio-blk\"; id = \"disk0\";\n backend = {\n"
		 " type = \"raw\"; path = \"nope.img\"; }; } );");
	expect_open_err(text, -ENOENT, "unit.cfg:2: raw[disk0]: cannot open ");
	expect_open_err(text, -ENOENT, "/nope.img: No such file");
}

/* A device that declares no backend gets none: the plan says so before
 * any plugin code runs. */
static void test_host_unused_backend(void)
{
	struct cub_inst *in;

	in = inst_for("devices = ( { type = \"virtio-rng\"; id = \"rng0\";\n backend = { type = \"raw\"; }; } );",
		      "virtio-rng");
	CU_ASSERT_PTR_NULL(in);
	CU_ASSERT_EQUAL(plan_ret, -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unit.cfg:2: virtio-rng[rng0]: unknown parameter 'backend'"));
	in = inst_for("devices = ( { type = \"virtio-rng\"; id = \"rng0\"; } );", "virtio-rng");
	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	CU_ASSERT_EQUAL(backend_check_unused(in, err, sizeof(err)), 0);
	inst_done(in);
}

/* Device params and the nested backend group are both filled by the plan. */
static void test_fill_cfg_backend_key(void)
{
	struct cub_inst *in = inst_for("devices = ( { type = \"virtio-blk\"; id = \"disk0\"; serial = \"abc\";\n"
				       " backend = { type = \"raw\"; path = \"x\"; }; } );",
				       "virtio-blk");

	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	CU_ASSERT_EQUAL(plan.devs[0].n_backends, 1);
	CU_ASSERT_STRING_EQUAL(*(const char *const *)plan.devs[0].cfg, "raw"); /* blk_cfg.backend */
	CU_ASSERT_PTR_NOT_NULL(strstr(*(const char *const *)plan.devs[0].backends[0].inst.cfg, "/x"));
	inst_done(in);
}

static int suite_init(void)
{
	char path[512], e[512];
	char *dirs[3] = { NULL, NULL, NULL };

	if (!mkdtemp(dir))
		return 1;
	fake_host_init(&fh);
	if (fake_plugin_path("raw", path, sizeof(path)) || loader_open(path, &raw, e, sizeof(e))) {
		fprintf(stderr, "cannot load raw: %s\n", e);
		return 1;
	}
	dirs[0] = CUB_BUILD_DIR "/plugins/storage/.libs";
	dirs[1] = CUB_BUILD_DIR "/plugins/devices/.libs";
	return registry_scan(&reg, dirs, NULL, NULL) ? 1 : 0;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "descriptor", test_descriptor },
		{ "open errors: path, size, type", test_open_errors },
		{ "size makes a sparse image", test_size_creates_sparse },
		{ "read, write, flush", test_read_write_flush },
		{ "discard punches a hole, write zeroes", test_discard_punches_hole },
		{ "read-only refuses writes", test_read_only },
		{ "one writer per image", test_lock },
		{ "O_DIRECT with bounce and fallback", test_direct },
		{ "O_DIRECT bounce in 256 KiB chunks", test_direct_bounce_chunks },
		{ "O_DIRECT bounce from 4 threads at once", test_direct_bounce_threads },
		{ "snapshot copies, rollback brings back", test_snapshot_rollback },
		{ "the same with O_DIRECT", test_snapshot_rollback_direct },
		{ "a rolled back image keeps its lock", test_rollback_keeps_lock },
		{ "host opens a backend from config", test_host_open },
		{ "host reports config errors with file:line", test_host_errors },
		{ "a backend the device never opened", test_host_unused_backend },
		{ "device params leave backend alone", test_fill_cfg_backend_key },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	if (suite_init())
		return 1;
	ret = cu_run("storage_raw", tests);
	loader_close(raw);
	registry_free(&reg);
	fake_host_fini(&fh);
	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", dir, dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
