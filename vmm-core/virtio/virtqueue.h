/* SPDX-License-Identifier: Apache-2.0 */
/* One virtqueue as the host's virtio core sees it: created from what the
 * driver programmed, popped and pushed by the device. The ring format (split
 * today, packed later) stays inside virtqueue.c. */
#ifndef CUBICLE_VIRTQUEUE_H
#define CUBICLE_VIRTQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubicle/virtio.h"
#include "mem.h"

/* Feature bits the queue code implements (virtio 1.x numbering). */
#define VIRTIO_F_INDIRECT_DESC 28
#define VIRTIO_F_EVENT_IDX 29
#define VIRTIO_F_VERSION_1 32

#define VIRTQ_MAX_SIZE 32768

struct virtq;

/*
 * Where the driver put a queue: the three areas of virtio 1.x (descriptor
 * table, driver area, device area; for a split ring these are the
 * descriptor table, the available ring and the used ring).
 */
struct virtq_addr {
	uint16_t size; /* entries: a power of two, 1..32768 */
	uint64_t desc, driver, device; /* guest-physical */
};

/*
 * Make a queue over guest RAM @m. @features are the negotiated ones: the
 * ring format and EVENT_IDX / INDIRECT_DESC are taken from them. Every area
 * must be aligned as the format requires and lie wholly inside one RAM bank.
 * 0 and *@out, or -EINVAL with a reason in @err, or -ENOMEM.
 */
int virtq_create(const struct guest_mem *m, const struct virtq_addr *a, uint64_t features,
		 struct virtq **out, char *err, size_t errlen);
void virtq_free(struct virtq *vq);

/*
 * Take the next available chain into @c: 1, 0 if there is none, or -EIO if
 * the driver broke the rules (the queue is then broken for good: every later
 * call returns -EIO; virtq_error says why). One thread at a time per queue,
 * together with virtq_push and virtq_should_notify.
 */
int virtq_pop(struct virtq *vq, struct cub_vq_chain *c);
/* Give back the @n chains popped last, unused (@heads in pop order, nothing
 * popped since): the next pops return them again. 0, or -EIO (the queue is
 * then broken): a head not held, or an available-ring slot that no longer
 * names it (the driver rewrote an entry it had handed over). */
int virtq_unpop(struct virtq *vq, const uint16_t *heads, unsigned n);
/* Give chain @head back with @written bytes written to its device-writable
 * part. A @head that was never popped breaks the queue. */
void virtq_push(struct virtq *vq, uint16_t head, uint32_t written);
/* Give back @n chains in order with one used->idx store, so the driver never
 * sees part of them. Any head never popped breaks the queue and none is
 * published. */
void virtq_push_batch(struct virtq *vq, const struct cub_vq_used *u, unsigned n);
/* After one or more pushes: does the driver want an interrupt now?
 * (VIRTIO_F_EVENT_IDX used_event, else VIRTQ_AVAIL_F_NO_INTERRUPT.) */
bool virtq_should_notify(struct virtq *vq);

/* Where a queue stands, for snapshots: the next available slot to read,
 * our used index, and the used index at the last interrupt decision. */
struct virtq_pos {
	uint16_t last_avail, used_idx, signalled;
};
/*
 * The position to save: chains popped and not yet pushed are given back
 * (last_avail moved back over them), so that a queue restored there pops
 * them again; they must be the last ones popped (a device holding buffers
 * it has not filled yet). -EBUSY if one of them came before a chain that
 * was pushed already (requests completed out of order), -EIO if broken.
 */
int virtq_save_pos(const struct virtq *vq, struct virtq_pos *p);
/* A queue just made (virtq_create), nothing popped: put it at @p. */
void virtq_set_pos(struct virtq *vq, const struct virtq_pos *p);
/* Dirty tracking: mark what the device may still write for the chains it
 * holds (their writable buffers, the used ring); after a snapshot took
 * the dirty bits, so that the next one has them. */
void virtq_mark_held(struct virtq *vq);

bool virtq_broken(const struct virtq *vq);
/* Why the queue broke (a static string), or NULL. */
const char *virtq_error(const struct virtq *vq);
uint16_t virtq_size(const struct virtq *vq);

#endif
