/* SPDX-License-Identifier: Apache-2.0 */
/* The virtio-mmio transport (virtio 1.x 4.2, register layout version 2): the
 * register file, a level interrupt line driven by InterruptStatus, and queue
 * notifications by a trapped write or, where KVM allows, an ioeventfd. */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cnode.h"
#include "snap/state.h"
#include "transports.h"
#include "virtio_dev.h"
#include "vm.h"

#define MMIO_LEN 0x200
#define MMIO_MAGIC 0x74726976  /* "virt" */
#define MMIO_VERSION 2
#define MMIO_VENDOR 0x49425543 /* "CUBI" */

enum {
	REG_MAGIC = 0x000,
	REG_VERSION = 0x004,
	REG_DEVICE_ID = 0x008,
	REG_VENDOR_ID = 0x00c,
	REG_DEV_FEATURES = 0x010,
	REG_DEV_FEATURES_SEL = 0x014,
	REG_DRV_FEATURES = 0x020,
	REG_DRV_FEATURES_SEL = 0x024,
	REG_QUEUE_SEL = 0x030,
	REG_QUEUE_NUM_MAX = 0x034,
	REG_QUEUE_NUM = 0x038,
	REG_QUEUE_READY = 0x044,
	REG_QUEUE_NOTIFY = 0x050,
	REG_INT_STATUS = 0x060,
	REG_INT_ACK = 0x064,
	REG_STATUS = 0x070,
	REG_QUEUE_DESC_LO = 0x080,
	REG_QUEUE_DESC_HI = 0x084,
	REG_QUEUE_DRIVER_LO = 0x090,
	REG_QUEUE_DRIVER_HI = 0x094,
	REG_QUEUE_DEVICE_LO = 0x0a0,
	REG_QUEUE_DEVICE_HI = 0x0a4,
	REG_SHM_SEL = 0x0ac,
	REG_SHM_LEN_LO = 0x0b0,
	REG_SHM_LEN_HI = 0x0b4,
	REG_SHM_BASE_LO = 0x0b8,
	REG_SHM_BASE_HI = 0x0bc,
	REG_CONFIG_GEN = 0x0fc,
	REG_CONFIG = 0x100,
};

#define INT_USED 1
#define INT_CONFIG 2

struct mmio_kick {
	struct mmio *m;
	unsigned q;
	int fd; /* eventfd; -1 if the write traps instead */
};

struct mmio {
	struct virtio_dev *d;
	uint64_t base;
	int irq;
	pthread_mutex_t lock; /* isr and the line level */
	uint32_t isr;
	bool level;
	struct mmio_kick kick[VIRTIO_MAX_QUEUES];
};

/* ---- interrupts ---- */

static void update_line(struct mmio *m)
{
	bool level = m->isr != 0;

	if (level != m->level) {
		m->level = level;
		m->d->host->irq_set(m->d->in, (unsigned)m->irq, level);
	}
}

static void mmio_interrupt(void *tpriv, int q)
{
	struct mmio *m = tpriv;

	pthread_mutex_lock(&m->lock);
	m->isr |= q < 0 ? INT_CONFIG : INT_USED;
	update_line(m);
	pthread_mutex_unlock(&m->lock);
}

static void mmio_reset(void *tpriv)
{
	struct mmio *m = tpriv;

	pthread_mutex_lock(&m->lock);
	m->isr = 0;
	update_line(m);
	pthread_mutex_unlock(&m->lock);
}

static uint32_t isr_read(struct mmio *m)
{
	uint32_t v;

	pthread_mutex_lock(&m->lock);
	v = m->isr;
	pthread_mutex_unlock(&m->lock);
	return v;
}

static void isr_ack(struct mmio *m, uint32_t v)
{
	pthread_mutex_lock(&m->lock);
	m->isr &= ~v;
	update_line(m);
	pthread_mutex_unlock(&m->lock);
}

/* ---- registers ---- */

static void set_half(uint64_t *v, bool high, uint32_t val)
{
	unsigned sh = high ? 32 : 0;

	*v = (*v & ~(0xffffffffull << sh)) | ((uint64_t)val << sh);
}

/* Queue registers: only before DRIVER_OK, and only for a real queue. */
static void queue_write(struct virtio_dev *d, unsigned reg, uint32_t v)
{
	struct virtio_queue_cfg *q;

	pthread_mutex_lock(&d->lock);
	q = virtio_dev_queue(d, d->queue_sel);
	if (!q || (d->status & VIRTIO_STATUS_DRIVER_OK))
		goto out;
	switch (reg) {
	case REG_QUEUE_NUM:
		q->size = v > 0xffff ? 0 : (uint16_t)v; /* checked at DRIVER_OK */
		break;
	case REG_QUEUE_READY:
		q->enabled = v & 1;
		break;
	case REG_QUEUE_DESC_LO:
	case REG_QUEUE_DESC_HI:
		set_half(&q->desc, reg == REG_QUEUE_DESC_HI, v);
		break;
	case REG_QUEUE_DRIVER_LO:
	case REG_QUEUE_DRIVER_HI:
		set_half(&q->avail, reg == REG_QUEUE_DRIVER_HI, v);
		break;
	case REG_QUEUE_DEVICE_LO:
	case REG_QUEUE_DEVICE_HI:
		set_half(&q->used, reg == REG_QUEUE_DEVICE_HI, v);
		break;
	}
out:
	pthread_mutex_unlock(&d->lock);
}

