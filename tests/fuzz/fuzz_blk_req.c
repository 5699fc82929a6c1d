/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for the virtio-blk request parser: the input is a chain
 * (segment layout and guest bytes) and the device's limits; whatever the
 * parser accepts must stay inside the chain, the disk and the offered limits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "virtio_blk_req.h"

#define MAX_SEGS 40

static struct cub_vq_chain chain;
static struct blk_req req;

struct in {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct in *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		v = v << 8 | (in->n ? *in->p : 0);
		if (in->n) {
			in->p++;
			in->n--;
		}
	}
	return v;
}

#define CHECK(c)                       \
	do {                           \
		if (!(c))              \
			__builtin_trap(); \
	} while (0)

/* Does [p, p + len) lie inside one of the chain's segments of this kind? */
static bool inside(const void *p, size_t len, bool writable)
{
	unsigned lo = writable ? chain.n_out : 0;
	unsigned hi = writable ? chain.n_out + chain.n_in : chain.n_out;

	for (unsigned i = lo; i < hi; i++) {
		const uint8_t *b = chain.iov[i].iov_base;

		if ((const uint8_t *)p >= b && len <= chain.iov[i].iov_len &&
		    (size_t)((const uint8_t *)p - b) <= chain.iov[i].iov_len - len)
			return true;
	}
	return false;
}

static void check(const struct blk_limits *lim, int ret)
{
	uint64_t total = 0;

	if (ret < 0) {
		CHECK(req.verdict == BLK_MALFORMED);
		return;
	}
	CHECK(req.status && inside(req.status, 1, true));
	*req.status = 0xff; /* the device writes it: ASan checks the byte */
	if (req.verdict == BLK_STATUS) {
		CHECK(req.status_val == VIRTIO_BLK_S_IOERR || req.status_val == VIRTIO_BLK_S_UNSUPP);
		CHECK(req.why);
		return;
	}
	CHECK(req.verdict == BLK_DO);
	CHECK(req.n_iov >= 0 && req.n_iov <= CUB_VQ_MAX_SEGS);
	for (int i = 0; i < req.n_iov; i++) {
		bool wr = req.type != VIRTIO_BLK_T_OUT;

		CHECK(inside(req.iov[i].iov_base, req.iov[i].iov_len, wr));
		total += req.iov[i].iov_len;
		if (wr) {
			/* data never covers the status byte */
			CHECK(!(req.status >= (uint8_t *)req.iov[i].iov_base &&
				req.status < (uint8_t *)req.iov[i].iov_base + req.iov[i].iov_len));
			memset(req.iov[i].iov_base, 0x5a, req.iov[i].iov_len);
		}
	}
	CHECK(total == req.len && req.len <= BLK_MAX_DATA);
	switch (req.type) {
	case VIRTIO_BLK_T_OUT:
		CHECK(!lim->read_only);
		/* fall through */
	case VIRTIO_BLK_T_IN:
		CHECK(req.len % BLK_SECTOR == 0);
		CHECK(req.sector <= lim->capacity &&
		      req.len / BLK_SECTOR <= lim->capacity - req.sector);
		break;
	case VIRTIO_BLK_T_GET_ID:
		CHECK(req.len >= 1 && req.len <= BLK_ID_BYTES);
		break;
	case VIRTIO_BLK_T_FLUSH:
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES: {
		bool d = req.type == VIRTIO_BLK_T_DISCARD;

		CHECK(!lim->read_only && (d ? lim->discard : lim->write_zeroes));
		CHECK(req.n_ranges >= 1 && req.n_ranges <= BLK_MAX_RANGES);
		CHECK(req.n_ranges <= (d ? lim->max_discard_seg : lim->max_write_zeroes_seg));
		for (unsigned i = 0; i < req.n_ranges; i++) {
			const struct blk_range *g = &req.ranges[i];

			CHECK(g->num_sectors <= (d ? lim->max_discard_sectors
						   : lim->max_write_zeroes_sectors));
			CHECK(g->sector <= lim->capacity &&
			      g->num_sectors <= lim->capacity - g->sector);
			CHECK(!(g->flags & ~VIRTIO_BLK_WZ_FLAG_UNMAP));
			CHECK(!(d && g->flags));
		}
		break;
	}
	default:
		__builtin_trap(); /* an unknown type must not be BLK_DO */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct blk_limits lim;
	void *bufs[MAX_SEGS] = { 0 };
	unsigned n_out, n_in;
	uint8_t flags;

	/* the device */
	flags = (uint8_t)take(&in, 1);
	lim.capacity = take(&in, 1) & 0x80 ? UINT64_MAX - take(&in, 2) : take(&in, 3);
	lim.read_only = flags & 1;
	lim.discard = flags & 2;
	lim.write_zeroes = flags & 4;
	lim.max_discard_sectors = (uint32_t)take(&in, 4);
	lim.max_discard_seg = (uint32_t)take(&in, 1);
	lim.max_write_zeroes_sectors = (uint32_t)take(&in, 4);
	lim.max_write_zeroes_seg = (uint32_t)take(&in, 1);

	/* the chain: each segment its own allocation, so ASan sees any overrun */
	n_out = (unsigned)take(&in, 1) % (MAX_SEGS / 2 + 1);
	n_in = (unsigned)take(&in, 1) % (MAX_SEGS / 2 + 1);
	chain.head = 0;
	chain.n_out = (uint16_t)n_out;
	chain.n_in = (uint16_t)n_in;
	chain.out = chain.iov;
	chain.in = chain.iov + n_out;
	chain.out_len = chain.in_len = 0;
	for (unsigned i = 0; i < n_out + n_in; i++) {
		size_t len = (size_t)take(&in, 2) % 1100;

		bufs[i] = malloc(len ? len : 1);
		if (!bufs[i])
			abort();
		for (size_t j = 0; j < len; j++)
			((uint8_t *)bufs[i])[j] = (uint8_t)take(&in, 1);
		chain.iov[i].iov_base = bufs[i];
		chain.iov[i].iov_len = len;
		if (i < n_out)
			chain.out_len += len;
		else
			chain.in_len += len;
	}
	check(&lim, blk_parse(&chain, &lim, &req));
	for (unsigned i = 0; i < n_out + n_in; i++)
		free(bufs[i]);
	return 0;
}
