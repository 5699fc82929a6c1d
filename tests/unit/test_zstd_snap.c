/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the zstd-snap storage backend (its .so through the real loader, with the fake host): base reads, the delta, its map, crash safety, corrupt frames. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan.h"
#include "cubicle/storage.h"
#include "cunit_main.h"
#include "devices.h"
#include "fake_host.h"
#include "loader.h"
#include "zseek.h"

/* The disk: 5 x 64 KiB frames and a short one; its last 4 KiB block is 512 bytes. */
#define DISK (5 * 65536 + 8704)

static struct plugin *zs;
static struct fake_host fh;
static char dir[] = "/tmp/cubicle-test-zsnap-XXXXXX";
static uint8_t *image; /* the raw bytes every base holds */

static const struct cub_storage_ops *ops(void)
{
	return zs->d->ops;
}

static char *in_dir(const char *name)
{
	static char buf[4][300];
	static unsigned n;
	char *p = buf[n++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
	return p;
}

static uint8_t *pattern(size_t len, unsigned seed)
{
	uint8_t *p = malloc(len);
	uint32_t x = seed * 2654435761u + 7;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (i / 512) % 4 ? (uint8_t)(x >> 24) : (uint8_t)(i >> 9);
	}
	return p;
}

/* NAME: a seekable image of `image` with frames of fsz bytes. */
static void make_base(const char *name, uint32_t fsz, size_t len)
{
	struct zseek_wopts o = { .level = 1, .frame_size = fsz };
	struct zseek_wstats st;
	char why[256];
	int in, out;

	in = open(in_dir("raw.img"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	out = open(in_dir(name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT_FATAL(in >= 0 && out >= 0);
	CU_ASSERT_FATAL(write(in, image, len) == (ssize_t)len);
	CU_ASSERT_EQUAL_FATAL(zseek_write(in, out, &o, &st, why, sizeof(why)), 0);
	close(in);
	close(out);
}

static void rm_delta(const char *name)
{
	char p[320];

	unlink(in_dir(name));
	snprintf(p, sizeof(p), "%s.map", in_dir(name));
	unlink(p);
}

struct disk {
	void *priv, *cfg;
};

static int zopen(struct disk *d, const char *base, const char *delta, bool ro,
		 const char *const *kv)
{
	const char *all[16] = { 0 };
	unsigned n = 0;
	int err;

	if (base) {
		all[n++] = "base";
		all[n++] = in_dir(base);
	}
	if (delta) {
		all[n++] = "delta";
		all[n++] = in_dir(delta);
	}
	for (; kv && *kv; kv++)
		all[n++] = *kv;
	d->cfg = fake_cfg_new(zs->d, all);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d->cfg);
	fh.fail_msg[0] = '\0';
	err = ops()->open(fake_inst(&fh), &fh.ops, d->cfg, ro, &d->priv);
	if (err)
		fake_cfg_free(zs->d, d->cfg);
	return err;
}

static void zclose(struct disk *d)
{
	ops()->close(d->priv);
	fake_cfg_free(zs->d, d->cfg);
}

static int64_t rw(struct disk *d, bool wr, uint64_t off, void *buf, size_t len)
{
	struct iovec v = { buf, len };

	return wr ? ops()->writev(d->priv, off, &v, 1) : ops()->readv(d->priv, off, &v, 1);
}

/* The whole disk equals want. */
static bool disk_is(struct disk *d, const uint8_t *want)
{
	static uint8_t buf[DISK];

	memset(buf, 0xee, sizeof(buf));
	return rw(d, false, 0, buf, DISK) == DISK && !memcmp(buf, want, DISK);
}

static void test_descriptor(void)
{
	image = pattern(DISK, 5);
	make_base("base.zst", 65536, DISK);
	CU_ASSERT_STRING_EQUAL(zs->d->name, "zstd-snap");
	CU_ASSERT_EQUAL(zs->d->kind, CUB_KIND_STORAGE);
	CU_ASSERT_PTR_NULL(ops()->discard); /* see zstd_snap/zstd_snap.c: not offered */
	CU_ASSERT_PTR_NOT_NULL(ops()->flush);
}

static void test_open_errors(void)
{
	struct disk d;
	int fd;

	CU_ASSERT_EQUAL(zopen(&d, NULL, "d", false, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "base must name"));
	CU_ASSERT_EQUAL(zopen(&d, "nope.zst", "d", false, NULL), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "nope.zst"));
	CU_ASSERT_EQUAL(zopen(&d, "base.zst", NULL, false, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "delta must name"));
	CU_ASSERT_EQUAL(zopen(&d, "base.zst", "d", false,
			      (const char *[]){ "cache_frames", "0", NULL }), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "cache_frames = 0"));
	/* a raw file is no base */
	fd = open(in_dir("plain.img"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT(fd >= 0 && !ftruncate(fd, 65536));
	close(fd);
	CU_ASSERT_EQUAL(zopen(&d, "plain.img", "d", false, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "not a zstd seekable file"));
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "cubicle disk compress"));
	/* 1000 bytes: not whole sectors */
	make_base("odd.zst", 65536, 1000);
	CU_ASSERT_EQUAL(zopen(&d, "odd.zst", "d", false, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "not a whole number of 512-byte sectors"));
	/* read-only does not create a delta */
	rm_delta("d");
	CU_ASSERT_EQUAL(zopen(&d, "base.zst", "d", true, NULL), -ENOENT);
	CU_ASSERT_EQUAL(access(in_dir("d"), F_OK), -1);
	/* FIFOs as base, delta or map: refused at once, not waited on */
	CU_ASSERT_EQUAL_FATAL(mkfifo(in_dir("fifo.zst"), 0600), 0);
	CU_ASSERT_EQUAL(zopen(&d, "fifo.zst", "d", true, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "neither a regular file nor a block device"));
	CU_ASSERT_EQUAL(zopen(&d, "base.zst", "fifo.zst", true, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "delta"));
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "not a regular file"));
	unlink(in_dir("fifo.zst"));
}

