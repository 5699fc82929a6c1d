/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_virtio_dev's driver model: what Linux's virtio_blk does, much
 * simplified. It brings the device up through the transport, posts
 * well-formed requests (direct or indirect, split headers, status bytes
 * inside data buffers), and, while the guest has broken no rule, checks
 * every completion against a model of the disk: status, used length, data
 * read back, and that an interrupt came. */
#include <endian.h>
#include <string.h>

#include "vdev.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtqueue.h"

static void put_desc(uint64_t at, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t d[16];
	uint64_t a = htole64(addr);
	uint32_t l = htole32(len);
	uint16_t f = htole16(flags), n = htole16(next);

	memcpy(d, &a, 8);
	memcpy(d + 8, &l, 4);
	memcpy(d + 12, &f, 2);
	memcpy(d + 14, &n, 2);
	memcpy(mach_gpa(at, 16), d, 16);
}

static uint32_t dev_features(unsigned sel)
{
	mach_wr(M.pci ? CC_DFSELECT : MMIO_DEV_FEATURES_SEL, 4, sel);
	return (uint32_t)mach_rd(M.pci ? CC_DF : MMIO_DEV_FEATURES, 4);
}

static void drv_features(unsigned sel, uint32_t v)
{
	mach_wr(M.pci ? CC_GFSELECT : MMIO_DRV_FEATURES_SEL, 4, sel);
	mach_wr(M.pci ? CC_GF : MMIO_DRV_FEATURES, 4, v);
}

/* Request buffers: bump-allocated, never shared by two requests in flight;
 * the pointer goes back to the start once none is. 0 when full. */
static uint64_t data_alloc(uint32_t len)
{
	uint64_t a = M.data_next ? M.data_next : M.n_queues * QSTRIDE;

	if (a + len > BANK0 && a < BANK1_GPA)
		a = BANK1_GPA;
	if (a + len > BANK1_GPA + BANK1)
		return 0;
	M.data_next = (a + len + 7) & ~7ull;
	return a;
}

static unsigned busy_total(void)
{
	unsigned n = 0;

	for (unsigned q = 0; q < MODEL_QUEUES; q++)
		n += M.q[q].busy;
	return n;
}

/* ---- the driver model: Linux's virtio_blk, much simplified ---- */

void drv_reset(void)
{
	memset(M.q, 0, sizeof(M.q));
	M.acked = 0;
	M.msix_on = false;
	M.data_next = 0;
}

static bool has(unsigned bit)
{
	return M.acked & (1ull << bit);
}

static void msix_setup(unsigned n)
{
	mach_cfg_wr((uint16_t)M.msix_cap + 2, 2, 0xc000); /* enable, function masked */
	for (unsigned v = 0; v < n; v++) {
		mach_wr(VP_MSIX_TABLE_OFF + 16 * v, 4, MSI_ADDR);
		mach_wr(VP_MSIX_TABLE_OFF + 16 * v + 4, 4, 0);
		mach_wr(VP_MSIX_TABLE_OFF + 16 * v + 8, 4, MSI_DATA0 + v);
	}
	mach_cfg_wr((uint16_t)M.msix_cap + 2, 2, 0x8000);
	for (unsigned v = 0; v < n; v++)
		mach_wr(VP_MSIX_TABLE_OFF + 16 * v + 12, 4, 0);
	mach_wr(CC_MSIX, 2, 0); /* config vector */
	M.msix_on = true;
}

