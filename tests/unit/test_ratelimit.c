/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the token-bucket rate limiters (vmm-core/ratelimit.c), on a made-up clock. */
#include <string.h>

#include "cunit_main.h"
#include "ratelimit.h"

#define MS 1000ull
#define S  1000000ull

/* Bytes a greedy taker of @chunk-byte requests gets through in @dur_us,
 * sleeping exactly as long as it is told. */
static uint64_t drain(struct rate_limiter *rl, uint64_t chunk, uint64_t t0, uint64_t dur_us,
		      uint64_t *reqs)
{
	uint64_t t = t0, got = 0, w;

	*reqs = 0;
	while (t < t0 + dur_us) {
		if (rl_take(rl, chunk, 1, t, &w)) {
			got += chunk;
			++*reqs;
			continue;
		}
		CU_ASSERT(w >= 1);
		t += w;
	}
	return got;
}

static void test_bandwidth(void)
{
	/* 1 MiB per 100 ms: 10 MiB/s, a 1 MiB burst (the full bucket). */
	struct rl_cfg c = { .bandwidth = { 1 << 20, 0, 100 } };
	struct rate_limiter rl;
	uint64_t reqs, got, w;

	CU_ASSERT_PTR_NULL(rl_cfg_check(&c));
	rl_init(&rl, &c, 0);
	CU_ASSERT_TRUE(rl_active(&rl));
	got = drain(&rl, 4096, 0, 10 * S, &reqs);
	/* 10 s at 10 MiB/s plus the first full bucket, within one request. */
	CU_ASSERT(got >= (101ull << 20) - 4096 && got <= (101ull << 20) + 4096);
	/* emptied: the next 4 KiB is 4096/10 MiB/s away, to the microsecond */
	while (rl_take(&rl, 4096, 1, 10 * S, &w))
		;
	CU_ASSERT(w >= 1 && w <= 391);
	CU_ASSERT_TRUE(rl_take(&rl, 4096, 1, 10 * S + 391, &w));
}

static void test_ops_and_both(void)
{
	/* 100 ops/s and 1 MiB/s: the ops bucket limits 4 KiB requests ... */
	struct rl_cfg c = { .bandwidth = { 1 << 20, 0, 1000 }, .ops = { 100, 0, 1000 } };
	struct rate_limiter rl;
	uint64_t reqs, got;

	rl_init(&rl, &c, 0);
	got = drain(&rl, 4096, 0, 5 * S, &reqs);
	CU_ASSERT(reqs >= 599 && reqs <= 601); /* 100 in the bucket, 500 refilled */
	CU_ASSERT_EQUAL(got, reqs * 4096);
	/* ... the bandwidth bucket 64 KiB ones (16/s). */
	rl_init(&rl, &c, 0);
	got = drain(&rl, 65536, 0, 5 * S, &reqs);
	CU_ASSERT(reqs >= 95 && reqs <= 97); /* 16 in the bucket, 80 refilled */
}

static void test_refuse_charges_nothing(void)
{
	struct rl_cfg c = { .bandwidth = { 1000, 0, 1000 }, .ops = { 1, 0, 1000 } };
	struct rate_limiter rl;
	uint64_t w;

	rl_init(&rl, &c, 0);
	CU_ASSERT_TRUE(rl_take(&rl, 10, 1, 0, &w));
	/* ops empty: refused, and the 990 bytes left are still there */
	CU_ASSERT_FALSE(rl_take(&rl, 900, 1, 0, &w));
	CU_ASSERT(w >= 999 * MS && w <= 1000 * MS);
	CU_ASSERT_TRUE(rl_take(&rl, 990, 1, 1000 * MS, &w));
	/* a refund gives tokens back, never above the size */
	rl_refund(&rl, 990, 1);
	rl_refund(&rl, 5000, 9);
	CU_ASSERT_TRUE(rl_take(&rl, 1000, 1, 1000 * MS, &w));
	CU_ASSERT_FALSE(rl_take(&rl, 1, 0, 1000 * MS, &w));
}

static void test_one_time_burst(void)
{
	struct rl_cfg c = { .bandwidth = { 1000, 5000, 1000 } };
	struct rate_limiter rl;
	uint64_t w, reqs, got;

	rl_init(&rl, &c, 0);
	/* burst and bucket both at t=0 */
	CU_ASSERT_TRUE(rl_take(&rl, 5000, 0, 0, &w));
	CU_ASSERT_TRUE(rl_take(&rl, 1000, 0, 0, &w));
	CU_ASSERT_FALSE(rl_take(&rl, 100, 0, 0, &w));
	CU_ASSERT(w >= 99 * MS && w <= 100 * MS);
	/* the burst never comes back: 10 s later, one bucket's worth */
	got = drain(&rl, 100, 10 * S, 1, &reqs);
	CU_ASSERT_EQUAL(got, 1000);
}

