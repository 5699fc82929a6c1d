/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for a whole virtio device: the real virtio core, the
 * real virtio-mmio or virtio-pci transport and the real virtio-blk plugin
 * (compiled in) on an in-memory disk, driven by a fuzzed guest that pokes
 * registers, PCI config space and RAM, and kicks queues. A driver model
 * inside the guest brings the device up and posts well-formed requests, so
 * inputs reach DRIVER_OK with live queues; raw writes then break whatever
 * they like. Checked after every step: sanitizers, every buffer the device
 * hands the disk lies in guest RAM and in the disk, NEEDS_RESET only after
 * the guest broke a rule, the interrupt line follows InterruptStatus
 * (MMIO), and, while the guest has followed the rules, every request
 * completes once with the status and data a disk model predicts and an
 * interrupt. Each input builds a fresh machine and ends with a guest reset
 * and a full teardown, so no state outlives it and LeakSanitizer sees
 * everything freed.
 *
 * Input: one configuration byte (mach_up), then up to MAX_STEPS
 * operations, each an opcode byte and its fixed-size arguments (step). */
#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "pci.h"
#include "seed.h"
#include "vdev.h"
#include "virtio/virtio_pci.h"

#define MAX_STEPS 192

/* ---- the program ---- */

struct cursor {
	const uint8_t *p;
	size_t n;
};

static bool take(struct cursor *c, void *out, size_t len)
{
	if (c->n < len)
		return false;
	memcpy(out, c->p, len);
	c->p += len;
	c->n -= len;
	return true;
}

enum {
	OP_REG_WR, OP_REG_RD, OP_RAM_WR, OP_KICK, OP_BRING_UP, OP_REQ, OP_IRQ, OP_PCI_CFG,
	OP_RESET, OP_CFG_RD, OP_REQ_KICK, OP_KICK_ALL, OP_BURST, OP_SCRIBBLE, N_OPS
};

/*
 * A malformed ring, aimed where the driver model keeps queue qi: field f
 * of descriptor or ring slot i gets v. The guest broke the rules (or may
 * have): the model stops checking until the next reset.
 */
static void scribble(unsigned qi, uint8_t f, uint8_t i, uint32_t v)
{
	const struct mqueue *q = &M.q[qi];
	uint64_t d;

	if (!q->live)
		return;
	i %= q->size;
	d = q->desc + 16 * (uint64_t)i;
	M.tainted = true;
	switch (f % 8) {
	case 0: /* an address anywhere, often near RAM's edges */
		memcpy(mach_gpa(d, 4), &v, 4);
		memset(mach_gpa(d + 4, 4), f >> 3 & 1 ? 0xff : 0, 4);
		break;
	case 1: /* a length */
		memcpy(mach_gpa(d + 8, 4), &v, 4);
		break;
	case 2: /* flags and next: loops, indirect, a readable after a writable */
		memcpy(mach_gpa(d + 12, 4), &v, 4);
		break;
	case 3: /* an avail slot naming any head */
		mach_put16(q->avail + 4 + 2 * (uint64_t)i, (uint16_t)v);
		break;
	case 4: /* avail->idx moved: replays, or far ahead */
		mach_put16(q->avail + 2, (uint16_t)(mach_get16(q->avail + 2) + v));
		break;
	case 5: /* avail->flags, used_event */
		mach_put16(f & 8 ? q->avail : q->avail + 4 + 2 * (uint64_t)q->size, (uint16_t)v);
		break;
	case 6: /* the used ring under the device's feet */
		mach_put16(q->used + 2 + 2 * (uint64_t)(f >> 3 & 3), (uint16_t)v);
		break;
	case 7: /* a whole descriptor, pointing back into the ring itself */
		memcpy(mach_gpa(d, 8), &q->desc, 8);
		memcpy(mach_gpa(d + 8, 4), &v, 4);
		mach_put16(d + 12, (uint16_t)(v >> 16 | D_NEXT));
		mach_put16(d + 14, i);
		break;
	}
}