static void queue_setup(unsigned q, uint16_t size)
{
	struct mqueue *mq = &M.q[q];
	uint64_t base = (uint64_t)q * QSTRIDE;

	*mq = (struct mqueue){ .size = size, .desc = base, .avail = base + 0x1000,
			       .used = base + 0x1400 };
	memset(mach_gpa(base, QSTRIDE), 0, QSTRIDE);
	for (unsigned i = 0; i < size; i++)
		mq->free[mq->n_free++] = (uint16_t)(size - 1 - i);
	if (M.pci) {
		mach_wr(CC_Q_SELECT, 2, q);
		if (mach_rd(CC_Q_SIZE, 2) < size)
			return;
		mach_wr(CC_Q_SIZE, 2, size);
		mach_wr(CC_Q_DESC, 8, mq->desc);
		mach_wr(CC_Q_AVAIL, 4, mq->avail); /* as two dwords */
		mach_wr(CC_Q_AVAIL + 4, 4, 0);
		mach_wr(CC_Q_USED, 8, mq->used);
		if (M.msix_on)
			mach_wr(CC_Q_MSIX, 2, q + 1);
		mach_wr(CC_Q_ENABLE, 2, 1);
		mq->live = mach_rd(CC_Q_ENABLE, 2) == 1;
	} else {
		mach_wr(MMIO_QUEUE_SEL, 4, q);
		if (mach_rd(MMIO_QUEUE_NUM_MAX, 4) < size)
			return;
		mach_wr(MMIO_QUEUE_NUM, 4, size);
		mach_wr(MMIO_DESC_LO, 4, (uint32_t)mq->desc);
		mach_wr(MMIO_DESC_HI, 4, 0);
		mach_wr(MMIO_DRIVER_LO, 4, (uint32_t)mq->avail);
		mach_wr(MMIO_DRIVER_HI, 4, 0);
		mach_wr(MMIO_DEVICE_LO, 4, (uint32_t)mq->used);
		mach_wr(MMIO_DEVICE_HI, 4, 0);
		mach_wr(MMIO_QUEUE_READY, 4, 1);
		mq->live = mach_rd(MMIO_QUEUE_READY, 4) == 1;
	}
}

/* a: queue size code and options; f: which offered features to accept. */
void drv_bring_up(uint8_t a, uint8_t f)
{
	static const unsigned fbits[] = { VIRTIO_F_EVENT_IDX, VIRTIO_F_INDIRECT_DESC, F_FLUSH,
					  F_DISCARD, F_WZ, F_MQ, F_RO, F_SEG_MAX };
	uint16_t size = (uint16_t)(2u << (a & 7)); /* 2..256 */
	uint64_t offered, want = 1ull << VIRTIO_F_VERSION_1 | 1ull << F_BLK_SIZE;

	drv_guest_reset();
	mach_status_wr(ST_ACK);
	mach_status_wr(ST_ACK | ST_DRIVER);
	offered = dev_features(0) | (uint64_t)dev_features(1) << 32;
	for (unsigned i = 0; i < 8; i++)
		if (f & (1u << i))
			want |= 1ull << fbits[i];
	if (a & 0x40)
		want &= ~(1ull << VIRTIO_F_VERSION_1); /* a legacy driver: refused */
	M.acked = offered & want;
	drv_features(0, (uint32_t)M.acked);
	drv_features(1, (uint32_t)(M.acked >> 32));
	mach_status_wr(ST_ACK | ST_DRIVER | ST_FEATURES_OK);
	if (!(mach_status_rd() & ST_FEATURES_OK)) {
		if (M.acked & (1ull << VIRTIO_F_VERSION_1))
			TRAP("features %#llx refused", (unsigned long long)M.acked);
		drv_reset();
		return;
	}
	if (M.pci && !(a & 8))
		msix_setup(M.n_queues + 1);
	else if (M.pci)
		mach_cfg_wr((uint16_t)M.msix_cap + 2, 2, 0); /* INTx-less: the ISR only */
	for (unsigned q = 0; q < M.n_queues; q++)
		if (!(a & 0x10) || q == 0)
			queue_setup(q, size);
	mach_status_wr(ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK);
	mach_loop();
	drv_reap_all();
}

/* What a correct device answers, from the disk model; applies the request
 * to the model. Returns the used length expected. */
