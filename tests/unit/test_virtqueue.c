/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the split virtqueue on real guest RAM: well-formed chains,
 * indirect tables, interrupt suppression, and every malformation a hostile
 * guest can build, each of which must give -EIO and nothing worse. */
#include <errno.h>
#include <string.h>

#include "cunit_main.h"
#include "mem.h"
#include "virtio/virtqueue.h"

#define F_EVENT (1ull << VIRTIO_F_EVENT_IDX)
#define F_INDIRECT (1ull << VIRTIO_F_INDIRECT_DESC)
#define F_BASE (1ull << VIRTIO_F_VERSION_1)

#define D_NEXT 1
#define D_WRITE 2
#define D_INDIRECT 4

/* RAM: [0, 512K) and [1M, 1.5M), a hole in between. */
#define HOLE 0x80000ull
#define HIGH 0x100000ull
#define AVAIL 0x1000ull /* room for 4096 entries */
#define USED 0x4000ull
#define BUF 0x10000ull
#define DESC 0x20000ull
#define TABLE 0x40000ull

static struct guest_mem mem;
static struct cub_vq_chain c;
static uint16_t avail_idx;

static void *at(uint64_t gpa)
{
	void *p = mem_map(&mem, gpa, 1);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	return p;
}

static void put_desc(uint64_t table, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	uint8_t d[16];

	memcpy(d, &addr, 8);
	memcpy(d + 8, &len, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &next, 2);
	CU_ASSERT_EQUAL_FATAL(mem_write(&mem, table + 16 * i, d, 16), 0);
}

static void make_avail(uint16_t size, uint16_t head)
{
	uint16_t *ring = at(AVAIL + 4);

	ring[avail_idx % size] = head;
	avail_idx++;
	__atomic_store_n((uint16_t *)at(AVAIL + 2), avail_idx, __ATOMIC_RELEASE);
}

static uint16_t *avail_flags(void) { return at(AVAIL); }
static uint16_t *used_event(uint16_t size) { return at(AVAIL + 4 + 2 * size); }
static uint16_t *avail_event(uint16_t size) { return at(USED + 4 + 8 * size); }
static uint16_t used_idx(void) { return *(uint16_t *)at(USED + 2); }

static struct virtq *setup(uint16_t size, uint64_t features)
{
	static const struct mem_bank banks[] = { { .gpa = 0, .size = HOLE },
						  { .gpa = HIGH, .size = 0x80000 } };
	struct virtq_addr a = { size, DESC, AVAIL, USED };
	struct virtq *vq = NULL;
	char err[128];

	mem_destroy(&mem);
	CU_ASSERT_EQUAL_FATAL(mem_create(&mem, 0x100000, banks, 2), 0);
	avail_idx = 0;
	CU_ASSERT_EQUAL_FATAL(virtq_create(&mem, &a, F_BASE | features, &vq, err, sizeof(err)), 0);
	return vq;
}

static void test_chain(void)
{
	struct virtq *vq = setup(8, 0);
	uint32_t used[2];

	put_desc(DESC, 3, BUF, 16, D_NEXT, 5);
	put_desc(DESC, 5, BUF + 0x100, 32, D_NEXT, 1);
	put_desc(DESC, 1, HIGH + 0x200, 512, D_WRITE, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 0); /* empty */
	make_avail(8, 3);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.head, 3);
	CU_ASSERT_EQUAL(c.n_out, 2);
	CU_ASSERT_EQUAL(c.n_in, 1);
	CU_ASSERT_EQUAL(c.out_len, 48);
	CU_ASSERT_EQUAL(c.in_len, 512);
	CU_ASSERT_PTR_EQUAL(c.out, c.iov);
	CU_ASSERT_PTR_EQUAL(c.in, c.iov + 2);
	CU_ASSERT_PTR_EQUAL(c.out[0].iov_base, at(BUF));
	CU_ASSERT_PTR_EQUAL(c.out[1].iov_base, at(BUF + 0x100));
	CU_ASSERT_PTR_EQUAL(c.in[0].iov_base, at(HIGH + 0x200));
	CU_ASSERT_EQUAL(c.in[0].iov_len, 512);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 0);

	virtq_push(vq, 3, 100);
	CU_ASSERT_EQUAL(used_idx(), 1);
	memcpy(used, at(USED + 4), 8);
	CU_ASSERT_EQUAL(used[0], 3);
	CU_ASSERT_EQUAL(used[1], 100);
	CU_ASSERT_FALSE(virtq_broken(vq));

	/* The ring wraps: 20 more single-descriptor chains through 8 slots. */
	put_desc(DESC, 0, BUF, 1, 0, 0);
	for (int i = 0; i < 20; i++) {
		make_avail(8, 0);
		CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
		CU_ASSERT_EQUAL(c.n_out, 1);
		virtq_push(vq, 0, 0);
	}
	CU_ASSERT_EQUAL(used_idx(), 21);
	CU_ASSERT_FALSE(virtq_broken(vq));
	virtq_free(vq);
}

