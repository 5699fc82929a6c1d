/* SPDX-License-Identifier: Apache-2.0 */
/* The transport-neutral virtio device (status machine, feature negotiation,
 * config space, queue bring-up and teardown) and the virtio services device
 * plugins reach through h->virtio. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cnode.h"
#include "devices.h"
#include "ratelimit.h"
#include "snap/state.h"
#include "transports.h"
#include "virtio_dev.h"
#include "virtqueue.h"
#include "vm.h"

/* Bits 24..41 belong to the transport and ring layer (virtio 1.x 6):
 * only the ones implemented here are offered, whatever the device says. */
#define TRANSPORT_BITS (((1ull << 42) - 1) & ~((1ull << 24) - 1))
#define CORE_FEATURES                                                            \
	((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_EVENT_IDX) |              \
	 (1ull << VIRTIO_F_INDIRECT_DESC))

static void reset_queue_cfg(struct virtio_dev *d)
{
	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++)
		d->qcfg[q] = (struct virtio_queue_cfg){
			.size = q < d->ops->n_queues ? d->ops->queue_max : 0,
			.msix_vector = VIRTIO_NO_VECTOR,
		};
}

struct virtio_dev *virtio_dev_new(struct cub_inst *in, struct vm *vm,
				  const struct cub_virtio_ops *ops, void *priv)
{
	struct virtio_dev *d = calloc(1, sizeof(*d));
	uint64_t f;

	if (!d)
		return NULL;
	d->in = in;
	d->vm = vm;
	d->host = &devices_host;
	d->ops = ops;
	d->priv = priv;
	pthread_mutex_init(&d->lock, NULL);
	f = ops->features ? ops->features(priv) : 0;
	d->dev_features = (f & ~TRANSPORT_BITS) | CORE_FEATURES;
	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++)
		d->handles[q] = (struct cub_vq){ d, q };
	reset_queue_cfg(d);
	return d;
}

void virtio_dev_set_transport(struct virtio_dev *d, const struct virtio_transport_ops *tops,
			      void *tpriv)
{
	d->tops = tops;
	d->tpriv = tpriv;
}

static bool is_broken(struct virtio_dev *d)
{
	return __atomic_load_n(&d->broken, __ATOMIC_ACQUIRE);
}

void virtio_dev_broken(struct virtio_dev *d, const char *why)
{
	if (__atomic_exchange_n(&d->broken, true, __ATOMIC_ACQ_REL))
		return;
	d->host->log_ratelimited(d->in, CUB_LOG_WARN, "device needs reset: %s", why);
	if (d->tops)
		d->tops->interrupt(d->tpriv, -1);
}

static void __attribute__((format(printf, 2, 3))) brokenf(struct virtio_dev *d, const char *fmt,
							  ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	virtio_dev_broken(d, why);
}

/* Stop the device and drop its queues. d->lock held (or last owner). */
static void stop_queues(struct virtio_dev *d)
{
	if (d->started) {
		d->ops->stop(d->priv);
		d->started = false;
	}
	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++) {
		struct virtq *vq = d->vqs[q];

		__atomic_store_n(&d->vqs[q], NULL, __ATOMIC_RELEASE);
		virtq_free(vq);
	}
}

static void reset_locked(struct virtio_dev *d)
{
	stop_queues(d);
	d->status = 0;
	d->drv_features = 0;
	d->dev_feature_sel = d->drv_feature_sel = 0;
	d->queue_sel = 0;
	reset_queue_cfg(d);
	__atomic_store_n(&d->broken, false, __ATOMIC_RELEASE);
	if (d->tops && d->tops->reset)
		d->tops->reset(d->tpriv);
}