static uint32_t expect(struct req *r, uint8_t st, uint32_t used_len)
{
	bool ro = M.disk_ro;
	uint8_t want = S_OK;
	uint32_t len = 1;
	const uint8_t *data = r->data_len ? mach_gpa(r->data_gpa, r->data_len) : NULL;
	const uint8_t *hdr = mach_gpa(r->hdr_gpa, 16);
	uint64_t sector;
	uint32_t type;

	/* The device writes only device-writable buffers. */
	memcpy(&type, hdr, 4);
	memcpy(&sector, hdr + 8, 8);
	if (le32toh(type) != r->type || le64toh(sector) != r->sector)
		TRAP("the device wrote into a request header");

	switch (r->type) {
	case T_IN:
	case T_OUT:
		if ((r->type == T_OUT && ro) || r->data_len % 512 ||
		    r->sector + r->data_len / 512 > DISK_SECTORS)
			want = S_IOERR;
		break;
	case T_FLUSH:
		want = M.can_flush ? S_OK : S_UNSUPP;
		break;
	case T_GET_ID:
		break;
	case T_DISCARD:
	case T_WZ:
		if (!has(r->type == T_DISCARD ? F_DISCARD : F_WZ))
			want = S_UNSUPP;
		else if (r->type == T_DISCARD && r->range_flags)
			want = S_UNSUPP;
		else if (r->sector + r->nsec > DISK_SECTORS)
			want = S_IOERR;
		break;
	default:
		want = S_UNSUPP;
	}
	if (st != want)
		TRAP("request type %u sector %llu len %u: status %u, expected %u", r->type,
		     (unsigned long long)r->sector, r->data_len, st, want);
	if (want != S_OK)
		return used_len <= 1 + r->data_len ? used_len : 1; /* partial data may count */
	switch (r->type) {
	case T_IN:
		if (memcmp(data, M.shadow + r->sector * 512, r->data_len))
			TRAP("read of sector %llu returned other data", (unsigned long long)r->sector);
		len += r->data_len;
		break;
	case T_OUT:
		memcpy(M.shadow + r->sector * 512, data, r->data_len);
		break;
	case T_GET_ID:
		len += r->data_len < 20 ? r->data_len : 20;
		if (memcmp(data, SERIAL, len - 1))
			TRAP("GET_ID returned other bytes");
		break;
	case T_WZ:
		memset(M.shadow + r->sector * 512, 0, r->nsec * 512);
		break;
	}
	return len;
}

static void reap(unsigned qi, bool irq_seen)
{
	struct mqueue *q = &M.q[qi];
	uint16_t idx, n = 0;

	if (!q->live)
		return;
	idx = mach_get16(q->used + 2);
	while (q->last_used != idx && n++ < q->size) {
		uint64_t e = q->used + 4 + 8 * (uint64_t)(q->last_used % q->size);
		uint32_t id = mach_get32(e), len = mach_get32(e + 4);
		struct req *r = id < q->size ? &q->r[id] : NULL;

		q->last_used++;
		if (!r || !r->busy) {
			if (!M.tainted)
				TRAP("queue %u: used id %u was not in flight", qi, id);
			continue;
		}
		if (!M.tainted) {
			uint8_t st = *mach_gpa(r->status_gpa, 1);
			uint32_t want = expect(r, st, len);

			if (len != want)
				TRAP("queue %u: used len %u, expected %u (type %u)", qi, len, want,
				     r->type);
			if (!irq_seen && !M.irq_unsure)
				TRAP("queue %u: a request completed without an interrupt", qi);
			M.checked++;
		}
		r->busy = false;
		q->busy--;
		for (unsigned i = 0; i < r->n_descs; i++)
			q->free[q->n_free++] = r->descs[i];
	}
	if (!M.tainted && q->last_used != idx)
		TRAP("queue %u: used idx ran %u past what was posted", qi,
		     (uint16_t)(idx - q->last_used));
	if (has(VIRTIO_F_EVENT_IDX))
		mach_put16(q->avail + 4 + 2 * (uint64_t)q->size, q->last_used); /* used_event */
	if (!busy_total())
		M.data_next = 0;
}

