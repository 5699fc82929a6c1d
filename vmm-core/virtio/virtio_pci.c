/* SPDX-License-Identifier: Apache-2.0 */
/* The modern virtio-pci transport (virtio 1.x 4.1, no legacy I/O BAR): one
 * PCI function per device with its vendor capabilities, BAR0 holding the
 * common, ISR, device and notify structures and the MSI-X table, MSI-X
 * delivery by KVM_SIGNAL_MSI, and notify writes by trap or ioeventfd.
 *
 * Locks, outermost first: the PCI bus lock (config accesses), d->lock (the
 * virtio core), vp->lock (vectors, ISR), the MSI-X table's own lock. Only
 * the last two are taken on the interrupt path, which the core may enter
 * with d->lock held; vp->lock is never held across a call out. */
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
#include "msix.h"
#include "snap/state.h"
#include "pci.h"
#include "transports.h"
#include "virtio_dev.h"
#include "virtio_pci.h"
#include "vm.h"

/* struct virtio_pci_common_cfg offsets. */
enum {
	CC_DFSELECT = 0x00, CC_DF = 0x04, CC_GFSELECT = 0x08, CC_GF = 0x0c,
	CC_MSIX = 0x10, CC_NUMQ = 0x12, CC_STATUS = 0x14, CC_CFGGEN = 0x15,
	CC_Q_SELECT = 0x16, CC_Q_SIZE = 0x18, CC_Q_MSIX = 0x1a, CC_Q_ENABLE = 0x1c,
	CC_Q_NOFF = 0x1e, CC_Q_DESC = 0x20, CC_Q_AVAIL = 0x28, CC_Q_USED = 0x30,
};

_Static_assert(VP_NOTIFY_OFF + VP_NOTIFY_MULT * VIRTIO_MAX_QUEUES <= VP_MSIX_TABLE_OFF &&
	       VP_MSIX_TABLE_OFF + MSIX_ENTRY_SIZE * (VIRTIO_MAX_QUEUES + 1) <= VP_MSIX_PBA_OFF &&
	       VP_MSIX_PBA_OFF + 8 * ((VIRTIO_MAX_QUEUES + 64) / 64) <= VP_BAR_SIZE &&
	       VP_COMMON_OFF + VP_COMMON_LEN <= VP_ISR_OFF && VP_DEVICE_OFF + VP_DEVICE_MAX <= VP_NOTIFY_OFF,
	       "BAR0 layout");

#define ISR_QUEUE  1
#define ISR_CONFIG 2

/* Vendor capability layout (struct virtio_pci_cap and its extensions). */
#define VCAP_LEN       16
#define VCAP_NOTIFY_LEN 20
#define VCAP_CFG_LEN   20
#define VCAP_TYPE      3
#define VCAP_BAR       4
#define VCAP_OFFSET    8
#define VCAP_LENGTH    12
#define VCAP_EXTRA     16 /* notify_off_multiplier, or pci_cfg_data */

struct virtio_pci;

struct vp_kick {
	struct virtio_pci *vp;
	unsigned q;
	int fd;        /* eventfd, -1 if notify writes trap instead */
	uint64_t addr; /* where its ioeventfd is assigned, 0 if nowhere */
};

struct virtio_pci {
	struct virtio_dev *d;
	struct pci_dev *pd; /* NULL once the PCI bus let go of it */
	unsigned msix_cap, cfg_cap; /* config-space offsets */
	struct msix msix;   /* one vector per queue, plus one for config changes */
	struct vp_kick kick[VIRTIO_MAX_QUEUES];
	char name[64];

