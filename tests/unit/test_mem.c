/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of guest RAM: bank layout and bounds-checked translation. */
#include <errno.h>
#include <string.h>

#include "cunit_main.h"
#include "mem.h"

static void test_two_banks(void)
{
	struct mem_bank banks[2] = { { 0, 0x100000, 0 }, { 0x100000000ull, 0x200000, 0 } };
	struct guest_mem m;
	uint8_t *lo, *hi;
	uint32_t v = 0xdeadbeef, r = 0;

	CU_ASSERT_EQUAL_FATAL(mem_create(&m, 0x300000, banks, 2), 0);
	lo = mem_map(&m, 0, 1);
	hi = mem_map(&m, 0x100000000ull, 1);
	CU_ASSERT_PTR_NOT_NULL(lo);
	CU_ASSERT_PTR_EQUAL(hi, lo + 0x100000); /* contiguous in the memfd */
	CU_ASSERT_PTR_NOT_NULL(mem_map(&m, 0xfffff, 1));
	CU_ASSERT_PTR_NULL(mem_map(&m, 0xfffff, 2));   /* runs off bank 0 */
	CU_ASSERT_PTR_NULL(mem_map(&m, 0x100000, 1));  /* the hole */
	CU_ASSERT_PTR_NULL(mem_map(&m, 0xffffffffull, 2));
	CU_ASSERT_PTR_NULL(mem_map(&m, 0x100000000ull + 0x200000, 1));
	CU_ASSERT_PTR_NULL(mem_map(&m, 0, 0));
	CU_ASSERT_PTR_NULL(mem_map(&m, UINT64_MAX, 2)); /* wraps */
	CU_ASSERT_PTR_NULL(mem_map(&m, 0x100000000ull, UINT64_MAX));
	CU_ASSERT_EQUAL(mem_write(&m, 0x100000000ull + 0x1ffffc, &v, 4), 0);
	CU_ASSERT_EQUAL(mem_read(&m, 0x100000000ull + 0x1ffffc, &r, 4), 0);
	CU_ASSERT_EQUAL(r, v);
	CU_ASSERT_EQUAL(mem_write(&m, 0x100000000ull + 0x1ffffd, &v, 4), -EFAULT);
	CU_ASSERT_EQUAL(mem_end(&m), 0x100200000ull);
	mem_destroy(&m);
}

static void test_bad_layouts(void)
{
	struct mem_bank overlap[2] = { { 0, 0x2000, 0 }, { 0x1000, 0x1000, 0 } };
	struct mem_bank one = { 0, 0x1000, 0 };
	struct guest_mem m;

	CU_ASSERT_EQUAL(mem_create(&m, 0x3000, overlap, 2), -EINVAL);
	CU_ASSERT_EQUAL(mem_create(&m, 0x2000, &one, 1), -EINVAL); /* sizes disagree */
	CU_ASSERT_EQUAL(mem_create(&m, 0x1000, &one, 0), -EINVAL);
	CU_ASSERT_EQUAL(mem_create(&m, 0x1000, &one, MEM_MAX_BANKS + 1), -EINVAL);
}

/* The host's dirty bitmap (Diff snapshots): marks by range, taken once,
 * given back, nothing outside RAM, nothing when tracking is off. */
static void test_dirty(void)
{
	struct mem_bank banks[2] = { { 0, 0x100000, 0 }, { 0x100000000ull, 0x100000, 0 } };
	struct guest_mem m;
	uint64_t bits[(0x200000 / MEM_PAGE + 63) / 64] = { 0 }, none[8] = { 0 };
	uint8_t *lo, *hi;

	CU_ASSERT_EQUAL_FATAL(mem_create(&m, 0x200000, banks, 2), 0);
	lo = mem_map(&m, 0, 1);
	hi = mem_map(&m, 0x100000000ull, 1);
	mem_mark_dirty(&m, lo, 4096); /* tracking off: nothing */
	CU_ASSERT_EQUAL_FATAL(mem_dirty_enable(&m), 0);
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(memcmp(bits, none, sizeof(none)), 0);
	mem_mark_dirty(&m, lo + 4095, 2);       /* pages 0 and 1 */
	mem_mark_dirty(&m, hi + 64 * 4096, 1);  /* page 256 + 64 of the mapping */
	mem_mark_dirty(&m, lo - 1, 2);          /* starts outside RAM: ignored */
	mem_mark_dirty(&m, hi + 0xfffff, 2);    /* runs past the end: ignored */
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(bits[0], 3);
	CU_ASSERT_EQUAL(bits[5], 1);            /* page 320 */
	CU_ASSERT_EQUAL(bits[1] | bits[2] | bits[3] | bits[4] | bits[6] | bits[7], 0);
	memset(bits, 0, sizeof(bits));
	mem_take_dirty(&m, bits);               /* taken: cleared */
	CU_ASSERT_EQUAL(bits[0] | bits[5], 0);
	bits[0] = 8;
	mem_put_dirty(&m, bits);                /* a failed snapshot gives them back */
	bits[0] = 0;
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(bits[0], 8);
	mem_mark_all_dirty(&m);
	memset(bits, 0, sizeof(bits));
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(bits[0], UINT64_MAX);
	CU_ASSERT_EQUAL(bits[7], UINT64_MAX);
	mem_destroy(&m);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "two banks around a hole", test_two_banks },
		{ "bad layouts", test_bad_layouts },
		{ "the host's dirty bitmap", test_dirty },
		{ NULL, NULL },
	};

	return cu_run("mem", tests);
}
