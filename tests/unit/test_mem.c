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

int main(void)
{
	static const struct cu_test tests[] = {
		{ "two banks around a hole", test_two_banks },
		{ "bad layouts", test_bad_layouts },
		{ NULL, NULL },
	};

	return cu_run("mem", tests);
}
