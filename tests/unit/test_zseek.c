/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the zstd seekable format (plugins/lib/zseek.c): round trips, frame boundaries, and every seek-table field corrupted. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cunit_main.h"
#include "zseek.h"

static char dir[] = "/tmp/cubicle-test-zseek-XXXXXX";
static char why[512];

static void path_in_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Compressible but not trivial: runs of a counter and pseudo-random bytes. */
static uint8_t *pattern(size_t len, unsigned seed)
{
	uint8_t *p = malloc(len ? len : 1);
	uint32_t x = seed * 2654435761u + 1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (i / 1024) % 3 ? (uint8_t)(x >> 24) : (uint8_t)(i / 4096);
	}
	return p;
}

static void write_file(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL((size_t)write(fd, p, len), len);
	close(fd);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *p;
	int fd = open(path, O_RDONLY);

	CU_ASSERT_FATAL(fd >= 0 && !fstat(fd, &st));
	p = malloc((size_t)st.st_size + 1);
	CU_ASSERT_FATAL(p && read(fd, p, (size_t)st.st_size) == st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

struct prog {
	uint64_t last, total;
	unsigned calls;
	bool backwards;
};

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct prog *p = arg;

	if (done < p->last)
		p->backwards = true;
	p->last = done;
	p->total = total;
	p->calls++;
}

/* Compress len bytes of data into NAME.zst; returns 0 or the writer's error. */
static int compress(const uint8_t *data, size_t len, const char *name, uint32_t fsz,
		    bool no_sums, struct zseek_wstats *st, struct prog *pr)
{
	char src[300], dst[300];
	struct zseek_wopts o = { .level = 3, .frame_size = fsz, .no_checksums = no_sums,
				 .progress = pr ? on_progress : NULL, .arg = pr };
	struct zseek_wstats s;
	int in, out, err;

	path_in_dir(src, sizeof(src), name);
	snprintf(dst, sizeof(dst), "%s.zst", src);
	write_file(src, data, len);
	in = open(src, O_RDONLY);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT_FATAL(in >= 0 && out >= 0);
	err = zseek_write(in, out, &o, st ? st : &s, why, sizeof(why));
	close(in);
	close(out);
	return err;
}

/* Open NAME.zst: returns zseek_open's result; *fd stays open on success. */
static int zopen(const char *name, struct zseek *z, int *fd)
{
	char p[300];
	int err;

	path_in_dir(p, sizeof(p), name);
	strcat(p, ".zst");
	*fd = open(p, O_RDONLY);
	CU_ASSERT_FATAL(*fd >= 0);
	why[0] = '\0';
	err = zseek_open(z, *fd, why, sizeof(why));
	if (err)
		close(*fd);
	return err;
}

/* Every byte of z decompressed, compared with want. */
static bool same_content(struct zseek *z, const uint8_t *want, size_t len)
{
	struct zseek_dctx *d = zseek_dctx_new();
	uint8_t *buf = malloc(z->frame_max + 1);
	bool ok = z->size == len;

	for (uint32_t i = 0; ok && i < z->n_frames; i++) {
		ok = !zseek_frame_read(z, d, i, buf, why, sizeof(why)) &&
		     !memcmp(buf, want + z->f[i].doff, z->f[i].dsize);
	}
	free(buf);
	zseek_dctx_free(d);
	return ok;
}

static void test_xxh64(void)
{
	/* Published XXH64 values (seed 0). */
	CU_ASSERT_EQUAL(zseek_xxh64("", 0), 0xEF46DB3751D8E999ull);
	CU_ASSERT_EQUAL(zseek_xxh64("abc", 3), 0x44BC2CF5AD770999ull);
}

static void test_round_trip(void)
{
	static const size_t sizes[] = { 0, 1, 4095, 65536, 65537, 3 * 65536, 1000000 };

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		uint8_t *data = pattern(len, (unsigned)k);
		struct zseek_wstats st;
		struct prog pr = { 0 };
		struct zseek z;
		int fd;

		CU_ASSERT_EQUAL_FATAL(compress(data, len, "rt", 65536, false, &st, &pr), 0);
		CU_ASSERT_EQUAL(st.in_bytes, len);
		CU_ASSERT_EQUAL(st.n_frames, (len + 65535) / 65536);
		CU_ASSERT(!pr.backwards && pr.last == len && pr.calls == st.n_frames);
		CU_ASSERT_EQUAL_FATAL(zopen("rt", &z, &fd), 0);
		CU_ASSERT_EQUAL(z.n_frames, st.n_frames);
		CU_ASSERT_EQUAL(z.size, len);
		CU_ASSERT_EQUAL(z.file_size, st.out_bytes);
		CU_ASSERT(z.checksums);
		CU_ASSERT_EQUAL(z.frame_size, len > 65536 ? 65536 : len);
		CU_ASSERT(same_content(&z, data, len));
		zseek_close(&z);
		close(fd);
		free(data);
	}
}

