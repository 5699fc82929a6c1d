/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of virtio-blk's request parser (virtio_blk_req.h) on fake guest memory. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cunit_main.h"
#include "virtio_blk_support.h"

#define CAP 2048 /* sectors in the parser tests: 1 MiB */

static struct blk_req req;

static const struct blk_limits lim_rw = {
	.capacity = CAP, .discard = true, .write_zeroes = true,
	.max_discard_sectors = 1024, .max_discard_seg = 4,
	.max_write_zeroes_sectors = 1024, .max_write_zeroes_seg = 2,
};

static int parse(const struct blk_limits *lim)
{
	return blk_parse(&ch, lim, &req);
}

static void expect_status(const struct blk_limits *lim, uint8_t st, const char *why)
{
	CU_ASSERT_EQUAL(parse(lim), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_STATUS);
	CU_ASSERT_EQUAL(req.status_val, st);
	CU_ASSERT_PTR_NOT_NULL(req.status);
	if (!req.why || !strstr(req.why, why))
		fprintf(stderr, "\n  got: %s\n  want: %s\n", req.why ? req.why : "(none)", why);
	CU_ASSERT(req.why && strstr(req.why, why));
}

static void test_parse_read_write(void)
{
	uint8_t *h, *d;

	simple(VIRTIO_BLK_T_IN, 8, 4096, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	CU_ASSERT_EQUAL(req.type, VIRTIO_BLK_T_IN);
	CU_ASSERT_EQUAL(req.sector, 8);
	CU_ASSERT_EQUAL(req.len, 4096);
	CU_ASSERT_EQUAL(req.n_iov, 1);
	CU_ASSERT_PTR_EQUAL(req.status, ch.in[1].iov_base);

	/* data and status in one writable segment, header split in three */
	fake_chain_init(&ch, 1);
	h = hdr(VIRTIO_BLK_T_IN, CAP - 2);
	seg(h, 3, false);
	seg(h + 3, 9, false);
	seg(h + 12, 4, false);
	d = gmem(1025);
	seg(d, 1025, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	CU_ASSERT_EQUAL(req.sector, CAP - 2);
	CU_ASSERT_EQUAL(req.len, 1024);
	CU_ASSERT_EQUAL(req.n_iov, 1);
	CU_ASSERT_EQUAL(req.iov[0].iov_len, 1024);
	CU_ASSERT_PTR_EQUAL(req.status, d + 1024);

	/* write: header and data in one readable segment */
	fake_chain_init(&ch, 2);
	d = gmem(16 + 1024);
	memcpy(d, hdr(VIRTIO_BLK_T_OUT, 0), 16);
	seg(d, 16 + 1024, false);
	seg(gmem(1), 1, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	CU_ASSERT_EQUAL(req.len, 1024);
	CU_ASSERT_PTR_EQUAL(req.iov[0].iov_base, d + 16);

	/* zero-length segments anywhere are harmless; the last one is not the status */
	fake_chain_init(&ch, 3);
	seg(hdr(VIRTIO_BLK_T_FLUSH, 0), 16, false);
	seg(gmem(1), 0, false);
	seg(gmem(1), 1, true);
	seg(gmem(1), 0, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	CU_ASSERT_PTR_EQUAL(req.status, ch.in[0].iov_base);
}

static void test_parse_malformed(void)
{
	/* no writable byte at all: nowhere to put a status */
	fake_chain_init(&ch, 1);
	seg(hdr(VIRTIO_BLK_T_IN, 0), 16, false);
	seg(gmem(512), 512, false);
	CU_ASSERT_EQUAL(parse(&lim_rw), -1);
	CU_ASSERT_EQUAL(req.verdict, BLK_MALFORMED);
	fake_chain_init(&ch, 1);
	seg(hdr(VIRTIO_BLK_T_IN, 0), 16, false);
	seg(gmem(1), 0, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), -1);
	fake_chain_init(&ch, 1);
	CU_ASSERT_EQUAL(parse(&lim_rw), -1);
	/* more segments than any chain may have */
	fake_chain_init(&ch, 1);
	ch.n_out = CUB_VQ_MAX_SEGS;
	ch.n_in = 1;
	CU_ASSERT_EQUAL(parse(&lim_rw), -1);
	/* lengths that overflow */
	fake_chain_init(&ch, 1);
	seg(gmem(16), SIZE_MAX, false);
	seg(gmem(16), SIZE_MAX, false);
	seg(gmem(1), 1, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), -1);

	/* header too short, but a status byte: IOERR */
	fake_chain_init(&ch, 1);
	seg(hdr(VIRTIO_BLK_T_IN, 0), 15, false);
	seg(gmem(1), 1, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "header too short");
	fake_chain_init(&ch, 1);
	seg(gmem(513), 513, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "header too short");
}

static void test_parse_ranges_of_io(void)
{
	simple(VIRTIO_BLK_T_IN, CAP, 0, true); /* empty read at the very end: fine */
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	simple(VIRTIO_BLK_T_IN, CAP - 1, 1024, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "beyond the end");
	simple(VIRTIO_BLK_T_IN, CAP + 1, 0, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "beyond the end");
	simple(VIRTIO_BLK_T_OUT, UINT64_MAX - 1, 1024, false);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "beyond the end");
	simple(VIRTIO_BLK_T_IN, UINT64_MAX / 512, 512, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "beyond the end");
	simple(VIRTIO_BLK_T_IN, 0, 100, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "not a multiple of 512");
	simple(VIRTIO_BLK_T_OUT, 0, 513, false);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "not a multiple of 512");
	/* 4 GiB of data (segments may alias): too large for used.len */
	{
		struct blk_limits huge = lim_rw;
		uint8_t *d = gmem(8 << 20);

		huge.capacity = UINT64_MAX / 512;
		fake_chain_init(&ch, 1);
		seg(hdr(VIRTIO_BLK_T_IN, 0), 16, false);
		for (int i = 0; i < 600; i++)
			seg(d, 8 << 20, true);
		seg(gmem(1), 1, true);
		expect_status(&huge, VIRTIO_BLK_S_IOERR, "larger than 4 GiB");
		fake_chain_init(&ch, 1);
		seg(hdr(VIRTIO_BLK_T_IN, 0), 16, false);
		for (int i = 0; i < 500; i++)
			seg(d, 8 << 20, true);
		seg(gmem(1), 1, true);
		CU_ASSERT_EQUAL(parse(&huge), 0);
		CU_ASSERT_EQUAL(req.verdict, BLK_DO);
		CU_ASSERT_EQUAL(req.len, 4000ull << 20);
	}
}