/* The driver's interrupt handler: what fired, then every used ring. */
void drv_reap_all(void)
{
	bool seen[MODEL_QUEUES];

	for (unsigned q = 0; q < MODEL_QUEUES; q++) {
		if (M.pci && M.msix_on) {
			seen[q] = M.msis[q + 1] != 0;
			M.msis[q + 1] = 0;
		}
	}
	if (!M.pci || !M.msix_on) {
		uint32_t isr = (uint32_t)(M.pci ? mach_rd(VP_ISR_OFF, 1) : mach_rd(MMIO_INT_STATUS, 4));

		if (!M.pci)
			mach_wr(MMIO_INT_ACK, 4, isr);
		for (unsigned q = 0; q < MODEL_QUEUES; q++)
			seen[q] = isr & 1;
	}
	for (unsigned q = 0; q < MODEL_QUEUES; q++)
		reap(q, seen[q]);
	M.irq_unsure = false;
}

/*
 * Post one request on queue qi. type picks the command; sector may run
 * past the disk; shape: bits 0-1 sectors (1..4), 2-3 data descriptors
 * (1..4), 4 a length that is not whole sectors, 5 header in two
 * descriptors, 6 status byte inside the last data descriptor, 7 indirect.
 */
void drv_post(unsigned qi, uint8_t type, uint8_t sector, uint8_t shape)
{
	static const uint32_t types[] = { T_IN, T_OUT, T_FLUSH, T_GET_ID, T_DISCARD, T_WZ, 99,
					  T_IN };
	struct mqueue *q = &M.q[qi % MODEL_QUEUES];
	struct { uint64_t a; uint32_t len; uint16_t flags; } seg[8];
	unsigned n = 0, nsec = 1 + (shape & 3), nd = 1 + ((shape >> 2) & 3);
	bool indirect = (shape & 0x80) && has(VIRTIO_F_INDIRECT_DESC);
	bool merged = shape & 0x40;
	uint32_t dlen = 0;
	uint64_t hdr, data = 0, status, range = 0;
	struct req r = { .type = types[type & 7] };
	uint16_t head;

	if (!q->live)
		return;
	r.sector = sector % (DISK_SECTORS + 4);
	if (r.type == T_IN || r.type == T_OUT)
		dlen = nsec * 512 - (shape & 0x10 ? 7 : 0);
	else if (r.type == T_GET_ID)
		dlen = shape & 0x10 ? 8 : 20;
	hdr = data_alloc(32 + dlen + 1 + (indirect ? 15 + 16 * 8 : 0));
	if (!hdr)
		return;
	if (r.type == T_DISCARD || r.type == T_WZ) {
		r.nsec = nsec;
		r.range_flags = (type >> 3) & 1;
		range = hdr + 16;
	}
	data = hdr + 32;
	status = data + dlen;
	r.hdr_gpa = hdr;
	r.data_gpa = data;
	r.data_len = dlen;
	r.status_gpa = status;

	/* Header: le32 type, le32 reserved, le64 sector. */
	{
		uint8_t h[16] = { 0 };
		uint32_t t = htole32(r.type);
		uint64_t s = htole64(r.sector);

		memcpy(h, &t, 4);
		memcpy(h + 8, &s, 8);
		memcpy(mach_gpa(hdr, 16), h, 16);
	}
	if (shape & 0x20) {
		seg[n++] = (typeof(seg[0])){ hdr, 8, 0 };
		seg[n++] = (typeof(seg[0])){ hdr + 8, 8, 0 };
	} else {
		seg[n++] = (typeof(seg[0])){ hdr, 16, 0 };
	}
	if (range) {
		uint8_t g[16] = { 0 };
		uint64_t s = htole64(r.sector);
		uint32_t ns = htole32(r.nsec), fl = htole32(r.range_flags);

		memcpy(g, &s, 8);
		memcpy(g + 8, &ns, 4);
		memcpy(g + 12, &fl, 4);
		memcpy(mach_gpa(range, 16), g, 16);
		seg[n++] = (typeof(seg[0])){ range, 16, 0 };
	}
	if (dlen) {
		uint16_t fl = r.type == T_OUT ? 0 : D_WRITE;
		uint8_t *p = mach_gpa(data, dlen);

		for (uint32_t i = 0; i < dlen; i++) /* what the guest wrote, or a canary */
			p[i] = r.type == T_OUT ? (uint8_t)(i * 7 + sector + type) : 0xee;
		if (nd > dlen)
			nd = dlen;
		for (unsigned i = 0, off = 0; i < nd; i++) {
			uint32_t l = i == nd - 1 ? dlen - off : dlen / nd;

			seg[n++] = (typeof(seg[0])){ data + off, l, fl };
			off += l;
		}
	}
	*mach_gpa(status, 1) = 0xff;
	if (merged && dlen && r.type != T_OUT)
		seg[n - 1].len++; /* the status byte ends the last data buffer */
	else
		seg[n++] = (typeof(seg[0])){ status, 1, D_WRITE };

	if (n > q->size) /* a chain longer than the queue is a driver bug */
		return;
	if (indirect) {
		uint64_t table = (status + 1 + 15) & ~15ull;

		if (!q->n_free)
			return;
		for (unsigned i = 0; i < n; i++)
			put_desc(table + 16 * i, seg[i].a, seg[i].len,
				 seg[i].flags | (i + 1 < n ? D_NEXT : 0), (uint16_t)(i + 1));
		head = q->free[--q->n_free];
		r.descs[r.n_descs++] = head;
		put_desc(q->desc + 16 * (uint64_t)head, table, 16 * n, D_INDIRECT, 0);
	} else {
		if (q->n_free < n)
			return;
		for (unsigned i = 0; i < n; i++)
			r.descs[r.n_descs++] = q->free[--q->n_free];
		for (unsigned i = 0; i < n; i++)
			put_desc(q->desc + 16 * (uint64_t)r.descs[i], seg[i].a, seg[i].len,
				 seg[i].flags | (i + 1 < n ? D_NEXT : 0),
				 i + 1 < n ? r.descs[i + 1] : 0);
		head = r.descs[0];
	}
	r.busy = true;
	q->r[head] = r;
	q->busy++;
	mach_put16(q->avail + 4 + 2 * (uint64_t)(q->avail_idx % q->size), head);
	mach_put16(q->avail + 2, ++q->avail_idx);
}
/* ---- invariants after every step ---- */

void drv_check(void)
{
	uint8_t s = mach_status();

	if ((s & ST_NEEDS_RESET) && !M.tainted)
		TRAP("NEEDS_RESET (%s) though the guest broke no rule", M.why[0] ? M.why : "?");
	if (!M.pci && M.irq_level != (mach_rd(MMIO_INT_STATUS, 4) != 0))
		TRAP("irq line %d with InterruptStatus %#llx", M.irq_level,
		     (unsigned long long)mach_rd(MMIO_INT_STATUS, 4));
}
/* The guest resets the device through the transport: it must come back
 * with status 0 and no interrupt pending. Rules broken before no longer
 * matter: the driver model starts over and trusts the disk as it is. */
void drv_guest_reset(void)
{
	mach_pci_enable();
	mach_status_wr(0);
	mach_loop();
	if (mach_status() != 0)
		TRAP("status %#x after a reset", mach_status());
	if (!M.pci && (M.irq_level || mach_rd(MMIO_INT_STATUS, 4)))
		TRAP("interrupt still pending after a reset");
	drv_reset();
	memcpy(M.shadow, M.disk, DISK_SIZE);
	M.tainted = false;
	M.why[0] = '\0';
}