/* The stock zstd CLI restores the exact bytes (and verifies each frame's checksum). */
static void test_zstd_cli(void)
{
	uint8_t *data = pattern(700000, 7), *back;
	char cmd[1024], p[300];
	size_t len;

	if (system("zstd --version >/dev/null 2>&1")) {
		fprintf(stderr, "\n  (no zstd CLI: apt-get install zstd) ");
		free(data);
		return;
	}
	for (int sums = 0; sums < 2; sums++) {
		CU_ASSERT_EQUAL_FATAL(compress(data, 700000, "cli", 32768, !sums, NULL, NULL), 0);
		path_in_dir(p, sizeof(p), "cli");
		snprintf(cmd, sizeof(cmd), "zstd -q -t %s.zst && zstd -q -d -f %s.zst -o %s.out", p,
			 p, p);
		CU_ASSERT_EQUAL(system(cmd), 0);
		strcat(p, ".out");
		back = read_file(p, &len);
		CU_ASSERT(len == 700000 && !memcmp(back, data, len));
		free(back);
	}
	free(data);
}

static void test_frame_of(void)
{
	uint8_t *data = pattern(5 * 8192 + 512, 3);
	struct zseek z;
	int fd;

	CU_ASSERT_EQUAL_FATAL(compress(data, 5 * 8192 + 512, "fo", 8192, false, NULL, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(zopen("fo", &z, &fd), 0);
	CU_ASSERT_EQUAL(z.n_frames, 6);
	CU_ASSERT_EQUAL(zseek_frame_of(&z, 0), 0);
	CU_ASSERT_EQUAL(zseek_frame_of(&z, 8191), 0);
	CU_ASSERT_EQUAL(zseek_frame_of(&z, 8192), 1);
	CU_ASSERT_EQUAL(zseek_frame_of(&z, 8193), 1);
	CU_ASSERT_EQUAL(zseek_frame_of(&z, 4 * 8192 + 100), 4);
	CU_ASSERT_EQUAL(zseek_frame_of(&z, 5 * 8192), 5);
	CU_ASSERT_EQUAL(zseek_frame_of(&z, 5 * 8192 + 511), 5);
	CU_ASSERT_EQUAL(z.f[5].dsize, 512);
	CU_ASSERT_EQUAL(z.f[3].doff, 3 * 8192);
	CU_ASSERT_EQUAL(z.f[3].coff, z.f[2].coff + z.f[2].csize);
	CU_ASSERT_EQUAL(zseek_frame_read(&z, NULL, 6, data, why, sizeof(why)), -EINVAL);
	zseek_close(&z);
	close(fd);
	free(data);
}

static void test_writer_errors(void)
{
	uint8_t b = 0;

	CU_ASSERT_EQUAL(compress(&b, 1, "we", 100, false, NULL, NULL), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "frame size 100"));
	{
		struct zseek_wopts o = { .level = 99 };
		struct zseek_wstats st;

		CU_ASSERT_EQUAL(zseek_write(0, 1, &o, &st, why, sizeof(why)), -EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "level 99"));
	}
}

/* ---- corruption: a good file, one change, then open (and read) ---- */

static uint8_t *good;
static size_t good_len;

