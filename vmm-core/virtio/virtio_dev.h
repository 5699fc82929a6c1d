/* SPDX-License-Identifier: Apache-2.0 */
/* The host's virtio core as transports see it: one struct virtio_dev per
 * virtio device plugin instance; a transport (virtio_pci.c, virtio_mmio.c)
 * turns register accesses into these calls, and the core calls back into
 * the transport to interrupt the guest. Transport-neutral: status, features,
 * queue setup, config space, notification.
 *
 * Changes from the lead's draft (function names and meanings unchanged):
 *  - d->host: the cub_host services a transport uses to claim its region,
 *    drive its irq line and watch fds (&devices_host; unit tests swap in a
 *    fake host before attaching).
 *  - struct virtio_transport_ops gained an optional @destroy.
 *  - locking is spelled out below: transports hold d->lock only around
 *    their own direct reads and writes of the selectors and of the
 *    virtio_dev_queue() fields, never while calling virtio_dev_*().
 *  - @broken is an atomic flag (device threads set it without the lock);
 *    the NEEDS_RESET bit is reported by virtio_dev_get_status().
 *  - @started, @handles (the struct cub_vq plugins hold) and the
 *    VIRTIO_STATUS_* names; feature bit names are in virtqueue.h.
 */
#ifndef CUBICLE_VIRTIO_DEV_H
#define CUBICLE_VIRTIO_DEV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cubicle/virtio.h"
#include "virtqueue.h"

struct vm;
struct virtq; /* virtqueue.h */
struct snap_w;
struct snap_r;

#define VIRTIO_MAX_QUEUES 64
#define VIRTIO_NO_VECTOR 0xffff

/* Device status bits (virtio 1.x 2.1). */
#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 0x40
#define VIRTIO_STATUS_FAILED 0x80

/* Queue registers as the driver programs them, before DRIVER_OK. */
struct virtio_queue_cfg {
	uint16_t size;       /* driver-chosen, <= ops->queue_max, power of two;
			      * ops->queue_max after reset */
	bool enabled;
	uint16_t msix_vector;
	uint64_t desc, avail, used; /* guest-physical addresses */
};

/*
 * struct virtio_transport_ops - what a transport provides to the core.
 *
 * @interrupt: interrupt the guest for queue @q (used buffer) or, with q < 0,
 *             for a config change (also used for NEEDS_RESET). Any thread,
 *             possibly with d->lock held: take only the transport's own locks.
 * @reset:     the device was reset (status 0): drop pending interrupt state.
 *             Called with d->lock held.
 * @destroy:   (optional) free the transport's state; called last from
 *             virtio_dev_free, after the device was stopped and its regions
 *             and fd watches are gone. Default: nothing to free.
 * @save, @load: (optional) the transport's own registers in a snapshot
 *             (a section of its own for device @inst); called with d->lock
 *             held, the VM paused. load checks everything it reads. 0 or
 *             -errno with err.
 */
struct virtio_transport_ops {
	void (*interrupt)(void *tpriv, int q);
	void (*reset)(void *tpriv);
	void (*destroy)(void *tpriv);
	int (*save)(void *tpriv, struct snap_w *w, unsigned inst, char *err, size_t errlen);
	int (*load)(void *tpriv, const struct snap_r *r, unsigned inst, char *err, size_t errlen);
};

/* What a device plugin holds as struct cub_vq: one per queue index. */
struct cub_vq {
	struct virtio_dev *d;
	unsigned index;
};

/*
 * Locking: d->lock serialises everything the driver does through the
 * transport (status, features, selectors, queue config, config space,
 * notify), and is held across ops->start, ops->stop, ops->set_features and
 * ops->notify so that a reset never races a notify. The plugin-facing
 * services (pop, push, notify, broken) never take it: a device's worker
 * thread can always make progress while ops->stop waits for it.
 */
