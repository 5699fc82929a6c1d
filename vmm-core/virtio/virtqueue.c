/* SPDX-License-Identifier: Apache-2.0 */
/* Split virtqueues (virtio 1.x, 2.7): checked creation, descriptor-chain
 * walking that trusts nothing in guest memory, used-ring updates and the
 * interrupt-suppression decision. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "virtqueue.h"

#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1

/* Guest layout, little-endian (virtio 1.x). */
struct vring_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct vring_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[]; /* then used_event */
};

struct vring_used_elem {
	uint32_t id;
	uint32_t len;
};

struct vring_used {
	uint16_t flags;
	uint16_t idx;
	struct vring_used_elem ring[]; /* then avail_event */
};

struct virtq {
	uint16_t size;
	bool event_idx, indirect;
	const struct guest_mem *mem;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t *used_event;  /* in the avail ring; NULL without EVENT_IDX */
	uint16_t *avail_event; /* in the used ring; NULL without EVENT_IDX */
	uint16_t last_avail;   /* next avail->ring slot to read */
	uint16_t used_idx;     /* our copy of used->idx: never read back */
	uint16_t signalled;    /* used_idx when we last decided about an interrupt */
	const char *why;       /* set once: the queue is broken */
	uint64_t inflight[];   /* bitmap: heads popped and not yet pushed */
};

/*
 * Copy from guest memory exactly once. The compiler barrier after the copy
 * stops the compiler from re-reading guest memory in place of the local copy
 * (the guest may change it at any moment); READ_ONCE in spirit.
 */
static void guest_read(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	__asm__ __volatile__("" ::: "memory");
}