static void make_good(void)
{
	uint8_t *data = pattern(4 * 16384, 11);
	char p[300];

	CU_ASSERT_EQUAL_FATAL(compress(data, 4 * 16384, "good", 16384, false, NULL, NULL), 0);
	free(data);
	path_in_dir(p, sizeof(p), "good.zst");
	free(good);
	good = read_file(p, &good_len);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* Write good with byte range [off, off+n) replaced by b (or truncated to cut). */
static int open_variant(size_t off, const void *b, size_t n, size_t cut, const char *want)
{
	uint8_t *v = malloc(good_len);
	struct zseek z;
	char p[300];
	int fd, err;

	memcpy(v, good, good_len);
	if (n)
		memcpy(v + off, b, n);
	path_in_dir(p, sizeof(p), "bad.zst");
	write_file(p, v, cut ? cut : good_len);
	free(v);
	err = zopen("bad", &z, &fd);
	if (!err) {
		zseek_close(&z);
		close(fd);
	}
	if (want && !strstr(why, want))
		fprintf(stderr, "\n  got: %s\n  want: %s\n", why, want);
	if (want)
		CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
	return err;
}

static void test_table_fields(void)
{
	/* Layout: 4 frames, then magic, len, 4 x 12-byte entries, footer. */
	size_t foot, tab, e1;
	uint8_t b4[4], b1;

	make_good();
	foot = good_len - 9;
	tab = good_len - 9 - 4 * 12 - 8;
	e1 = tab + 8 + 12;
	CU_ASSERT_EQUAL(open_variant(0, NULL, 0, 0, NULL), 0);
	CU_ASSERT_EQUAL(get32(good + foot), 4);
	/* seekable magic */
	put32(b4, 0x8F92EAB0);
	CU_ASSERT_EQUAL(open_variant(foot + 5, b4, 4, 0, "no seek table"), -EINVAL);
	/* descriptor: reserved bits refused, unused bits ignored, checksum flag off */
	b1 = 0x80 | 0x04;
	CU_ASSERT_EQUAL(open_variant(foot + 4, &b1, 1, 0, "reserved bits"), -EINVAL);
	b1 = 0x80 | 0x03;
	CU_ASSERT_EQUAL(open_variant(foot + 4, &b1, 1, 0, NULL), 0);
	b1 = 0;
	CU_ASSERT_EQUAL(open_variant(foot + 4, &b1, 1, 0, "frame header"), -EINVAL);
	/* number of frames: one more, one less, absurd */
	put32(b4, 5);
	CU_ASSERT_EQUAL(open_variant(foot, b4, 4, 0, "frame header"), -EINVAL);
	put32(b4, 3);
	CU_ASSERT_EQUAL(open_variant(foot, b4, 4, 0, "frame header"), -EINVAL);
	put32(b4, 0xffffffff);
	CU_ASSERT_EQUAL(open_variant(foot, b4, 4, 0, "impossible"), -EINVAL);
	put32(b4, 0x7ffffff);
	CU_ASSERT_EQUAL(open_variant(foot, b4, 4, 0, "impossible"), -EINVAL);
	/* skippable magic and frame size */
	put32(b4, 0x184D2A50);
	CU_ASSERT_EQUAL(open_variant(tab, b4, 4, 0, "frame header"), -EINVAL);
	put32(b4, get32(good + tab + 4) + 1);
	CU_ASSERT_EQUAL(open_variant(tab + 4, b4, 4, 0, "frame header"), -EINVAL);
	/* an entry's compressed size: off by one either way, zero, absurd */
	put32(b4, get32(good + e1) + 1);
	CU_ASSERT_EQUAL(open_variant(e1, b4, 4, 0, "past the seek table"), -EINVAL);
	put32(b4, get32(good + e1) - 1);
	CU_ASSERT_EQUAL(open_variant(e1, b4, 4, 0, "sum to"), -EINVAL);
	put32(b4, 0);
	CU_ASSERT_EQUAL(open_variant(e1, b4, 4, 0, "out of bounds"), -EINVAL);
	put32(b4, 0xfffffff0);
	CU_ASSERT_EQUAL(open_variant(e1, b4, 4, 0, "past the seek table"), -EINVAL);
	/* decompressed size: absurd at open */
	put32(b4, 0x80000000);
	CU_ASSERT_EQUAL(open_variant(e1 + 4, b4, 4, 0, "out of bounds"), -EINVAL);
	/* truncations */
	CU_ASSERT_EQUAL(open_variant(0, NULL, 0, good_len - 1, "no seek table"), -EINVAL);
	CU_ASSERT_EQUAL(open_variant(0, NULL, 0, good_len / 2, "no seek table"), -EINVAL);
	CU_ASSERT_EQUAL(open_variant(0, NULL, 0, 16, "too small"), -EINVAL);
	CU_ASSERT_EQUAL(open_variant(0, NULL, 0, 1, "too small"), -EINVAL);
}

/* Tables that open fine but lie about one frame: that frame fails with -EIO, others read. */
static void read_variant(size_t off, const void *b, size_t n, uint32_t bad, const char *want)
{
	uint8_t *v = malloc(good_len), *buf = malloc(1 << 20), *data = pattern(4 * 16384, 11);
	struct zseek_dctx *d = zseek_dctx_new();
	struct zseek z;
	char p[300];
	int fd;

	memcpy(v, good, good_len);
	memcpy(v + off, b, n);
	path_in_dir(p, sizeof(p), "bad.zst");
	write_file(p, v, good_len);
	CU_ASSERT_EQUAL_FATAL(zopen("bad", &z, &fd), 0);
	for (uint32_t i = 0; i < z.n_frames; i++) {
		int err = zseek_frame_read(&z, d, i, buf, why, sizeof(why));

		if (i != bad) {
			CU_ASSERT_EQUAL(err, 0);
			CU_ASSERT(!memcmp(buf, data + i * 16384, 16384));
			continue;
		}
		CU_ASSERT_EQUAL(err, -EIO);
		if (!strstr(why, want))
			fprintf(stderr, "\n  got: %s\n  want: %s\n", why, want);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "frame 1 at offset"));
	}
	zseek_close(&z);
	close(fd);
	zseek_dctx_free(d);
	free(data);
	free(buf);
	free(v);
}

