/* SPDX-License-Identifier: Apache-2.0 */
/* bench/storage: disk-image costs measured in one run: cloning a 1 GiB and an 8 GiB image by reflink (the floor: one FICLONE ioctl; `cubicle disk clone`) against `cp`, and the zstd-snap hooks (random and sequential reads, compression) for that backend. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cubicle/storage.h>

#include "fileclone.h"
#include "zseek.h"

/*
 * Usage: storage CUBICLE WORKDIR [GIB...] (default 1 8).
 * As root with mkfs.xfs, the images live on a loop-mounted XFS made with
 * `mkfs.xfs -m reflink=1` under WORKDIR; otherwise in WORKDIR itself, and
 * only the copies are measured (the reason is printed). Each image is fully
 * written with incompressible data, synced and dropped from the page cache
 * (POSIX_FADV_DONTNEED), so `cp` reads it from disk.
 */

#define RUNS 5
#define MIB (1u << 20)

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

/* Run argv, wait: wall microseconds, or 0 on failure. */
static uint64_t run(char *const argv[])
{
	uint64_t t0 = now_us();
	int st;
	pid_t p = fork();

	if (p == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, STDOUT_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return 0;
	return now_us() - t0;
}

static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

/* gib GiB of incompressible bytes (xorshift), synced, out of the cache. */
static int make_image(const char *path, unsigned gib)
{
	uint64_t *buf = malloc(MIB), x = 0x9e3779b97f4a7c15ull;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int ret = 0;

	if (!buf || fd < 0)
		ret = -1;
	for (uint64_t m = 0; !ret && m < (uint64_t)gib << 10; m++) {
		for (size_t i = 0; i < MIB / 8; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = x;
		}
		if (write(fd, buf, MIB) != MIB)
			ret = -1;
	}
	if (fd >= 0 && (fsync(fd) || close(fd)))
		ret = -1;
	free(buf);
	drop_cache(path);
	return ret;
}

/* Before each timed clone: the filesystem's pending work done (the last
 * clone's unlink frees its shared extents in the background on XFS, which
 * would otherwise slow whichever clone comes next). */
static void settle(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		syncfs(fd);
		close(fd);
	}
}

/* The floor: one FICLONE ioctl into an empty file. 0 if refused. In
 * *made_us, the floor of any clone into a new file: opening the image,
 * creating the file, the ioctl, closing both. */
static uint64_t ficlone_us(const char *src, const char *dst, uint64_t *made_us)
{
	uint64_t t00 = now_us(), t0, t = 0;
	int s = open(src, O_RDONLY), d = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0644);

	t0 = now_us();
	if (s >= 0 && d >= 0 && !ioctl(d, FICLONE, s))
		t = now_us() - t0 + !(now_us() - t0); /* never 0: 0 means refused */
	close(s);
	close(d);
	*made_us = now_us() - t00;
	unlink(dst);
	return t;
}

/* One fc_clone_path reflink of src to dst (then removed), on a settled
 * filesystem: its total microseconds, or 0 (said why) when it failed or
 * copied. */
static uint64_t lib_clone_us(const char *src, const char *dst, bool durable)
{
	struct fc_result res;
	char err[512];
	int ret;

	settle(src);
	ret = fc_clone_path(src, dst, &(struct fc_opts){ .durable = durable }, &res, err, sizeof(err));
	unlink(dst);
	if (ret || res.copied) {
		printf("  fc_clone_path%s: %s\n", durable ? " (durable)" : "",
		       ret ? err : "copied, not reflinked");
		return 0;
	}
	return res.total_us ? res.total_us : 1;
}