static void test_indirect(void)
{
	struct virtq *vq = setup(4, F_INDIRECT);

	put_desc(TABLE, 0, BUF, 8, D_NEXT, 2);
	put_desc(TABLE, 2, BUF + 8, 8, D_NEXT, 1);
	put_desc(TABLE, 1, BUF + 64, 4, D_WRITE, 0);
	put_desc(DESC, 2, TABLE, 3 * 16, D_INDIRECT | D_WRITE, 0); /* WRITE ignored here */
	make_avail(4, 2);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.head, 2);
	CU_ASSERT_EQUAL(c.n_out, 2);
	CU_ASSERT_EQUAL(c.n_in, 1);
	CU_ASSERT_PTR_EQUAL(c.iov[1].iov_base, at(BUF + 8));
	CU_ASSERT_PTR_EQUAL(c.in[0].iov_base, at(BUF + 64));
	virtq_push(vq, 2, 4);
	CU_ASSERT_FALSE(virtq_broken(vq));

	/* A chain may end before the table does. */
	put_desc(TABLE, 0, BUF, 8, 0, 0);
	make_avail(4, 2);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.n_out, 1);
	virtq_free(vq);
}

static void test_notify_event_idx(void)
{
	struct virtq *vq = setup(8, F_EVENT);

	put_desc(DESC, 0, BUF, 1, 0, 0);
	/* pop publishes avail_event = how far we have read */
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 0);
	CU_ASSERT_EQUAL(*avail_event(8), 0);
	make_avail(8, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(*avail_event(8), 1);

	CU_ASSERT_FALSE(virtq_should_notify(vq)); /* nothing pushed */
	*used_event(8) = 0; /* interrupt me when used idx passes 0 */
	virtq_push(vq, 0, 0);
	CU_ASSERT_TRUE(virtq_should_notify(vq));
	CU_ASSERT_FALSE(virtq_should_notify(vq)); /* already told */

	/* Driver wants an interrupt only once used idx passes 3 (i.e. 4). */
	*used_event(8) = 3;
	for (int i = 2; i <= 5; i++) {
		make_avail(8, 0);
		CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
		virtq_push(vq, 0, 0);
		CU_ASSERT_EQUAL(virtq_should_notify(vq), i == 4);
	}
	/* A batch that jumps over used_event still interrupts once. */
	*used_event(8) = 6;
	for (int i = 0; i < 3; i++) {
		make_avail(8, 0);
		CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
		virtq_push(vq, 0, 0);
	}
	CU_ASSERT_TRUE(virtq_should_notify(vq));
	/* NO_INTERRUPT is ignored with EVENT_IDX. */
	*avail_flags() = 1;
	*used_event(8) = 8;
	make_avail(8, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	virtq_push(vq, 0, 0);
	CU_ASSERT_TRUE(virtq_should_notify(vq));
	virtq_free(vq);
}

static void test_notify_flags(void)
{
	struct virtq *vq = setup(8, 0);

	put_desc(DESC, 0, BUF, 1, 0, 0);
	make_avail(8, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	virtq_push(vq, 0, 0);
	CU_ASSERT_TRUE(virtq_should_notify(vq));
	*avail_flags() = 1; /* VIRTQ_AVAIL_F_NO_INTERRUPT */
	make_avail(8, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	virtq_push(vq, 0, 0);
	CU_ASSERT_FALSE(virtq_should_notify(vq));
	virtq_free(vq);
}

static void test_create_checks(void)
{
	struct virtq_addr ok = { 8, DESC, AVAIL, USED };
	struct virtq *vq;
	char err[128];
	struct virtq_addr bad[] = {
		{ 0, DESC, AVAIL, USED },           /* size 0 */
		{ 12, DESC, AVAIL, USED },          /* not a power of two */
		{ 8, DESC + 8, AVAIL, USED },       /* desc misaligned */
		{ 8, DESC, AVAIL + 1, USED },       /* avail misaligned */
		{ 8, DESC, AVAIL, USED + 2 },       /* used misaligned */
		{ 8, HOLE - 64, AVAIL, USED },      /* desc runs into the hole */
		{ 8, DESC, HOLE + 0x1000, USED },   /* avail in the hole */
		{ 8, DESC, AVAIL, HOLE - 64 },      /* used runs into the hole */
		{ 8, DESC, AVAIL, 0xfffffffffffffff0ull }, /* wraps */
		{ 32768, DESC, AVAIL, USED + 0x7fff0 }, /* used ring past RAM */
	};

	virtq_free(setup(8, 0));
	for (unsigned i = 0; i < CUB_ARRAY_SIZE(bad); i++) {
		vq = (void *)1;
		CU_ASSERT_EQUAL(virtq_create(&mem, &bad[i], F_BASE | F_EVENT, &vq, err, sizeof(err)),
				-EINVAL);
		CU_ASSERT_PTR_NULL(vq);
		CU_ASSERT(strlen(err) > 0);
	}
	/* Without EVENT_IDX the used ring may end 2 bytes earlier. */
	ok.device = HOLE - (4 + 8 * 8);
	CU_ASSERT_EQUAL(virtq_create(&mem, &ok, F_BASE, &vq, err, sizeof(err)), 0);
	virtq_free(vq);
	CU_ASSERT_EQUAL(virtq_create(&mem, &ok, F_BASE | F_EVENT, &vq, err, sizeof(err)), -EINVAL);
	ok = (struct virtq_addr){ 32768, HIGH, 0x1000, 0x20000 }; /* the largest queue */
	CU_ASSERT_EQUAL(virtq_create(&mem, &ok, F_BASE, &vq, err, sizeof(err)), 0);
	virtq_free(vq);
}

/* Build one malformed chain with head 0 in a fresh queue of 8 and expect
 * -EIO, then -EIO forever after, even once the ring is repaired. */
typedef void build_fn(void);

static void expect_broken(const char *what, build_fn *build, uint64_t features)
{
	struct virtq *vq = setup(8, features);

	build();
	make_avail(8, 0);
	if (virtq_pop(vq, &c) != -EIO)
		fprintf(stderr, "\n  malformed chain accepted: %s\n", what);
	CU_ASSERT_TRUE(virtq_broken(vq));
	CU_ASSERT_PTR_NOT_NULL(virtq_error(vq));
	put_desc(DESC, 0, BUF, 1, 0, 0);
	make_avail(8, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO);
	virtq_push(vq, 0, 0); /* ignored */
	CU_ASSERT_EQUAL(used_idx(), 0);
	CU_ASSERT_FALSE(virtq_should_notify(vq));
	virtq_free(vq);
}

static void b_loop(void)
{
	put_desc(DESC, 0, BUF, 1, D_NEXT, 1);
	put_desc(DESC, 1, BUF, 1, D_NEXT, 2);
	put_desc(DESC, 2, BUF, 1, D_NEXT, 0);
}
static void b_self_loop(void) { put_desc(DESC, 0, BUF, 1, D_NEXT, 0); }
static void b_zero_len_loop(void)
{
	put_desc(DESC, 0, BUF, 0, D_NEXT, 1);
	put_desc(DESC, 1, BUF, 0, D_NEXT, 0);
}
static void b_next_range(void) { put_desc(DESC, 0, BUF, 1, D_NEXT, 8); }
static void b_out_of_ram(void) { put_desc(DESC, 0, HOLE + 0x100, 16, 0, 0); }
static void b_straddle(void) { put_desc(DESC, 0, HOLE - 8, 16, 0, 0); }
static void b_overflow(void) { put_desc(DESC, 0, 0xfffffffffffffff0ull, 0x100, 0, 0); }
static void b_huge_len(void) { put_desc(DESC, 0, BUF, 0xffffffffu, D_WRITE, 0); }
static void b_read_after_write(void)
{
	put_desc(DESC, 0, BUF, 8, D_WRITE | D_NEXT, 1);
	put_desc(DESC, 1, BUF + 8, 8, 0, 0);
}
static void b_nested(void)
{
	put_desc(TABLE, 0, TABLE + 0x100, 16, D_INDIRECT, 0);
	put_desc(TABLE + 0x100, 0, BUF, 8, 0, 0);
	put_desc(DESC, 0, TABLE, 16, D_INDIRECT, 0);
}
static void b_indirect_len(void)
{
	put_desc(TABLE, 0, BUF, 8, 0, 0);
	put_desc(DESC, 0, TABLE, 24, D_INDIRECT, 0);
}
static void b_indirect_zero(void) { put_desc(DESC, 0, TABLE, 0, D_INDIRECT, 0); }
static void b_indirect_next(void)
{
	put_desc(TABLE, 0, BUF, 8, 0, 0);
	put_desc(DESC, 0, TABLE, 16, D_INDIRECT | D_NEXT, 1);
	put_desc(DESC, 1, BUF, 8, 0, 0);
}
static void b_indirect_after_direct(void)
{
	put_desc(TABLE, 0, BUF, 8, 0, 0);
	put_desc(DESC, 0, BUF, 8, D_NEXT, 1);
	put_desc(DESC, 1, TABLE, 16, D_INDIRECT, 0);
	/* allowed by the walk only if the table is well formed: see below */
}
static void b_indirect_outside(void) { put_desc(DESC, 0, HOLE - 16, 32, D_INDIRECT, 0); }
static void b_indirect_loop(void)
{
	put_desc(TABLE, 0, BUF, 8, D_NEXT, 1);
	put_desc(TABLE, 1, BUF, 8, D_NEXT, 0);
	put_desc(DESC, 0, TABLE, 32, D_INDIRECT, 0);
}
static void b_indirect_next_range(void)
{
	put_desc(TABLE, 0, BUF, 8, D_NEXT, 2);
	put_desc(DESC, 0, TABLE, 32, D_INDIRECT, 0);
}
static void b_indirect_too_long(void)
{
	/* 9 entries in a queue of 8: longer than the queue allows */
	for (unsigned i = 0; i < 9; i++)
		put_desc(TABLE, i, BUF, 1, i < 8 ? D_NEXT : 0, (uint16_t)(i + 1));
	put_desc(DESC, 0, TABLE, 9 * 16, D_INDIRECT, 0);
}
static void b_direct_then_indirect(void)
{
	/* 3 direct + an 8-entry table: 11 segments in a queue of 8 */
	for (unsigned i = 0; i < 8; i++)
		put_desc(TABLE, i, BUF, 1, i < 7 ? D_NEXT : 0, (uint16_t)(i + 1));
	put_desc(DESC, 0, BUF, 1, D_NEXT, 1);
	put_desc(DESC, 1, BUF, 1, D_NEXT, 2);
	put_desc(DESC, 2, BUF, 1, D_NEXT, 3);
	put_desc(DESC, 3, TABLE, 8 * 16, D_INDIRECT, 0);
}
static void b_indirect_huge(void) { put_desc(DESC, 0, TABLE, 0xfffffff0u, D_INDIRECT, 0); }
static void b_head_range(void)
{
	/* make_avail(0) comes after: overwrite the slot it fills with 9 */
	put_desc(DESC, 0, BUF, 1, 0, 0);
	((uint16_t *)at(AVAIL + 4))[0] = 9;
}

static void b_none(void) { put_desc(DESC, 0, TABLE, 16, D_INDIRECT, 0); }

static void test_malformed(void)
{
	expect_broken("loop", b_loop, 0);
	expect_broken("self loop", b_self_loop, 0);
	expect_broken("loop of empty buffers", b_zero_len_loop, 0);
	expect_broken("next out of range", b_next_range, 0);
	expect_broken("buffer in the hole", b_out_of_ram, 0);
	expect_broken("buffer straddling RAM's end", b_straddle, 0);
	expect_broken("addr + len overflows", b_overflow, 0);
	expect_broken("len 4G", b_huge_len, 0);
	expect_broken("readable after writable", b_read_after_write, 0);
	expect_broken("nested indirect", b_nested, F_INDIRECT);
	expect_broken("indirect len not a multiple of 16", b_indirect_len, F_INDIRECT);
	expect_broken("indirect len 0", b_indirect_zero, F_INDIRECT);
	expect_broken("indirect with NEXT", b_indirect_next, F_INDIRECT);
	expect_broken("indirect table outside RAM", b_indirect_outside, F_INDIRECT);
	expect_broken("loop inside an indirect table", b_indirect_loop, F_INDIRECT);
	expect_broken("next out of an indirect table", b_indirect_next_range, F_INDIRECT);
	expect_broken("indirect table longer than the queue", b_indirect_too_long, F_INDIRECT);
	expect_broken("indirect table of 4G", b_indirect_huge, F_INDIRECT);
	expect_broken("direct + indirect longer than the queue", b_direct_then_indirect,
		      F_INDIRECT);
	expect_broken("indirect not negotiated", b_none, 0);
	/* make_avail after build: the head slot is overwritten after it, so
	 * build it through the avail ring directly. */
	{
		struct virtq *vq = setup(8, 0);

		b_head_range();
		avail_idx = 1;
		__atomic_store_n((uint16_t *)at(AVAIL + 2), avail_idx, __ATOMIC_RELEASE);
		CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO);
		virtq_free(vq);
	}
}

/* A direct chain ending in an indirect descriptor is allowed by the
 * split-ring rules only as the sole descriptor; cubicle follows Linux and
 * QEMU in accepting it after direct ones too, as long as the whole chain is
 * well formed and short enough. */
static void test_indirect_after_direct(void)
{
	struct virtq *vq = setup(8, F_INDIRECT);

	b_indirect_after_direct();
	make_avail(8, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.n_out, 2);
	virtq_free(vq);
}

static void test_avail_jump(void)
{
	struct virtq *vq = setup(8, 0);

	put_desc(DESC, 0, BUF, 1, 0, 0);
	make_avail(8, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	virtq_push(vq, 0, 0);
	/* idx exactly a queue ahead is fine (a full ring)... */
	avail_idx = 9;
	*(uint16_t *)at(AVAIL + 2) = avail_idx;
	for (int i = 0; i < 8; i++) {
		CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
		virtq_push(vq, 0, 0);
	}
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 0);
	/* ...more than a queue ahead is not. */
	*(uint16_t *)at(AVAIL + 2) = 9 + 9;
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO);
	virtq_free(vq);

	/* Going backwards looks like a jump of almost 64K. */
	vq = setup(8, 0);
	*(uint16_t *)at(AVAIL + 2) = 0xffff;
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO);
	virtq_free(vq);
}