static uint32_t queue_read(struct virtio_dev *d, unsigned reg)
{
	struct virtio_queue_cfg *q;
	uint32_t v = 0;

	pthread_mutex_lock(&d->lock);
	q = virtio_dev_queue(d, d->queue_sel);
	if (q && reg == REG_QUEUE_NUM_MAX)
		v = d->ops->queue_max;
	else if (q && reg == REG_QUEUE_READY)
		v = q->enabled;
	pthread_mutex_unlock(&d->lock);
	return v;
}

static uint32_t sel_read(struct virtio_dev *d, const uint32_t *sel)
{
	uint32_t v;

	pthread_mutex_lock(&d->lock);
	v = *sel;
	pthread_mutex_unlock(&d->lock);
	return v;
}

static void sel_write(struct virtio_dev *d, uint32_t *sel, uint32_t v)
{
	pthread_mutex_lock(&d->lock);
	*sel = v;
	pthread_mutex_unlock(&d->lock);
}

static uint32_t reg_read(struct mmio *m, unsigned reg)
{
	struct virtio_dev *d = m->d;

	switch (reg) {
	case REG_MAGIC:
		return MMIO_MAGIC;
	case REG_VERSION:
		return MMIO_VERSION;
	case REG_DEVICE_ID:
		return d->ops->device_id;
	case REG_VENDOR_ID:
		return MMIO_VENDOR;
	case REG_DEV_FEATURES:
		return virtio_dev_get_features(d, sel_read(d, &d->dev_feature_sel));
	case REG_QUEUE_NUM_MAX:
	case REG_QUEUE_READY:
		return queue_read(d, reg);
	case REG_INT_STATUS:
		return isr_read(m);
	case REG_STATUS:
		return virtio_dev_get_status(d);
	case REG_SHM_LEN_LO:
	case REG_SHM_LEN_HI:
		return 0xffffffff; /* no shared memory regions */
	case REG_CONFIG_GEN:
		return __atomic_load_n(&d->config_generation, __ATOMIC_ACQUIRE);
	default:
		return 0; /* write-only and reserved registers */
	}
}

static void reg_write(struct mmio *m, unsigned reg, uint32_t v)
{
	struct virtio_dev *d = m->d;

	switch (reg) {
	case REG_DEV_FEATURES_SEL:
		sel_write(d, &d->dev_feature_sel, v);
		break;
	case REG_DRV_FEATURES:
		virtio_dev_set_driver_features(d, sel_read(d, &d->drv_feature_sel), v);
		break;
	case REG_DRV_FEATURES_SEL:
		sel_write(d, &d->drv_feature_sel, v);
		break;
	case REG_QUEUE_SEL:
		pthread_mutex_lock(&d->lock);
		d->queue_sel = v > 0xffff ? 0xffff : (uint16_t)v;
		pthread_mutex_unlock(&d->lock);
		break;
	case REG_QUEUE_NUM:
	case REG_QUEUE_READY:
	case REG_QUEUE_DESC_LO:
	case REG_QUEUE_DESC_HI:
	case REG_QUEUE_DRIVER_LO:
	case REG_QUEUE_DRIVER_HI:
	case REG_QUEUE_DEVICE_LO:
	case REG_QUEUE_DEVICE_HI:
		queue_write(d, reg, v);
		break;
	case REG_QUEUE_NOTIFY:
		virtio_dev_notify(d, v);
		break;
	case REG_INT_ACK:
		isr_ack(m, v);
		break;
	case REG_STATUS:
		virtio_dev_set_status(d, (uint8_t)v);
		break;
	default:
		break; /* read-only and reserved registers */
	}
}

static void mmio_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct mmio *m = priv;
	uint32_t v;

	if (off >= REG_CONFIG) {
		virtio_dev_config_rw(m->d, (uint32_t)(off - REG_CONFIG), data, len, is_write);
		return;
	}
	/* Registers below the config space are 32 bits wide and aligned. */
	if (len != 4 || (off & 3)) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	if (is_write) {
		memcpy(&v, data, 4);
		reg_write(m, (unsigned)off, le32toh(v));
	} else {
		v = htole32(reg_read(m, (unsigned)off));
		memcpy(data, &v, 4);
	}
}

/* ---- ioeventfd: QueueNotify writes that never leave the kernel ---- */

static void on_kick(void *arg)
{
	struct mmio_kick *k = arg;
	uint64_t n;

	if (read(k->fd, &n, sizeof(n)) == sizeof(n))
		virtio_dev_notify(k->m->d, k->q);
}