static void test_parse_read_only(void)
{
	struct blk_limits ro = lim_rw;

	ro.read_only = true;
	simple(VIRTIO_BLK_T_OUT, 0, 512, false);
	expect_status(&ro, VIRTIO_BLK_S_IOERR, "read-only");
	fake_chain_init(&ch, 1);
	seg(hdr(VIRTIO_BLK_T_WRITE_ZEROES, 0), 16, false);
	seg(range(0, 8, 0), 16, false);
	seg(gmem(1), 1, true);
	expect_status(&ro, VIRTIO_BLK_S_IOERR, "read-only");
	simple(VIRTIO_BLK_T_IN, 0, 512, true);
	CU_ASSERT_EQUAL(parse(&ro), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	simple(VIRTIO_BLK_T_FLUSH, 0, 0, false);
	CU_ASSERT_EQUAL(parse(&ro), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
}

static void dwz(uint32_t type, unsigned n, const uint8_t *const *r, size_t extra)
{
	fake_chain_init(&ch, 1);
	seg(hdr(type, 0), 16, false);
	for (unsigned i = 0; i < n; i++)
		seg((void *)r[i], 16, false);
	if (extra)
		seg(gmem(extra), extra, false);
	seg(gmem(1), 1, true);
}

static void test_parse_discard(void)
{
	const uint8_t *r[8];
	struct blk_limits nod = lim_rw;

	r[0] = range(0, 8, 0);
	r[1] = range(100, 1024, 0);
	dwz(VIRTIO_BLK_T_DISCARD, 2, r, 0);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	CU_ASSERT_EQUAL(req.n_ranges, 2);
	CU_ASSERT_EQUAL(req.ranges[1].sector, 100);
	CU_ASSERT_EQUAL(req.ranges[1].num_sectors, 1024);
	/* not negotiated */
	nod.discard = nod.write_zeroes = false;
	expect_status(&nod, VIRTIO_BLK_S_UNSUPP, "not negotiated");
	/* more segments than offered (4) */
	for (int i = 0; i < 5; i++)
		r[i] = range(0, 1, 0);
	dwz(VIRTIO_BLK_T_DISCARD, 5, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "more discard/write-zeroes segments");
	/* no segment, or a partial one */
	dwz(VIRTIO_BLK_T_DISCARD, 0, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "whole number of segments");
	dwz(VIRTIO_BLK_T_DISCARD, 1, r, 8);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "whole number of segments");
	/* flags: unmap is for write zeroes only; unknown bits are UNSUPP */
	r[0] = range(0, 8, VIRTIO_BLK_WZ_FLAG_UNMAP);
	dwz(VIRTIO_BLK_T_DISCARD, 1, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_UNSUPP, "discard with unmap");
	dwz(VIRTIO_BLK_T_WRITE_ZEROES, 1, r, 0);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.verdict, BLK_DO);
	CU_ASSERT_EQUAL(req.ranges[0].flags, VIRTIO_BLK_WZ_FLAG_UNMAP);
	r[0] = range(0, 8, 2);
	dwz(VIRTIO_BLK_T_WRITE_ZEROES, 1, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_UNSUPP, "unknown discard/write-zeroes flags");
	/* per-segment length and the disk's end */
	r[0] = range(0, 1025, 0);
	dwz(VIRTIO_BLK_T_DISCARD, 1, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "longer than offered");
	r[0] = range(CAP - 4, 8, 0);
	dwz(VIRTIO_BLK_T_WRITE_ZEROES, 1, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "beyond the end");
	r[0] = range(UINT64_MAX - 2, 8, 0);
	dwz(VIRTIO_BLK_T_DISCARD, 1, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "beyond the end");
	/* write zeroes allows 2 segments, not 3 */
	for (int i = 0; i < 3; i++)
		r[i] = range((uint64_t)i * 8, 8, 0);
	dwz(VIRTIO_BLK_T_WRITE_ZEROES, 3, r, 0);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "more discard/write-zeroes segments");
}

