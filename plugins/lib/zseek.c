/* SPDX-License-Identifier: Apache-2.0 */
/* The zstd seekable format on top of libzstd's plain API: the writer, the validating seek-table reader, single-frame reads, XXH64, and the zstd-snap map header. */
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "iov.h"
#include "zseek.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the zstd-snap map header is stored in host order; cubicle hosts are little-endian");

/* The smallest well-formed frame: a skippable frame's magic and length. */
#define MIN_FRAME 8u

__attribute__((format(printf, 4, 5)))
static int say(char *why, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return err;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- XXH64 (seed 0): libxxhash ---- */

uint64_t zseek_xxh64(const void *data, size_t len)
{
	return XXH64(data, len, 0);
}

/* ---- reader ---- */

static int read_table(struct zseek *z, char *why, size_t wl)
{
	uint8_t foot[ZSEEK_FOOTER], *t;
	uint64_t n, esz, tlen, coff = 0, doff = 0;
	bool fixed = true;
	int err;

	if (z->file_size < 8 + ZSEEK_FOOTER)
		return say(why, wl, -EINVAL, "not a zstd seekable file: %llu bytes, too small for a seek table",
			   (unsigned long long)z->file_size);
	err = fullio_pread(z->fd, foot, sizeof(foot), z->file_size - ZSEEK_FOOTER);
	if (err)
		return say(why, wl, err, "cannot read the seek table footer: %s", strerror(-err));
	if (get32(foot + 5) != ZSEEK_MAGIC)
		return say(why, wl, -EINVAL, "not a zstd seekable file (no seek table at its end)");
	z->desc = foot[4];
	if (z->desc & ZSEEK_DESC_RESERVED)
		return say(why, wl, -EINVAL, "seek table descriptor 0x%02x has reserved bits set (a newer format?)",
			   z->desc);
	z->checksums = z->desc & ZSEEK_DESC_CHECKSUM;
	n = get32(foot);
	esz = z->checksums ? 12 : 8;
	tlen = n * esz + ZSEEK_FOOTER;
	if (n > ZSEEK_MAX_FRAMES || tlen + 8 > z->file_size ||
	    n * MIN_FRAME > z->file_size - tlen - 8)
		return say(why, wl, -EINVAL, "seek table claims %llu frames: impossible in a file of %llu bytes",
			   (unsigned long long)n, (unsigned long long)z->file_size);
	z->table_off = z->file_size - tlen - 8;
	t = malloc(tlen + 8);
	z->f = calloc(n ? n : 1, sizeof(*z->f));
	if (!t || !z->f) {
		free(t);
		return say(why, wl, -ENOMEM, "out of memory for a seek table of %llu frames",
			   (unsigned long long)n);
	}
	err = fullio_pread(z->fd, t, tlen + 8, z->table_off);
	if (err) {
		say(why, wl, err, "cannot read the seek table: %s", strerror(-err));
		goto out;
	}
	err = -EINVAL;
	if (get32(t) != ZSEEK_SKIPPABLE_MAGIC || get32(t + 4) != tlen) {
		say(why, wl, err, "seek table frame header at offset %llu is wrong (magic 0x%08x, length %u; want 0x%08x, %llu)",
		    (unsigned long long)z->table_off, get32(t), get32(t + 4), ZSEEK_SKIPPABLE_MAGIC,
		    (unsigned long long)tlen);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *e = t + 8 + i * esz;
		struct zseek_frame *f = &z->f[i];

		f->coff = coff;
		f->doff = doff;
		f->csize = get32(e);
		f->dsize = get32(e + 4);
		f->sum = z->checksums ? get32(e + 8) : 0;
		if (f->csize < MIN_FRAME || f->dsize > ZSEEK_MAX_FRAME_SIZE) {
			say(why, wl, err, "seek table entry %u: compressed %u, decompressed %u bytes: out of bounds",
			    i, f->csize, f->dsize);
			goto out;
		}
		coff += f->csize;
		doff += f->dsize;
		if (coff > z->table_off) {
			say(why, wl, err, "seek table entry %u: frames end at %llu, past the seek table at %llu",
			    i, (unsigned long long)coff, (unsigned long long)z->table_off);
			goto out;
		}
		if (f->dsize > z->frame_max)
			z->frame_max = f->dsize;
		if (f->csize > z->csize_max)
			z->csize_max = f->csize;
		if (i && i + 1 < n && f->dsize != z->f[0].dsize)
			fixed = false;
	}
	if (coff != z->table_off) {
		say(why, wl, err, "frames' compressed sizes sum to %llu bytes, but the seek table starts at %llu (truncated or padded file?)",
		    (unsigned long long)coff, (unsigned long long)z->table_off);
		goto out;
	}
	z->n_frames = (uint32_t)n;
	z->size = doff;
	z->frame_size = n && fixed && z->f[n - 1].dsize <= z->f[0].dsize ? z->f[0].dsize : 0;
	z->table_hash = zseek_xxh64(t, tlen + 8);
	err = 0;
out:
	free(t);
	return err;
}

int zseek_open(struct zseek *z, int fd, char *why, size_t whylen)
{
	off_t end;
	int err;

	memset(z, 0, sizeof(*z));
	z->fd = fd;
	end = lseek(fd, 0, SEEK_END);
	if (end < 0)
		return say(why, whylen, -errno, "cannot find the file's size: %s", strerror(errno));
	z->file_size = (uint64_t)end;
	err = read_table(z, why, whylen);
	if (err) {
		free(z->f);
		z->f = NULL;
	}
	return err;
}

void zseek_close(struct zseek *z)
{
	free(z->f);
	z->f = NULL;
}

uint32_t zseek_frame_of(const struct zseek *z, uint64_t off)
{
	uint32_t lo = 0, hi = z->n_frames;

	/* Frames of one size (every one but the last): no search. */
	if (z->frame_size && off / z->frame_size < z->n_frames) {
		uint32_t i = (uint32_t)(off / z->frame_size);

		if (z->f[i].doff <= off && off - z->f[i].doff < z->f[i].dsize)
			return i;
	}
	/* The last frame starting at or before off: zero-sized frames sharing
	 * its start come before it, so they are never chosen. */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (z->f[mid].doff <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

struct zseek_dctx {
	ZSTD_DCtx *dc;
	uint8_t *buf;
	size_t cap;
};

struct zseek_dctx *zseek_dctx_new(void)
{
	struct zseek_dctx *d = calloc(1, sizeof(*d));

	if (d && !(d->dc = ZSTD_createDCtx())) {
		free(d);
		d = NULL;
	}
	return d;
}

void zseek_dctx_free(struct zseek_dctx *d)
{
	if (!d)
		return;
	ZSTD_freeDCtx(d->dc);
	free(d->buf);
	free(d);
}

int zseek_frame_read(const struct zseek *z, struct zseek_dctx *d, uint32_t i, void *dst,
		     char *why, size_t wl)
{
	const struct zseek_frame *f;
	unsigned long long fcs;
	char at[128];
	size_t r;
	int err;

	if (i >= z->n_frames)
		return say(why, wl, -EINVAL, "frame %u does not exist (%u frames)", i, z->n_frames);
	f = &z->f[i];
	snprintf(at, sizeof(at), "frame %u at offset %llu (disk bytes %llu..%llu)", i,
		 (unsigned long long)f->coff, (unsigned long long)f->doff,
		 (unsigned long long)(f->doff + f->dsize));
	if (d->cap < f->csize) {
		uint8_t *b = realloc(d->buf, f->csize);

		if (!b)
			return say(why, wl, -ENOMEM, "%s: out of memory", at);
		d->buf = b;
		d->cap = f->csize;
	}
	err = fullio_pread(z->fd, d->buf, f->csize, f->coff);
	if (err)
		return say(why, wl, err, "%s: cannot read %u bytes: %s", at, f->csize,
			   err == -EIO ? "the file is shorter than its seek table says" : strerror(-err));
	r = ZSTD_findFrameCompressedSize(d->buf, f->csize);
	if (ZSTD_isError(r) || r != f->csize)
		return say(why, wl, -EIO, "%s: not one zstd frame of %u bytes (%s)", at, f->csize,
			   ZSTD_isError(r) ? ZSTD_getErrorName(r) : "size differs");
	fcs = ZSTD_getFrameContentSize(d->buf, f->csize);
	if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != f->dsize)
		return say(why, wl, -EIO, "%s: frame header says %llu bytes, seek table %u", at, fcs,
			   f->dsize);
	r = ZSTD_decompressDCtx(d->dc, dst, f->dsize, d->buf, f->csize);
	if (ZSTD_isError(r) || r != f->dsize)
		return say(why, wl, -EIO, "%s: %s", at,
			   ZSTD_isError(r) ? ZSTD_getErrorName(r) : "decompressed size differs");
	if (z->checksums && (uint32_t)zseek_xxh64(dst, f->dsize) != f->sum)
		return say(why, wl, -EIO, "%s: checksum mismatch", at);
	return 0;
}

/* ---- writer ---- */

/* The input's size for progress: a file's, a block device's, or 0 (unknown). */
static uint64_t input_size(int fd)
{
	struct stat st;
	uint64_t sz = 0;

	if (fstat(fd, &st))
		return 0;
	if (S_ISBLK(st.st_mode) && !ioctl(fd, BLKGETSIZE64, &sz))
		return sz;
	return S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

static int table_write(int out, const uint32_t *ent, uint32_t n, bool sums, char *why, size_t wl)
{
	size_t esz = sums ? 12 : 8, len = 8 + n * esz + ZSEEK_FOOTER;
	uint8_t *t = malloc(len), *p;
	int err;

	if (!t)
		return say(why, wl, -ENOMEM, "out of memory for the seek table");
	put32(t, ZSEEK_SKIPPABLE_MAGIC);
	put32(t + 4, (uint32_t)(len - 8));
	p = t + 8;
	for (uint32_t i = 0; i < n; i++, p += esz) {
		put32(p, ent[3 * i]);
		put32(p + 4, ent[3 * i + 1]);
		if (sums)
			put32(p + 8, ent[3 * i + 2]);
	}
	put32(p, n);
	p[4] = sums ? ZSEEK_DESC_CHECKSUM : 0;
	put32(p + 5, ZSEEK_MAGIC);
	err = fullio_write(out, t, len);
	free(t);
	return err ? say(why, wl, err, "cannot write the seek table: %s", strerror(-err)) : 0;
}

#define ZSEEK_MAX_THREADS 64

/* One frame of a batch: its input, output and compressor. */
struct zjob {
	ZSTD_CCtx *cc;
	uint8_t *src, *dst;
	size_t len, bound, c; /* c: compressed bytes, or a zstd error code */
	uint32_t sum;         /* the seek table's checksum of src */
	pthread_t t;
	bool started;
};

static void *zjob_run(void *arg)
{
	struct zjob *j = arg;

	j->c = ZSTD_compress2(j->cc, j->dst, j->bound, j->src, j->len);
	j->sum = (uint32_t)zseek_xxh64(j->src, j->len);
	return NULL;
}

static int zjobs_new(struct zjob *j, unsigned n, uint32_t fsz, int level, char *why, size_t wl)
{
	for (unsigned i = 0; i < n; i++) {
		j[i].bound = ZSTD_compressBound(fsz);
		j[i].src = malloc(fsz);
		j[i].dst = malloc(j[i].bound);
		j[i].cc = ZSTD_createCCtx();
		if (!j[i].src || !j[i].dst || !j[i].cc)
			return say(why, wl, -ENOMEM, "out of memory");
		/* Every frame carries its size and its own checksum (the same
		 * low 32 bits of XXH64 as the seek table's), so `zstd -d` and
		 * `zstd -t` verify it. */
		if (ZSTD_isError(ZSTD_CCtx_setParameter(j[i].cc, ZSTD_c_compressionLevel, level)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(j[i].cc, ZSTD_c_checksumFlag, 1)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(j[i].cc, ZSTD_c_contentSizeFlag, 1)))
			return say(why, wl, -EINVAL, "libzstd refused the compression parameters");
	}
	return 0;
}

static void zjobs_free(struct zjob *j, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		ZSTD_freeCCtx(j[i].cc);
		free(j[i].src);
		free(j[i].dst);
	}
}

/* Compress jobs 0..n-1: on threads when there are several. */
static void zjobs_run(struct zjob *j, unsigned n)
{
	for (unsigned i = 1; i < n; i++)
		j[i].started = !pthread_create(&j[i].t, NULL, zjob_run, &j[i]);
	for (unsigned i = 0; i < n; i++)
		if (!i || !j[i].started)
			zjob_run(&j[i]);
	for (unsigned i = 1; i < n; i++)
		if (j[i].started) {
			pthread_join(j[i].t, NULL);
			j[i].started = false;
		}
}

int zseek_write(int in, int out, const struct zseek_wopts *o, struct zseek_wstats *st,
		char *why, size_t wl)
{
	uint32_t fsz = o->frame_size ? o->frame_size : ZSEEK_DEFAULT_FRAME_SIZE;
	unsigned nt = o->threads > 1 ? o->threads : 1;
	uint64_t total = input_size(in), off = 0;
	uint32_t *ent = NULL, n = 0, cap = 0;
	struct zjob *jobs;
	bool end = false;
	int err = 0;

	memset(st, 0, sizeof(*st));
	if (fsz < 4096 || fsz > (64u << 20))
		return say(why, wl, -EINVAL, "frame size %u: expected 4 KiB .. 64 MiB", fsz);
	if (o->level < ZSTD_minCLevel() || o->level > ZSTD_maxCLevel())
		return say(why, wl, -EINVAL, "level %d: expected %d .. %d", o->level, ZSTD_minCLevel(),
			   ZSTD_maxCLevel());
	if (nt > ZSEEK_MAX_THREADS)
		nt = ZSEEK_MAX_THREADS;
	jobs = calloc(nt, sizeof(*jobs));
	if (!jobs)
		return say(why, wl, -ENOMEM, "out of memory");
	err = zjobs_new(jobs, nt, fsz, o->level, why, wl);
	while (!err && !end) {
		unsigned b = 0;

		/* A batch: up to nt frames read, compressed at once, written in order. */
		while (b < nt && !end) {
			int64_t got = fullio_pread_upto(in, jobs[b].src, fsz, off);

			if (got < 0) {
				err = say(why, wl, (int)got, "read error at offset %llu: %s",
					  (unsigned long long)off, strerror((int)-got));
				break;
			}
			if (!got)
				break;
			jobs[b++].len = (size_t)got;
			off += (uint64_t)got;
			end = (size_t)got < fsz;
		}
		if (err || !b)
			break;
		zjobs_run(jobs, b);
		for (unsigned i = 0; i < b && !err; i++) {
			struct zjob *j = &jobs[i];

			if (n == ZSEEK_MAX_FRAMES) {
				err = say(why, wl, -EFBIG, "more than %u frames: use a larger frame size",
					  ZSEEK_MAX_FRAMES);
				break;
			}
			if (ZSTD_isError(j->c)) {
				err = say(why, wl, -EIO, "compressing frame %u: %s", n,
					  ZSTD_getErrorName(j->c));
				break;
			}
			err = fullio_write(out, j->dst, j->c);
			if (err) {
				say(why, wl, err, "write error: %s", strerror(-err));
				break;
			}
			if (n == cap) {
				uint32_t *e = realloc(ent, (size_t)(cap ? 2 * cap : 1024) * 3 * sizeof(*e));

				if (!e) {
					err = say(why, wl, -ENOMEM, "out of memory");
					break;
				}
				ent = e;
				cap = cap ? 2 * cap : 1024;
			}
			ent[3 * n] = (uint32_t)j->c;
			ent[3 * n + 1] = (uint32_t)j->len;
			ent[3 * n + 2] = j->sum;
			n++;
			st->out_bytes += j->c;
		}
		if (!err && o->progress)
			o->progress(o->arg, off, total > off ? total : off);
	}
	if (!err)
		err = table_write(out, ent, n, !o->no_checksums, why, wl);
	if (!err) {
		st->in_bytes = off;
		st->n_frames = n;
		st->out_bytes += 8 + (uint64_t)n * (o->no_checksums ? 8 : 12) + ZSEEK_FOOTER;
	}
	zjobs_free(jobs, nt);
	free(jobs);
	free(ent);
	return err;
}

/* ---- the zstd-snap map header ---- */

void zmap_hdr_init(struct zmap_hdr *h, const struct zseek *z)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, ZMAP_MAGIC, sizeof(h->magic));
	h->version = ZMAP_VERSION;
	h->block_size = ZMAP_BLOCK;
	h->disk_size = z->size;
	h->n_blocks = (z->size + ZMAP_BLOCK - 1) / ZMAP_BLOCK;
	h->base_size = z->file_size;
	h->base_table = z->table_hash;
	h->hdr_sum = zseek_xxh64(h, offsetof(struct zmap_hdr, hdr_sum));
}

