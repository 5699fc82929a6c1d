/* SPDX-License-Identifier: Apache-2.0 */
/* The zstd seekable format (writer and reader) and the zstd-snap delta map header, shared by the zstd_snap plugin and `cubicle disk`. */
#ifndef CUBICLE_ZSEEK_H
#define CUBICLE_ZSEEK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A seekable file is a run of independent zstd frames followed by one
 * skippable frame holding the seek table (zstd's published format,
 * contrib/seekable_format): the stock `zstd -d` skips the table and gives
 * back the raw bytes. All integers are little-endian.
 *
 *   frame 0 .. frame N-1      zstd frames, contiguous from file offset 0
 *   u32 0x184D2A5E            skippable frame magic
 *   u32 table_len             N * entry + 9
 *   N x { u32 csize, u32 dsize [, u32 xxh64_low32] }
 *   u32 N, u8 descriptor, u32 0x8F92EAB1
 *
 * descriptor bit 7: entries carry a checksum (the low 32 bits of XXH64,
 * seed 0, of the frame's decompressed bytes); bits 6-2 reserved (must be 0);
 * bits 1-0 unused (ignored).
 */
#define ZSEEK_SKIPPABLE_MAGIC 0x184D2A5Eu
#define ZSEEK_MAGIC 0x8F92EAB1u
#define ZSEEK_FOOTER 9u
#define ZSEEK_DESC_CHECKSUM 0x80u
#define ZSEEK_DESC_RESERVED 0x7cu
#define ZSEEK_MAX_FRAMES 0x8000000u           /* 2^27 entries, as zstd's own reader */
#define ZSEEK_MAX_FRAME_SIZE (1u << 30)       /* largest decompressed frame we accept */
#define ZSEEK_DEFAULT_FRAME_SIZE (32u << 10) /* writer default: a cold 4 KiB read decompresses one */

struct zseek_frame {
	uint64_t coff, doff; /* where it starts: compressed file, decompressed data */
	uint32_t csize, dsize;
	uint32_t sum;        /* valid when the table has checksums */
};

/* A parsed seekable file (zseek_open). Read-only after open: any thread. */
struct zseek {
	int fd;              /* the caller's; not closed by zseek_close */
	uint64_t file_size;
	uint64_t size;       /* decompressed total */
	uint64_t table_off;  /* where the seek-table frame starts (= bytes of frames) */
	uint32_t n_frames;
	uint32_t frame_max;  /* largest dsize */
	uint32_t csize_max;  /* largest csize */
	uint32_t frame_size; /* the fixed frame size (every frame but the last), 0 if mixed */
	uint8_t desc;
	bool checksums;
	uint64_t table_hash; /* XXH64 of the whole seek-table frame: identifies the image */
	struct zseek_frame *f;
};

/*
 * zseek_open - read and validate the seek table at the end of @fd.
 * Every entry is checked: sizes within bounds, compressed sizes summing to
 * exactly the table's offset, frame count bounded by the file size. 0, or
 * -EINVAL (not a seekable file / malformed table), -EIO, -ENOMEM, with the
 * reason in @why.
 */
int zseek_open(struct zseek *z, int fd, char *why, size_t whylen);
void zseek_close(struct zseek *z);

/* The frame holding decompressed byte @off (< z->size). */
uint32_t zseek_frame_of(const struct zseek *z, uint64_t off);

/* Per-thread decompression state: a ZSTD_DCtx and a compressed buffer. */
struct zseek_dctx;
struct zseek_dctx *zseek_dctx_new(void);
void zseek_dctx_free(struct zseek_dctx *d);

/*
 * zseek_frame_read - decompress frame @i into @dst (f[i].dsize bytes).
 * The frame must be exactly one zstd frame of f[i].csize bytes decompressing
 * to exactly f[i].dsize bytes, and match the table's checksum if it has
 * them. 0, or -EIO (corrupt, truncated, checksum), -ENOMEM, -errno of
 * pread, with @why naming the frame and its offsets.
 */
int zseek_frame_read(const struct zseek *z, struct zseek_dctx *d, uint32_t i, void *dst,
		     char *why, size_t whylen);

/* Progress callback of the writer: @done of @total input bytes compressed. */
typedef void zseek_progress_fn(void *arg, uint64_t done, uint64_t total);

struct zseek_wopts {
	int level;              /* zstd level; 0 = zstd's default (3) */
	uint32_t frame_size;    /* decompressed bytes per frame; 0 = default */
	bool no_checksums;      /* omit the seek-table checksums */
	zseek_progress_fn *progress; /* (optional) called after each frame */
	void *arg;
	unsigned threads;       /* frames compressed at once (0, 1: on the caller's thread) */
};

struct zseek_wstats {
	uint64_t in_bytes, out_bytes;
	uint32_t n_frames;
};

/*
 * zseek_write - compress all of @in (a regular file or block device, read
 * from offset 0 to its end) into @out as a seekable file. @out is written
 * sequentially from its current position and not synced. With o->threads
 * > 1, that many frames are read, compressed by as many threads and written
 * in order, batch after batch (the file is the same as with one). 0 or
 * -errno, with the reason in @why.
 */
int zseek_write(int in, int out, const struct zseek_wopts *o, struct zseek_wstats *st,
		char *why, size_t whylen);

/* XXH64 (seed 0) of @len bytes: the seek table's checksum is its low 32 bits. */
uint64_t zseek_xxh64(const void *p, size_t len);

/*
 * The zstd-snap delta map (DELTA.map): a 4 KiB header, then one bit per
 * 4 KiB block of the disk (bit set: the block's bytes are in the delta),
 * LSB-first within little-endian bytes. Bits only ever go from 0 to 1.
 */
#define ZMAP_MAGIC "CUBZMAP1"
#define ZMAP_VERSION 1u
#define ZMAP_BLOCK 4096u
#define ZMAP_HDR 4096u

struct zmap_hdr {
	char magic[8];        /* ZMAP_MAGIC */
	uint32_t version;     /* ZMAP_VERSION */
	uint32_t block_size;  /* ZMAP_BLOCK */
	uint64_t disk_size;   /* the base's decompressed size */
	uint64_t n_blocks;    /* ceil(disk_size / block_size) */
	uint64_t base_size;   /* the base file's size */
	uint64_t base_table;  /* the base's zseek.table_hash */
	uint64_t hdr_sum;     /* XXH64 of the bytes above */
};

/* Fill a header for base @z (little-endian on disk: cubicle hosts are). */
void zmap_hdr_init(struct zmap_hdr *h, const struct zseek *z);
/* Check a header read from a map file of @file_size bytes: 0 or -EINVAL with @why. */
int zmap_hdr_check(const struct zmap_hdr *h, uint64_t file_size, char *why, size_t whylen);
/* Bytes of bitmap after the header for @n_blocks blocks (whole 4 KiB pages). */
uint64_t zmap_bitmap_bytes(uint64_t n_blocks);

#endif
