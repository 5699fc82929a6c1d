/* SPDX-License-Identifier: Apache-2.0 */
/* The host's virtio core as transports see it: one struct virtio_dev per
 * virtio device plugin instance; a transport (virtio_pci.c, virtio_mmio.c)
 * turns register accesses into these calls, and the core calls back into
 * the transport to interrupt the guest. Transport-neutral: status, features,
 * queue setup, config space, notification. */
#ifndef CUBICLE_VIRTIO_DEV_H
#define CUBICLE_VIRTIO_DEV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cubicle/virtio.h"

struct vm;
struct virtq; /* virtqueue.h */

#define VIRTIO_MAX_QUEUES 64
#define VIRTIO_NO_VECTOR 0xffff

/* Queue registers as the driver programs them, before DRIVER_OK. */
struct virtio_queue_cfg {
	uint16_t size;       /* driver-chosen, <= ops->queue_max, power of two */
	bool enabled;
	uint16_t msix_vector;
	uint64_t desc, avail, used; /* guest-physical addresses */
};

/* What a transport provides to the core. */
struct virtio_transport_ops {
	/* Interrupt the guest for queue q (used buffer) or, with q < 0, for a
	 * config change. Any thread. */
	void (*interrupt)(void *tpriv, int q);
	/* The device was reset: drop pending interrupt state. */
	void (*reset)(void *tpriv);
};

struct virtio_dev {
	struct cub_inst *in;
	struct vm *vm;
	const struct cub_virtio_ops *ops;
	void *priv;
	pthread_mutex_t lock; /* status, features, queue config; never held across ops calls that may block */
	uint8_t status;
	uint64_t dev_features, drv_features;
	uint32_t dev_feature_sel, drv_feature_sel; /* transport select registers */
	uint16_t queue_sel;
	struct virtio_queue_cfg qcfg[VIRTIO_MAX_QUEUES];
	struct virtq *vqs[VIRTIO_MAX_QUEUES]; /* live after DRIVER_OK */
	uint8_t config_generation;
	bool broken;
	const struct virtio_transport_ops *tops;
	void *tpriv;
};

/* Create the core part of a device (transport attached after). */
struct virtio_dev *virtio_dev_new(struct cub_inst *in, struct vm *vm,
				  const struct cub_virtio_ops *ops, void *priv);
void virtio_dev_free(struct virtio_dev *d);
void virtio_dev_set_transport(struct virtio_dev *d, const struct virtio_transport_ops *tops,
			      void *tpriv);

/* Register semantics shared by every transport. */
uint8_t virtio_dev_get_status(struct virtio_dev *d);
/* Writing 0 resets; FEATURES_OK is refused (left clear) if the accepted
 * features are not a subset of the offered ones or lack VERSION_1; DRIVER_OK
 * creates the virtqueues (validating their addresses) and calls ops->start. */
void virtio_dev_set_status(struct virtio_dev *d, uint8_t status);
/* 32-bit windows of the 64-bit feature words. */
uint32_t virtio_dev_get_features(struct virtio_dev *d, uint32_t sel);
void virtio_dev_set_driver_features(struct virtio_dev *d, uint32_t sel, uint32_t val);
uint32_t virtio_dev_get_driver_features(struct virtio_dev *d, uint32_t sel);
/* Config space: out-of-range bytes read as 0 and writes are dropped. */
void virtio_dev_config_rw(struct virtio_dev *d, uint32_t off, void *data, uint32_t len,
			  bool is_write);
/* Queue registers; the queue index is checked (bad index: ignored / reads 0). */
struct virtio_queue_cfg *virtio_dev_queue(struct virtio_dev *d, unsigned q);
/* The driver kicked queue q. */
void virtio_dev_notify(struct virtio_dev *d, unsigned q);
/* Mark NEEDS_RESET (status bit 0x40) and raise a config interrupt. */
void virtio_dev_broken(struct virtio_dev *d, const char *why);

#endif
