/* SPDX-License-Identifier: Apache-2.0 */
/* cubicle plugin ABI: virtio devices. A device plugin describes itself with a
 * struct cub_virtio_ops and hands it to h->virtio->add() in create; the
 * host's virtio core and a transport (PCI on x86, MMIO on ARM64, or the
 * device's `transport` key) do the rest. The device never knows which
 * transport carries it. */
#ifndef CUBICLE_VIRTIO_H
#define CUBICLE_VIRTIO_H

#include <sys/uio.h>

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most segments one chain may have (direct + indirect); longer chains
 * are malformed. Also bounded by the queue size. */
#define CUB_VQ_MAX_SEGS 1024

struct cub_vq; /* one virtqueue, owned by the host's virtio core; opaque */

/*
 * One descriptor chain popped from an available ring. Every segment is a host
 * pointer into guest RAM that the host checked lies wholly inside RAM.
 * Device-readable segments come first (out), then device-writable ones (in);
 * a chain with a readable segment after a writable one is malformed.
 * The guest may change the bytes at any time: copy before you validate.
 */
struct cub_vq_chain {
	uint16_t head;      /* the id to give back to vq_push */
	uint16_t n_out, n_in;
	uint64_t out_len, in_len; /* total bytes of each kind */
	struct iovec *out;  /* = iov */
	struct iovec *in;   /* = iov + n_out */
	struct iovec iov[CUB_VQ_MAX_SEGS];
};

/* One used-ring entry for push_batch: a chain's head and the bytes written. */
struct cub_vq_used {
	uint16_t head;
	uint32_t written;
};

/*
 * struct cub_virtio_ops - what a virtio device tells the host. Checked by
 * add (device_id, n_queues, queue_max, config_read when config_size, start,
 * notify, stop); kept by pointer, so it must stay valid until destroy.
 *
 * Locking: the host calls set_features, config_read, config_write, start,
 * notify and stop with the device's virtio lock held, so they never run at
 * the same time as each other; work a device does on its own threads (or
 * in fd_watch callbacks) is not covered by it.
 *
 * @device_id:    virtio device type (2 block, 3 console, 4 entropy, ...);
 *                not 0.
 * @n_queues:     number of virtqueues (1..64).
 * @queue_max:    largest queue size offered (power of two, 2..32768).
 * @config_size:  bytes of device-specific config space (may be 0).
 * @features:     (optional) device feature bits (the transport adds
 *                VIRTIO_F_VERSION_1, VIRTIO_F_EVENT_IDX and
 *                VIRTIO_F_INDIRECT_DESC; bits 24..41 from the device are
 *                dropped). Called once, inside add, so @priv must be ready by
 *                then. Main thread. NULL: no device features.
 * @set_features: (optional) the features the driver accepted, when it sets
 *                FEATURES_OK; return a negative errno to refuse them (the
 *                driver then sees FEATURES_OK clear). NULL: accept. vCPU
 *                thread.
 * @config_read:  copy @len bytes of config space at @off into @buf; the host
 *                has checked 0 < @len and @off + @len <= @config_size (reads
 *                outside return zeroes without a call). vCPU thread.
 *                Required when config_size is not 0.
 * @config_write: (optional) the driver wrote config space (checked like
 *                config_read). NULL: ignored. vCPU thread.
 * @start:        the driver set DRIVER_OK: @vqs[i] is queue i, or NULL if the
 *                driver did not enable it; @n is n_queues. 0, or -errno to
 *                fail the device (it then shows NEEDS_RESET). vCPU thread.
 *                Buffers may already be waiting: drain them.
 * @notify:       the driver kicked queue @q (only for a started device and an
 *                enabled queue). vCPU thread (a trapped write) or the
 *                event-loop thread (ioeventfd); must not block for long:
 *                it holds the device's virtio lock, so a reset waits for it.
 *                The guest controls how much work is queued: do a bounded
 *                amount per call (a budget of requests or bytes) and leave
 *                the rest for a later round, e.g. an eventfd of your own
 *                watched with h->fd_watch and written when the budget ran
 *                out (virtio-blk, virtio-console and virtio-net do this).
 * @stop:         the driver reset the device, or the instance is being
 *                destroyed: stop touching the queues before returning; they
 *                are freed after. Called only after a successful @start.
 *                vCPU thread (reset) or main thread (before destroy); must
 *                not wait for the event-loop thread (it may be blocked
 *                delivering a kick to this device).
 */
struct cub_virtio_ops {
	uint32_t device_id;
	uint16_t n_queues;
	uint16_t queue_max;
	uint32_t config_size;
	uint64_t (*features)(void *priv);
	int (*set_features)(void *priv, uint64_t features);
	void (*config_read)(void *priv, uint32_t off, void *buf, uint32_t len);
	void (*config_write)(void *priv, uint32_t off, const void *buf, uint32_t len);
	int (*start)(void *priv, struct cub_vq *const *vqs, unsigned n);
	void (*notify)(void *priv, unsigned q);
	void (*stop)(void *priv);
};

