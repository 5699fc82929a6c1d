/* SPDX-License-Identifier: Apache-2.0 */
/* PCI bus 0: config spaces with writable masks, BAR sizing and moves,
 * capability lists, the host bridge and configuration mechanism #1.
 *
 * Locking: one mutex per bus serialises config accesses, the conf1 address
 * register and BAR moves. A BAR move takes the MMIO bus's write lock while
 * holding the PCI lock, so a BAR handler (which runs under the MMIO bus's
 * read lock) must never take the PCI lock; device owners keep whatever
 * config state their BAR handlers need in their own state, updated from
 * the cfg_write hook. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cnode.h"
#include "log.h"
#include "pci.h"
#include "vm.h"

struct pci_bar {
	uint64_t size;   /* 0: not implemented */
	cub_io_fn *io;
	void *priv;
	uint64_t mapped; /* base on vm->mmio, 0 if not decoding */
};

struct pci_dev {
	struct pci_bus *bus;
	unsigned slot;
	char name[64];
	uint8_t cfg[PCI_CFG_SIZE];
	uint8_t wmask[PCI_CFG_SIZE];
	unsigned cap_next; /* where the next capability goes */
	unsigned cap_last; /* offset of the last capability, 0 if none */
	struct pci_bar bar[PCI_NUM_BARS];
	const struct pci_dev_ops *ops;
	void *priv;
};

struct pci_bus {
	struct vm *vm;
	pthread_mutex_t lock;
	uint32_t conf1_addr;
	bool conf1_attached;
	uint64_t win_base, win_size, win_used;
	struct pci_dev *devs[PCI_MAX_DEVS];
	struct ratelimit rl;
};

/* conf1 address register: enable, bus, device, function, dword register. */
#define CONF1_ENABLE 0x80000000u
#define CONF1_MASK   0x80fffffcu /* bits 30:24 and 1:0 read as 0 */

#define BAR_ADDR_MASK 0xfffffff0u

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

/* Make each BAR decode where its register and the command register say
 * (bus lock held). A range that collides with another region stays
 * unmapped: the guest gets what real hardware would give it, a conflict
 * it has to resolve, and the host is not hurt. */
static void update_bars(struct pci_dev *pd)
{
	struct bus *mmio = &pd->bus->vm->mmio;
	bool mem = get16(pd->cfg + PCI_COMMAND) & PCI_CMD_MEMORY;

	for (unsigned i = 0; i < PCI_NUM_BARS; i++) {
		struct pci_bar *b = &pd->bar[i];
		uint64_t want;
		int ret;

		if (!b->size)
			continue;
		want = get32(pd->cfg + PCI_BAR0 + 4 * i) & BAR_ADDR_MASK;
		if (!mem)
			want = 0;
		if (want == b->mapped)
			continue;
		if (b->mapped) {
			bus_del(mmio, b->mapped);
			__atomic_store_n(&b->mapped, 0, __ATOMIC_RELEASE);
		}
		ret = want ? bus_add(mmio, want, b->size, b->io, b->priv, pd->name) : 0;
		if (want && !ret)
			__atomic_store_n(&b->mapped, want, __ATOMIC_RELEASE);
		else if (ret && ratelimit_ok(&pd->bus->rl))
			log_warn("pci %02x.0 %s: BAR%u at 0x%" PRIx64 "+0x%" PRIx64
				 " not decoded: %s", pd->slot, pd->name, i, want, b->size,
				 ret == -EEXIST ? "it overlaps another device's range" :
						  strerror(-ret));
		if (pd->ops && pd->ops->bar_moved)
			pd->ops->bar_moved(pd->priv, i, b->mapped);
	}
}

static bool overlaps(unsigned off, unsigned len, unsigned start, unsigned end)
{
	return off < end && start < off + len;
}

static void dev_read(struct pci_dev *pd, uint16_t off, void *data, uint32_t len)
{
	if (pd->ops && pd->ops->cfg_read)
		pd->ops->cfg_read(pd->priv, off, len);
	memcpy(data, pd->cfg + off, len);
}

static void dev_write(struct pci_dev *pd, uint16_t off, const void *data, uint32_t len)
{
	const uint8_t *v = data;

	for (uint32_t i = 0; i < len; i++) {
		uint8_t m = pd->wmask[off + i];

		pd->cfg[off + i] = (uint8_t)((pd->cfg[off + i] & ~m) | (v[i] & m));
	}
	if (overlaps(off, len, PCI_COMMAND, PCI_COMMAND + 2) ||
	    overlaps(off, len, PCI_BAR0, PCI_BAR0 + 4 * PCI_NUM_BARS))
		update_bars(pd);
	if (pd->ops && pd->ops->cfg_write)
		pd->ops->cfg_write(pd->priv, off, len);
}

