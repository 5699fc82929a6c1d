/* SPDX-License-Identifier: Apache-2.0 */
/* virtio-blk tests' shared part: fake guest RAM and the request chains built in it. */
#include <string.h>

#include <CUnit/CUnit.h>

#include "virtio_blk_support.h"

struct fake_host mem;
struct cub_vq_chain ch;
static uint64_t ram_next;

int blk_ram_init(void)
{
	fake_host_init(&mem);
	return fake_host_ram(&mem, 0, RAM_SIZE);
}

void blk_ram_fini(void)
{
	fake_host_fini(&mem);
}

uint8_t *gmem(size_t len)
{
	uint8_t *p;

	if (ram_next + len > RAM_SIZE)
		ram_next = 0;
	p = mem.ops.gpa_map(fake_inst(&mem), ram_next, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	ram_next += (len + 63) & ~63ull;
	return p;
}

uint8_t *hdr(uint32_t type, uint64_t sector)
{
	uint8_t *h = gmem(BLK_HDR_LEN);

	for (int i = 0; i < 4; i++)
		h[i] = (uint8_t)(type >> (8 * i));
	memset(h + 4, 0, 4);
	for (int i = 0; i < 8; i++)
		h[8 + i] = (uint8_t)(sector >> (8 * i));
	return h;
}

void seg(void *p, size_t len, bool w)
{
	CU_ASSERT_EQUAL_FATAL(fake_chain_add(&ch, p, len, w), 0);
}

void simple(uint32_t type, uint64_t sector, size_t data, bool data_writable)
{
	fake_chain_init(&ch, 7);
	seg(hdr(type, sector), BLK_HDR_LEN, false);
	if (data && !data_writable)
		seg(gmem(data), data, false);
	if (data && data_writable)
		seg(gmem(data), data, true);
	seg(gmem(1), 1, true);
}

uint8_t *range(uint64_t sector, uint32_t n, uint32_t flags)
{
	uint8_t *r = gmem(BLK_RANGE_LEN);

	for (int i = 0; i < 8; i++)
		r[i] = (uint8_t)(sector >> (8 * i));
	for (int i = 0; i < 4; i++) {
		r[8 + i] = (uint8_t)(n >> (8 * i));
		r[12 + i] = (uint8_t)(flags >> (8 * i));
	}
	return r;
}