static int ioeventfd(struct mmio *m, struct mmio_kick *k, bool assign)
{
	struct kvm_ioeventfd io = {
		.datamatch = k->q,
		.addr = m->base + REG_QUEUE_NOTIFY,
		.len = 4,
		.fd = k->fd,
		.flags = KVM_IOEVENTFD_FLAG_DATAMATCH | (assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN),
	};

	return ioctl(m->d->vm->vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

static void kick_close(struct mmio *m, struct mmio_kick *k, bool assigned)
{
	if (k->fd < 0)
		return;
	m->d->host->fd_unwatch(m->d->in, k->fd); /* -ENOENT if the instance did it */
	if (assigned)
		ioeventfd(m, k, false);
	close(k->fd);
	k->fd = -1;
}

/* Optional: without it every QueueNotify write traps to the vCPU thread,
 * which works the same, only slower. */
static void setup_ioeventfds(struct mmio *m)
{
	struct virtio_dev *d = m->d;
	int ret = 0;

	if (!d->vm || d->vm->vm_fd < 0)
		return;
	for (unsigned q = 0; q < d->ops->n_queues && !ret; q++) {
		struct mmio_kick *k = &m->kick[q];

		k->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (k->fd < 0) {
			ret = -errno;
			break;
		}
		ret = ioeventfd(m, k, true);
		if (ret) {
			close(k->fd);
			k->fd = -1;
			break;
		}
		ret = d->host->fd_watch(d->in, k->fd, EPOLLIN, on_kick, k);
		if (ret)
			kick_close(m, k, true);
	}
	if (ret) {
		d->host->log(d->in, CUB_LOG_DEBUG, "no ioeventfd (%s): queue notifications trap",
			     strerror(-ret));
		for (unsigned q = 0; q < d->ops->n_queues; q++)
			kick_close(m, &m->kick[q], true);
	}
}

static void mmio_destroy(void *tpriv)
{
	struct mmio *m = tpriv;

	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++)
		kick_close(m, &m->kick[q], true);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* Snapshots: section "virtio-mmio" 1.0, the interrupt status (u32); the
 * line follows it. Everything else is the core's. */
static int mmio_save(void *tpriv, struct snap_w *w, unsigned inst, char *err, size_t errlen)
{
	struct mmio *m = tpriv;
	uint32_t isr = isr_read(m);
	int ret = snap_w_put(w, SNAP_K_DEVICE, "@virtio-mmio", inst, SNAP_VER(1, 0), &isr,
			     sizeof(isr));

	return ret ? errf(err, errlen, ret, "state: %s", strerror(-ret)) : 0;
}

static int mmio_load(void *tpriv, const struct snap_r *r, unsigned inst, char *err, size_t errlen)
{
	struct mmio *m = tpriv;
	const struct snap_sec *s = snap_r_find(r, SNAP_K_DEVICE, "@virtio-mmio", inst);
	uint32_t isr;

	if (!s || SNAP_VER_MAJOR(s->ver) != 1 || s->len != sizeof(isr))
		return errf(err, errlen, -EINVAL, "virtio-mmio device %u: no state", inst);
	memcpy(&isr, s->data, sizeof(isr));
	if (isr & ~(uint32_t)(INT_USED | INT_CONFIG))
		return errf(err, errlen, -EINVAL, "virtio-mmio device %u: interrupt status 0x%x",
			    inst, isr);
	pthread_mutex_lock(&m->lock);
	m->isr = isr;
	m->level = !isr; /* drive the line whatever it was */
	update_line(m);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

static const struct virtio_transport_ops mmio_ops = {
	.interrupt = mmio_interrupt,
	.reset = mmio_reset,
	.destroy = mmio_destroy,
	.save = mmio_save,
	.load = mmio_load,
};

int virtio_mmio_attach(struct virtio_dev *d, char *err, size_t errlen)
{
	struct mmio *m = calloc(1, sizeof(*m));
	struct cub_region r = {
		.want = CUB_BUS_MMIO,
		.class = "virtio-mmio",
		.len = MMIO_LEN,
		.io = mmio_io,
		.priv = m,
	};
	int ret;

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->d = d;
	pthread_mutex_init(&m->lock, NULL);
	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++)
		m->kick[q] = (struct mmio_kick){ m, q, -1 };
	ret = d->host->region_add(d->in, &r); /* on failure it recorded why */
	if (!ret && (r.bus != CUB_BUS_MMIO || r.irq < 0)) {
		snprintf(err, errlen, "placed without an MMIO window and an interrupt line");
		ret = -EINVAL;
	}
	if (ret) {
		pthread_mutex_destroy(&m->lock);
		free(m);
		return ret;
	}
	m->base = r.base;
	m->irq = r.irq;
	setup_ioeventfds(m);
	virtio_dev_set_transport(d, &mmio_ops, m);
	d->host->log(d->in, CUB_LOG_DEBUG,
		     "virtio-mmio at 0x%" PRIx64 " irq %d (a Linux guest without firmware tables for it needs virtio_mmio.device=%u@0x%" PRIx64 ":%d)",
		     m->base, m->irq, MMIO_LEN, m->base, m->irq);
	return 0;
}