static void bench_clone(const char *cub, const char *dir, unsigned gib, bool reflink)
{
	char img[512], dst[512];
	uint64_t floor_v[RUNS], made_v[RUNS], lib_v[RUNS], dur_v[RUNS], cli_v[RUNS], cp_us, sync_us, t0;
	int n = 0;

	snprintf(img, sizeof(img), "%s/image-%ug.img", dir, gib);
	snprintf(dst, sizeof(dst), "%s/clone.img", dir);
	t0 = now_us();
	if (make_image(img, gib)) {
		printf("  %u GiB: cannot write %s: %s\n", gib, img, strerror(errno));
		return;
	}
	printf("  %u GiB image written and synced in %.1f s\n", gib, (now_us() - t0) / 1e6);
	if (reflink) {
		for (n = 0; n < RUNS; n++) {
			char *argv[] = { (char *)cub, "disk", "clone", img, dst, NULL };

			settle(img);
			floor_v[n] = ficlone_us(img, dst, &made_v[n]);
			lib_v[n] = lib_clone_us(img, dst, false);
			dur_v[n] = lib_clone_us(img, dst, true);
			settle(img);
			cli_v[n] = run(argv);
			unlink(dst);
			if (!floor_v[n] || !lib_v[n] || !dur_v[n] || !cli_v[n])
				break;
		}
	}
	{
		char *argv[] = { "cp", "--reflink=never", "--sparse=never", img, dst, NULL };
		char *sargv[] = { "sync", "-f", dst, NULL };

		cp_us = run(argv);
		sync_us = run(sargv);
		unlink(dst);
	}
	if (n == RUNS) {
		uint64_t f = median(floor_v, RUNS), l = median(lib_v, RUNS), c = median(cli_v, RUNS);
		uint64_t d = median(dur_v, RUNS), m = median(made_v, RUNS);

		printf("  %u GiB  FICLONE ioctl (floor)          %8" PRIu64 " us   1.0x\n", gib, f);
		printf("  %u GiB  open, create, FICLONE, close   %8" PRIu64 " us  %5.1fx  (any new clone's floor)\n",
		       gib, m, (double)m / f);
		printf("  %u GiB  fc_clone_path (open, FICLONE)  %8" PRIu64 " us  %5.1fx  %5.2fx that floor\n",
		       gib, l, (double)l / f, (double)l / m);
		printf("  %u GiB  fc_clone_path durable (+fsync, rename) %" PRIu64 " us  %5.1fx\n", gib,
		       d, (double)d / f);
		printf("  %u GiB  cubicle disk clone (process)   %8" PRIu64 " us  %5.1fx\n", gib, c,
		       (double)c / f);
		printf("  %u GiB  cp --reflink=never             %8.0f ms  %5.0fx\n", gib, cp_us / 1e3,
		       (double)cp_us / f);
		printf("  %u GiB  cp, then sync -f (durable)     %8.0f ms  %5.0fx\n", gib,
		       (cp_us + sync_us) / 1e3, (double)(cp_us + sync_us) / f);
	} else {
		printf("  %u GiB  cp --reflink=never             %8.0f ms (%.0f MiB/s)\n", gib,
		       cp_us / 1e3, cp_us ? (double)gib * 1024 / (cp_us / 1e6) : 0.0);
		printf("  %u GiB  cp, then sync -f (durable)     %8.0f ms\n", gib,
		       (cp_us + sync_us) / 1e3);
	}
	unlink(img);
}

/*
 * ---- zstd-snap: reads through the plugin, compression against the zstd CLI ----
 * One image of real, compressible bytes (files from /usr, repeated to
 * ZS_MIB): compressed by `cubicle disk compress` and by `zstd -3 -T1` (same
 * level, one thread each); then random 4 KiB reads through the zstd_snap
 * plugin with a cold frame cache (a fresh open, offsets over the whole disk:
 * nearly every read decompresses a frame) and a warm one (offsets within the
 * frames the cache holds), and a sequential read of the whole disk, each
 * beside the same reads with pread on the raw image (in the page cache, as
 * the compressed base is).
 */
#define ZS_MIB 256u
#define ZS_READS 4000u

static void zs_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	(void)in;
	(void)lvl;
	(void)fmt;
}

static int zs_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	(void)in;
	fprintf(stderr, "zstd-snap: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return err;
}

struct zs_disk {
	void *dl, *priv, *cfg;
	const struct cub_storage_ops *ops;
	int raw; /* >= 0: pread the raw image instead */
};

/* Open the plugin next to the cubicle binary on base, with delta, and
 * ra_threads read-ahead threads (negative: the plugin's default). */