/*
 * struct cub_virtio_host - the virtio services, at h->virtio (NULL on a host
 * without virtio: check with CUB_HOST_HAS(h, virtio)).
 *
 * @add:    make this instance a virtio device with @ops (kept, must stay
 *          valid) and @priv. Create time only; once per instance. 0 or
 *          -errno with the reason recorded (as by fail()).
 * @pop:    take the next available chain: 1 and @c filled, 0 if the queue is
 *          empty, -EIO if the queue is stopped or the guest broke the rules
 *          (loop, bad address or index, too long): the device is then
 *          marked NEEDS_RESET and every later pop returns -EIO until the
 *          driver resets it. One thread per queue at a time.
 * @push:   return chain @c to the used ring with @written bytes written into
 *          its device-writable part. Same thread discipline as pop. Does
 *          nothing once the queue is stopped.
 * @notify: interrupt the guest for this queue if the driver wants it
 *          (honours VIRTQ_AVAIL_F_NO_INTERRUPT / used_event). Call after a
 *          batch of pushes.
 * @broken: mark the device NEEDS_RESET with a reason (logged rate-limited)
 *          and tell the driver (config interrupt). Any thread.
 * @push_batch: (ABI 1.3) as @push for @n chains, in order, published with
 *          one used index update: the driver sees all of them or none (a
 *          virtio-net packet spread over mergeable buffers must never be
 *          seen in part). Check with CUB_VIRTIO_HAS_PUSH_BATCH.
 * @queue_size: (ABI 1.4) the size the driver gave queue @vq (entries; at
 *          most the device's queue_max): how many descriptors the driver
 *          can ever have handed over at once. Same thread discipline as
 *          pop. Check with CUB_VIRTIO_HAS_QUEUE_SIZE.
 * @rl_take: (ABI 1.6) charge a request of @bytes and @ops to rate limiter
 *          @rl (a CUB_P_RATELIMIT param's slot): true if it may go now,
 *          else false with nothing charged and *@wait_us the time to wait
 *          before asking again (1 us to 100 ms: a limit changed through the
 *          API counts by then). Any thread. A request larger than a bucket
 *          passes once the bucket is full, then the bucket owes. Check
 *          with CUB_VIRTIO_HAS_RL.
 * @rl_charge: (ABI 1.6) charge @bytes and @ops to @rl whatever it holds (it
 *          may owe after), or give back (negative): for what is known only
 *          after the fact, e.g. a received frame's length once rl_take said
 *          a frame may come. Any thread.
 * @unpop:  (ABI 1.8) give back the @n chains popped last, unused (@heads in
 *          the order pop returned them; nothing popped since): the next
 *          pops return them again. For a device that pops buffers ahead of
 *          knowing how many it needs (virtio-net receiving into mergeable
 *          buffers). 0, or -EIO: those were not the chains popped last
 *          (the device is wrong), or the driver changed the available ring
 *          under them; the queue is then broken as for pop. Same thread
 *          discipline as pop. Check with CUB_VIRTIO_HAS_UNPOP.
 */
struct cub_rl;

struct cub_virtio_host {
	uint32_t size;
	int (*add)(struct cub_inst *in, const struct cub_virtio_ops *ops, void *priv);
	int (*pop)(struct cub_vq *vq, struct cub_vq_chain *c);
	void (*push)(struct cub_vq *vq, const struct cub_vq_chain *c, uint32_t written);
	void (*notify)(struct cub_vq *vq);
	void (*broken)(struct cub_inst *in, const char *why);
	void (*push_batch)(struct cub_vq *vq, const struct cub_vq_used *u, unsigned n);
	uint16_t (*queue_size)(struct cub_vq *vq);
	/* ABI 1.6: */
	bool (*rl_take)(struct cub_rl *rl, uint64_t bytes, uint64_t ops, uint64_t *wait_us);
	void (*rl_charge)(struct cub_rl *rl, int64_t bytes, int64_t ops);
	/* ABI 1.8: */
	int (*unpop)(struct cub_vq *vq, const uint16_t *heads, unsigned n);
};

#define CUB_VIRTIO_HAS_PUSH_BATCH(v)                                                  \
	((v)->size >= offsetof(struct cub_virtio_host, push_batch) + sizeof((v)->push_batch) && \
	 (v)->push_batch)

#define CUB_VIRTIO_HAS_QUEUE_SIZE(v)                                                  \
	((v)->size >= offsetof(struct cub_virtio_host, queue_size) + sizeof((v)->queue_size) && \
	 (v)->queue_size)

/* Rate limiters (CUB_P_RATELIMIT params' slots): rl_take and rl_charge. */
#define CUB_VIRTIO_HAS_RL(v)                                                          \
	((v)->size >= offsetof(struct cub_virtio_host, rl_charge) + sizeof((v)->rl_charge) && \
	 (v)->rl_take && (v)->rl_charge)

#define CUB_VIRTIO_HAS_UNPOP(v)                                                       \
	((v)->size >= offsetof(struct cub_virtio_host, unpop) + sizeof((v)->unpop) && (v)->unpop)

#ifdef __cplusplus
}
#endif
#endif