static void test_parse_get_id_and_unknown(void)
{
	simple(VIRTIO_BLK_T_GET_ID, 0, 20, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.len, 20);
	simple(VIRTIO_BLK_T_GET_ID, 0, 8, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.len, 8);
	simple(VIRTIO_BLK_T_GET_ID, 0, 64, true);
	CU_ASSERT_EQUAL(parse(&lim_rw), 0);
	CU_ASSERT_EQUAL(req.len, 20);
	simple(VIRTIO_BLK_T_GET_ID, 0, 0, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_IOERR, "GET_ID without a buffer");
	simple(99, 0, 0, true);
	expect_status(&lim_rw, VIRTIO_BLK_S_UNSUPP, "unsupported request type");
	simple(5, 0, 0, true); /* legacy FLUSH_OUT */
	expect_status(&lim_rw, VIRTIO_BLK_S_UNSUPP, "unsupported");
	simple(VIRTIO_BLK_T_IN | 0x80000000u, 0, 512, true); /* legacy barrier bit */
	expect_status(&lim_rw, VIRTIO_BLK_S_UNSUPP, "unsupported");
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "parse: read and write layouts", test_parse_read_write },
		{ "parse: malformed chains", test_parse_malformed },
		{ "parse: sector ranges and lengths", test_parse_ranges_of_io },
		{ "parse: read-only disk", test_parse_read_only },
		{ "parse: discard and write zeroes", test_parse_discard },
		{ "parse: GET_ID sizes, unknown types", test_parse_get_id_and_unknown },
		{ NULL, NULL },
	};
	int ret;

	if (blk_ram_init()) {
		fprintf(stderr, "test_virtio_blk_parse: setup failed\n");
		return 1;
	}
	ret = cu_run("virtio_blk_parse", tests);
	blk_ram_fini();
	return ret;
}