static void test_read_base(void)
{
	static uint8_t buf[DISK];
	struct cub_storage_info info;
	struct disk d;

	/* read-only without a delta: the base alone */
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "base.zst", NULL, true, NULL), 0);
	ops()->info(d.priv, &info);
	CU_ASSERT_EQUAL(info.size, DISK);
	CU_ASSERT_EQUAL(info.block_size, 512);
	CU_ASSERT(info.read_only && !info.can_discard && !info.can_write_zeroes && info.can_flush);
	CU_ASSERT(disk_is(&d, image));
	/* across a frame boundary, split over iovecs of odd sizes */
	{
		struct iovec v[3] = { { buf, 100 }, { buf + 100, 7000 }, { buf + 7100, 1092 } };

		CU_ASSERT_EQUAL(ops()->readv(d.priv, 65536 - 4096, v, 3), 8192);
		CU_ASSERT(!memcmp(buf, image + 65536 - 4096, 8192));
	}
	CU_ASSERT_EQUAL(rw(&d, false, DISK - 512, buf, 512), 512);
	CU_ASSERT(!memcmp(buf, image + DISK - 512, 512));
	CU_ASSERT_EQUAL(rw(&d, false, DISK - 512, buf, 1024), -EINVAL);
	CU_ASSERT_EQUAL(rw(&d, false, UINT64_MAX - 511, buf, 512), -EINVAL);
	CU_ASSERT_EQUAL(rw(&d, true, 0, buf, 512), -EROFS);
	CU_ASSERT_EQUAL(ops()->flush(d.priv), 0);
	CU_ASSERT_EQUAL(rw(&d, false, 0, buf, 0), 0);
	zclose(&d);
}

