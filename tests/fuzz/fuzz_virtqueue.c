/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for the split virtqueue: the fuzz input is the whole
 * guest (queue placement, features, RAM contents and what the guest scribbles
 * while the device works); the device pops, pushes and asks about
 * interrupts, and every chain it gets must lie inside guest RAM. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "virtqueue.h"
#include "seed.h"

/* Two banks with a hole between them, in one malloc'd buffer so that
 * AddressSanitizer sees any access outside guest RAM. */
#define BANK0 0x8000u
#define BANK1_GPA 0x10000u
#define BANK1 0x8000u
#define RAM (BANK0 + BANK1)

static struct guest_mem mem;
static struct cub_vq_chain chain;

static void ram_init(void)
{
	mem.fd = -1;
	mem.host = malloc(RAM);
	if (!mem.host)
		abort();
	mem.size = RAM;
	mem.bank[0] = (struct mem_bank){ .gpa = 0, .size = BANK0, .off = 0 };
	mem.bank[1] = (struct mem_bank){ .gpa = BANK1_GPA, .size = BANK1, .off = BANK0 };
	mem.n_banks = 2;
}

static void check_chain(const struct cub_vq_chain *c, uint16_t size)
{
	uint64_t out = 0, in = 0;
	unsigned n = (unsigned)c->n_out + c->n_in;
	volatile uint8_t sink = 0;

	if (n > size || n > CUB_VQ_MAX_SEGS || c->head >= size)
		__builtin_trap();
	if (c->out != c->iov || c->in != c->iov + c->n_out)
		__builtin_trap();
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *p = c->iov[i].iov_base;
		size_t len = c->iov[i].iov_len;

		if (!len || p < mem.host || len > RAM || p - mem.host > (ptrdiff_t)(RAM - len))
			__builtin_trap();
		if (i < c->n_out) {
			out += len;
			sink ^= p[0] ^ p[len - 1]; /* the device reads */
		} else {
			in += len;
			memset((void *)p, 0x5a, len); /* the device writes */
		}
	}
	if (out != c->out_len || in != c->in_len)
		__builtin_trap();
	(void)sink;
}

/*
 * Seeds: well-formed inputs the fuzzer mutates from, built here so the tree
 * holds no binary files. With FUZZ_SEED_DIR set (make fuzz-smoke sets it to
 * the corpus folder), LLVMFuzzerInitialize writes them there. Input layout:
 * size code, feature bits, desc/avail/used placement, op count, ops, then
 * the RAM image from guest-physical 0.
 */
static void put_desc(uint8_t *ram, unsigned at, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	memcpy(ram + at, &addr, 8);
	memcpy(ram + at + 8, &len, 4);
	memcpy(ram + at + 12, &flags, 2);
	memcpy(ram + at + 14, &next, 2);
}

static void write_seed(const char *dir, const char *name, uint8_t features)
{
	static const uint8_t ops[] = { 0, 0, 3, 5, 0, 3, 5, 6, 0x80, 0, 1, 0, 4, 5 };
	uint8_t in[9 + sizeof(ops) + 0x400] = {
		3,          /* 8 entries */
		features,   /* 1 EVENT_IDX, 2 INDIRECT_DESC */
		0x00, 0x00, /* desc at 0x0 */
		0x40, 0x00, /* avail at 0x80 */
		0x40, 0x00, /* used at 0x100 */
		sizeof(ops),
	};
	uint8_t *ram = in + 9 + sizeof(ops);
	uint16_t avail[4 + 8] = { 0, 3, 0, 2, 4 }; /* flags, idx, ring..., used_event */
	memcpy(in + 9, ops, sizeof(ops));
	put_desc(ram, 0 * 16, 0x200, 16, 1, 1);     /* out, NEXT 1 */
	put_desc(ram, 1 * 16, 0x240, 32, 2, 0);     /* in */
	put_desc(ram, 2 * 16, 0x300, 48, 4, 0);     /* INDIRECT: table of 3 */
	put_desc(ram, 4 * 16, 0x10000, 64, 2, 0);   /* in, in the second bank */
	put_desc(ram, 0x300, 0x280, 8, 1, 2);       /* table[0] out, NEXT 2 */
	put_desc(ram, 0x310, 0x2a0, 8, 2, 0);       /* table[1] in */
	put_desc(ram, 0x320, 0x290, 8, 1, 1);       /* table[2] out, NEXT 1 */
	memcpy(ram + 0x80, avail, sizeof(avail));
	fuzz_write_seed(dir, name, in, sizeof(in));
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");

	if (dir) {
		write_seed(dir, "seed-split", 0);
		write_seed(dir, "seed-event-idx", 1);
		write_seed(dir, "seed-indirect", 3);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint16_t held[64];
	unsigned n_held = 0;
	struct virtq_addr a;
	struct virtq *vq;
	uint64_t features = 1ull << VIRTIO_F_VERSION_1;
	const uint8_t *ops;
	size_t n_ops;
	char err[128];

	if (!mem.host)
		ram_init();
	if (size < 9)
		return 0;
	a.size = (uint16_t)(1u << (data[0] % 10)); /* 1..512 */
	if (data[1] & 1)
		features |= 1ull << VIRTIO_F_EVENT_IDX;
	if (data[1] & 2)
		features |= 1ull << VIRTIO_F_INDIRECT_DESC;
	/* Mostly aligned addresses in or near RAM; the low bits of byte 1
	 * sometimes misalign them to cover the checks. */
	a.desc = (uint64_t)((data[2] | data[3] << 8) % 0x1800) * 16 + ((data[1] >> 2) & 1) * 8;
	a.driver = (uint64_t)((data[4] | data[5] << 8) % 0xc000) * 2 + ((data[1] >> 3) & 1);
	a.device = (uint64_t)((data[6] | data[7] << 8) % 0x6000) * 4 + ((data[1] >> 4) & 1) * 2;
	n_ops = data[8];
	data += 9;
	size -= 9;
	if (n_ops > size)
		n_ops = size;
	ops = data;
	data += n_ops;
	size -= n_ops;
	memset(mem.host, 0, RAM);
	memcpy(mem.host, data, size < RAM ? size : RAM);

	if (virtq_create(&mem, &a, features, &vq, err, sizeof(err)))
		return 0;
	for (size_t i = 0; i < n_ops; i++) {
		uint8_t op = ops[i];
		int ret;

		switch (op & 7) {
		case 0:
		case 1:
		case 2:
			ret = virtq_pop(vq, &chain);
			if (ret < 0 && !virtq_broken(vq))
				__builtin_trap();
			if (ret == 1) {
				check_chain(&chain, a.size);
				if (n_held < 64)
					held[n_held++] = chain.head;
				else
					virtq_push(vq, chain.head, (uint32_t)chain.in_len);
			}
			break;
		case 3:
		case 4:
			if (n_held) /* return the oldest, like an in-order device */
				virtq_push(vq, held[0], op);
			if (n_held)
				memmove(held, held + 1, --n_held * sizeof(held[0]));
			break;
		case 5:
			(void)virtq_should_notify(vq);
			break;
		case 6: /* the guest writes while the device works */
			if (i + 3 < n_ops) {
				unsigned off = (ops[i + 1] | ops[i + 2] << 8) % RAM;

				mem.host[off] = ops[i + 3];
				i += 3;
			}
			break;
		case 7: /* a device bug: push a head it does not hold */
			virtq_push(vq, op >> 3, 0);
			break;
		}
	}
	virtq_free(vq);
	return 0;
}