uint64_t zmap_bitmap_bytes(uint64_t n_blocks)
{
	uint64_t bytes = (n_blocks + 7) / 8;

	return (bytes + ZMAP_HDR - 1) / ZMAP_HDR * ZMAP_HDR;
}

int zmap_hdr_check(const struct zmap_hdr *h, uint64_t file_size, char *why, size_t wl)
{
	if (memcmp(h->magic, ZMAP_MAGIC, sizeof(h->magic)))
		return say(why, wl, -EINVAL, "not a zstd-snap map (no %s magic)", ZMAP_MAGIC);
	if (h->hdr_sum != zseek_xxh64(h, offsetof(struct zmap_hdr, hdr_sum)))
		return say(why, wl, -EINVAL, "map header checksum mismatch");
	if (h->version != ZMAP_VERSION || h->block_size != ZMAP_BLOCK)
		return say(why, wl, -EINVAL, "map version %u, block size %u: expected %u, %u",
			   h->version, h->block_size, ZMAP_VERSION, ZMAP_BLOCK);
	if (h->n_blocks != (h->disk_size + ZMAP_BLOCK - 1) / ZMAP_BLOCK ||
	    h->n_blocks > (UINT64_MAX >> 16) ||
	    file_size != ZMAP_HDR + zmap_bitmap_bytes(h->n_blocks))
		return say(why, wl, -EINVAL, "map of %llu blocks is %llu bytes: expected %llu",
			   (unsigned long long)h->n_blocks, (unsigned long long)file_size,
			   (unsigned long long)(ZMAP_HDR + zmap_bitmap_bytes(h->n_blocks)));
	return 0;
}