static bool step(struct cursor *c)
{
	static const uint8_t widths[] = { 4, 4, 1, 2, 4, 8, 4, 4 };
	uint8_t op, a[7];
	uint16_t off;
	uint32_t v;

	if (!take(c, &op, 1))
		return false;
	switch (op % N_OPS) {
	case OP_REG_WR: /* off16 width val32 */
		if (!take(c, a, 7))
			return false;
		memcpy(&off, a, 2);
		memcpy(&v, a + 3, 4);
		mach_wr(le16toh(off) & (M.pci ? VP_BAR_SIZE - 1 : MMIO_LEN - 1), widths[a[2] & 7],
			le32toh(v) | (a[2] & 8 ? (uint64_t)le32toh(v) << 32 : 0));
		M.tainted = M.irq_unsure = true;
		break;
	case OP_REG_RD: /* off16 width */
		if (!take(c, a, 3))
			return false;
		memcpy(&off, a, 2);
		(void)mach_rd(le16toh(off) & (M.pci ? VP_BAR_SIZE - 1 : MMIO_LEN - 1), widths[a[2] & 7]);
		M.irq_unsure = true; /* the PCI ISR clears on read */
		break;
	case OP_RAM_WR: { /* off16 len bytes */
		uint8_t buf[16];
		uint64_t g;

		if (!take(c, a, 3) || !take(c, buf, 1 + a[2] % 16))
			return false;
		memcpy(&off, a, 2);
		off = le16toh(off) % RAM;
		g = off < BANK0 ? off : BANK1_GPA + off - BANK0;
		if (off + 1u + a[2] % 16 <= (off < BANK0 ? BANK0 : RAM))
			memcpy(mach_gpa(g, 1 + a[2] % 16), buf, 1 + a[2] % 16);
		M.tainted = true;
		break;
	}
	case OP_KICK:
		if (!take(c, a, 1))
			return false;
		mach_kick(a[0] % (M.n_queues + 1)); /* one past the last: ignored */
		drv_reap_all();
		break;
	case OP_BRING_UP:
		if (!take(c, a, 2))
			return false;
		drv_bring_up(a[0], a[1]);
		break;
	case OP_REQ:
	case OP_REQ_KICK: /* queue type sector shape */
		if (!take(c, a, 4))
			return false;
		drv_post(a[0] % M.n_queues, a[1], a[2], a[3]);
		if (op % N_OPS == OP_REQ_KICK) {
			mach_kick(a[0] % M.n_queues);
			drv_reap_all();
		}
		break;
	case OP_IRQ:
		drv_reap_all();
		break;
	case OP_PCI_CFG: /* off width val32: write if width bit 2 */
		if (!take(c, a, 6))
			return false;
		memcpy(&v, a + 2, 4);
		if (M.pci) {
			uint32_t len = 1u << (a[1] & 3);

			if (a[1] & 4) {
				mach_cfg_wr(a[0], len > 4 ? 4 : len, le32toh(v));
				M.tainted = M.irq_unsure = true;
			} else { /* may read BAR0 through the PCI-config window */
				pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, a[0], &v,
						len > 4 ? 4 : len, false);
				M.irq_unsure = true;
			}
		}
		break;
	case OP_RESET:
		drv_guest_reset();
		break;
	case OP_CFG_RD: /* off width */
		if (!take(c, a, 2))
			return false;
		(void)mach_rd((M.pci ? VP_DEVICE_OFF : MMIO_CONFIG) + a[0] % 0x48, widths[a[1] & 7]);
		break;
	case OP_KICK_ALL:
		for (unsigned q = 0; q < M.n_queues; q++)
			mach_kick(q);
		drv_reap_all();
		break;
	case OP_SCRIBBLE: /* queue field index val32, then a kick */
		if (!take(c, a, 7))
			return false;
		memcpy(&v, a + 3, 4);
		scribble(a[0] % M.n_queues, a[1], a[2], le32toh(v));
		mach_kick(a[0] % M.n_queues);
		drv_reap_all();
		break;
	case OP_BURST: /* queue type sector shape count: a full queue, one kick */
		if (!take(c, a, 5))
			return false;
		for (unsigned i = 0; i <= a[4]; i++)
			drv_post(a[0] % M.n_queues, a[1], (uint8_t)(a[2] + i), a[3]);
		mach_kick(a[0] % M.n_queues);
		drv_reap_all();
		break;
	}
	drv_check();
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c;

	if (size < 1)
		return 0;
	c = (struct cursor){ data + 1, size - 1 };
	if (!mach_up(data[0])) {
		mach_down();
		return 0;
	}
	for (unsigned i = 0; i < MAX_STEPS && step(&c); i++)
		;
	drv_guest_reset(); /* it must come back clean */
	if (vdev_verbose)
		fprintf(stderr, "[fuzz] %s, %u completions checked\n", M.pci ? "pci" : "mmio",
			M.checked);
	mach_down();
	return 0;
}