static int zs_open(struct zs_disk *d, const char *cub, const char *base, const char *delta,
		   int ra_threads)
{
	static const struct cub_host host = { .size = sizeof(host), .log = zs_log,
					      .log_ratelimited = zs_log, .fail = zs_fail };
	const struct cub_plugin *p;
	char so[600];

	snprintf(so, sizeof(so), "%.*s/plugins/storage/.libs/zstd_snap.so",
		 (int)(strrchr(cub, '/') ? strrchr(cub, '/') - cub : 1), strrchr(cub, '/') ? cub : ".");
	d->raw = -1;
	d->dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	p = d->dl ? dlsym(d->dl, "cubicle_plugin") : NULL;
	if (!p) {
		printf("  cannot load %s: %s\n", so, dlerror());
		return -1;
	}
	d->ops = p->ops;
	d->cfg = calloc(1, p->cfg_size);
	for (unsigned i = 0; d->cfg && i < p->n_params; i++) {
		char *slot = (char *)d->cfg + p->params[i].offset;

		if (!strcmp(p->params[i].name, "base"))
			memcpy(slot, &base, sizeof(base));
		else if (!strcmp(p->params[i].name, "delta"))
			memcpy(slot, &delta, sizeof(delta));
		else if (!strcmp(p->params[i].name, "cache_frames"))
			*(uint64_t *)slot = 64;
		else if (p->params[i].def && p->params[i].type == CUB_P_U64)
			*(uint64_t *)slot = strtoull(p->params[i].def, NULL, 0);
		if (ra_threads >= 0 && !strcmp(p->params[i].name, "readahead_threads"))
			*(uint64_t *)slot = (uint64_t)ra_threads;
	}
	if (!d->cfg || d->ops->open(NULL, &host, d->cfg, !delta, &d->priv)) {
		free(d->cfg);
		dlclose(d->dl);
		return -1;
	}
	return 0;
}

static void zs_close(struct zs_disk *d)
{
	d->ops->close(d->priv);
	free(d->cfg);
	dlclose(d->dl);
}

static bool zs_read(struct zs_disk *d, void *buf, size_t len, uint64_t off)
{
	struct iovec v = { buf, len };

	if (d->raw >= 0)
		return pread(d->raw, buf, len, (off_t)off) == (ssize_t)len;
	return d->ops->readv(d->priv, off, &v, 1) == (int64_t)len;
}

/* n random 4 KiB reads in [0, span): microseconds per read, 0 on error. */
static double zs_random(struct zs_disk *d, uint64_t span, unsigned n, uint64_t seed)
{
	static uint8_t buf[4096];
	uint64_t x = seed, t0 = now_us();

	for (unsigned i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (!zs_read(d, buf, sizeof(buf), x % (span / 4096) * 4096))
			return 0;
	}
	return (double)(now_us() - t0) / n;
}

/* The whole disk in 1 MiB reads: MiB/s, 0 on error. */
static double zs_seq(struct zs_disk *d, uint64_t size)
{
	static uint8_t buf[MIB];
	uint64_t t0 = now_us();

	for (uint64_t off = 0; off < size; off += MIB)
		if (!zs_read(d, buf, MIB, off))
			return 0;
	return (double)size / MIB / ((now_us() - t0) / 1e6);
}

/* Every frame of the seekable file at path decompressed in order on this
 * thread (what one core can do): MiB/s, 0 on error. */
static double zs_decompress_all(const char *path)
{
	struct zseek_dctx *dc = zseek_dctx_new();
	int fd = open(path, O_RDONLY);
	uint8_t *buf = NULL;
	double mibs = 0;
	struct zseek z;
	char why[256];

	if (fd >= 0 && dc && !zseek_open(&z, fd, why, sizeof(why))) {
		uint64_t t0 = now_us();
		uint32_t i = 0;

		buf = malloc(z.frame_max);
		while (buf && i < z.n_frames && !zseek_frame_read(&z, dc, i, buf, why, sizeof(why)))
			i++;
		if (buf && i == z.n_frames)
			mibs = (double)z.size / MIB / ((now_us() - t0) / 1e6);
		zseek_close(&z);
	}
	free(buf);
	zseek_dctx_free(dc);
	if (fd >= 0)
		close(fd);
	return mibs;
}

/* size bytes of files from /usr (the list repeated if short): 0 or -1. */
static int zs_image(const char *path, uint64_t size)
{
	static uint8_t buf[MIB];
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	uint64_t done = 0;
	bool progress = true;

	while (out >= 0 && done < size && progress) {
		FILE *l = popen("find /usr/lib /usr/bin -type f -size +8k 2>/dev/null | sort", "r");
		char name[4096];

		progress = false;
		while (l && done < size && fgets(name, sizeof(name), l)) {
			int in;
			ssize_t n;

			name[strcspn(name, "\n")] = '\0';
			in = open(name, O_RDONLY);
			while (in >= 0 && done < size && (n = read(in, buf, sizeof(buf))) > 0) {
				if (n > (ssize_t)(size - done))
					n = (ssize_t)(size - done);
				if (write(out, buf, (size_t)n) != n)
					done = size + 1;
				done += (uint64_t)n;
				progress = true;
			}
			if (in >= 0)
				close(in);
		}
		if (l)
			pclose(l);
	}
	if (out >= 0 && close(out))
		return -1;
	return out >= 0 && done == size ? 0 : -1;
}