/* Random reads and writes against a model, on a base with frames of fsz. */
static void model_run(const char *base, uint32_t fsz, unsigned seed)
{
	static uint8_t model[DISK], buf[3 * 4096 + 1024];
	unsigned r = seed;
	struct stat st;
	struct disk d;

	make_base(base, fsz, DISK);
	rm_delta("m");
	CU_ASSERT_EQUAL_FATAL(zopen(&d, base, "m", false, (const char *[]){ "cache_frames", "2", NULL }), 0);
	CU_ASSERT_EQUAL(stat(in_dir("m"), &st), 0);
	CU_ASSERT_EQUAL(st.st_size, DISK);
	memcpy(model, image, DISK);
	for (int i = 0; i < 400; i++) {
		uint64_t off, len;
		struct iovec v[3];
		size_t a, b;

		r = r * 1103515245u + 12345u;
		len = 512 * (1 + (r >> 8) % 24);
		off = 512 * ((r >> 16) % (DISK / 512));
		if (off + len > DISK)
			off = DISK - len;
		a = (r >> 3) % (len + 1);
		b = a + (len - a) / 2;
		v[0] = (struct iovec){ buf, a };
		v[1] = (struct iovec){ buf + a, b - a };
		v[2] = (struct iovec){ buf + b, len - b };
		if (r & 1) {
			for (size_t k = 0; k < len; k++)
				buf[k] = (uint8_t)(i * 7 + k);
			CU_ASSERT_EQUAL(ops()->writev(d.priv, off, v, 3), (int64_t)len);
			memcpy(model + off, buf, len);
		} else {
			CU_ASSERT_EQUAL(ops()->readv(d.priv, off, v, 3), (int64_t)len);
			CU_ASSERT(!memcmp(buf, model + off, len));
		}
	}
	CU_ASSERT(disk_is(&d, model));
	CU_ASSERT_EQUAL(ops()->flush(d.priv), 0);
	zclose(&d);
	/* reopened, the delta is still there; the base is untouched */
	CU_ASSERT_EQUAL_FATAL(zopen(&d, base, "m", false, NULL), 0);
	CU_ASSERT(disk_is(&d, model));
	zclose(&d);
	CU_ASSERT_EQUAL_FATAL(zopen(&d, base, NULL, true, NULL), 0);
	CU_ASSERT(disk_is(&d, image));
	zclose(&d);
	/* read-only over the delta sees it */
	CU_ASSERT_EQUAL_FATAL(zopen(&d, base, "m", true, NULL), 0);
	CU_ASSERT(disk_is(&d, model));
	CU_ASSERT_EQUAL(rw(&d, true, 0, buf, 512), -EROFS);
	zclose(&d);
}

static void test_model_aligned_frames(void)
{
	model_run("base.zst", 65536, 1);
}

/* Frames of 6000 bytes: 4 KiB blocks straddle frames, partial writes read two. */
static void test_model_straddling_frames(void)
{
	model_run("odd-frames.zst", 6000, 2);
}

static void test_delta_sparse_and_map(void)
{
	static uint8_t buf[8192];
	struct stat st, ms;
	struct disk d;
	char map[320];

	rm_delta("s");
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "base.zst", "s", false, NULL), 0);
	memset(buf, 0xab, sizeof(buf));
	CU_ASSERT_EQUAL(rw(&d, true, 40960 + 512, buf, 512), 512); /* one partial block */
	CU_ASSERT_EQUAL(ops()->flush(d.priv), 0);
	CU_ASSERT_EQUAL(stat(in_dir("s"), &st), 0);
	CU_ASSERT(st.st_blocks <= 16); /* 4 KiB of data, maybe some metadata */
	snprintf(map, sizeof(map), "%s.map", in_dir("s"));
	CU_ASSERT_EQUAL(stat(map, &ms), 0);
	CU_ASSERT_EQUAL(ms.st_size, ZMAP_HDR + 4096);
	/* the rest of the partially written block came from the base */
	CU_ASSERT_EQUAL(rw(&d, false, 40960, buf, 4096), 4096);
	CU_ASSERT(!memcmp(buf, image + 40960, 512));
	CU_ASSERT(buf[512] == 0xab && buf[1023] == 0xab);
	CU_ASSERT(!memcmp(buf + 1024, image + 40960 + 1024, 3072));
	/* one writer per delta */
	{
		struct disk d2;

		CU_ASSERT_EQUAL(zopen(&d2, "base.zst", "s", false, NULL), -EBUSY);
		CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "in use by another VM"));
	}
	zclose(&d);
	{
		int fd = open(map, O_RDONLY);
		uint8_t byte = 0;

		CU_ASSERT(pread(fd, &byte, 1, ZMAP_HDR + 1) == 1);
		CU_ASSERT_EQUAL(byte, 1 << 2); /* block 10 */
		close(fd);
	}
}