struct virtio_dev {
	struct cub_inst *in;
	struct vm *vm;
	const struct cub_host *host;
	const struct cub_virtio_ops *ops;
	void *priv;
	pthread_mutex_t lock;
	uint8_t status;     /* as the driver wrote it; see virtio_dev_get_status */
	uint64_t dev_features, drv_features;
	uint32_t dev_feature_sel, drv_feature_sel; /* transport select registers */
	uint16_t queue_sel;
	struct virtio_queue_cfg qcfg[VIRTIO_MAX_QUEUES];
	struct virtq *vqs[VIRTIO_MAX_QUEUES]; /* live after DRIVER_OK */
	struct cub_vq handles[VIRTIO_MAX_QUEUES];
	bool started;       /* ops->start succeeded: ops->stop is owed */
	uint8_t config_generation;
	bool broken;        /* atomic: NEEDS_RESET until the driver resets */
	const struct virtio_transport_ops *tops;
	void *tpriv;
	struct virtq_pos restore_pos[VIRTIO_MAX_QUEUES]; /* virtio_dev_load's, for resume */
};

/* Create the core part of a device (transport attached after). Offers
 * ops->features plus what the core implements (VERSION_1, EVENT_IDX,
 * INDIRECT_DESC); transport-reserved bits (24..41) from the device are
 * dropped. NULL if out of memory. Main thread. */
struct virtio_dev *virtio_dev_new(struct cub_inst *in, struct vm *vm,
				  const struct cub_virtio_ops *ops, void *priv);
/* Stop the device if running, free its queues, then the transport. */
void virtio_dev_free(struct virtio_dev *d);
void virtio_dev_set_transport(struct virtio_dev *d, const struct virtio_transport_ops *tops,
			      void *tpriv);

/* Register semantics shared by every transport. Call without d->lock. */
uint8_t virtio_dev_get_status(struct virtio_dev *d);
/* Writing 0 resets; FEATURES_OK is refused (left clear) if the accepted
 * features are not a subset of the offered ones or lack VERSION_1; DRIVER_OK
 * creates the virtqueues (validating their addresses) and calls ops->start.
 * A write that clears bits other than by reset is ignored. */
void virtio_dev_set_status(struct virtio_dev *d, uint8_t status);
/* 32-bit windows of the 64-bit feature words. */
uint32_t virtio_dev_get_features(struct virtio_dev *d, uint32_t sel);
/* Ignored once FEATURES_OK is set. */
void virtio_dev_set_driver_features(struct virtio_dev *d, uint32_t sel, uint32_t val);
uint32_t virtio_dev_get_driver_features(struct virtio_dev *d, uint32_t sel);
/* Config space: out-of-range bytes read as 0 and writes are dropped. */
void virtio_dev_config_rw(struct virtio_dev *d, uint32_t off, void *data, uint32_t len,
			  bool is_write);
/* Queue registers; NULL for an index >= ops->n_queues (the transport then
 * ignores the write / reads 0). Hold d->lock while touching the fields;
 * changes after DRIVER_OK have no effect on the live queues. */
struct virtio_queue_cfg *virtio_dev_queue(struct virtio_dev *d, unsigned q);
/* The driver kicked queue q: ops->notify, unless not DRIVER_OK, broken or
 * a bad index. vCPU or event-loop thread. */
void virtio_dev_notify(struct virtio_dev *d, unsigned q);
/* Mark NEEDS_RESET (status bit 0x40) and raise a config interrupt; the
 * first reason is logged (rate-limited). Any thread, no lock needed. */
void virtio_dev_broken(struct virtio_dev *d, const char *why);

/*
 * Snapshots (the VM paused). save: the device's virtio state (status,
 * features, queue registers and positions, with held buffers given back)
 * and its transport's, as sections for device @inst. load: put them back,
 * stopping the device first if it runs (rollback); then, once the plugin
 * loaded its own state, resume_loaded starts the queues where they were
 * (ops->set_features, ops->start) and kicks each (requests the snapshot's
 * driver had made available but the device had not completed). 0 or
 * -errno with err.
 */
int virtio_dev_save(struct virtio_dev *d, struct snap_w *w, unsigned inst, char *err,
		    size_t errlen);
int virtio_dev_load(struct virtio_dev *d, const struct snap_r *r, unsigned inst, char *err,
		    size_t errlen);
void virtio_dev_resume_loaded(struct virtio_dev *d);
/* After a snapshot took the dirty bits: mark what the device's held
 * chains may still write (virtq_mark_held). */
void virtio_dev_mark_held(struct virtio_dev *d);

/* The plugin-facing services (struct cub_virtio_host), at devices_host.virtio. */
extern const struct cub_virtio_host virtio_host;

#endif