static void test_inflight(void)
{
	struct virtq *vq = setup(8, 0);

	put_desc(DESC, 0, BUF, 1, 0, 0);
	make_avail(8, 0);
	make_avail(8, 0); /* the same head twice while the device holds it */
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO);
	virtq_free(vq);

	/* A device returning a head it does not hold breaks the queue. */
	vq = setup(8, 0);
	virtq_push(vq, 5, 0);
	CU_ASSERT_TRUE(virtq_broken(vq));
	CU_ASSERT_EQUAL(used_idx(), 0);
	virtq_free(vq);
	vq = setup(8, 0);
	virtq_push(vq, 300, 0);
	CU_ASSERT_TRUE(virtq_broken(vq));
	virtq_free(vq);
}

/* push_batch: several chains appear at once, in order, across the wrap; a
 * head not held (or held once, given twice) publishes nothing. */
static void test_push_batch(void)
{
	struct virtq *vq = setup(4, 0);
	struct cub_vq_used u[4];
	uint32_t e[2];

	for (unsigned i = 0; i < 4; i++)
		put_desc(DESC, i, BUF + 0x100 * i, 64, D_WRITE, 0);
	make_avail(4, 2);
	make_avail(4, 0);
	make_avail(4, 3);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	virtq_push(vq, 2, 10); /* used slot 0: the batch then wraps */
	u[0] = (struct cub_vq_used){ 0, 64 };
	u[1] = (struct cub_vq_used){ 3, 7 };
	virtq_push_batch(vq, u, 2);
	CU_ASSERT_FALSE(virtq_broken(vq));
	CU_ASSERT_EQUAL(used_idx(), 3);
	memcpy(e, at(USED + 4 + 8), 8);
	CU_ASSERT_EQUAL(e[0], 0);
	CU_ASSERT_EQUAL(e[1], 64);
	memcpy(e, at(USED + 4 + 16), 8);
	CU_ASSERT_EQUAL(e[0], 3);
	CU_ASSERT_EQUAL(e[1], 7);
	make_avail(4, 1);
	make_avail(4, 2);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	u[0] = (struct cub_vq_used){ 1, 1 };
	u[1] = (struct cub_vq_used){ 2, 2 };
	virtq_push_batch(vq, u, 2);
	CU_ASSERT_EQUAL(used_idx(), 5);
	memcpy(e, at(USED + 4), 8); /* slot 4 % 4 */
	CU_ASSERT_EQUAL(e[0], 2);
	virtq_push_batch(vq, u, 0);
	CU_ASSERT_EQUAL(used_idx(), 5);
	CU_ASSERT_FALSE(virtq_broken(vq));
	virtq_free(vq);

	vq = setup(4, 0);
	put_desc(DESC, 0, BUF, 64, D_WRITE, 0);
	make_avail(4, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	u[0] = (struct cub_vq_used){ 0, 1 };
	u[1] = (struct cub_vq_used){ 0, 1 };
	virtq_push_batch(vq, u, 2);
	CU_ASSERT_TRUE(virtq_broken(vq));
	CU_ASSERT_EQUAL(used_idx(), 0);
	virtq_free(vq);
}

/* unpop of @n chains ending with @head is refused and breaks the queue (freed). */
static void unpop_refused(struct virtq *vq, uint16_t head, unsigned n)
{
	uint16_t h[8] = { 0 };

	h[n ? n - 1 : 0] = head;
	CU_ASSERT_EQUAL(virtq_unpop(vq, h, n), -EIO);
	CU_ASSERT_TRUE(virtq_broken(vq));
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO);
	virtq_free(vq);
}