void virtio_dev_free(struct virtio_dev *d)
{
	if (!d)
		return;
	stop_queues(d);
	if (d->tops && d->tops->destroy)
		d->tops->destroy(d->tpriv);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

uint8_t virtio_dev_get_status(struct virtio_dev *d)
{
	uint8_t s;

	pthread_mutex_lock(&d->lock);
	s = d->status;
	pthread_mutex_unlock(&d->lock);
	return s | (is_broken(d) ? VIRTIO_STATUS_NEEDS_RESET : 0);
}

static bool features_ok(struct virtio_dev *d)
{
	uint64_t f = d->drv_features;

	if (f & ~d->dev_features) {
		d->host->log_ratelimited(d->in, CUB_LOG_WARN,
					 "driver accepted features 0x%llx it was not offered",
					 (unsigned long long)(f & ~d->dev_features));
		return false;
	}
	if (!(f & (1ull << VIRTIO_F_VERSION_1))) {
		d->host->log_ratelimited(d->in, CUB_LOG_WARN,
					 "driver did not accept VIRTIO_F_VERSION_1 (legacy drivers are not supported)");
		return false;
	}
	if (d->ops->set_features && d->ops->set_features(d->priv, f) < 0) {
		d->host->log_ratelimited(d->in, CUB_LOG_WARN, "device refused features 0x%llx",
					 (unsigned long long)f);
		return false;
	}
	return true;
}

/* DRIVER_OK: build every enabled queue (at @pos[q] when restoring a
 * snapshot), then start the device. */
static void start_locked(struct virtio_dev *d, const struct virtq_pos *pos)
{
	struct cub_vq *vqs[VIRTIO_MAX_QUEUES] = { 0 };
	unsigned n = d->ops->n_queues;
	char err[128];
	int ret;

	for (unsigned q = 0; q < n; q++) {
		const struct virtio_queue_cfg *c = &d->qcfg[q];
		struct virtq_addr a = { c->size, c->desc, c->avail, c->used };
		struct virtq *vq;

		if (!c->enabled)
			continue;
		if (c->size > d->ops->queue_max) {
			brokenf(d, "queue %u: size %u is above the maximum %u", q, c->size,
				d->ops->queue_max);
			return;
		}
		ret = virtq_create(&d->vm->mem, &a, d->drv_features, &vq, err, sizeof(err));
		if (ret) {
			brokenf(d, "queue %u: %s", q, ret == -ENOMEM ? "out of memory" : err);
			return;
		}
		if (pos)
			virtq_set_pos(vq, &pos[q]);
		__atomic_store_n(&d->vqs[q], vq, __ATOMIC_RELEASE);
		vqs[q] = &d->handles[q];
	}
	ret = d->ops->start(d->priv, vqs, n);
	if (ret) {
		brokenf(d, "device failed to start: %s", strerror(-ret));
		return;
	}
	d->started = true;
}

void virtio_dev_set_status(struct virtio_dev *d, uint8_t val)
{
	uint8_t old, added;

	pthread_mutex_lock(&d->lock);
	old = d->status;
	val &= ~VIRTIO_STATUS_NEEDS_RESET; /* the device's bit, not the driver's */
	if (!val) {
		reset_locked(d);
		goto out;
	}
	if (old & ~val) {
		d->host->log_ratelimited(d->in, CUB_LOG_WARN,
					 "driver cleared status bits 0x%x without a reset; ignored",
					 old & ~val);
		goto out;
	}
	added = val & ~old;
	if ((added & VIRTIO_STATUS_FEATURES_OK) && !features_ok(d))
		val &= ~VIRTIO_STATUS_FEATURES_OK;
	if (added & VIRTIO_STATUS_DRIVER_OK) {
		if (!(val & VIRTIO_STATUS_FEATURES_OK)) {
			d->status = val;
			brokenf(d, "driver set DRIVER_OK before FEATURES_OK");
			goto out;
		}
		d->status = val;
		if (!is_broken(d))
			start_locked(d, NULL);
		goto out;
	}
	d->status = val;
out:
	pthread_mutex_unlock(&d->lock);
}

/* ---- snapshots ---- */

/* The "virtio" section of a device, version 1.0: this header, then one
 * struct vq_state per queue (host byte order: a snapshot is arch-bound). */
struct vdev_state {
	uint8_t status, config_generation, broken, pad;
	uint16_t queue_sel, n_queues;
	uint32_t dev_feature_sel, drv_feature_sel;
	uint64_t dev_features, drv_features;
};

struct vq_state {
	uint16_t size;
	uint8_t enabled, live; /* live: a queue was running (DRIVER_OK) */
	uint16_t msix_vector;
	uint16_t last_avail, used_idx, signalled;
	uint32_t pad;
	uint64_t desc, avail, used;
};

#define VDEV_STATE_VER SNAP_VER(1, 0)

int virtio_dev_save(struct virtio_dev *d, struct snap_w *w, unsigned inst, char *err,
		    size_t errlen)
{
	unsigned n = d->ops->n_queues;
	size_t len = sizeof(struct vdev_state) + n * sizeof(struct vq_state);
	uint8_t *buf = calloc(1, len);
	struct vdev_state *h = (struct vdev_state *)(void *)buf;
	struct vq_state *qs = (struct vq_state *)(void *)(buf + sizeof(*h));
	int ret = 0;

	if (!buf)
		return errf(err, errlen, -ENOMEM, "out of memory");
	pthread_mutex_lock(&d->lock);
	h->status = d->status;
	h->config_generation = d->config_generation;
	h->broken = is_broken(d);
	h->queue_sel = d->queue_sel;
	h->n_queues = (uint16_t)n;
	h->dev_feature_sel = d->dev_feature_sel;
	h->drv_feature_sel = d->drv_feature_sel;
	h->dev_features = d->dev_features;
	h->drv_features = d->drv_features;
	for (unsigned q = 0; q < n && !ret; q++) {
		const struct virtio_queue_cfg *c = &d->qcfg[q];
		struct virtq_pos pos = { 0 };

		qs[q] = (struct vq_state){ .size = c->size, .enabled = c->enabled,
					   .msix_vector = c->msix_vector, .desc = c->desc,
					   .avail = c->avail, .used = c->used };
		if (!d->vqs[q] || h->broken)
			continue;
		ret = virtq_save_pos(d->vqs[q], &pos);
		if (ret == -EIO) { /* broken: restored as broken, as it is */
			ret = 0;
			continue;
		}
		if (ret)
			errf(err, errlen, ret,
			     "%s: queue %u has requests in flight that completed out of order; resume the VM and try again",
			     d->in->name, q);
		qs[q].live = 1;
		qs[q].last_avail = pos.last_avail;
		qs[q].used_idx = pos.used_idx;
		qs[q].signalled = pos.signalled;
	}
	if (!ret && (ret = snap_w_put(w, SNAP_K_DEVICE, "@virtio", inst, VDEV_STATE_VER, buf, len)))
		errf(err, errlen, ret, "state: %s", strerror(-ret));
	if (!ret && d->tops->save)
		ret = d->tops->save(d->tpriv, w, inst, err, errlen);
	pthread_mutex_unlock(&d->lock);
	free(buf);
	return ret;
}

int virtio_dev_load(struct virtio_dev *d, const struct snap_r *r, unsigned inst, char *err,
		    size_t errlen)
{
	const struct snap_sec *s = snap_r_find(r, SNAP_K_DEVICE, "@virtio", inst);
	unsigned n = d->ops->n_queues;
	const struct vq_state *qs;
	struct vdev_state h;
	int ret;

	if (!s)
		return errf(err, errlen, -EINVAL, "%s: no virtio state", d->in->name);
	if (SNAP_VER_MAJOR(s->ver) != 1 || s->len != sizeof(h) + n * sizeof(*qs))
		return errf(err, errlen, -EINVAL, "%s: virtio state: version %u.%u, %zu bytes; expected 1.x, %zu",
			    d->in->name, SNAP_VER_MAJOR(s->ver), SNAP_VER_MINOR(s->ver), s->len,
			    sizeof(h) + n * sizeof(*qs));
	memcpy(&h, s->data, sizeof(h));
	qs = (const struct vq_state *)(const void *)(s->data + sizeof(h)); /* 8-aligned */
	if (h.n_queues != n || h.dev_features != d->dev_features)
		return errf(err, errlen, -EINVAL,
			    "%s: the snapshot's device has %u queues and features 0x%llx; this one %u and 0x%llx (another plugin version or config?)",
			    d->in->name, h.n_queues, (unsigned long long)h.dev_features, n,
			    (unsigned long long)d->dev_features);
	if ((h.drv_features & ~h.dev_features) || h.broken > 1 ||
	    (h.status & ~(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
			  VIRTIO_STATUS_DRIVER_OK | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_FAILED)))
		return errf(err, errlen, -EINVAL, "%s: virtio state: bad status or features",
			    d->in->name);
	for (unsigned q = 0; q < n; q++)
		if (qs[q].size > d->ops->queue_max || qs[q].enabled > 1 || qs[q].live > 1)
			return errf(err, errlen, -EINVAL, "%s: virtio state: queue %u: bad size or flag",
				    d->in->name, q);
	pthread_mutex_lock(&d->lock);
	stop_queues(d); /* a rollback: the device ran */
	d->status = h.status;
	d->config_generation = h.config_generation;
	__atomic_store_n(&d->broken, h.broken != 0, __ATOMIC_RELEASE);
	d->queue_sel = h.queue_sel;
	d->dev_feature_sel = h.dev_feature_sel;
	d->drv_feature_sel = h.drv_feature_sel;
	d->drv_features = h.drv_features;
	reset_queue_cfg(d);
	for (unsigned q = 0; q < n; q++) {
		d->qcfg[q] = (struct virtio_queue_cfg){ .size = qs[q].size,
							.enabled = qs[q].enabled,
							.msix_vector = qs[q].msix_vector,
							.desc = qs[q].desc, .avail = qs[q].avail,
							.used = qs[q].used };
		d->restore_pos[q] = (struct virtq_pos){ qs[q].last_avail, qs[q].used_idx,
							qs[q].signalled };
	}
	ret = d->tops->load ? d->tops->load(d->tpriv, r, inst, err, errlen) : 0;
	pthread_mutex_unlock(&d->lock);
	return ret;
}

void virtio_dev_mark_held(struct virtio_dev *d)
{
	pthread_mutex_lock(&d->lock);
	for (unsigned q = 0; q < d->ops->n_queues; q++)
		if (d->vqs[q])
			virtq_mark_held(d->vqs[q]);
	pthread_mutex_unlock(&d->lock);
}

void virtio_dev_resume_loaded(struct virtio_dev *d)
{
	pthread_mutex_lock(&d->lock);
	if ((d->status & VIRTIO_STATUS_DRIVER_OK) && !is_broken(d)) {
		if (d->ops->set_features && d->ops->set_features(d->priv, d->drv_features) < 0)
			brokenf(d, "device refused the snapshot's features 0x%llx",
				(unsigned long long)d->drv_features);
		else
			start_locked(d, d->restore_pos);
		/* Requests the snapshot's driver made available but the device
		 * had not completed (given back at save: rewound) were kicked
		 * before it: kick again, or a driver waiting on them waits
		 * forever. A queue with nothing new finds nothing. */
		for (unsigned q = 0; d->started && q < d->ops->n_queues; q++)
			if (d->vqs[q] && !is_broken(d))
				d->ops->notify(d->priv, q);
	}
	pthread_mutex_unlock(&d->lock);
}

uint32_t virtio_dev_get_features(struct virtio_dev *d, uint32_t sel)
{
	return sel < 2 ? (uint32_t)(d->dev_features >> (32 * sel)) : 0;
}

void virtio_dev_set_driver_features(struct virtio_dev *d, uint32_t sel, uint32_t val)
{
	pthread_mutex_lock(&d->lock);
	if (sel < 2 && !(d->status & VIRTIO_STATUS_FEATURES_OK)) {
		unsigned sh = 32 * sel;

		d->drv_features = (d->drv_features & ~(0xffffffffull << sh)) | ((uint64_t)val << sh);
	}
	pthread_mutex_unlock(&d->lock);
}

uint32_t virtio_dev_get_driver_features(struct virtio_dev *d, uint32_t sel)
{
	uint64_t f;

	pthread_mutex_lock(&d->lock);
	f = d->drv_features;
	pthread_mutex_unlock(&d->lock);
	return sel < 2 ? (uint32_t)(f >> (32 * sel)) : 0;
}

void virtio_dev_config_rw(struct virtio_dev *d, uint32_t off, void *data, uint32_t len,
			  bool is_write)
{
	uint32_t size = d->ops->config_size;
	bool ok = len && off < size && len <= size - off;

	pthread_mutex_lock(&d->lock);
	if (!is_write && !ok)
		memset(data, 0, len);
	else if (!is_write)
		d->ops->config_read(d->priv, off, data, len);
	else if (ok && d->ops->config_write)
		d->ops->config_write(d->priv, off, data, len);
	pthread_mutex_unlock(&d->lock);
}

struct virtio_queue_cfg *virtio_dev_queue(struct virtio_dev *d, unsigned q)
{
	return q < d->ops->n_queues ? &d->qcfg[q] : NULL;
}

void virtio_dev_notify(struct virtio_dev *d, unsigned q)
{
	pthread_mutex_lock(&d->lock);
	if (d->started && q < d->ops->n_queues && d->vqs[q] && !is_broken(d))
		d->ops->notify(d->priv, q);
	pthread_mutex_unlock(&d->lock);
}

/* ---- the services device plugins use: h->virtio ---- */

static bool ops_ok(const struct cub_virtio_ops *o, char *err, size_t errlen)
{
	const char *why = NULL;

	if (!o->device_id)
		why = "device_id is 0";
	else if (!o->n_queues || o->n_queues > VIRTIO_MAX_QUEUES)
		why = "n_queues must be 1..64";
	else if (o->queue_max < 2 || o->queue_max > VIRTQ_MAX_SIZE ||
		 (o->queue_max & (o->queue_max - 1)))
		why = "queue_max must be a power of two, 2..32768";
	else if (o->config_size && !o->config_read)
		why = "config space without a config_read op";
	else if (!o->start || !o->notify || !o->stop)
		why = "start, notify and stop ops are required";
	if (why)
		snprintf(err, errlen, "virtio ops: %s", why);
	return !why;
}

static int vh_add(struct cub_inst *in, const struct cub_virtio_ops *ops, void *priv)
{
	const char *t = in->pi && in->pi->transport ? in->pi->transport :
		arch_virtio_default_transport();
	struct virtio_dev *d;
	char err[256];
	int ret;

	if (in->created)
		return devices_host.fail(in, -EBUSY, "virtio devices are added only at create time");
	if (in->virtio)
		return devices_host.fail(in, -EEXIST, "instance is already a virtio device");
	if (!ops_ok(ops, err, sizeof(err)))
		return devices_host.fail(in, -EINVAL, "%s", err);
	d = virtio_dev_new(in, in->vm, ops, priv);
	if (!d)
		return devices_host.fail(in, -ENOMEM, "out of memory");
	err[0] = '\0';
	if (!strcmp(t, "pci")) {
		ret = virtio_pci_attach(d, err, sizeof(err));
	} else if (!strcmp(t, "mmio")) {
		ret = virtio_mmio_attach(d, err, sizeof(err));
	} else {
		snprintf(err, sizeof(err), "unknown virtio transport '%s'", t);
		ret = -EINVAL;
	}
	if (ret) {
		virtio_dev_free(d);
		return devices_host.fail(in, ret, "virtio-%s: %s", t, err[0] ? err : strerror(-ret));
	}
	in->virtio = d;
	return 0;
}

static struct virtq *live(struct cub_vq *h)
{
	return __atomic_load_n(&h->d->vqs[h->index], __ATOMIC_ACQUIRE);
}

static int vh_pop(struct cub_vq *h, struct cub_vq_chain *c)
{
	struct virtq *vq = live(h);
	int ret;

	if (!vq || is_broken(h->d))
		return -EIO;
	ret = virtq_pop(vq, c);
	if (ret < 0)
		brokenf(h->d, "queue %u: %s", h->index, virtq_error(vq));
	return ret;
}

static int vh_unpop(struct cub_vq *h, const uint16_t *heads, unsigned n)
{
	struct virtq *vq = live(h);
	int ret;

	if (!vq || is_broken(h->d))
		return -EIO;
	ret = virtq_unpop(vq, heads, n);
	if (ret < 0)
		brokenf(h->d, "queue %u: %s", h->index, virtq_error(vq));
	return ret;
}

static void vh_push(struct cub_vq *h, const struct cub_vq_chain *c, uint32_t written)
{
	struct virtq *vq = live(h);

	if (!vq)
		return;
	virtq_push(vq, c->head, written);
	if (virtq_broken(vq))
		brokenf(h->d, "queue %u: %s", h->index, virtq_error(vq));
}

static void vh_push_batch(struct cub_vq *h, const struct cub_vq_used *u, unsigned n)
{
	struct virtq *vq = live(h);

	if (!vq)
		return;
	virtq_push_batch(vq, u, n);
	if (virtq_broken(vq))
		brokenf(h->d, "queue %u: %s", h->index, virtq_error(vq));
}

static void vh_notify(struct cub_vq *h)
{
	struct virtq *vq = live(h);

	if (vq && h->d->tops && virtq_should_notify(vq))
		h->d->tops->interrupt(h->d->tpriv, (int)h->index);
}

static uint16_t vh_queue_size(struct cub_vq *h)
{
	struct virtq *vq = live(h);

	return vq ? virtq_size(vq) : 0;
}

static void vh_broken(struct cub_inst *in, const char *why)
{
	if (in->virtio)
		virtio_dev_broken(in->virtio, why);
}

const struct cub_virtio_host virtio_host = {
	.size = sizeof(struct cub_virtio_host),
	.add = vh_add,
	.pop = vh_pop,
	.push = vh_push,
	.notify = vh_notify,
	.broken = vh_broken,
	.push_batch = vh_push_batch,
	.queue_size = vh_queue_size,
	.rl_take = cub_rl_take,
	.rl_charge = cub_rl_charge,
	.unpop = vh_unpop,
};