static void bench_zstd_snap(const char *cub, const char *dir)
{
	char img[600], zst[600], cli[600], delta[600], cmd[700];
	uint64_t size = (uint64_t)ZS_MIB * MIB, t_cub, t_cli;
	struct stat zs_st, cli_st;
	struct zs_disk zd, raw = { .raw = -1 };
	double cold, warm, rcold, seq, seq0, rseq, dec;

	snprintf(img, sizeof(img), "%s/zs.img", dir);
	snprintf(zst, sizeof(zst), "%s/zs.zst", dir);
	snprintf(cli, sizeof(cli), "%s/zs.cli.zst", dir);
	snprintf(delta, sizeof(delta), "%s/zs.delta", dir);
	printf("zstd-snap: a %u MiB image of files from /usr, frames of %u KiB, level 3\n", ZS_MIB,
	       ZSEEK_DEFAULT_FRAME_SIZE >> 10);
	if (zs_image(img, size)) {
		printf("  cannot make %s\n", img);
		unlink(img);
		return;
	}
	{
		char *a[] = { (char *)cub, "disk", "compress", "--force", "--level", "3", img, zst, NULL };
		char *b[] = { "zstd", "-q", "-f", "-3", "-T1", img, "-o", cli, NULL };

		t_cub = run(a);
		t_cli = run(b);
	}
	if (!t_cub || stat(zst, &zs_st)) {
		printf("  cubicle disk compress failed\n");
		return;
	}
	printf("  compress  cubicle disk compress  %7.0f MiB/s  ratio %.3f\n",
	       ZS_MIB / (t_cub / 1e6), (double)size / zs_st.st_size);
	if (t_cli && !stat(cli, &cli_st))
		printf("  compress  zstd -3 -T1 (one frame) %7.0f MiB/s  ratio %.3f"
		       "   (cubicle: %.2fx the speed, %.3fx the size)\n",
		       ZS_MIB / (t_cli / 1e6), (double)size / cli_st.st_size,
		       (double)t_cli / t_cub, (double)zs_st.st_size / cli_st.st_size);
	else
		printf("  compress  zstd CLI not found (apt-get install zstd)\n");
	unlink(cli);

	raw.raw = open(img, O_RDONLY);
	unlink(delta);
	snprintf(cmd, sizeof(cmd), "%s.map", delta);
	unlink(cmd);
	if (raw.raw < 0 || zs_open(&zd, cub, zst, delta, -1)) {
		printf("  cannot open the image or the plugin\n");
		goto out;
	}
	zs_seq(&raw, size); /* both files in the page cache */
	rcold = zs_random(&raw, size, ZS_READS, 88172645463325252ull);
	cold = zs_random(&zd, size, ZS_READS, 88172645463325252ull);
	zs_random(&zd, 64ull * ZSEEK_DEFAULT_FRAME_SIZE, ZS_READS, 7); /* fill the cache */
	warm = zs_random(&zd, 64ull * ZSEEK_DEFAULT_FRAME_SIZE, 25 * ZS_READS, 99); /* long enough to time */
	printf("  random 4 KiB  raw pread (page cache)   %7.1f us  %7.0f IOPS  1.0x\n", rcold,
	       1e6 / rcold);
	printf("  random 4 KiB  zstd-snap, cold cache    %7.1f us  %7.0f IOPS  %.1fx\n", cold,
	       cold ? 1e6 / cold : 0, cold / rcold);
	printf("  random 4 KiB  zstd-snap, warm cache    %7.1f us  %7.0f IOPS  %.1fx\n", warm,
	       warm ? 1e6 / warm : 0, warm / rcold);
	rseq = zs_seq(&raw, size);
	seq = zs_seq(&zd, size);
	zs_close(&zd);
	seq0 = 0;
	if (!zs_open(&zd, cub, zst, NULL, 0)) {
		seq0 = zs_seq(&zd, size);
		zs_close(&zd);
	}
	dec = zs_decompress_all(zst);
	printf("  sequential 1 MiB  raw pread            %7.0f MiB/s\n", rseq);
	printf("  sequential 1 MiB  zstd-snap            %7.0f MiB/s  (%.2fx raw, %.2fx one core decompressing)\n",
	       seq, rseq ? seq / rseq : 0, dec ? seq / dec : 0);
	printf("  sequential 1 MiB  zstd-snap, readahead_threads = 0 %7.0f MiB/s  (%.2fx raw)\n", seq0,
	       rseq ? seq0 / rseq : 0);
	printf("  sequential        one core decompressing every frame in order %7.0f MiB/s (%.2fx raw)\n",
	       dec, rseq ? dec / rseq : 0);
out:
	if (raw.raw >= 0)
		close(raw.raw);
	unlink(delta);
	snprintf(cmd, sizeof(cmd), "%s.map", delta);
	unlink(cmd);
	unlink(zst);
	unlink(img);
}