/* unpop: the chains popped last go back and come out again, across the
 * ring's wrap, and a snapshot's position counts only what is still held;
 * giving back chains not held, or not the last popped, or whose ring slot
 * the driver rewrote, breaks the queue. */
static void test_unpop(void)
{
	struct virtq *vq = setup(4, F_EVENT);
	struct virtq_pos pos;
	uint16_t h[3];

	for (unsigned i = 0; i < 4; i++)
		put_desc(DESC, i, BUF + 0x100 * i, 64, D_WRITE, 0);
	make_avail(4, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	virtq_push(vq, 0, 1);
	make_avail(4, 3);
	make_avail(4, 1);
	make_avail(4, 2); /* ring slots 1, 2, 3 */
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
		h[i] = c.head;
	}
	CU_ASSERT(h[0] == 3 && h[1] == 1 && h[2] == 2);
	CU_ASSERT_EQUAL(virtq_unpop(vq, &h[1], 2), 0); /* 1 and 2 back, 3 held */
	CU_ASSERT_EQUAL(virtq_save_pos(vq, &pos), 0);
	CU_ASSERT_EQUAL(pos.last_avail, 1); /* only 3 is held */
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.head, 1);
	CU_ASSERT_EQUAL(c.in_len, 64);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.head, 2);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 0);
	CU_ASSERT_EQUAL(virtq_unpop(vq, h, 0), 0);
	CU_ASSERT_FALSE(virtq_broken(vq));
	/* wrap: slot 0 again */
	virtq_push(vq, 1, 1);
	make_avail(4, 1);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(virtq_unpop(vq, &c.head, 1), 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.head, 1);
	CU_ASSERT_FALSE(virtq_broken(vq));
	/* not the last popped: 3 was popped before 2 and 1 */
	unpop_refused(vq, 3, 1);

	/* a head the device does not hold */
	vq = setup(4, 0);
	put_desc(DESC, 0, BUF, 64, D_WRITE, 0);
	make_avail(4, 0);
	unpop_refused(vq, 1, 1);

	/* the driver rewrote the ring slot of a chain it had handed over */
	vq = setup(4, 0);
	put_desc(DESC, 0, BUF, 64, D_WRITE, 0);
	put_desc(DESC, 1, BUF + 0x100, 64, D_WRITE, 0);
	make_avail(4, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	((uint16_t *)at(AVAIL + 4))[0] = 1;
	unpop_refused(vq, 0, 1);

	/* more than the queue holds */
	unpop_refused(setup(4, 0), 0, 5);
}

