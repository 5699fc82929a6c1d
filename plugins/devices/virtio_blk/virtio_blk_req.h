/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-blk request parsing (virtio 1.x §5.2.6), private to the virtio-blk
 * plugin; its unit test, fuzzer and benchmark compile it in too. */
#ifndef CUBICLE_VIRTIO_BLK_REQ_H
#define CUBICLE_VIRTIO_BLK_REQ_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include <cubicle/virtio.h>

#define VIRTIO_BLK_T_IN		  0
#define VIRTIO_BLK_T_OUT	  1
#define VIRTIO_BLK_T_FLUSH	  4
#define VIRTIO_BLK_T_GET_ID	  8
#define VIRTIO_BLK_T_DISCARD	  11
#define VIRTIO_BLK_T_WRITE_ZEROES 13

#define VIRTIO_BLK_S_OK		0
#define VIRTIO_BLK_S_IOERR	1
#define VIRTIO_BLK_S_UNSUPP	2

#define VIRTIO_BLK_WZ_FLAG_UNMAP 1u

#define BLK_SECTOR	 512u
#define BLK_HDR_LEN	 16u /* le32 type, le32 reserved, le64 sector */
#define BLK_RANGE_LEN	 16u /* le64 sector, le32 num_sectors, le32 flags */
#define BLK_ID_BYTES	 20u
#define BLK_MAX_RANGES	 32u /* the most discard / write-zeroes segments we offer */
#define BLK_MAX_DATA	 (UINT32_MAX - 1u) /* so used.len (data + status) fits 32 bits */

/* What requests may do: the device's config and the negotiated features. */
struct blk_limits {
	uint64_t capacity; /* sectors */
	bool read_only;
	bool discard, write_zeroes; /* negotiated and supported */
	uint32_t max_discard_sectors, max_discard_seg;
	uint32_t max_write_zeroes_sectors, max_write_zeroes_seg;
};

struct blk_range {
	uint64_t sector;
	uint32_t num_sectors;
	uint32_t flags;
};

enum blk_verdict {
	BLK_DO,        /* valid: do the I/O, then write the status */
	BLK_STATUS,    /* write status_val and complete, no I/O */
	BLK_MALFORMED, /* no status byte to report into: the chain is broken */
};

/*
 * A request as the device acts on it. Everything the guest could change
 * later (type, sector, ranges) is a copy; iov and status point into guest
 * RAM, which the device only writes (IN data, GET_ID, status) or hands to
 * the backend (OUT data).
 */
struct blk_req {
	enum blk_verdict verdict;
	uint8_t status_val; /* BLK_STATUS: VIRTIO_BLK_S_IOERR or _UNSUPP */
	const char *why;    /* BLK_STATUS, BLK_MALFORMED: for a rate-limited log */
	uint32_t type;
	uint64_t sector;
	uint8_t *status;    /* the last device-writable byte */
	uint64_t len;       /* data bytes in iov */
	int n_iov;
	unsigned n_ranges;
	struct blk_range ranges[BLK_MAX_RANGES];
	struct iovec iov[CUB_VQ_MAX_SEGS];
};

static inline uint32_t blk_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t blk_le64(const uint8_t *p)
{
	return (uint64_t)blk_le32(p) | (uint64_t)blk_le32(p + 4) << 32;
}

/* Copy len bytes starting skip bytes into iov; returns the bytes copied. */
static inline uint64_t blk_iov_read(const struct iovec *iov, unsigned n, uint64_t skip,
				    void *dst, uint64_t len)
{
	uint8_t *d = dst;
	uint64_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		uint64_t l = iov[i].iov_len, c;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		c = l - skip < len - done ? l - skip : len - done;
		memcpy(d + done, (const uint8_t *)iov[i].iov_base + skip, (size_t)c);
		done += c;
		skip = 0;
	}
	return done;
}

/* Point r->iov at bytes [skip, skip + len) of iov. */
static inline void blk_iov_slice(struct blk_req *r, const struct iovec *iov, unsigned n,
				 uint64_t skip, uint64_t len)
{
	r->n_iov = 0;
	r->len = len;
	for (unsigned i = 0; i < n && len; i++) {
		uint64_t l = iov[i].iov_len, c;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		c = l - skip < len ? l - skip : len;
		r->iov[r->n_iov].iov_base = (uint8_t *)iov[i].iov_base + skip;
		r->iov[r->n_iov++].iov_len = (size_t)c;
		len -= c;
		skip = 0;
	}
}

static inline int blk_fail(struct blk_req *r, enum blk_verdict v, uint8_t st, const char *why)
{
	r->verdict = v;
	r->status_val = st;
	r->why = why;
	return v == BLK_MALFORMED ? -1 : 0;
}

/* Does [sector, sector + n) lie within the disk? Overflow-safe. */
static inline bool blk_in_disk(const struct blk_limits *lim, uint64_t sector, uint64_t n)
{
	return sector <= lim->capacity && n <= lim->capacity - sector;
}

