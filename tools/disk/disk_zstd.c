/* SPDX-License-Identifier: Apache-2.0 */
/* `cubicle disk compress|decompress|inspect|check`: make, restore, describe and verify zstd seekable images and zstd-snap deltas. */
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "size.h"
#include "iov.h"
#include "zseek.h"

/* One message ("cubicle: disk SUB: ..."); returns DISK_EXIT_ERROR. */
__attribute__((format(printf, 2, 3)))
static int fail(const char *sub, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	disk_err("disk %s: %s", sub, msg);
	return DISK_EXIT_ERROR;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * Open an input read-only, looking at its type before a read can block on
 * it (a FIFO waits for a writer): the fd, or -1 with errno set (EINVAL:
 * neither a regular file nor a block device).
 */
static int open_input(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* The reason open_input failed. */
static const char *input_why(void)
{
	return errno == EINVAL ? "not a regular file or block device (a FIFO, socket or directory is refused)" :
	       strerror(errno);
}

/* "1.5 GiB" */
static const char *human(uint64_t n, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

/* ---- output files: OUT.tmp, synced, renamed over OUT ---- */

static int out_open(const char *sub, const char *out, bool force, char **tmp)
{
	int fd;

	if (!force && !access(out, F_OK)) {
		fail(sub, "%s already exists (--force replaces it)", out);
		return -1;
	}
	if (asprintf(tmp, "%s.tmp", out) < 0) {
		fail(sub, "out of memory");
		return -1;
	}
	fd = open(*tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fail(sub, "cannot create %s: %s", *tmp, strerror(errno));
		free(*tmp);
	}
	return fd;
}

/* Sync, close and rename tmp over out when ok; else remove tmp. 0 or DISK_EXIT_ERROR. */
static int out_commit(const char *sub, int fd, char *tmp, const char *out, bool ok)
{
	if (ok && fsync(fd) < 0)
		ok = !fail(sub, "cannot sync %s: %s", tmp, strerror(errno));
	if (close(fd) < 0 && ok)
		ok = !fail(sub, "cannot write %s: %s", tmp, strerror(errno));
	if (ok && rename(tmp, out) < 0)
		ok = !fail(sub, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
	if (!ok)
		unlink(tmp);
	free(tmp);
	return ok ? 0 : DISK_EXIT_ERROR;
}

/* ---- compress ---- */

int disk_compress(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "level", required_argument, NULL, 'l' },
		{ "frame-size", required_argument, NULL, 's' },
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct zseek_wopts o = { .level = 3 };
	struct disk_progress prog;
	struct zseek_wstats st;
	bool force = false;
	char why[512], a[32], b[32], *tmp, *end;
	const char *img, *out;
	uint64_t fs;
	double t0, el;
	int c, in, fd, err;

	while ((c = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.level = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg)
				return disk_usage_error("compress", "--level %s: expected a number", optarg);
			break;
		case 's':
			if (size_parse(optarg, &fs) || fs < 4096 || fs > (64u << 20))
				return disk_usage_error("compress", "--frame-size %s: expected 4K .. 64M",
							optarg);
			o.frame_size = (uint32_t)fs;
			break;
		case 'f':
			force = true;
			break;
		default:
			return disk_usage_error("compress", "unknown option or missing value: %s",
						argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		return disk_usage_error("compress", "needs IMG OUT.zst");
	img = argv[optind];
	out = argv[optind + 1];
	in = open_input(img);
	if (in < 0)
		return fail("compress", "cannot open %s: %s", img, input_why());
	fd = out_open("compress", out, force, &tmp);
	if (fd < 0) {
		close(in);
		return DISK_EXIT_ERROR;
	}
	disk_progress_init(&prog, "compressing");
	o.progress = disk_progress;
	o.arg = &prog;
	t0 = now_s();
	err = zseek_write(in, fd, &o, &st, why, sizeof(why));
	disk_progress_end(&prog);
	close(in);
	if (err) {
		fail("compress", "%s: %s", img, why);
		return out_commit("compress", fd, tmp, out, false) ?: DISK_EXIT_ERROR;
	}
	if (out_commit("compress", fd, tmp, out, true))
		return DISK_EXIT_ERROR;
	el = now_s() - t0;
	printf("compressed %s (%s) to %s: %s, ratio %.2f, %u frames of %u KiB, level %d, %.2f s (%.0f MiB/s)\n",
	       img, human(st.in_bytes, a, sizeof(a)), out, human(st.out_bytes, b, sizeof(b)),
	       st.out_bytes ? (double)st.in_bytes / (double)st.out_bytes : 0.0, st.n_frames,
	       (o.frame_size ? o.frame_size : ZSEEK_DEFAULT_FRAME_SIZE) >> 10, o.level, el,
	       el > 0 ? (double)st.in_bytes / el / (1 << 20) : 0.0);
	return 0;
}

/* ---- decompress and check: every frame in order ---- */

static bool all_zero(const uint8_t *p, size_t len)
{
	return !len || (!p[0] && !memcmp(p, p + 1, len - 1));
}

/* Write a frame, leaving holes for zero 4 KiB blocks (the file is sized at the end). */
static int write_sparse(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len;) {
		size_t n = len - i < 4096 ? len - i : 4096;

		if (!all_zero(p + i, n)) {
			int err = fullio_pwrite(fd, p + i, n, off + i);

			if (err)
				return err;
		}
		i += n;
	}
	return 0;
}

/*
 * Read every frame of @z, in order; write them to @out (>= 0: the first bad
 * frame stops) or only verify them (-1: every bad frame is named). Returns
 * the number of bad frames, or -errno.
 */
static int64_t walk(const char *sub, const struct zseek *z, int out, const char *name,
		    struct disk_progress *prog)
{
	struct zseek_dctx *d = zseek_dctx_new();
	uint8_t *buf = malloc(z->frame_max ? z->frame_max : 1);
	int64_t bad = 0;
	char why[512];
	int err = 0;

	if (!d || !buf) {
		err = -ENOMEM;
		fail(sub, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < z->n_frames; i++) {
		err = zseek_frame_read(z, d, i, buf, why, sizeof(why));
		if (err) {
			disk_progress_end(prog);
			fail(sub, "%s: %s", name, why);
			if (out >= 0 || err == -ENOMEM)
				goto out;
			bad++;
			err = 0;
		} else if (out >= 0 && (err = write_sparse(out, buf, z->f[i].dsize, z->f[i].doff))) {
			disk_progress_end(prog);
			fail(sub, "write error: %s", strerror(-err));
			goto out;
		}
		disk_progress(prog, z->f[i].doff + z->f[i].dsize, z->size);
	}
	disk_progress_end(prog);
out:
	free(buf);
	zseek_dctx_free(d);
	return err ? err : bad;
}

static int open_seekable(const char *sub, const char *path, struct zseek *z, int *fd)
{
	char why[512];

	*fd = open_input(path);
	if (*fd < 0)
		return fail(sub, "cannot open %s: %s", path, input_why());
	if (zseek_open(z, *fd, why, sizeof(why))) {
		close(*fd);
		return fail(sub, "%s: %s", path, why);
	}
	return 0;
}

int disk_decompress(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct disk_progress prog;
	bool force = false;
	struct zseek z;
	char *tmp;
	int c, in, fd;
	int64_t r;

	while ((c = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
		if (c != 'f')
			return disk_usage_error("decompress", "unknown option %s", argv[optind - 1]);
		force = true;
	}
	if (argc - optind != 2)
		return disk_usage_error("decompress", "needs IN.zst OUT");
	if (open_seekable("decompress", argv[optind], &z, &in))
		return DISK_EXIT_ERROR;
	fd = out_open("decompress", argv[optind + 1], force, &tmp);
	if (fd < 0) {
		zseek_close(&z);
		close(in);
		return DISK_EXIT_ERROR;
	}
	disk_progress_init(&prog, "decompressing");
	r = walk("decompress", &z, fd, argv[optind], &prog);
	if (!r && ftruncate(fd, (off_t)z.size) < 0)
		r = fail("decompress", "cannot size %s: %s", tmp, strerror(errno));
	c = out_commit("decompress", fd, tmp, argv[optind + 1], !r);
	if (!r && !c)
		printf("decompressed %s to %s: %llu bytes in %u frames\n", argv[optind],
		       argv[optind + 1], (unsigned long long)z.size, z.n_frames);
	zseek_close(&z);
	close(in);
	return r || c ? DISK_EXIT_ERROR : 0;
}

int disk_check(int argc, char **argv)
{
	struct disk_progress prog;
	struct zseek z;
	char a[32];
	int fd;
	int64_t bad;

	if (argc != 2 || argv[1][0] == '-')
		return disk_usage_error("check", "needs one FILE");
	if (open_seekable("check", argv[1], &z, &fd))
		return DISK_EXIT_ERROR;
	disk_progress_init(&prog, "checking");
	bad = walk("check", &z, -1, argv[1], &prog);
	if (bad > 0)
		fail("check", "%s: %lld of %u frames are bad", argv[1], (long long)bad, z.n_frames);
	else if (!bad)
		printf("%s: ok: seek table and %u frames (%s%s) verified\n", argv[1], z.n_frames,
		       human(z.size, a, sizeof(a)), z.checksums ? ", with checksums" : "");
	zseek_close(&z);
	close(fd);
	return bad ? DISK_EXIT_ERROR : 0;
}

/* ---- inspect ---- */

/* What inspect found, as JSON (--json) or as text. */
static int inspect_out(json_t *j, bool json, const char *text)
{
	char *dump = json ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

	json_decref(j);
	if (json && !dump)
		return fail("inspect", "out of memory");
	fputs(json ? dump : text, stdout);
	if (json)
		fputc('\n', stdout);
	free(dump);
	return 0;
}

static char *hex64(uint64_t v, char *out, size_t len)
{
	snprintf(out, len, "%016llx", (unsigned long long)v);
	return out;
}

static int inspect_map(const char *delta, const char *map, bool json)
{
	struct zmap_hdr h;
	struct stat ds, ms;
	char why[256], a[32], b[32], c[32], t[32], text[1024];
	uint64_t set = 0, word;
	int fd = open_input(map), n, derr;
	bool have_delta;
	json_t *j;

	if (fd < 0)
		return fail("inspect", "cannot open %s: %s", map, input_why());
	if (fstat(fd, &ms) < 0 || fullio_pread(fd, &h, sizeof(h), 0)) {
		close(fd);
		return fail("inspect", "%s: cannot read the map header", map);
	}
	if (zmap_hdr_check(&h, (uint64_t)ms.st_size, why, sizeof(why))) {
		close(fd);
		return fail("inspect", "%s: %s", map, why);
	}
	for (uint64_t off = ZMAP_HDR; off < (uint64_t)ms.st_size; off += sizeof(word)) {
		if (fullio_pread(fd, &word, sizeof(word), off)) {
			close(fd);
			return fail("inspect", "%s: short read", map);
		}
		set += (uint64_t)__builtin_popcountll(word);
	}
	close(fd);
	have_delta = !stat(delta, &ds);
	derr = errno;
	j = json_pack("{s:s,s:s,s:I,s:s,s:I,s:i,s:I,s:s,s:I,s:I}", "path", delta, "format",
		      "zstd-snap delta", "disk_size", (json_int_t)h.disk_size, "map", map, "blocks",
		      (json_int_t)h.n_blocks, "block_size", (int)h.block_size, "base_size",
		      (json_int_t)h.base_size, "base_seek_table", hex64(h.base_table, t, sizeof(t)),
		      "written_blocks", (json_int_t)set, "written_bytes",
		      (json_int_t)(set * h.block_size));
	if (!j)
		return fail("inspect", "out of memory");
	json_object_set_new(j, "delta_allocated",
			    have_delta ? json_integer((json_int_t)ds.st_blocks * 512) : json_null());
	n = snprintf(text, sizeof(text),
		     "%s: zstd-snap delta\n"
		     "  disk size       %s (%llu bytes)\n"
		     "  map             %s (%llu blocks of %u bytes)\n"
		     "  base            %llu bytes, seek table %s\n"
		     "  written blocks  %llu (%s, %.2f%% of the disk)\n",
		     delta, human(h.disk_size, a, sizeof(a)), (unsigned long long)h.disk_size, map,
		     (unsigned long long)h.n_blocks, h.block_size, (unsigned long long)h.base_size, t,
		     (unsigned long long)set, human(set * h.block_size, b, sizeof(b)),
		     h.n_blocks ? 100.0 * (double)set / (double)h.n_blocks : 0.0);
	if (n > 0 && (size_t)n < sizeof(text)) {
		if (have_delta)
			snprintf(text + n, sizeof(text) - (size_t)n, "  delta on disk   %s allocated\n",
				 human((uint64_t)ds.st_blocks * 512, c, sizeof(c)));
		else
			snprintf(text + n, sizeof(text) - (size_t)n, "  delta on disk   missing (%s)\n",
				 strerror(derr));
	}
	return inspect_out(j, json, text);
}

static int inspect_seekable(const char *path, const struct zseek *z, bool json)
{
	char a[32], b[32], t[32], text[1024];
	bool base = z->size && !(z->size % 512);
	json_t *j = json_pack("{s:s,s:s,s:I,s:I,s:f,s:i,s:i,s:i,s:b,s:s,s:b}", "path", path, "format",
			      "zstd seekable", "disk_size", (json_int_t)z->size, "file_size",
			      (json_int_t)z->file_size, "ratio",
			      z->file_size ? (double)z->size / (double)z->file_size : 0.0, "frames",
			      (int)z->n_frames, "frame_size", (int)z->frame_size,
			      "largest_compressed_frame", (int)z->csize_max, "checksums",
			      z->checksums, "seek_table", hex64(z->table_hash, t, sizeof(t)),
			      "zstd_snap_base", base);

	if (!j)
		return fail("inspect", "out of memory");
	snprintf(text, sizeof(text),
		 "%s: zstd seekable image\n"
		 "  disk size       %s (%llu bytes)\n"
		 "  file size       %s (ratio %.2f)\n"
		 "  frames          %u, %s%u bytes each, largest compressed %u\n"
		 "  checksums       %s\n"
		 "  seek table      %s\n"
		 "  zstd-snap base  %s\n",
		 path, human(z->size, a, sizeof(a)), (unsigned long long)z->size,
		 human(z->file_size, b, sizeof(b)),
		 z->file_size ? (double)z->size / (double)z->file_size : 0.0, z->n_frames,
		 z->frame_size ? "" : "mixed sizes, up to ",
		 z->frame_size ? z->frame_size : z->frame_max, z->csize_max,
		 z->checksums ? "XXH64 per frame" : "none", t,
		 base ? "yes" : "no (not a whole number of 512-byte sectors)");
	return inspect_out(j, json, text);
}

int disk_inspect(int argc, char **argv)
{
	const char *path = NULL;
	char why[512], a[32], b[32], *map = NULL, text[1024];
	uint8_t magic[8] = { 0 };
	struct stat st;
	struct zseek z;
	bool json = false;
	size_t len;
	int fd, ret;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] == '-' || path)
			return disk_usage_error("inspect", "needs one FILE (and --json)");
		else
			path = argv[i];
	}
	if (!path)
		return disk_usage_error("inspect", "needs one FILE");
	len = strlen(path);
	fd = open_input(path);
	if (fd < 0 || fstat(fd, &st) < 0)
		return fail("inspect", "cannot open %s: %s", path, input_why());
	if (pread(fd, magic, sizeof(magic), 0) < 0)
		magic[0] = 0;
	/* DELTA.map names its delta. */
	if (!memcmp(magic, ZMAP_MAGIC, 8) && len > 4 && !strcmp(path + len - 4, ".map")) {
		char *delta = strndup(path, len - 4);

		close(fd);
		ret = delta ? inspect_map(delta, path, json) : fail("inspect", "out of memory");
		free(delta);
		return ret;
	}
	if (!zseek_open(&z, fd, why, sizeof(why))) {
		ret = inspect_seekable(path, &z, json);
		zseek_close(&z);
		close(fd);
		return ret;
	}
	close(fd);
	/* A delta is known by the map beside it. */
	if (asprintf(&map, "%s.map", path) >= 0 && !access(map, F_OK)) {
		ret = inspect_map(path, map, json);
		free(map);
		return ret;
	}
	free(map);
	if (magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) {
		snprintf(text, sizeof(text),
			 "%s: zstd, not seekable (%s): `cubicle disk compress` makes a seekable one\n",
			 path, why);
		return inspect_out(json_pack("{s:s,s:s,s:s}", "path", path, "format",
					     "zstd (not seekable)", "why", why),
				   json, text);
	}
	if (st.st_size % 512) {
		fprintf(stderr,
			"cubicle disk: %s: not a disk image: %llu bytes, not a whole number of 512-byte sectors%s\n",
			path, (unsigned long long)st.st_size,
			memchr(magic, 0, sizeof(magic)) ? "" : " (it looks like text)");
		return 1;
	}
	snprintf(text, sizeof(text), "%s: raw image\n  size            %s (%llu bytes)\n  allocated       %s\n",
		 path, human((uint64_t)st.st_size, a, sizeof(a)), (unsigned long long)st.st_size,
		 human((uint64_t)st.st_blocks * 512, b, sizeof(b)));
	return inspect_out(json_pack("{s:s,s:s,s:I,s:I}", "path", path, "format", "raw", "size",
				     (json_int_t)st.st_size, "allocated",
				     (json_int_t)st.st_blocks * 512),
			   json, text);
}