static void test_delta_recovery_rules(void)
{
	char map[320], cmd[700];
	struct disk d;
	uint8_t b[512] = { 1 };

	snprintf(map, sizeof(map), "%s.map", in_dir("r"));
	/* a delta with data and no map: refused */
	rm_delta("r");
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "base.zst", "r", false, NULL), 0);
	CU_ASSERT_EQUAL(rw(&d, true, 0, b, 512), 512);
	CU_ASSERT_EQUAL(ops()->flush(d.priv), 0);
	zclose(&d);
	snprintf(cmd, sizeof(cmd), "mv %s %s.saved", map, map);
	CU_ASSERT_EQUAL(system(cmd), 0);
	CU_ASSERT_EQUAL(zopen(&d, "base.zst", "r", false, NULL), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "has no map"));
	/* a map with bits and no delta: refused */
	snprintf(cmd, sizeof(cmd), "mv %s.saved %s && rm %s", map, map, in_dir("r"));
	CU_ASSERT_EQUAL(system(cmd), 0);
	CU_ASSERT_EQUAL(zopen(&d, "base.zst", "r", false, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "which is missing"));
	/* a map made over another base: refused */
	rm_delta("r");
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "odd-frames.zst", "r", false, NULL), 0);
	zclose(&d);
	CU_ASSERT_EQUAL(zopen(&d, "base.zst", "r", false, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "different base"));
	/* creation interrupted after the map (no bits) or after an empty delta: completed */
	unlink(in_dir("r"));
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "odd-frames.zst", "r", false, NULL), 0);
	zclose(&d);
	unlink(map);
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "odd-frames.zst", "r", false, NULL), 0);
	zclose(&d);
	/* a corrupt map header */
	{
		int fd = open(map, O_WRONLY);

		CU_ASSERT(pwrite(fd, "X", 1, 0) == 1);
		close(fd);
	}
	CU_ASSERT_EQUAL(zopen(&d, "odd-frames.zst", "r", false, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "not a zstd-snap map"));
}

/*
 * A child writes A and flushes, tells us, writes B without a flush, and is
 * killed with SIGKILL. Reopened: every A block is there; every B block is
 * either B or the base (never anything else).
 */