/* The longest legal chain: every descriptor of a 1024-entry queue, and
 * CUB_VQ_MAX_SEGS through an indirect table in a larger one. */
static void test_long_chains(void)
{
	struct virtq *vq = setup(1024, F_INDIRECT);

	for (unsigned i = 0; i < 1024; i++)
		put_desc(DESC, i, BUF + i, 1, i < 1023 ? D_NEXT : 0, (uint16_t)(i + 1));
	make_avail(1024, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.n_out, 1024);
	virtq_free(vq);

	vq = setup(4096, F_INDIRECT);
	for (unsigned i = 0; i < 1025; i++)
		put_desc(HIGH, i, BUF + i, 1, i < 1024 ? D_NEXT : 0, (uint16_t)(i + 1));
	put_desc(DESC, 0, HIGH, 1024 * 16, D_INDIRECT, 0);
	put_desc(DESC, 1, HIGH, 1025 * 16, D_INDIRECT, 0);
	make_avail(4096, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO); /* 1024 entries, the last has NEXT */
	virtq_free(vq);
	vq = setup(4096, F_INDIRECT);
	for (unsigned i = 0; i < 1025; i++)
		put_desc(HIGH, i, BUF + i, 1, i != 1023 && i < 1024 ? D_NEXT : 0,
			 (uint16_t)(i + 1));
	put_desc(DESC, 0, HIGH, 1024 * 16, D_INDIRECT, 0);
	make_avail(4096, 0);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), 1);
	CU_ASSERT_EQUAL(c.n_out, 1024);
	put_desc(DESC, 1, HIGH, 1025 * 16, D_INDIRECT, 0);
	make_avail(4096, 1);
	CU_ASSERT_EQUAL(virtq_pop(vq, &c), -EIO); /* more than CUB_VQ_MAX_SEGS */
	virtq_free(vq);
}