	pthread_mutex_t lock; /* the vectors and the ISR */
	uint16_t config_vector;
	uint16_t queue_vector[VIRTIO_MAX_QUEUES];
	uint8_t isr;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static bool overlaps(unsigned off, unsigned len, unsigned start, unsigned end)
{
	return off < end && start < off + len;
}

static int kvm_msi(void *arg, uint64_t addr, uint32_t data)
{
	return irq_msi(arg, addr, data);
}

/* ---- the core's view: interrupts and reset ---- */

static void vp_interrupt(void *tpriv, int q)
{
	struct virtio_pci *vp = tpriv;
	uint16_t vec;

	pthread_mutex_lock(&vp->lock);
	if (q < 0)
		vp->isr |= ISR_CONFIG;
	vec = q < 0 ? vp->config_vector
		    : q < VIRTIO_MAX_QUEUES ? vp->queue_vector[q] : VIRTIO_NO_VECTOR;
	pthread_mutex_unlock(&vp->lock);
	if (msix_notify(&vp->msix, vec) || q < 0)
		return;
	/* MSI-X is off and there is no INTx either: the ISR bit is all a
	 * polling driver gets (4.1.4.5). */
	pthread_mutex_lock(&vp->lock);
	vp->isr |= ISR_QUEUE;
	pthread_mutex_unlock(&vp->lock);
}

static void vp_reset(void *tpriv)
{
	struct virtio_pci *vp = tpriv;

	pthread_mutex_lock(&vp->lock);
	vp->isr = 0;
	vp->config_vector = VIRTIO_NO_VECTOR;
	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++)
		vp->queue_vector[q] = VIRTIO_NO_VECTOR;
	pthread_mutex_unlock(&vp->lock);
	msix_clear_pending(&vp->msix);
}

/* ---- common configuration ---- */

/* Each field at its own width; the 64-bit ones also as two dwords. */
static bool common_ok(unsigned off, uint32_t len)
{
	if (off >= CC_Q_DESC)
		return off < VP_COMMON_LEN && (len == 4 || len == 8) && !(off & (len - 1));
	switch (off) {
	case CC_DFSELECT: case CC_DF: case CC_GFSELECT: case CC_GF:
		return len == 4;
	case CC_STATUS: case CC_CFGGEN:
		return len == 1;
	case CC_MSIX: case CC_NUMQ: case CC_Q_SELECT: case CC_Q_SIZE: case CC_Q_MSIX:
	case CC_Q_ENABLE: case CC_Q_NOFF:
		return len == 2;
	default:
		return false;
	}
}

static uint32_t locked_u32(struct virtio_dev *d, const uint32_t *p)
{
	uint32_t v;

	pthread_mutex_lock(&d->lock);
	v = *p;
	pthread_mutex_unlock(&d->lock);
	return v;
}

static uint64_t *queue_addr(struct virtio_queue_cfg *q, unsigned off)
{
	return off < CC_Q_AVAIL ? &q->desc : off < CC_Q_USED ? &q->avail : &q->used;
}

static uint64_t queue_read(struct virtio_pci *vp, unsigned off, uint32_t len)
{
	struct virtio_dev *d = vp->d;
	struct virtio_queue_cfg *q;
	uint64_t v = 0;

	pthread_mutex_lock(&d->lock);
	q = virtio_dev_queue(d, d->queue_sel);
	if (!q)
		goto out;
	switch (off) {
	case CC_Q_SIZE:
		v = q->size;
		break;
	case CC_Q_MSIX:
		pthread_mutex_lock(&vp->lock);
		v = vp->queue_vector[d->queue_sel];
		pthread_mutex_unlock(&vp->lock);
		break;
	case CC_Q_ENABLE:
		v = q->enabled;
		break;
	case CC_Q_NOFF:
		v = d->queue_sel; /* times VP_NOTIFY_MULT */
		break;
	default:
		v = *queue_addr(q, off);
		if (len == 4)
			v = (off & 4) ? v >> 32 : (uint32_t)v;
	}
out:
	pthread_mutex_unlock(&d->lock);
	return v;
}

static uint64_t common_read(struct virtio_pci *vp, unsigned off, uint32_t len)
{
	struct virtio_dev *d = vp->d;
	uint64_t v;

	switch (off) {
	case CC_DFSELECT:
		return locked_u32(d, &d->dev_feature_sel);
	case CC_DF:
		return virtio_dev_get_features(d, locked_u32(d, &d->dev_feature_sel));
	case CC_GFSELECT:
		return locked_u32(d, &d->drv_feature_sel);
	case CC_GF:
		return virtio_dev_get_driver_features(d, locked_u32(d, &d->drv_feature_sel));
	case CC_MSIX:
		pthread_mutex_lock(&vp->lock);
		v = vp->config_vector;
		pthread_mutex_unlock(&vp->lock);
		return v;
	case CC_NUMQ:
		return d->ops->n_queues;
	case CC_STATUS:
		return virtio_dev_get_status(d);
	case CC_CFGGEN:
		return __atomic_load_n(&d->config_generation, __ATOMIC_ACQUIRE);
	case CC_Q_SELECT:
		pthread_mutex_lock(&d->lock);
		v = d->queue_sel;
		pthread_mutex_unlock(&d->lock);
		return v;
	default:
		return queue_read(vp, off, len);
	}
}