/* The device a config access reaches, or NULL (bus lock held). */
static struct pci_dev *target(struct pci_bus *pb, uint8_t bus, uint8_t dev, uint8_t fn,
			      uint16_t off, uint32_t len)
{
	if (bus || fn || dev >= PCI_MAX_DEVS)
		return NULL;
	if ((len != 1 && len != 2 && len != 4) || off >= PCI_CFG_SIZE || (off & 3) + len > 4)
		return NULL;
	return pb->devs[dev];
}

static void access_locked(struct pci_bus *pb, uint8_t bus, uint8_t dev, uint8_t fn,
			  uint16_t off, void *data, uint32_t len, bool is_write)
{
	struct pci_dev *pd = target(pb, bus, dev, fn, off, len);

	if (!pd) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	if (is_write)
		dev_write(pd, off, data, len);
	else
		dev_read(pd, off, data, len);
}

void pci_conf_access(struct vm *vm, uint8_t bus, uint8_t dev, uint8_t fn, uint16_t off,
		     void *data, uint32_t len, bool is_write)
{
	struct pci_bus *pb = vm->pci;

	if (!pb || len > 4) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	pthread_mutex_lock(&pb->lock);
	access_locked(pb, bus, dev, fn, off, data, len, is_write);
	pthread_mutex_unlock(&pb->lock);
}

/*
 * Ports 0xcf8-0xcff. Only a dword access to 0xcf8 reaches the address
 * register (PCI 3.0, 3.2.2.3.2); byte and word accesses there belong to
 * other chipset registers (0xcf9 is the reset control on Intel parts),
 * which cubicle does not model. Data at 0xcfc+k reaches register
 * (address & 0xfc) + k while the enable bit is set.
 */
static void conf1_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct pci_bus *pb = priv;
	uint32_t a, v;

	pthread_mutex_lock(&pb->lock);
	if (off == 0 && len == 4) {
		if (is_write) {
			memcpy(&v, data, 4);
			pb->conf1_addr = v & CONF1_MASK;
		} else {
			memcpy(data, &pb->conf1_addr, 4);
		}
	} else if (off < 4 || off + len > PCI_CONF1_LEN || !(pb->conf1_addr & CONF1_ENABLE)) {
		if (!is_write)
			memset(data, 0xff, len);
	} else {
		a = pb->conf1_addr;
		access_locked(pb, (uint8_t)(a >> 16), (a >> 11) & 0x1f, (a >> 8) & 7,
			      (uint16_t)((a & 0xfc) + (off - 4)), data, len, is_write);
	}
	pthread_mutex_unlock(&pb->lock);
}

int pci_conf1_attach(struct vm *vm, char *err, size_t errlen)
{
	struct pci_bus *pb = vm->pci;
	int ret;

	if (!pb)
		return errf(err, errlen, -EINVAL, "PCI conf1 ports: no PCI bus");
	ret = bus_add(&vm->pio, PCI_CONF1_PORT, PCI_CONF1_LEN, conf1_io, pb, "pci-conf1");
	if (ret)
		return errf(err, errlen, ret, "PCI conf1 ports 0x%x-0x%x: %s", PCI_CONF1_PORT,
			    PCI_CONF1_PORT + PCI_CONF1_LEN - 1, strerror(-ret));
	pb->conf1_attached = true;
	return 0;
}

static void dev_unmap(struct pci_dev *pd)
{
	for (unsigned i = 0; i < PCI_NUM_BARS; i++)
		if (pd->bar[i].mapped) {
			bus_del(&pd->bus->vm->mmio, pd->bar[i].mapped);
			__atomic_store_n(&pd->bar[i].mapped, 0, __ATOMIC_RELEASE);
		}
}