static void test_crash_safety(void)
{
	static uint8_t buf[DISK];
	int pfd[2], status;
	struct disk d;
	pid_t pid;
	char c;

	rm_delta("crash");
	CU_ASSERT_EQUAL_FATAL(pipe(pfd), 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (!pid) {
		uint8_t blk[4096];

		close(pfd[0]);
		if (zopen(&d, "base.zst", "crash", false, NULL))
			_exit(2);
		for (int i = 0; i < 30; i++) {
			memset(blk, 'A' + i % 26, sizeof(blk));
			if (rw(&d, true, (uint64_t)i * 8192, blk, 4096) != 4096)
				_exit(3);
		}
		memset(blk, 'p', 512);
		if (rw(&d, true, 70 * 4096 + 1024, blk, 512) != 512 || ops()->flush(d.priv))
			_exit(4);
		if (write(pfd[1], "f", 1) != 1)
			_exit(5);
		for (;;) {
			memset(blk, 'B', sizeof(blk));
			for (int i = 0; i < 30; i++)
				if (rw(&d, true, (uint64_t)i * 8192 + 4096, blk, 4096) != 4096)
					_exit(6);
		}
	}
	close(pfd[1]);
	CU_ASSERT_EQUAL(read(pfd[0], &c, 1), 1);
	usleep(20000);
	kill(pid, SIGKILL);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(pfd[0]);

	CU_ASSERT_EQUAL_FATAL(zopen(&d, "base.zst", "crash", false, NULL), 0);
	CU_ASSERT_EQUAL(rw(&d, false, 0, buf, DISK), DISK);
	for (int i = 0; i < 30; i++) {
		const uint8_t *a = buf + i * 8192, *b = a + 4096;
		bool a_ok = true, b_ok = true, b_base = !memcmp(b, image + i * 8192 + 4096, 4096);

		for (int k = 0; k < 4096; k++) {
			a_ok &= a[k] == 'A' + i % 26;
			b_ok &= b[k] == 'B';
		}
		CU_ASSERT(a_ok);
		CU_ASSERT(b_ok || b_base);
	}
	CU_ASSERT(!memcmp(buf + 70 * 4096, image + 70 * 4096, 1024));
	CU_ASSERT(buf[70 * 4096 + 1024] == 'p' && buf[70 * 4096 + 1535] == 'p');
	CU_ASSERT(!memcmp(buf + 70 * 4096 + 1536, image + 70 * 4096 + 1536, 2560));
	zclose(&d);
}

/* Frame 2 of a copy of the base is corrupt: only its blocks fail. */
static void test_corrupt_frame(void)
{
	static uint8_t buf[65536];
	char cmd[700];
	struct zseek z;
	struct disk d;
	int fd;

	snprintf(cmd, sizeof(cmd), "cp %s %s", in_dir("base.zst"), in_dir("corrupt.zst"));
	CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
	fd = open(in_dir("corrupt.zst"), O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(zseek_open(&z, fd, (char[256]){ 0 }, 256), 0);
	CU_ASSERT(pwrite(fd, "\xde\xad\xbe\xef\xde\xad\xbe\xef", 8,
			 (off_t)(z.f[2].coff + z.f[2].csize / 2)) == 8);
	zseek_close(&z);
	close(fd);

	rm_delta("c");
	fake_log_clear(&fh);
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "corrupt.zst", "c", false, NULL), 0);
	CU_ASSERT_EQUAL(rw(&d, false, 2 * 65536, buf, 4096), -EIO);
	CU_ASSERT_EQUAL(rw(&d, false, 2 * 65536 + 60000, buf, 4096), -EIO);
	CU_ASSERT_EQUAL(rw(&d, false, 65536, buf, 65536 + 512), -EIO); /* touches it */
	CU_ASSERT(fake_log_count(&fh, CUB_LOG_ERR, "frame 2 at offset") > 0);
	CU_ASSERT(fake_log_has(&fh, "disk bytes 131072..196608"));
	CU_ASSERT(fake_log_has(&fh, "corrupt.zst"));
	/* neighbours read */
	CU_ASSERT_EQUAL(rw(&d, false, 65536, buf, 65536), 65536);
	CU_ASSERT(!memcmp(buf, image + 65536, 65536));
	CU_ASSERT_EQUAL(rw(&d, false, 3 * 65536, buf, 65536), 65536);
	CU_ASSERT(!memcmp(buf, image + 3 * 65536, 65536));
	/* a partial write there needs the base: fails; a whole block does not */
	CU_ASSERT_EQUAL(rw(&d, true, 2 * 65536 + 512, buf, 512), -EIO);
	memset(buf, 0x77, 4096);
	CU_ASSERT_EQUAL(rw(&d, true, 2 * 65536, buf, 4096), 4096);
	memset(buf, 0, 4096);
	CU_ASSERT_EQUAL(rw(&d, false, 2 * 65536, buf, 4096), 4096);
	CU_ASSERT(buf[0] == 0x77 && buf[4095] == 0x77);
	zclose(&d);
	/* the rate-limited channel carried it */
	pthread_mutex_lock(&fh.lock);
	{
		bool rl = false;

		for (unsigned i = 0; i < fh.n_logs && i < FAKE_MAX_LOGS; i++)
			rl |= fh.logs[i].ratelimited && strstr(fh.logs[i].msg, "frame 2");
		CU_ASSERT(rl);
	}
	pthread_mutex_unlock(&fh.lock);
}