/* A vector the table has, or NO_VECTOR: the driver reads back what it
 * got and falls back to fewer vectors (virtio 1.x 4.1.5.1.2). */
static uint16_t vector(struct virtio_pci *vp, uint64_t v)
{
	return v < vp->msix.n ? (uint16_t)v : VIRTIO_NO_VECTOR;
}

/* Queue registers are frozen once the queue is enabled or the device is
 * live; only its vector may still change. */
static void queue_write(struct virtio_pci *vp, unsigned off, uint32_t len, uint64_t v)
{
	struct virtio_dev *d = vp->d;
	struct virtio_queue_cfg *q;
	uint64_t *a;

	pthread_mutex_lock(&d->lock);
	q = virtio_dev_queue(d, d->queue_sel);
	if (!q)
		goto out;
	if (off == CC_Q_MSIX) {
		q->msix_vector = vector(vp, v);
		pthread_mutex_lock(&vp->lock);
		vp->queue_vector[d->queue_sel] = q->msix_vector;
		pthread_mutex_unlock(&vp->lock);
		goto out;
	}
	if (q->enabled || (d->status & VIRTIO_STATUS_DRIVER_OK))
		goto out;
	switch (off) {
	case CC_Q_SIZE:
		q->size = (uint16_t)v; /* checked at DRIVER_OK */
		break;
	case CC_Q_ENABLE:
		q->enabled = v == 1; /* writing 0 is not allowed; ignored */
		break;
	case CC_Q_DESC ... CC_Q_USED + 7:
		a = queue_addr(q, off);
		if (len == 8)
			*a = v;
		else if (off & 4)
			*a = (*a & 0xffffffffull) | v << 32;
		else
			*a = (*a & ~0xffffffffull) | (uint32_t)v;
		break;
	}
out:
	pthread_mutex_unlock(&d->lock);
}

static void common_write(struct virtio_pci *vp, unsigned off, uint32_t len, uint64_t v)
{
	struct virtio_dev *d = vp->d;

	switch (off) {
	case CC_DFSELECT:
	case CC_GFSELECT:
		pthread_mutex_lock(&d->lock);
		*(off == CC_DFSELECT ? &d->dev_feature_sel : &d->drv_feature_sel) = (uint32_t)v;
		pthread_mutex_unlock(&d->lock);
		break;
	case CC_GF:
		virtio_dev_set_driver_features(d, locked_u32(d, &d->drv_feature_sel), (uint32_t)v);
		break;
	case CC_MSIX:
		pthread_mutex_lock(&vp->lock);
		vp->config_vector = vector(vp, v);
		pthread_mutex_unlock(&vp->lock);
		break;
	case CC_STATUS:
		virtio_dev_set_status(d, (uint8_t)v);
		break;
	case CC_Q_SELECT:
		pthread_mutex_lock(&d->lock);
		d->queue_sel = (uint16_t)v;
		pthread_mutex_unlock(&d->lock);
		break;
	case CC_DF: case CC_NUMQ: case CC_CFGGEN: case CC_Q_NOFF:
		break; /* read-only */
	default:
		queue_write(vp, off, len, v);
	}
}

static void common_io(struct virtio_pci *vp, unsigned off, uint8_t *data, uint32_t len,
		      bool is_write)
{
	uint64_t v = 0;

	if (!common_ok(off, len))
		return; /* reads stay 0 */
	if (is_write) {
		memcpy(&v, data, len);
		common_write(vp, off, len, le64toh(v));
	} else {
		v = htole64(common_read(vp, off, len));
		memcpy(data, &v, len);
	}
}

/* ---- BAR0 ---- */