static void test_oversized_request(void)
{
	/* a 1 MiB request through a 64 KiB bucket: passes when full, then debt */
	struct rl_cfg c = { .bandwidth = { 65536, 0, 100 } };
	struct rate_limiter rl;
	uint64_t w;

	rl_init(&rl, &c, 0);
	CU_ASSERT_TRUE(rl_take(&rl, 1 << 20, 1, 0, &w));
	/* 15 buckets of debt: 1.5 s before the next 64 KiB, then a full one */
	CU_ASSERT_FALSE(rl_take(&rl, 1 << 20, 1, 0, &w));
	CU_ASSERT(w >= 1600 * MS - 1 && w <= 1600 * MS);
	CU_ASSERT_FALSE(rl_take(&rl, 1, 1, 1500 * MS, &w));
	CU_ASSERT_TRUE(rl_take(&rl, 1 << 20, 1, 1600 * MS, &w));
	/* the average holds: 10 s of 1 MiB requests move about 6.4 MiB */
	{
		uint64_t reqs, got = drain(&rl, 1 << 20, 1600 * MS, 10 * S, &reqs);

		CU_ASSERT(got >= (6ull << 20) && got <= (7ull << 20));
	}
}

static void test_unlimited_and_checks(void)
{
	struct rl_cfg none = { 0 }, c;
	struct rate_limiter rl;
	uint64_t w;

	rl_init(&rl, &none, 0);
	CU_ASSERT_FALSE(rl_active(&rl));
	for (int i = 0; i < 1000; i++)
		CU_ASSERT_TRUE(rl_take(&rl, 1ull << 40, 1000, 0, &w));
	memset(&c, 0, sizeof(c));
	c.bandwidth.one_time_burst = 5;
	CU_ASSERT_PTR_NOT_NULL(rl_cfg_check(&c));
	c = (struct rl_cfg){ .ops = { 10, 0, 0 } };
	CU_ASSERT_PTR_NOT_NULL(rl_cfg_check(&c));
	c = (struct rl_cfg){ .ops = { RL_SIZE_MAX + 1, 0, 10 } };
	CU_ASSERT_PTR_NOT_NULL(rl_cfg_check(&c));
	c = (struct rl_cfg){ .bandwidth = { RL_SIZE_MAX, RL_SIZE_MAX, RL_REFILL_MAX } };
	CU_ASSERT_PTR_NULL(rl_cfg_check(&c));
	/* the extremes: no overflow, the clock may even stand still or go back */
	rl_init(&rl, &c, UINT64_MAX / 2);
	CU_ASSERT_TRUE(rl_take(&rl, RL_SIZE_MAX * 2, 0, UINT64_MAX / 2, &w));
	CU_ASSERT_FALSE(rl_take(&rl, 1, 0, UINT64_MAX / 2 - 5, &w));
	CU_ASSERT(w > 0);
	CU_ASSERT_TRUE(rl_take(&rl, 1, 0, UINT64_MAX, &w));
}

static void test_update(void)
{
	struct rl_cfg slow = { .bandwidth = { 1000, 0, 1000 } };
	struct rl_cfg fast = { .bandwidth = { 100000, 0, 1000 } };
	struct rate_limiter rl;
	uint64_t w, reqs;

	rl_init(&rl, &slow, 0);
	CU_ASSERT(drain(&rl, 100, 0, 2 * S, &reqs) <= 3100);
	rl_update(&rl, &fast, 2 * S);
	/* in effect at once: a second moves 100x more */
	CU_ASSERT(drain(&rl, 100, 2 * S, S, &reqs) >= 199000);
	(void)w;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "bandwidth bucket: rate and first bucket", test_bandwidth },
		{ "ops bucket, and the stricter of both", test_ops_and_both },
		{ "a refused request charges nothing; refunds", test_refuse_charges_nothing },
		{ "one-time burst", test_one_time_burst },
		{ "a request bigger than the bucket", test_oversized_request },
		{ "unlimited; config checks; extremes", test_unlimited_and_checks },
		{ "a run-time update", test_update },
		{ NULL, NULL },
	};

	return cu_run("ratelimit", tests);
}