static int fail(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

int virtq_create(const struct guest_mem *m, const struct virtq_addr *a, uint64_t features,
		 struct virtq **out, char *err, size_t errlen)
{
	bool event_idx = features & (1ull << VIRTIO_F_EVENT_IDX);
	uint64_t n = a->size, extra = event_idx ? 2 : 0;
	size_t words;
	struct virtq *vq;
	void *desc, *avail, *used;

	*out = NULL;
	if (!n || n > VIRTQ_MAX_SIZE || (n & (n - 1)))
		return fail(err, errlen, "queue size is not a power of two between 1 and 32768");
	/* virtio 1.x 2.7: descriptor table 16, available ring 2, used ring 4 */
	if ((a->desc & 15) || (a->driver & 1) || (a->device & 3))
		return fail(err, errlen, "queue area is misaligned");
	desc = mem_map(m, a->desc, 16 * n);
	avail = mem_map(m, a->driver, 4 + 2 * n + extra);
	used = mem_map(m, a->device, 4 + 8 * n + extra);
	if (!desc || !avail || !used)
		return fail(err, errlen, "queue area lies outside guest RAM");
	words = (n + 63) / 64;
	vq = calloc(1, sizeof(*vq) + words * sizeof(uint64_t));
	if (!vq)
		return -ENOMEM;
	vq->size = (uint16_t)n;
	vq->mem = m;
	vq->event_idx = event_idx;
	vq->indirect = features & (1ull << VIRTIO_F_INDIRECT_DESC);
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	if (event_idx) {
		vq->used_event = &vq->avail->ring[n];
		vq->avail_event = (uint16_t *)&vq->used->ring[n];
	}
	*out = vq;
	return 0;
}

void virtq_free(struct virtq *vq)
{
	free(vq);
}

/* Dirty tracking: the used ring (with avail_event) is ours to write. */
static void mark_used(const struct virtq *vq)
{
	mem_mark_dirty(vq->mem, vq->used, 4 + 8u * vq->size + (vq->event_idx ? 2 : 0));
}

int virtq_save_pos(const struct virtq *vq, struct virtq_pos *p)
{
	unsigned words = (vq->size + 63u) / 64u, held = 0;

	if (vq->why)
		return -EIO;
	for (unsigned i = 0; i < words; i++)
		held += (unsigned)__builtin_popcountll(vq->inflight[i]);
	/* The last @held slots read from the available ring must name exactly
	 * the held heads (each once: the bitmap has one bit per head). */
	for (unsigned j = 1; j <= held; j++) {
		uint16_t slot = (uint16_t)(vq->last_avail - j) & (uint16_t)(vq->size - 1), head;

		guest_read(&head, &vq->avail->ring[slot], sizeof(head));
		head = le16toh(head);
		if (head >= vq->size || !(vq->inflight[head / 64] & (1ull << (head % 64))))
			return -EBUSY;
	}
	p->last_avail = (uint16_t)(vq->last_avail - held);
	p->used_idx = vq->used_idx;
	p->signalled = vq->signalled;
	return 0;
}

void virtq_set_pos(struct virtq *vq, const struct virtq_pos *p)
{
	vq->last_avail = p->last_avail;
	vq->used_idx = p->used_idx;
	vq->signalled = p->signalled;
}

static int broken(struct virtq *vq, const char *why)
{
	if (!vq->why)
		vq->why = why;
	return -EIO;
}

/* The walk over one chain: where we are and what we have collected. */
struct walk {
	const struct vring_desc *table;
	uint32_t table_size; /* entries in table */
	uint32_t seen;       /* descriptors visited in table: > table_size means a loop */
	bool in_indirect;
	bool writable;       /* a device-writable segment was seen */
	unsigned max_segs;
};

static int add_segment(struct virtq *vq, struct walk *w, struct cub_vq_chain *c,
		       const struct vring_desc *d)
{
	uint64_t addr = le64toh(d->addr);
	uint32_t len = le32toh(d->len);
	bool write = le16toh(d->flags) & VIRTQ_DESC_F_WRITE;
	void *p;

	if (write)
		w->writable = true;
	else if (w->writable)
		return broken(vq, "device-readable descriptor after a device-writable one");
	if (!len)
		return 0; /* nothing to transfer; Linux never sends these, others may */
	p = mem_map(vq->mem, addr, len);
	if (!p)
		return broken(vq, "buffer lies outside guest RAM");
	if ((unsigned)c->n_out + c->n_in >= w->max_segs)
		return broken(vq, "descriptor chain is too long");
	c->iov[c->n_out + c->n_in] = (struct iovec){ p, len };
	if (write) {
		c->n_in++;
		c->in_len += len;
	} else {
		c->n_out++;
		c->out_len += len;
	}
	return 0;
}

static int enter_indirect(struct virtq *vq, struct walk *w, const struct vring_desc *d)
{
	uint64_t addr = le64toh(d->addr);
	uint32_t len = le32toh(d->len);
	uint16_t flags = le16toh(d->flags);
	const void *t;

	if (!vq->indirect)
		return broken(vq, "indirect descriptor without VIRTIO_F_INDIRECT_DESC");
	if (w->in_indirect)
		return broken(vq, "nested indirect descriptor");
	if (flags & VIRTQ_DESC_F_NEXT)
		return broken(vq, "indirect descriptor with the NEXT flag");
	if (!len || len % sizeof(struct vring_desc))
		return broken(vq, "indirect table length is not a multiple of 16");
	if (len / sizeof(struct vring_desc) > w->max_segs)
		return broken(vq, "indirect table is too long");
	t = mem_map(vq->mem, addr, len);
	if (!t)
		return broken(vq, "indirect table lies outside guest RAM");
	w->table = t;
	w->table_size = len / sizeof(struct vring_desc);
	w->seen = 0;
	w->in_indirect = true;
	return 0;
}

static int walk_chain(struct virtq *vq, uint16_t head, struct cub_vq_chain *c)
{
	struct walk w = {
		.table = vq->desc,
		.table_size = vq->size,
		.max_segs = vq->size < CUB_VQ_MAX_SEGS ? vq->size : CUB_VQ_MAX_SEGS,
	};
	uint32_t i = head;
	int ret;

	for (;;) {
		struct vring_desc d;
		uint16_t flags;

		if (i >= w.table_size)
			return broken(vq, "descriptor index out of range");
		if (++w.seen > w.table_size)
			return broken(vq, "descriptor chain loops");
		guest_read(&d, &w.table[i], sizeof(d));
		flags = le16toh(d.flags);
		if (flags & VIRTQ_DESC_F_INDIRECT) {
			ret = enter_indirect(vq, &w, &d);
			if (ret)
				return ret;
			i = 0;
			continue;
		}
		ret = add_segment(vq, &w, c, &d);
		if (ret)
			return ret;
		if (!(flags & VIRTQ_DESC_F_NEXT))
			return 0;
		i = le16toh(d.next);
	}
}

int virtq_pop(struct virtq *vq, struct cub_vq_chain *c)
{
	uint16_t avail_idx, head, slot;
	int ret;

	if (vq->why)
		return -EIO;
	if (vq->avail_event) {
		/*
		 * Ask to be kicked for anything after what we have taken, then
		 * look at avail->idx. The full fence orders our store before the
		 * load, pairing with the driver's "store idx; mb; load
		 * avail_event": one side always sees the other, so no kick is lost.
		 */
		__atomic_store_n(vq->avail_event, htole16(vq->last_avail), __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	/* Acquire: the ring entries and descriptors the driver wrote before
	 * bumping idx are visible once we see the new idx. */
	avail_idx = le16toh(__atomic_load_n(&vq->avail->idx, __ATOMIC_ACQUIRE));
	if (avail_idx == vq->last_avail)
		return 0;
	if ((uint16_t)(avail_idx - vq->last_avail) > vq->size)
		return broken(vq, "available index ran more than a queue ahead");
	slot = vq->last_avail & (vq->size - 1);
	head = le16toh(__atomic_load_n(&vq->avail->ring[slot], __ATOMIC_RELAXED));
	if (head >= vq->size)
		return broken(vq, "available ring names a descriptor out of range");
	if (vq->inflight[head / 64] & (1ull << (head % 64)))
		return broken(vq, "descriptor made available twice");
	c->head = head;
	c->n_out = c->n_in = 0;
	c->out_len = c->in_len = 0;
	ret = walk_chain(vq, head, c);
	if (ret)
		return ret;
	c->out = c->iov;
	c->in = c->iov + c->n_out;
	if (vq->mem->dirty) { /* the device will write these, and the used ring */
		for (unsigned i = 0; i < c->n_in; i++)
			mem_mark_dirty(vq->mem, c->in[i].iov_base, c->in[i].iov_len);
		mark_used(vq);
	}
	vq->inflight[head / 64] |= 1ull << (head % 64);
	vq->last_avail++;
	if (vq->avail_event)
		__atomic_store_n(vq->avail_event, htole16(vq->last_avail), __ATOMIC_RELAXED);
	return 1;
}

int virtq_unpop(struct virtq *vq, const uint16_t *heads, unsigned n)
{
	if (vq->why)
		return -EIO;
	if (n > vq->size)
		return broken(vq, "device gave back more chains than the queue holds");
	/* Check all before changing anything: the last popped is heads[n-1]. */
	for (unsigned j = 0; j < n; j++) {
		uint16_t h = heads[n - 1 - j];
		uint16_t slot = (uint16_t)(vq->last_avail - 1 - j) & (uint16_t)(vq->size - 1);

		if (h >= vq->size || !(vq->inflight[h / 64] & (1ull << (h % 64))))
			return broken(vq, "device gave back a chain it does not hold");
		if (le16toh(__atomic_load_n(&vq->avail->ring[slot], __ATOMIC_RELAXED)) != h)
			return broken(vq, "available ring changed under chains the device held");
	}
	for (unsigned j = 0; j < n; j++)
		vq->inflight[heads[j] / 64] &= ~(1ull << (heads[j] % 64));
	vq->last_avail = (uint16_t)(vq->last_avail - n);
	return 0;
}

void virtq_push(struct virtq *vq, uint16_t head, uint32_t written)
{
	struct vring_used_elem *e;

	if (vq->why)
		return;
	if (head >= vq->size || !(vq->inflight[head / 64] & (1ull << (head % 64)))) {
		broken(vq, "device returned a chain it does not hold");
		return;
	}
	vq->inflight[head / 64] &= ~(1ull << (head % 64));
	e = &vq->used->ring[vq->used_idx & (vq->size - 1)];
	__atomic_store_n(&e->id, htole32(head), __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, htole32(written), __ATOMIC_RELAXED);
	vq->used_idx++;
	/* Release: the element is visible before the index that publishes it. */
	__atomic_store_n(&vq->used->idx, htole16(vq->used_idx), __ATOMIC_RELEASE);
	mark_used(vq);
}

void virtq_push_batch(struct virtq *vq, const struct cub_vq_used *u, unsigned n)
{
	uint16_t idx;

	if (vq->why)
		return;
	/* A batch longer than the ring would overwrite its own first entries. */
	if (n > vq->size) {
		broken(vq, "device returned more chains at once than the queue holds");
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		uint16_t h = u[i].head;

		if (h >= vq->size || !(vq->inflight[h / 64] & (1ull << (h % 64)))) {
			broken(vq, "device returned a chain it does not hold");
			return;
		}
		vq->inflight[h / 64] &= ~(1ull << (h % 64)); /* a head twice breaks too */
	}
	for (idx = vq->used_idx; idx != (uint16_t)(vq->used_idx + n); idx++) {
		struct vring_used_elem *e = &vq->used->ring[idx & (vq->size - 1)];
		const struct cub_vq_used *x = &u[(uint16_t)(idx - vq->used_idx)];

		__atomic_store_n(&e->id, htole32(x->head), __ATOMIC_RELAXED);
		__atomic_store_n(&e->len, htole32(x->written), __ATOMIC_RELAXED);
	}
	vq->used_idx = idx;
	/* Release: every element is visible before the index that publishes them. */
	__atomic_store_n(&vq->used->idx, htole16(vq->used_idx), __ATOMIC_RELEASE);
	mark_used(vq);
}

void virtq_mark_held(struct virtq *vq)
{
	const char *why = vq->why;
	struct cub_vq_chain *c;

	if (!vq->mem->dirty || why)
		return;
	c = malloc(sizeof(*c));
	if (!c) {
		mem_mark_all_dirty(vq->mem); /* too much, never too little */
		return;
	}
	for (uint16_t h = 0; h < vq->size; h++) {
		if (!(vq->inflight[h / 64] & (1ull << (h % 64))))
			continue;
		c->n_out = c->n_in = 0;
		c->out_len = c->in_len = 0;
		if (!walk_chain(vq, h, c))
			for (unsigned i = 0; i < c->n_in; i++)
				mem_mark_dirty(vq->mem, c->iov[c->n_out + i].iov_base,
					       c->iov[c->n_out + i].iov_len);
		vq->why = why; /* a guest that changed a held chain: not our business here */
	}
	mark_used(vq);
	free(c);
}

bool virtq_should_notify(struct virtq *vq)
{
	uint16_t old = vq->signalled, now = vq->used_idx;

	if (vq->why || old == now)
		return false;
	vq->signalled = now;
	/* Our used->idx store must be visible before we read the driver's
	 * suppression state, which it writes before re-checking used->idx. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vq->used_event) {
		uint16_t ev = le16toh(__atomic_load_n(vq->used_event, __ATOMIC_RELAXED));

		/* virtio 1.x 2.7.10: interrupt if used_event lies in [old, now) */
		return (uint16_t)(now - ev - 1) < (uint16_t)(now - old);
	}
	return !(le16toh(__atomic_load_n(&vq->avail->flags, __ATOMIC_RELAXED)) &
		 VIRTQ_AVAIL_F_NO_INTERRUPT);
}

bool virtq_broken(const struct virtq *vq)
{
	return vq->why;
}

const char *virtq_error(const struct virtq *vq)
{
	return vq->why;
}

uint16_t virtq_size(const struct virtq *vq)
{
	return vq->size;
}