/* Threads write different sectors of the same fresh blocks, and read through a one-frame cache. */
struct worker {
	struct disk *d;
	int id;
	bool ok;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	uint8_t sec[512], back[512];

	w->ok = true;
	memset(sec, 0x10 + w->id, sizeof(sec));
	for (int blk = 0; blk < 64; blk++) {
		uint64_t off = (uint64_t)blk * 4096 + (uint64_t)w->id * 512;

		w->ok &= rw(w->d, true, off, sec, 512) == 512;
		/* and a base read elsewhere, evicting the cache */
		w->ok &= rw(w->d, false, (uint64_t)(blk * 7919 % 60) * 4096 + 65536, back,
			    512) == 512;
	}
	return NULL;
}

static void test_concurrent_partial_writes(void)
{
	static uint8_t buf[64 * 4096];
	struct worker w[8];
	pthread_t t[8];
	struct disk d;

	/* Rounds on fresh deltas: a lost sector shows up in most runs of a few. */
	for (int round = 0; round < 10; round++) {
		bool all = true;

		rm_delta("t");
		CU_ASSERT_EQUAL_FATAL(zopen(&d, "base.zst", "t", false,
					    (const char *[]){ "cache_frames", "1", NULL }), 0);
		for (int i = 0; i < 8; i++) {
			w[i] = (struct worker){ &d, i, false };
			CU_ASSERT_EQUAL(pthread_create(&t[i], NULL, worker, &w[i]), 0);
		}
		for (int i = 0; i < 8; i++) {
			pthread_join(t[i], NULL);
			CU_ASSERT(w[i].ok);
		}
		CU_ASSERT_EQUAL(rw(&d, false, 0, buf, sizeof(buf)), (int64_t)sizeof(buf));
		for (int i = 0; i < 64 * 8; i++)
			for (int k = 0; k < 512; k++)
				all &= buf[i * 512 + k] == 0x10 + i % 8;
		CU_ASSERT(all);
		zclose(&d);
	}
}

/* ---- the host side: relative base and delta paths ---- */

/* ---- read-ahead: a base of 16 KiB frames (21 of them) ---- */

#define RA_F 16384u

static bool ra_logged(unsigned frame, unsigned wait_ms)
{
	char what[40];

	snprintf(what, sizeof(what), "frame %u at offset", frame);
	for (unsigned t = 0;; t += 10) {
		if (fake_log_count(&fh, CUB_LOG_ERR, what))
			return true;
		if (t >= wait_ms)
			return false;
		usleep(10000);
	}
}

/* Frames [a, b] read one after another, RA_F bytes at a time: each equals the image. */
static bool ra_read(struct disk *d, unsigned a, unsigned b)
{
	static uint8_t buf[RA_F];
	bool ok = true;

	for (unsigned f = a; f <= b; f++) {
		size_t n = (uint64_t)(f + 1) * RA_F <= DISK ? RA_F : DISK - (size_t)f * RA_F;

		ok &= rw(d, false, (uint64_t)f * RA_F, buf, n) == (int64_t)n &&
		      !memcmp(buf, image + (size_t)f * RA_F, n);
	}
	return ok;
}