static void vp_bar_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct virtio_pci *vp = priv;
	struct virtio_dev *d = vp->d;
	uint8_t *b = data;

	if (!is_write)
		memset(data, 0, len);
	if (!len || len > 8 || off >= VP_BAR_SIZE || len > VP_BAR_SIZE - off)
		return;
	if (off < VP_COMMON_OFF + VP_COMMON_LEN) {
		common_io(vp, (unsigned)off, b, len, is_write);
	} else if (off == VP_ISR_OFF) {
		if (is_write)
			return;
		pthread_mutex_lock(&vp->lock);
		b[0] = vp->isr; /* read to clear (virtio 1.x 4.1.4.5) */
		vp->isr = 0;
		pthread_mutex_unlock(&vp->lock);
	} else if (off >= VP_DEVICE_OFF && off < VP_DEVICE_OFF + VP_DEVICE_MAX) {
		virtio_dev_config_rw(d, (uint32_t)(off - VP_DEVICE_OFF), data, len, is_write);
	} else if (off >= VP_NOTIFY_OFF && off < VP_NOTIFY_OFF + VP_NOTIFY_MULT * (uint64_t)d->ops->n_queues) {
		/* The address names the queue; the value (its index) adds nothing. */
		if (is_write && !(off % VP_NOTIFY_MULT))
			virtio_dev_notify(d, (unsigned)(off - VP_NOTIFY_OFF) / VP_NOTIFY_MULT);
	} else if (off >= VP_MSIX_TABLE_OFF && off < VP_MSIX_PBA_OFF) {
		msix_table_io(&vp->msix, off - VP_MSIX_TABLE_OFF, data, len, is_write);
	} else if (off >= VP_MSIX_PBA_OFF) {
		msix_pba_io(&vp->msix, off - VP_MSIX_PBA_OFF, data, len, is_write);
	}
}

/* ---- config space hooks (PCI bus lock held) ---- */

/* VIRTIO_PCI_CAP_PCI_CFG: pci_cfg_data is a window onto BAR0 at the
 * offset and length the driver put in the capability (4.1.4.9). */
static void cfg_window(struct virtio_pci *vp, bool is_write)
{
	uint8_t *c = pci_cfg(vp->pd) + vp->cfg_cap;
	uint32_t off = get32(c + VCAP_OFFSET), len = get32(c + VCAP_LENGTH);

	if (c[VCAP_BAR] != 0 || (len != 1 && len != 2 && len != 4) || (off & (len - 1)) ||
	    off >= VP_BAR_SIZE)
		return;
	vp_bar_io(vp, off, c + VCAP_EXTRA, len, is_write);
}

static void vp_cfg_read(void *priv, uint16_t off, uint32_t len)
{
	struct virtio_pci *vp = priv;

	if (overlaps(off, len, vp->cfg_cap + VCAP_EXTRA, vp->cfg_cap + VCAP_CFG_LEN))
		cfg_window(vp, false);
}

static void vp_cfg_write(void *priv, uint16_t off, uint32_t len)
{
	struct virtio_pci *vp = priv;

	if (overlaps(off, len, vp->msix_cap + 2, vp->msix_cap + 4))
		msix_control(&vp->msix, get16(pci_cfg(vp->pd) + vp->msix_cap + 2));
	if (overlaps(off, len, vp->cfg_cap + VCAP_EXTRA, vp->cfg_cap + VCAP_CFG_LEN))
		cfg_window(vp, true);
}

/* ---- notify by ioeventfd: kicks that never leave the kernel ---- */

static void on_kick(void *arg)
{
	struct vp_kick *k = arg;
	uint64_t n;

	if (read(k->fd, &n, sizeof(n)) == sizeof(n))
		virtio_dev_notify(k->vp->d, k->q);
}