/* ---- seeds ---- */

/* Seeds: well-formed programs the fuzzer mutates from, built here so the
 * tree holds no binary files; with FUZZ_SEED_DIR set (make fuzz-smoke sets
 * it to the corpus folder), LLVMFuzzerInitialize writes them there. */
struct seed {
	uint8_t b[512];
	size_t n;
};

static void emit(struct seed *s, unsigned n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (unsigned i = 0; i < n && s->n < sizeof(s->b); i++)
		s->b[s->n++] = (uint8_t)va_arg(ap, int);
	va_end(ap);
}

static void seeds(const char *dir)
{
	/* conf: bit 0 PCI, 1 read-only, 2-3 queues - 1, 4 discard, 5 write
	 * zeroes, 6 flush. Bring-up: size code 7 (256) or smaller, features. */
	static const struct {
		const char *name;
		uint8_t conf, up, feat;
	} v[] = {
		{ "seed-mmio", 0x70, 7, 0xff },
		{ "seed-pci-msix", 0x71, 7, 0xff },
		{ "seed-pci-isr-2q", 0x75, 0x0b, 0x3f },
		{ "seed-mmio-ro-4q", 0x0e, 0x03, 0x63 },
	};

	for (unsigned i = 0; i < CUB_ARRAY_SIZE(v); i++) {
		struct seed s = { .n = 0 };

		emit(&s, 1, v[i].conf);
		emit(&s, 3, OP_BRING_UP, v[i].up, v[i].feat);
		emit(&s, 5, OP_REQ, 0, 1, 2, 0x05);          /* write 2 sectors at 2 */
		emit(&s, 5, OP_REQ_KICK, 0, 0, 2, 0x05);     /* read them back */
		emit(&s, 5, OP_REQ_KICK, 0, 0, 1, 0xc7);     /* indirect, status merged */
		emit(&s, 5, OP_REQ_KICK, 1, 3, 0, 0x00);     /* GET_ID */
		emit(&s, 5, OP_REQ, 0, 2, 0, 0x00);          /* FLUSH */
		emit(&s, 5, OP_REQ, 0, 5, 4, 0x01);          /* write zeroes */
		emit(&s, 5, OP_REQ_KICK, 0, 4, 8, 0x00);     /* discard */
		emit(&s, 5, OP_REQ_KICK, 0, 0, 30, 0x03);    /* read past the end */
		emit(&s, 6, OP_BURST, 0, 0, 0, 0x00, 99);    /* 100 one-sector reads */
		emit(&s, 1, OP_IRQ);
		emit(&s, 8, OP_SCRIBBLE, 0, 4, 0, 1, 0, 0, 0); /* avail->idx one past: a replay */
		fuzz_write_seed(dir, v[i].name, s.b, s.n);
	}
}

/* Each input creates and frees a device of a few hundred KiB; ASan's
 * default 256 MiB quarantine then hands out fresh, never-touched pages
 * every time, and page faults cost more than the device (3x the exec/s).
 * 16 MiB still holds the last few dozen inputs' frees, so a use after
 * free within an input is still caught. */
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
	return "quarantine_size_mb=16";
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");

	vdev_verbose = getenv("FUZZ_VERBOSE") != NULL;
	mach_init();
	log_set_level(vdev_verbose ? CUB_LOG_DEBUG : CUB_LOG_ERR);
	if (dir)
		seeds(dir);
	return 0;
}