static void test_readahead(void)
{
	const char *on[] = { "cache_frames", "16", "readahead", "4", "readahead_threads", "2", NULL };
	const char *off[] = { "cache_frames", "16", "readahead", "0", NULL };
	static uint8_t buf[RA_F];
	char cmd[700];
	struct zseek z;
	struct disk d;
	int fd;

	make_base("ra.zst", RA_F, DISK);
	snprintf(cmd, sizeof(cmd), "cp %s %s", in_dir("ra.zst"), in_dir("ra-bad.zst"));
	CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
	fd = open(in_dir("ra-bad.zst"), O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(zseek_open(&z, fd, (char[256]){ 0 }, 256), 0);
	CU_ASSERT_EQUAL_FATAL(z.n_frames, 21);
	CU_ASSERT(pwrite(fd, "\xde\xad\xbe\xef\xde\xad\xbe\xef", 8,
			 (off_t)(z.f[10].coff + z.f[10].csize / 2)) == 8);
	zseek_close(&z);
	close(fd);

	/* Reads that do not follow each other read nothing ahead. */
	fake_log_clear(&fh);
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "ra-bad.zst", NULL, true, on), 0);
	CU_ASSERT(ra_read(&d, 8, 8) && ra_read(&d, 2, 2) && ra_read(&d, 6, 6));
	CU_ASSERT(!ra_logged(10, 200));
	/* Sequential: 4, 5 (queues 6..9), 6 (queues 10): the helpers find the
	 * corrupt frame 10 that no read has touched. */
	CU_ASSERT(ra_read(&d, 4, 6));
	CU_ASSERT(ra_logged(10, 20000));
	CU_ASSERT(ra_read(&d, 7, 9));
	CU_ASSERT_EQUAL(rw(&d, false, 10 * RA_F, buf, 4096), -EIO);
	CU_ASSERT(ra_read(&d, 11, 20));
	zclose(&d);

	/* readahead = 0: the same reads find nothing ahead. */
	fake_log_clear(&fh);
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "ra-bad.zst", NULL, true, off), 0);
	CU_ASSERT(ra_read(&d, 4, 9));
	CU_ASSERT(!ra_logged(10, 200));
	zclose(&d);

	/* Whole-disk reads, each spanning every frame, through caches of 16 and 2. */
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "ra.zst", NULL, true, on), 0);
	CU_ASSERT(disk_is(&d, image) && disk_is(&d, image));
	zclose(&d);
	CU_ASSERT_EQUAL_FATAL(zopen(&d, "ra.zst", NULL, true,
				    (const char *[]){ "cache_frames", "2", "readahead", "8", NULL }), 0);
	CU_ASSERT(disk_is(&d, image) && ra_read(&d, 0, 20));
	zclose(&d);

	/* Bounds. */
	CU_ASSERT_EQUAL(zopen(&d, "ra.zst", NULL, true,
			      (const char *[]){ "readahead_threads", "17", NULL }), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "readahead_threads = 17"));
	CU_ASSERT_EQUAL(zopen(&d, "ra.zst", NULL, true,
			      (const char *[]){ "readahead", "4097", NULL }), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(fh.fail_msg, "readahead = 4097"));
}

/* Sequential readers from different places at once, through a small cache. */
struct ra_reader {
	struct disk *d;
	unsigned start, chunk;
	bool ok;
};

static void *ra_reader(void *arg)
{
	struct ra_reader *r = arg;
	static __thread uint8_t buf[20480];

	r->ok = true;
	for (unsigned round = 0; round < 3; round++)
		for (size_t off = r->start; off < DISK; off += r->chunk) {
			size_t n = off + r->chunk <= DISK ? r->chunk : DISK - off;

			r->ok &= rw(r->d, false, off, buf, n) == (int64_t)n &&
				 !memcmp(buf, image + off, n);
		}
	return NULL;
}

