/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the bus: registration, overlap rejection, dispatch, removal. */
#include <errno.h>
#include <string.h>

#include "bus.h"
#include "cunit_main.h"

struct rec {
	uint64_t off;
	uint32_t len;
	bool write;
	int calls;
	uint8_t data[8];
};

static void io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct rec *r = priv;

	r->off = off;
	r->len = len;
	r->write = is_write;
	r->calls++;
	if (is_write)
		memcpy(r->data, data, len);
	else
		memset(data, 0xab, len);
}

static void test_add_overlap(void)
{
	struct bus b;
	struct rec r = { 0 };

	bus_init(&b, "pio");
	CU_ASSERT_EQUAL(bus_add(&b, 0x3f8, 8, io, &r, "a"), 0);
	CU_ASSERT_EQUAL(bus_add(&b, 0x3f8, 8, io, &r, "b"), -EEXIST);
	CU_ASSERT_EQUAL(bus_add(&b, 0x3f0, 9, io, &r, "c"), -EEXIST); /* last byte overlaps */
	CU_ASSERT_EQUAL(bus_add(&b, 0x3ff, 1, io, &r, "d"), -EEXIST); /* first byte overlaps */
	CU_ASSERT_EQUAL(bus_add(&b, 0x3f0, 8, io, &r, "e"), 0);       /* adjacent below */
	CU_ASSERT_EQUAL(bus_add(&b, 0x400, 8, io, &r, "f"), 0);       /* adjacent above */
	CU_ASSERT_EQUAL(bus_add(&b, 0x300, 0, io, &r, "g"), -EINVAL); /* empty */
	CU_ASSERT_EQUAL(bus_add(&b, UINT64_MAX, 2, io, &r, "h"), -EINVAL); /* wraps */
	CU_ASSERT_EQUAL(bus_add(&b, UINT64_MAX, 1, io, &r, "i"), 0);  /* last byte is fine */
	CU_ASSERT_EQUAL(b.n, 4);
	for (size_t i = 1; i < b.n; i++)
		CU_ASSERT(b.r[i - 1].base < b.r[i].base);
	bus_free(&b);
}

static void test_dispatch(void)
{
	struct bus b;
	struct rec r1 = { 0 }, r2 = { 0 };
	uint8_t buf[4] = { 1, 2, 3, 4 };
	struct bus_range found;

	bus_init(&b, "mmio");
	bus_add(&b, 0xd0000000, 0x1000, io, &r1, "one");
	bus_add(&b, 0xd0001000, 0x1000, io, &r2, "two");
	CU_ASSERT_TRUE(bus_access(&b, 0xd0000004, buf, 4, true));
	CU_ASSERT_EQUAL(r1.calls, 1);
	CU_ASSERT_EQUAL(r1.off, 4);
	CU_ASSERT_EQUAL(r1.len, 4);
	CU_ASSERT_TRUE(r1.write);
	CU_ASSERT_EQUAL(memcmp(r1.data, buf, 4), 0);
	CU_ASSERT_TRUE(bus_access(&b, 0xd0001ffc, buf, 4, false));
	CU_ASSERT_EQUAL(r2.calls, 1);
	CU_ASSERT_EQUAL(r2.off, 0xffc);
	CU_ASSERT_EQUAL(buf[0], 0xab);
	/* An access straddling two ranges reaches neither. */
	CU_ASSERT_FALSE(bus_access(&b, 0xd0000ffe, buf, 4, false));
	CU_ASSERT_EQUAL(r1.calls, 1);
	CU_ASSERT_EQUAL(r2.calls, 1);
	CU_ASSERT_FALSE(bus_access(&b, 0xcfffffff, buf, 1, false));
	CU_ASSERT_FALSE(bus_access(&b, 0xd0002000, buf, 1, false));
	CU_ASSERT_FALSE(bus_access(&b, UINT64_MAX, buf, 2, false)); /* wraps */
	CU_ASSERT_TRUE(bus_find(&b, 0xd0001800, &found));
	CU_ASSERT_EQUAL(found.base, 0xd0001000);
	CU_ASSERT_STRING_EQUAL(found.owner, "two");
	bus_free(&b);
}

static void test_del(void)
{
	struct bus b;
	struct rec r = { 0 };
	uint8_t v = 0;

	bus_init(&b, "pio");
	bus_add(&b, 0x60, 1, io, &r, "kbd");
	bus_add(&b, 0x64, 1, io, &r, "kbd");
	CU_ASSERT_EQUAL(bus_del(&b, 0x61), -ENOENT);
	CU_ASSERT_EQUAL(bus_del(&b, 0x60), 0);
	CU_ASSERT_FALSE(bus_access(&b, 0x60, &v, 1, true));
	CU_ASSERT_TRUE(bus_access(&b, 0x64, &v, 1, true));
	CU_ASSERT_EQUAL(bus_add(&b, 0x60, 4, io, &r, "again"), 0);
	CU_ASSERT_EQUAL(bus_del(&b, 0x60), 0);
	CU_ASSERT_EQUAL(bus_del(&b, 0x64), 0);
	CU_ASSERT_EQUAL(b.n, 0);
	bus_free(&b);
}

static void test_many(void)
{
	struct bus b;
	struct rec r = { 0 };
	uint8_t v;

	bus_init(&b, "mmio");
	/* Insert out of order; the array must stay sorted and all reachable. */
	for (int i = 99; i >= 0; i--)
		CU_ASSERT_EQUAL(bus_add(&b, (uint64_t)((i * 37) % 100) * 0x100, 0x80, io, &r, "x"), 0);
	for (int i = 0; i < 100; i++) {
		CU_ASSERT_TRUE(bus_access(&b, (uint64_t)i * 0x100 + 0x7f, &v, 1, false));
		CU_ASSERT_FALSE(bus_access(&b, (uint64_t)i * 0x100 + 0x80, &v, 1, false));
	}
	CU_ASSERT_EQUAL(r.calls, 100);
	bus_free(&b);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "add rejects overlaps", test_add_overlap },
		{ "dispatch by range", test_dispatch },
		{ "remove", test_del },
		{ "many ranges", test_many },
		{ NULL, NULL },
	};

	return cu_run("bus", tests);
}