/* Set up a loop-mounted XFS with reflink=1 under work: its mount point, or
 * NULL with the reason in why. */
static char *xfs_mount(const char *work, uint64_t bytes, char *why, size_t len)
{
	static char mnt[512];
	char cmd[2048];

	if (geteuid()) {
		snprintf(why, len, "not root: cannot loop-mount an XFS filesystem");
		return NULL;
	}
	if (system("command -v mkfs.xfs >/dev/null 2>&1 || test -x /sbin/mkfs.xfs")) {
		snprintf(why, len, "mkfs.xfs not found (apt-get install xfsprogs)");
		return NULL;
	}
	snprintf(mnt, sizeof(mnt), "%s/mnt", work);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && truncate -s %" PRIu64 " '%s/xfs.bin' && "
		 "PATH=$PATH:/sbin:/usr/sbin mkfs.xfs -q -f -m reflink=1 '%s/xfs.bin' && "
		 "mount -o loop '%s/xfs.bin' '%s'",
		 mnt, bytes, work, work, work, mnt);
	if (system(cmd)) {
		snprintf(why, len, "cannot make or loop-mount an XFS filesystem in %s", work);
		return NULL;
	}
	return mnt;
}

int main(int argc, char **argv)
{
	unsigned sizes[8] = { 1, 8 }, n_sizes = 2, total = 0;
	char why[256] = "", cmd[1200], probe[600];
	const char *cub, *work, *dir;
	bool reflink;

	if (argc < 3) {
		fprintf(stderr, "usage: %s CUBICLE WORKDIR [GIB...]\n", argv[0]);
		return 2;
	}
	cub = argv[1];
	work = argv[2];
	if (argc > 3)
		for (n_sizes = 0; n_sizes < 8 && (int)n_sizes < argc - 3; n_sizes++)
			sizes[n_sizes] = (unsigned)atoi(argv[3 + n_sizes]);
	for (unsigned i = 0; i < n_sizes; i++)
		total = sizes[i] > total ? sizes[i] : total;
	mkdir(work, 0755);
	dir = xfs_mount(work, ((uint64_t)total * 2 + 2) << 30, why, sizeof(why));
	if (!dir)
		dir = work;
	snprintf(probe, sizeof(probe), "%s/probe.img", dir);
	make_image(probe, 0);
	snprintf(cmd, sizeof(cmd), "%s/probe2.img", dir);
	reflink = ficlone_us(probe, cmd, &(uint64_t){ 0 }) > 0;
	unlink(probe);
	if (!reflink && !why[0])
		snprintf(why, sizeof(why), "FICLONE is refused in %s", dir);
	printf("storage: clone of an image, reflink vs cp, in %s%s%s\n", dir,
	       reflink ? " (loop-mounted XFS, reflink=1)" : ": only the copy is measured, because ",
	       reflink ? "" : why);
	/* zstd-snap first: run after the clones' copies of an 8 GiB image on
	 * the same loop-mounted XFS, its sequential row read 160-260 MiB/s
	 * (alone 1290-1474; with the page cache filling memory, or one or two
	 * CPU hogs beside it, 724-1474): what it measured was the state those
	 * copies left, not the plugin */
	bench_zstd_snap(cub, dir);
	for (unsigned i = 0; i < n_sizes; i++)
		bench_clone(cub, dir, sizes[i], reflink);
	if (dir != work) {
		snprintf(cmd, sizeof(cmd), "umount '%s' && rm -rf '%s'", dir, work);
		if (system(cmd))
			fprintf(stderr, "cannot unmount %s\n", dir);
	}
	return 0;
}