static void test_readahead_concurrent(void)
{
	struct ra_reader r[4];
	pthread_t t[4];
	struct disk d;

	CU_ASSERT_EQUAL_FATAL(zopen(&d, "ra.zst", NULL, true,
				    (const char *[]){ "cache_frames", "4", "readahead", "8",
						      "readahead_threads", "3", NULL }), 0);
	for (unsigned i = 0; i < 4; i++) {
		r[i] = (struct ra_reader){ .d = &d, .start = i * 3 * 4096, .chunk = 4096u * (i + 2) };
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, ra_reader, &r[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT(r[i].ok);
	}
	zclose(&d);
}

static void test_host_relative_paths(void)
{
	static struct registry reg;
	char *dirs[3] = { CUB_BUILD_DIR "/plugins/storage/.libs",
			  CUB_BUILD_DIR "/plugins/devices/.libs", NULL };
	struct plan plan = { 0 };
	struct cub_inst in = { .name = "virtio-blk[disk0]", .plan = &plan };
	struct cub_storage *s;
	char cfgpath[300], err[512];

	CU_ASSERT_EQUAL_FATAL(registry_scan(&reg, dirs, NULL, NULL), 0);
	snprintf(cfgpath, sizeof(cfgpath), "%s/unit.cfg", dir);
	if (plan_devices_text(&plan,
		"devices = ( { type = \"virtio-blk\"; id = \"disk0\"; backend = { type = \"zstd-snap\";"
		" base = \"base.zst\"; delta = \"host.delta\"; cache_frames = 4; }; } );",
		cfgpath, dir, &reg, err, sizeof(err)))
		fprintf(stderr, "\n  %s\n", err);
	CU_ASSERT_EQUAL_FATAL(plan.n_devs, 1);
	in.pi = &plan.devs[0];
	rm_delta("host.delta");
	if (devices_storage_host.open(&in, "backend", false, &s))
		fprintf(stderr, "\n  %s\n", in.err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(in.storages);
	CU_ASSERT_STRING_EQUAL(s->name, "zstd-snap[disk0]");
	CU_ASSERT_EQUAL(s->info.size, DISK);
	CU_ASSERT_EQUAL(access(in_dir("host.delta"), F_OK), 0);
	CU_ASSERT_EQUAL(access(in_dir("host.delta.map"), F_OK), 0);
	storage_close_all(&in);
	plan_free(&plan);
	registry_free(&reg);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "descriptor", test_descriptor },
		{ "open errors", test_open_errors },
		{ "reads come from the base", test_read_base },
		{ "random I/O against a model, reopen (frames aligned to blocks)",
		  test_model_aligned_frames },
		{ "random I/O against a model, reopen (blocks straddle frames)",
		  test_model_straddling_frames },
		{ "the delta is sparse, the map has the bit", test_delta_sparse_and_map },
		{ "missing or foreign delta and map", test_delta_recovery_rules },
		{ "flushed writes survive SIGKILL", test_crash_safety },
		{ "a corrupt frame fails only its blocks", test_corrupt_frame },
		{ "concurrent partial writes to new blocks", test_concurrent_partial_writes },
		{ "host resolves base and delta like path", test_host_relative_paths },
		{ "read-ahead: sequential reads decompress the next frames", test_readahead },
		{ "read-ahead: concurrent sequential readers, small cache", test_readahead_concurrent },
		{ NULL, NULL },
	};
	char path[512], e[512], cmd[128];
	int ret;

	if (!mkdtemp(dir))
		return 1;
	fake_host_init(&fh);
	if (fake_plugin_path("zstd_snap", path, sizeof(path)) || loader_open(path, &zs, e, sizeof(e))) {
		fprintf(stderr, "cannot load zstd_snap: %s\n", e);
		return 1;
	}
	ret = cu_run("zstd_snap", tests);
	loader_close(zs);
	fake_host_fini(&fh);
	free(image);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