static void test_frame_corruption(void)
{
	size_t tab, e1, f1;
	uint8_t b4[4];

	make_good();
	tab = good_len - 9 - 4 * 12 - 8;
	e1 = tab + 8 + 12;
	f1 = get32(good + tab + 8);
	/* the table's checksum of frame 1 */
	put32(b4, get32(good + e1 + 8) ^ 1);
	read_variant(e1 + 8, b4, 4, 1, "checksum mismatch");
	/* the table's decompressed size of frame 1 */
	put32(b4, get32(good + e1 + 4) - 512);
	read_variant(e1 + 4, b4, 4, 1, "frame header says");
	/* frame 1's bytes: its magic, then its middle */
	put32(b4, 0x12345678);
	read_variant(f1, b4, 4, 1, "not one zstd frame");
	put32(b4, 0xdeadbeef);
	read_variant(f1 + get32(good + e1) / 2, b4, 4, 1, "disk bytes 16384..32768");
}

static void test_map_header(void)
{
	struct zseek z = { .size = 10 * 4096 + 512, .file_size = 1234, .table_hash = 42 };
	struct zmap_hdr h, bad;

	zmap_hdr_init(&h, &z);
	CU_ASSERT_EQUAL(h.n_blocks, 11);
	CU_ASSERT_EQUAL(zmap_bitmap_bytes(11), 4096);
	CU_ASSERT_EQUAL(zmap_bitmap_bytes(32768), 4096);
	CU_ASSERT_EQUAL(zmap_bitmap_bytes(32769), 8192);
	CU_ASSERT_EQUAL(zmap_hdr_check(&h, 8192, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(zmap_hdr_check(&h, 8193, why, sizeof(why)), -EINVAL);
	bad = h;
	bad.magic[0] = 'X';
	CU_ASSERT_EQUAL(zmap_hdr_check(&bad, 8192, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "magic"));
	bad = h;
	bad.disk_size++;
	CU_ASSERT_EQUAL(zmap_hdr_check(&bad, 8192, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "checksum"));
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "XXH64 reference values", test_xxh64 },
		{ "round trip, sizes around frame boundaries", test_round_trip },
		{ "the zstd CLI decompresses and tests our files", test_zstd_cli },
		{ "offset to frame", test_frame_of },
		{ "writer option errors", test_writer_errors },
		{ "seek table: every field corrupted, truncations", test_table_fields },
		{ "corrupt frames fail alone with -EIO", test_frame_corruption },
		{ "zstd-snap map header", test_map_header },
		{ NULL, NULL },
	};
	char cmd[128];
	int ret;

	if (!mkdtemp(dir))
		return 1;
	ret = cu_run("zseek", tests);
	free(good);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