/* Fill a fresh config space: identity and the generic writable bits. */
static void header_init(struct pci_dev *pd, const struct pci_id *id)
{
	put16(pd->cfg + PCI_VENDOR_ID, id->vendor);
	put16(pd->cfg + PCI_DEVICE_ID, id->device);
	pd->cfg[PCI_REVISION_ID] = id->revision;
	pd->cfg[PCI_CLASS_PROG] = (uint8_t)id->class;
	put16(pd->cfg + PCI_CLASS_PROG + 1, (uint16_t)(id->class >> 8));
	pd->cfg[PCI_HEADER_TYPE] = 0; /* type 0, single function */
	put16(pd->cfg + PCI_SUBSYS_VENDOR, id->subsys_vendor);
	put16(pd->cfg + PCI_SUBSYS_ID, id->subsys);
	pd->cfg[PCI_INT_PIN] = 0; /* no INTx: MSI-X only */
	/* No I/O BARs, so the I/O space enable stays 0. */
	put16(pd->wmask + PCI_COMMAND, PCI_CMD_MEMORY | PCI_CMD_MASTER | PCI_CMD_PARITY |
					       PCI_CMD_SERR | PCI_CMD_INTX_DIS);
	pd->wmask[PCI_CACHE_LINE] = 0xff;
	pd->wmask[PCI_LATENCY_TIMER] = 0xff;
	pd->wmask[PCI_INT_LINE] = 0xff;
	pd->cap_next = PCI_CAP_START;
}

static struct pci_dev *dev_new(struct pci_bus *pb, unsigned slot, const struct pci_id *id,
			       const struct pci_dev_ops *ops, void *priv, const char *name)
{
	struct pci_dev *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->bus = pb;
	pd->slot = slot;
	pd->ops = ops;
	pd->priv = priv;
	snprintf(pd->name, sizeof(pd->name), "%s", name ? name : "pci");
	header_init(pd, id);
	pb->devs[slot] = pd;
	return pd;
}

int pci_init(struct vm *vm, char *err, size_t errlen)
{
	static const struct pci_id host = {
		.vendor = PCI_HOST_VENDOR, .device = PCI_HOST_DEVICE, .class = 0x060000,
	};
	struct pci_bus *pb;

	if (vm->pci)
		return errf(err, errlen, -EEXIST, "PCI bus created twice");
	pb = calloc(1, sizeof(*pb));
	if (!pb)
		return errf(err, errlen, -ENOMEM, "PCI bus: out of memory");
	pb->vm = vm;
	pthread_mutex_init(&pb->lock, NULL);
	arch_pci_window(&pb->win_base, &pb->win_size);
	if (!pb->win_size || pb->win_base + pb->win_size > 0x100000000ULL) {
		pthread_mutex_destroy(&pb->lock);
		free(pb);
		return errf(err, errlen, -ENODEV, "PCI: this arch has no 32-bit MMIO window for BARs");
	}
	if (!dev_new(pb, 0, &host, NULL, NULL, "pci-host")) {
		pthread_mutex_destroy(&pb->lock);
		free(pb);
		return errf(err, errlen, -ENOMEM, "PCI bus: out of memory");
	}
	vm->pci = pb;
	return 0;
}

void pci_destroy(struct vm *vm)
{
	struct pci_bus *pb = vm->pci;

	if (!pb)
		return;
	if (pb->conf1_attached)
		bus_del(&vm->pio, PCI_CONF1_PORT);
	for (unsigned s = 0; s < PCI_MAX_DEVS; s++) {
		struct pci_dev *pd = pb->devs[s];

		if (!pd)
			continue;
		dev_unmap(pd);
		if (pd->ops && pd->ops->free)
			pd->ops->free(pd->priv);
		free(pd);
	}
	pthread_mutex_destroy(&pb->lock);
	free(pb);
	vm->pci = NULL;
}

struct pci_dev *pci_dev_add(struct vm *vm, const struct pci_id *id,
			    const struct pci_dev_ops *ops, void *priv, const char *name,
			    char *err, size_t errlen)
{
	struct pci_bus *pb = vm->pci;
	struct pci_dev *pd = NULL;
	unsigned s;

	if (!pb) {
		errf(err, errlen, -ENODEV, "%s: this VM has no PCI bus", name);
		return NULL;
	}
	pthread_mutex_lock(&pb->lock);
	for (s = 1; s < PCI_MAX_DEVS && pb->devs[s]; s++)
		;
	if (s == PCI_MAX_DEVS)
		errf(err, errlen, -ENOSPC, "%s: PCI bus 0 is full (%u devices besides the host bridge)",
		     name, PCI_MAX_DEVS - 1);
	else if (!(pd = dev_new(pb, s, id, ops, priv, name)))
		errf(err, errlen, -ENOMEM, "%s: out of memory", name);
	pthread_mutex_unlock(&pb->lock);
	return pd;
}

void pci_dev_remove(struct pci_dev *pd)
{
	struct pci_bus *pb = pd->bus;

	pthread_mutex_lock(&pb->lock);
	dev_unmap(pd);
	pb->devs[pd->slot] = NULL;
	pthread_mutex_unlock(&pb->lock);
	free(pd);
}