/* Random rings: whatever the bytes, pop returns 1, 0 or -EIO and every
 * segment it hands out lies in RAM (the fuzz harness does this at scale). */
static void test_random(void)
{
	uint32_t seed = 12345;

	for (int round = 0; round < 2000; round++) {
		struct virtq *vq = setup(16, round & 1 ? F_INDIRECT | F_EVENT : 0);
		uint8_t *p = at(0);

		for (unsigned i = 0; i < 0x800; i++) {
			seed = seed * 1103515245 + 12345;
			p[DESC + i] = (uint8_t)(seed >> 16);
		}
		/* Keep addresses and lengths below 64K and next below 32 so
		 * that some chains are valid. */
		for (unsigned i = 0; i < 16; i++) {
			uint8_t *d = p + DESC + 16 * i;

			memset(d + 2, 0, 6);
			d[10] = d[11] = d[13] = d[15] = 0;
			d[14] &= 0x1f;
		}
		for (int k = 0; k < 4; k++) {
			int ret;

			make_avail(16, (uint16_t)(p[DESC + k] & 15));
			ret = virtq_pop(vq, &c);
			CU_ASSERT(ret == 1 || ret == -EIO);
			for (unsigned s = 0; ret == 1 && s < (unsigned)c.n_out + c.n_in; s++)
				CU_ASSERT_PTR_NOT_NULL(mem_map(&mem,
							       (uint64_t)((uint8_t *)c.iov[s].iov_base - p),
							       c.iov[s].iov_len));
			if (ret == 1)
				virtq_push(vq, c.head, 0);
		}
		virtq_free(vq);
	}
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "chain", test_chain },
		{ "indirect", test_indirect },
		{ "indirect after direct", test_indirect_after_direct },
		{ "notify with EVENT_IDX", test_notify_event_idx },
		{ "notify with NO_INTERRUPT", test_notify_flags },
		{ "create checks", test_create_checks },
		{ "malformed chains", test_malformed },
		{ "avail idx jumps", test_avail_jump },
		{ "in-flight heads", test_inflight },
		{ "push_batch", test_push_batch },
		{ "unpop", test_unpop },
		{ "long chains", test_long_chains },
		{ "random rings", test_random },
		{ NULL, NULL },
	};
	int ret = cu_run("virtqueue", tests);

	mem_destroy(&mem);
	return ret;
}