/* Linux writes the queue index as 16 bits; other widths still trap. */
static int ioeventfd(struct virtio_pci *vp, struct vp_kick *k, uint64_t addr, bool assign)
{
	struct kvm_ioeventfd io = {
		.addr = addr,
		.len = 2,
		.fd = k->fd,
		.flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN,
	};

	return ioctl(vp->d->vm->vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

static void kicks_move(struct virtio_pci *vp, uint64_t base)
{
	for (unsigned q = 0; q < vp->d->ops->n_queues; q++) {
		struct vp_kick *k = &vp->kick[q];
		uint64_t addr = base ? base + VP_NOTIFY_OFF + VP_NOTIFY_MULT * q : 0;

		if (k->fd < 0 || k->addr == addr)
			continue;
		if (k->addr)
			ioeventfd(vp, k, k->addr, false);
		k->addr = addr && !ioeventfd(vp, k, addr, true) ? addr : 0;
	}
}

static void vp_bar_moved(void *priv, unsigned bar, uint64_t base)
{
	if (bar == 0)
		kicks_move(priv, base);
}

static void kicks_close(struct virtio_pci *vp)
{
	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++) {
		struct vp_kick *k = &vp->kick[q];

		if (k->fd < 0)
			continue;
		vp->d->host->fd_unwatch(vp->d->in, k->fd); /* -ENOENT if already gone */
		if (k->addr)
			ioeventfd(vp, k, k->addr, false);
		close(k->fd);
		k->fd = -1;
		k->addr = 0;
	}
}

/* Optional: without eventfds every notify write traps to the vCPU thread,
 * which works the same, only slower. They are assigned when BAR0 decodes. */
static void kicks_open(struct virtio_pci *vp)
{
	struct virtio_dev *d = vp->d;
	int ret = 0;

	if (!d->vm || d->vm->vm_fd < 0)
		return;
	for (unsigned q = 0; q < d->ops->n_queues && !ret; q++) {
		struct vp_kick *k = &vp->kick[q];

		k->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (k->fd < 0)
			ret = -errno;
		else
			ret = d->host->fd_watch(d->in, k->fd, EPOLLIN, on_kick, k);
	}
	if (ret) {
		d->host->log(d->in, CUB_LOG_DEBUG, "no ioeventfd (%s): queue notifications trap",
			     strerror(-ret));
		kicks_close(vp);
	}
}

/* ---- lifecycle ---- */

static void vp_pci_free(void *priv)
{
	struct virtio_pci *vp = priv;

	vp->pd = NULL; /* the bus freed it; our state goes with the virtio device */
}

static void vp_destroy(void *tpriv)
{
	struct virtio_pci *vp = tpriv;

	kicks_close(vp);
	if (vp->pd)
		pci_dev_remove(vp->pd);
	msix_free(&vp->msix);
	pthread_mutex_destroy(&vp->lock);
	free(vp);
}

/* ---- snapshots: config space, vectors, ISR, MSI-X ---- */

/* Section "virtio-pci" 1.0: this, then the MSI-X state (msix_save). */
struct vp_state {
	uint8_t cfg[PCI_CFG_SIZE];
	uint16_t config_vector;
	uint8_t isr, pad;
	uint32_t n_vectors;
	uint16_t queue_vector[VIRTIO_MAX_QUEUES];
};

static int vp_save(void *tpriv, struct snap_w *w, unsigned inst, char *err, size_t errlen)
{
	struct virtio_pci *vp = tpriv;
	size_t len = sizeof(struct vp_state) + msix_state_size(&vp->msix);
	uint8_t *buf = calloc(1, len);
	struct vp_state *st = (struct vp_state *)(void *)buf;
	int ret;

	if (!buf || !vp->pd) {
		free(buf);
		return errf(err, errlen, -ENOMEM, "%s: out of memory or off the bus", vp->name);
	}
	pci_cfg_save(vp->pd, st->cfg);
	pthread_mutex_lock(&vp->lock);
	st->config_vector = vp->config_vector;
	st->isr = vp->isr;
	memcpy(st->queue_vector, vp->queue_vector, sizeof(st->queue_vector));
	pthread_mutex_unlock(&vp->lock);
	st->n_vectors = vp->msix.n;
	msix_save(&vp->msix, buf + sizeof(*st));
	ret = snap_w_put(w, SNAP_K_DEVICE, "@virtio-pci", inst, SNAP_VER(1, 0), buf, len);
	free(buf);
	return ret ? errf(err, errlen, ret, "state: %s", strerror(-ret)) : 0;
}

static int vp_load(void *tpriv, const struct snap_r *r, unsigned inst, char *err, size_t errlen)
{
	struct virtio_pci *vp = tpriv;
	const struct snap_sec *s = snap_r_find(r, SNAP_K_DEVICE, "@virtio-pci", inst);
	struct vp_state st;

	if (!s || SNAP_VER_MAJOR(s->ver) != 1 ||
	    s->len != sizeof(st) + msix_state_size(&vp->msix))
		return errf(err, errlen, -EINVAL, "%s: no virtio-pci state of this device's size",
			    vp->name);
	memcpy(&st, s->data, sizeof(st));
	if (st.n_vectors != vp->msix.n || (st.isr & ~(ISR_QUEUE | ISR_CONFIG)) || !vp->pd ||
	    msix_load(&vp->msix, s->data + sizeof(st), s->len - sizeof(st)))
		return errf(err, errlen, -EINVAL, "%s: virtio-pci state: bad MSI-X state or ISR",
			    vp->name);
	pthread_mutex_lock(&vp->lock);
	vp->config_vector = st.config_vector;
	vp->isr = st.isr;
	memcpy(vp->queue_vector, st.queue_vector, sizeof(st.queue_vector));
	pthread_mutex_unlock(&vp->lock);
	pci_cfg_load(vp->pd, st.cfg); /* BAR0 moves with it: so do the kicks */
	return 0;
}

static const struct virtio_transport_ops vp_tops = {
	.interrupt = vp_interrupt,
	.reset = vp_reset,
	.destroy = vp_destroy,
	.save = vp_save,
	.load = vp_load,
};

static const struct pci_dev_ops vp_pci_ops = {
	.cfg_read = vp_cfg_read,
	.cfg_write = vp_cfg_write,
	.bar_moved = vp_bar_moved,
	.free = vp_pci_free,
};

void virtio_pci_set_msi(struct virtio_dev *d, virtio_pci_msi_fn *fn, void *arg)
{
	struct virtio_pci *vp = d->tpriv;

	if (d->tops == &vp_tops)
		msix_set_send(&vp->msix, fn, arg);
}

/* PCI class by virtio device type; the driver matches on ids, but lspci
 * and class-based tools read this. */
static uint32_t class_of(uint32_t device_id)
{
	switch (device_id) {
	case 1: return 0x020000;  /* network: ethernet */
	case 2: return 0x018000;  /* mass storage: other */
	case 3: return 0x078000;  /* communication: other (console) */
	case 8: return 0x010000;  /* mass storage: SCSI */
	case 16: return 0x038000; /* display: other (GPU) */
	case 18: return 0x098000; /* input: other */
	default: return 0xff0000; /* no class fits (entropy, balloon, vsock, ...) */
	}
}

static int add_vcap(struct pci_dev *pd, uint8_t type, uint32_t off, uint32_t len,
		    const uint8_t *extra, const uint8_t *wmask)
{
	uint8_t cap[VCAP_CFG_LEN] = { PCI_CAP_ID_VNDR, 0, VCAP_LEN, type, 0 /* BAR0 */ };
	unsigned n = VCAP_LEN;

	put32(cap + VCAP_OFFSET, off);
	put32(cap + VCAP_LENGTH, len);
	if (extra) {
		memcpy(cap + VCAP_EXTRA, extra, 4);
		n = VCAP_NOTIFY_LEN;
		cap[2] = (uint8_t)n;
	}
	return pci_cap_add(pd, cap, n, wmask);
}

/* The capability list: common, ISR, device (if any config space), notify,
 * PCI-config access, MSI-X. */
static int add_caps(struct virtio_pci *vp)
{
	const struct cub_virtio_ops *o = vp->d->ops;
	uint8_t mult[4], zero[4] = { 0 }, wm[VCAP_CFG_LEN] = { 0 };
	uint8_t msix[MSIX_CAP_LEN], msix_wm[MSIX_CAP_LEN];
	int ret;

	put32(mult, VP_NOTIFY_MULT);
	ret = add_vcap(vp->pd, VIRTIO_PCI_CAP_COMMON_CFG, VP_COMMON_OFF, VP_COMMON_LEN, NULL, NULL);
	if (ret >= 0)
		ret = add_vcap(vp->pd, VIRTIO_PCI_CAP_ISR_CFG, VP_ISR_OFF, 1, NULL, NULL);
	if (ret >= 0 && o->config_size)
		ret = add_vcap(vp->pd, VIRTIO_PCI_CAP_DEVICE_CFG, VP_DEVICE_OFF, o->config_size,
			       NULL, NULL);
	if (ret >= 0)
		ret = add_vcap(vp->pd, VIRTIO_PCI_CAP_NOTIFY_CFG, VP_NOTIFY_OFF,
			       VP_NOTIFY_MULT * o->n_queues, mult, NULL);
	/* bar, offset, length and data are the driver's to write */
	wm[VCAP_BAR] = 0xff;
	memset(wm + VCAP_OFFSET, 0xff, VCAP_CFG_LEN - VCAP_OFFSET);
	if (ret >= 0)
		ret = add_vcap(vp->pd, VIRTIO_PCI_CAP_PCI_CFG, 0, 0, zero, wm);
	if (ret >= 0)
		vp->cfg_cap = (unsigned)ret;
	msix_cap(&vp->msix, 0, VP_MSIX_TABLE_OFF, VP_MSIX_PBA_OFF, msix, msix_wm);
	if (ret >= 0)
		ret = pci_cap_add(vp->pd, msix, sizeof(msix), msix_wm);
	if (ret >= 0)
		vp->msix_cap = (unsigned)ret;
	return ret < 0 ? ret : 0;
}

int virtio_pci_attach(struct virtio_dev *d, char *err, size_t errlen)
{
	const struct cub_virtio_ops *o = d->ops;
	struct pci_id id = {
		.vendor = VIRTIO_PCI_VENDOR,
		.device = (uint16_t)(VIRTIO_PCI_DEVICE_BASE + o->device_id),
		.subsys_vendor = VIRTIO_PCI_VENDOR,
		.subsys = (uint16_t)(VIRTIO_PCI_DEVICE_BASE + o->device_id), /* >= 0x40 (4.1.2.1) */
		.revision = 1,
		.class = class_of(o->device_id),
	};
	struct virtio_pci *vp;
	int ret;

	if (!o->n_queues || o->n_queues > VIRTIO_MAX_QUEUES || o->device_id > 0x3f ||
	    o->config_size > VP_DEVICE_MAX) {
		snprintf(err, errlen, "device id %u, %u queues, %u config bytes: beyond what virtio-pci offers (id <= 63, 1..%u queues, <= %u bytes)",
			 o->device_id, o->n_queues, o->config_size, VIRTIO_MAX_QUEUES, VP_DEVICE_MAX);
		return -EINVAL;
	}
	if (!d->vm || !d->vm->pci) {
		snprintf(err, errlen, "this machine has no PCI bus (try transport = \"mmio\")");
		return -ENODEV;
	}
	vp = calloc(1, sizeof(*vp));
	if (!vp) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	vp->d = d;
	pthread_mutex_init(&vp->lock, NULL);
	for (unsigned q = 0; q < VIRTIO_MAX_QUEUES; q++)
		vp->kick[q] = (struct vp_kick){ vp, q, -1, 0 };
	ret = msix_init(&vp->msix, o->n_queues + 1u, kvm_msi, d->vm);
	if (ret) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	vp_reset(vp);
	/* d->in is opaque here; the host prefixes log lines with its name. */
	snprintf(vp->name, sizeof(vp->name), "virtio-pci(id %u)", o->device_id);

	vp->pd = pci_dev_add(d->vm, &id, &vp_pci_ops, vp, vp->name, err, errlen);
	if (!vp->pd) {
		ret = -ENOSPC;
		goto fail;
	}
	ret = add_caps(vp);
	if (ret) {
		snprintf(err, errlen, "PCI config space: no room for the capabilities");
		goto fail;
	}
	kicks_open(vp);
	ret = pci_bar_add(vp->pd, 0, VP_BAR_SIZE, vp_bar_io, vp, err, errlen);
	if (ret)
		goto fail;
	virtio_dev_set_transport(d, &vp_tops, vp);
	d->host->log(d->in, CUB_LOG_DEBUG, "virtio-pci at 00:%02x.0, BAR0 0x%x bytes, %u MSI-X vectors",
		     pci_dev_slot(vp->pd), VP_BAR_SIZE, vp->msix.n);
	return 0;
fail:
	kicks_close(vp);
	if (vp->pd)
		pci_dev_remove(vp->pd);
	msix_free(&vp->msix);
	pthread_mutex_destroy(&vp->lock);
	free(vp);
	return ret;
}