int pci_bar_add(struct pci_dev *pd, unsigned bar, uint64_t size, cub_io_fn *io, void *priv,
		char *err, size_t errlen)
{
	struct pci_bus *pb = pd->bus;
	uint64_t base;
	int ret = 0;

	if (bar >= PCI_NUM_BARS || !io || size < 0x1000 || size > 0x40000000 ||
	    (size & (size - 1)))
		return errf(err, errlen, -EINVAL, "%s: BAR%u of 0x%" PRIx64 " bytes: must be a power of two from 4 KiB to 1 GiB",
			    pd->name, bar, size);
	pthread_mutex_lock(&pb->lock);
	if (pd->bar[bar].size) {
		ret = errf(err, errlen, -EBUSY, "%s: BAR%u added twice", pd->name, bar);
		goto out;
	}
	/* Naturally aligned, as the sizing protocol implies. */
	base = (pb->win_base + pb->win_used + size - 1) & ~(size - 1);
	if (base + size > pb->win_base + pb->win_size) {
		ret = errf(err, errlen, -ENOSPC,
			   "%s: BAR%u of 0x%" PRIx64 " bytes does not fit the PCI window 0x%" PRIx64
			   "-0x%" PRIx64, pd->name, bar, size, pb->win_base,
			   pb->win_base + pb->win_size - 1);
		goto out;
	}
	pb->win_used = base + size - pb->win_base;
	pd->bar[bar] = (struct pci_bar){ .size = size, .io = io, .priv = priv };
	put32(pd->cfg + PCI_BAR0 + 4 * bar, (uint32_t)base); /* 32-bit, non-prefetchable */
	put32(pd->wmask + PCI_BAR0 + 4 * bar, (uint32_t)~(size - 1) & BAR_ADDR_MASK);
	update_bars(pd);
out:
	pthread_mutex_unlock(&pb->lock);
	return ret;
}

int pci_cap_add(struct pci_dev *pd, const void *cap, unsigned len, const void *wmask)
{
	struct pci_bus *pb = pd->bus;
	unsigned off;
	int ret;

	if (len < 4 || len > 64)
		return -EINVAL;
	pthread_mutex_lock(&pb->lock);
	off = pd->cap_next;
	if (off + len > PCI_CFG_SIZE) {
		ret = -ENOSPC;
		goto out;
	}
	memcpy(pd->cfg + off, cap, len);
	pd->cfg[off + 1] = 0;
	if (wmask)
		memcpy(pd->wmask + off, wmask, len);
	pd->wmask[off] = pd->wmask[off + 1] = 0;
	if (pd->cap_last)
		pd->cfg[pd->cap_last + 1] = (uint8_t)off;
	else
		pd->cfg[PCI_CAP_PTR] = (uint8_t)off;
	put16(pd->cfg + PCI_STATUS, get16(pd->cfg + PCI_STATUS) | PCI_STATUS_CAP);
	pd->cap_last = off;
	pd->cap_next = (off + len + 3) & ~3u;
	ret = (int)off;
out:
	pthread_mutex_unlock(&pb->lock);
	return ret;
}

uint8_t *pci_cfg(struct pci_dev *pd)
{
	return pd->cfg;
}

uint64_t pci_bar_mapped(struct pci_dev *pd, unsigned bar)
{
	return bar < PCI_NUM_BARS ? __atomic_load_n(&pd->bar[bar].mapped, __ATOMIC_ACQUIRE) : 0;
}

bool pci_has_devices(const struct vm *vm)
{
	const struct pci_bus *pb = vm->pci;

	for (unsigned s = 1; pb && s < PCI_MAX_DEVS; s++)
		if (pb->devs[s])
			return true;
	return false;
}

unsigned pci_dev_slot(const struct pci_dev *pd)
{
	return pd->slot;
}

void pci_cfg_save(struct pci_dev *pd, uint8_t out[PCI_CFG_SIZE])
{
	pthread_mutex_lock(&pd->bus->lock);
	memcpy(out, pd->cfg, PCI_CFG_SIZE);
	pthread_mutex_unlock(&pd->bus->lock);
}

void pci_cfg_load(struct pci_dev *pd, const uint8_t in[PCI_CFG_SIZE])
{
	pthread_mutex_lock(&pd->bus->lock);
	for (unsigned i = 0; i < PCI_CFG_SIZE; i++)
		pd->cfg[i] = (uint8_t)((pd->cfg[i] & ~pd->wmask[i]) | (in[i] & pd->wmask[i]));
	update_bars(pd);
	pthread_mutex_unlock(&pd->bus->lock);
}