static inline int blk_parse_ranges(const struct blk_limits *lim, struct blk_req *r,
				   const struct cub_vq_chain *c, uint64_t out_len)
{
	bool discard = r->type == VIRTIO_BLK_T_DISCARD;
	uint32_t max_seg = discard ? lim->max_discard_seg : lim->max_write_zeroes_seg;
	uint32_t max_sec = discard ? lim->max_discard_sectors : lim->max_write_zeroes_sectors;
	uint64_t payload = out_len - BLK_HDR_LEN;
	uint8_t raw[BLK_RANGE_LEN];

	if (!(discard ? lim->discard : lim->write_zeroes))
		return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_UNSUPP,
				discard ? "discard not negotiated" : "write-zeroes not negotiated");
	if (lim->read_only)
		return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR, "write to a read-only disk");
	if (!payload || payload % BLK_RANGE_LEN)
		return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
				"discard/write-zeroes payload is not a whole number of segments");
	if (payload / BLK_RANGE_LEN > max_seg || payload / BLK_RANGE_LEN > BLK_MAX_RANGES)
		return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
				"more discard/write-zeroes segments than offered");
	r->n_ranges = (unsigned)(payload / BLK_RANGE_LEN);
	for (unsigned i = 0; i < r->n_ranges; i++) {
		struct blk_range *g = &r->ranges[i];

		blk_iov_read(c->out, c->n_out, BLK_HDR_LEN + (uint64_t)i * BLK_RANGE_LEN, raw,
			     sizeof(raw));
		g->sector = blk_le64(raw);
		g->num_sectors = blk_le32(raw + 8);
		g->flags = blk_le32(raw + 12);
		if (g->flags & ~VIRTIO_BLK_WZ_FLAG_UNMAP)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_UNSUPP,
					"unknown discard/write-zeroes flags");
		if (discard && (g->flags & VIRTIO_BLK_WZ_FLAG_UNMAP))
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_UNSUPP, "discard with unmap set");
		if (g->num_sectors > max_sec)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
					"discard/write-zeroes segment longer than offered");
		if (!blk_in_disk(lim, g->sector, g->num_sectors))
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
					"discard/write-zeroes beyond the end of the disk");
	}
	return 0;
}

/*
 * Parse chain c under lim into r. Returns 0 with r->verdict BLK_DO or
 * BLK_STATUS, or -1 with BLK_MALFORMED when the chain has no device-writable
 * byte to put a status into (or is otherwise unusable). Reads guest memory
 * only through c's segments, and each header byte once.
 */
static inline int blk_parse(const struct cub_vq_chain *c, const struct blk_limits *lim,
			    struct blk_req *r)
{
	uint64_t out_len = 0, in_len = 0, data;
	uint8_t hdr[BLK_HDR_LEN];
	int last = -1;

	r->verdict = BLK_DO;
	r->why = NULL;
	r->status = NULL;
	r->len = 0;
	r->n_iov = 0;
	r->n_ranges = 0;
	r->type = UINT32_MAX;
	r->sector = 0;
	if ((unsigned)c->n_out + c->n_in > CUB_VQ_MAX_SEGS)
		return blk_fail(r, BLK_MALFORMED, 0, "chain longer than the segment limit");
	for (unsigned i = 0; i < c->n_out; i++) {
		if (c->out[i].iov_len > UINT64_MAX - out_len)
			return blk_fail(r, BLK_MALFORMED, 0, "chain length overflows");
		out_len += c->out[i].iov_len;
	}
	for (unsigned i = 0; i < c->n_in; i++) {
		if (c->in[i].iov_len > UINT64_MAX - in_len)
			return blk_fail(r, BLK_MALFORMED, 0, "chain length overflows");
		in_len += c->in[i].iov_len;
		if (c->in[i].iov_len)
			last = (int)i;
	}
	if (last < 0)
		return blk_fail(r, BLK_MALFORMED, 0, "no device-writable status byte");
	r->status = (uint8_t *)c->in[last].iov_base + c->in[last].iov_len - 1;
	data = in_len - 1; /* writable bytes before the status byte */

	if (out_len < BLK_HDR_LEN)
		return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR, "request header too short");
	if (c->out[0].iov_len >= sizeof(hdr)) /* the header in one segment: Linux's way */
		memcpy(hdr, c->out[0].iov_base, sizeof(hdr));
	else
		blk_iov_read(c->out, c->n_out, 0, hdr, sizeof(hdr));
	r->type = blk_le32(hdr);
	r->sector = blk_le64(hdr + 8);

	switch (r->type) {
	case VIRTIO_BLK_T_IN:
		if (data > BLK_MAX_DATA)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR, "request larger than 4 GiB");
		if (data % BLK_SECTOR)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
					"read length not a multiple of 512");
		if (!blk_in_disk(lim, r->sector, data / BLK_SECTOR))
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
					"read beyond the end of the disk");
		blk_iov_slice(r, c->in, c->n_in, 0, data);
		return 0;
	case VIRTIO_BLK_T_OUT:
		if (lim->read_only)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR, "write to a read-only disk");
		if (out_len - BLK_HDR_LEN > BLK_MAX_DATA)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR, "request larger than 4 GiB");
		if ((out_len - BLK_HDR_LEN) % BLK_SECTOR)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
					"write length not a multiple of 512");
		if (!blk_in_disk(lim, r->sector, (out_len - BLK_HDR_LEN) / BLK_SECTOR))
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR,
					"write beyond the end of the disk");
		blk_iov_slice(r, c->out, c->n_out, BLK_HDR_LEN, out_len - BLK_HDR_LEN);
		return 0;
	case VIRTIO_BLK_T_FLUSH:
		return 0;
	case VIRTIO_BLK_T_GET_ID:
		if (!data)
			return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_IOERR, "GET_ID without a buffer");
		blk_iov_slice(r, c->in, c->n_in, 0, data < BLK_ID_BYTES ? data : BLK_ID_BYTES);
		return 0;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return blk_parse_ranges(lim, r, c, out_len);
	default:
		return blk_fail(r, BLK_STATUS, VIRTIO_BLK_S_UNSUPP, "unsupported request type");
	}
}

#endif
