/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio transports' entry points: the core (virtio.c) attaches one of
 * them to each new struct virtio_dev, as the device's config or the arch
 * default says. */
#ifndef CUBICLE_VIRTIO_TRANSPORTS_H
#define CUBICLE_VIRTIO_TRANSPORTS_H

#include <stddef.h>

#include "virtio_dev.h"

/*
 * Give @d a transport: claim its registers through d->host->region_add,
 * then virtio_dev_set_transport(). Create time, main thread. 0, or -errno
 * with a one-line reason in @err (the core reports it once), or with @err
 * left empty when a host service already recorded the reason through
 * fail() (region_add does). On failure the transport leaves nothing to free
 * (regions already added are removed with the instance).
 */
int virtio_pci_attach(struct virtio_dev *d, char *err, size_t errlen);  /* virtio_pci.c */
int virtio_mmio_attach(struct virtio_dev *d, char *err, size_t errlen); /* virtio_mmio.c */

#endif
