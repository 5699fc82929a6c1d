/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_virtio_dev's machine: guest RAM in two banks, a bus, PCI when asked
 * for, the host services (devices_host, so the real virtio core and
 * transports use them), an in-memory disk that checks every access, and
 * the virtio-blk plugin created and destroyed as the host does it. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "bus.h"
#include "cubicle/storage.h"
#include "log.h"
#include "mem.h"
#include "pci.h"
#include "storage_zeroes.h"
#include "vdev.h"
#include "virtio/virtio_dev.h"
#include "virtio/virtio_pci.h"

/* The device under test: virtio_blk.c is compiled into this program. */
extern const struct cub_plugin cubicle_plugin;

struct machine M;

/* ---- arch and irq stubs: the parts of the core this harness leaves out ---- */

const char *arch_virtio_default_transport(void)
{
	return "mmio";
}

void arch_pci_window(uint64_t *base, uint64_t *size)
{
	*base = PCI_WIN;
	*size = 0x10000000;
}

int irq_msi(struct vm *vm, uint64_t addr, uint32_t data)
{
	if (addr == MSI_ADDR && data >= MSI_DATA0 && data - MSI_DATA0 <= MODEL_QUEUES)
		M.msis[data - MSI_DATA0]++;
	return 0;
}

/* ---- the host services (devices_host: virtio.c's default host) ---- */

bool vdev_verbose;

static void h_vlog(const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (!strncmp(line, "device needs reset: ", 20) && !M.why[0])
		snprintf(M.why, sizeof(M.why), "%s", line + 20);
	if (vdev_verbose)
		fprintf(stderr, "[host] %s\n", line);
}

__attribute__((format(printf, 3, 4)))
static void h_log(struct cub_inst *in, int lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	h_vlog(fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 3, 4)))
static int h_fail(struct cub_inst *in, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->err, sizeof(in->err), fmt, ap);
	va_end(ap);
	return err;
}

static void *h_gpa_map(struct cub_inst *in, uint64_t gpa, uint64_t len)
{
	return mem_map(&in->vm->mem, gpa, len);
}

static int h_region_add(struct cub_inst *in, struct cub_region *r)
{
	int ret;

	if (in->created || in->n_regions)
		return h_fail(in, -EBUSY, "one region, at create time");
	r->bus = CUB_BUS_MMIO;
	r->base = MMIO_BASE;
	r->irq = MMIO_IRQ;
	ret = bus_add(&in->vm->mmio, r->base, r->len, r->io, r->priv, "fuzz");
	if (ret)
		return h_fail(in, ret, "bus_add");
	in->regions[in->n_regions].bus = &in->vm->mmio;
	in->regions[in->n_regions++].base = r->base;
	return 0;
}

static int h_irq_set(struct cub_inst *in, unsigned line, bool level)
{
	if (line != MMIO_IRQ)
		TRAP("irq_set on line %u, not the one placed", line);
	M.irq_level = level;
	return 0;
}

static int h_fd_watch(struct cub_inst *in, int fd, uint32_t ev, void (*cb)(void *), void *arg)
{
	if (M.n_w == INST_MAX_WATCHES)
		return -ENOSPC;
	M.w[M.n_w++] = (struct watch){ fd, cb, arg };
	return 0;
}

static int h_fd_unwatch(struct cub_inst *in, int fd)
{
	for (unsigned i = 0; i < M.n_w; i++) {
		if (M.w[i].fd == fd) {
			M.w[i] = M.w[--M.n_w];
			return 0;
		}
	}
	return -ENOENT;
}

static void h_vm_exit(struct cub_inst *in, int status)
{
}

static int h_tty_raw(struct cub_inst *in, int fd)
{
	return -ENOTTY;
}

static uint64_t h_clock_us(struct cub_inst *in)
{
	return 0;
}

/* ---- the disk: in memory, every access checked ---- */

static void check_iov(const struct iovec *iov, int n, uint64_t off, bool to_guest)
{
	uint64_t total = 0;

	if (n < 0 || n > CUB_VQ_MAX_SEGS)
		TRAP("backend got %d segments", n);
	for (int i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;

		if (M.host_zeroes) {
			static const uint8_t zero[4096];

			for (size_t k = 0; k < len; k += sizeof(zero))
				if (memcmp(p + k, zero, len - k < sizeof(zero) ? len - k : sizeof(zero)))
					TRAP("write_zeroes wrote a nonzero byte");
		} else if (len && (p < M.ram || len > RAM || p - M.ram > (ptrdiff_t)(RAM - len))) {
			TRAP("backend buffer %p+%zu outside guest RAM", (void *)p, len);
		}
		total += len;
	}
	if (off > DISK_SIZE || total > DISK_SIZE - off)
		TRAP("%s of %llu bytes at %llu: beyond the %u-byte disk", to_guest ? "read" : "write",
		     (unsigned long long)total, (unsigned long long)off, DISK_SIZE);
}

static int64_t s_readv(void *priv, uint64_t off, const struct iovec *iov, int n)
{
	int64_t done = 0;

	check_iov(iov, n, off, true);
	for (int i = 0; i < n; i++) {
		memcpy(iov[i].iov_base, M.disk + off + done, iov[i].iov_len);
		done += (int64_t)iov[i].iov_len;
	}
	return done;
}

static int64_t s_writev(void *priv, uint64_t off, const struct iovec *iov, int n)
{
	int64_t done = 0;

	if (M.disk_ro)
		TRAP("write to a read-only backend");
	check_iov(iov, n, off, false);
	for (int i = 0; i < n; i++) {
		memcpy(M.disk + off + done, iov[i].iov_base, iov[i].iov_len);
		done += (int64_t)iov[i].iov_len;
	}
	return done;
}

static int s_flush(void *priv)
{
	if (!M.can_flush)
		TRAP("flush without can_flush");
	return 0;
}

static void check_range(const char *what, uint64_t off, uint64_t len)
{
	if (M.disk_ro)
		TRAP("%s on a read-only backend", what);
	if (off > DISK_SIZE || len > DISK_SIZE - off)
		TRAP("%s of %llu bytes at %llu: beyond the disk", what, (unsigned long long)len,
		     (unsigned long long)off);
}

static int s_discard(void *priv, uint64_t off, uint64_t len)
{
	check_range("discard", off, len);
	return 0; /* a hint: the bytes stay */
}

static int s_write_zeroes(void *priv, uint64_t off, uint64_t len, bool unmap)
{
	if (!M.can_wz)
		TRAP("write_zeroes without can_write_zeroes");
	check_range("write_zeroes", off, len);
	memset(M.disk + off, 0, len);
	return 0;
}

static void s_info(void *priv, struct cub_storage_info *out)
{
	*out = (struct cub_storage_info){
		.size = DISK_SIZE, .block_size = 512, .read_only = M.disk_ro,
		.can_discard = M.can_discard, .can_write_zeroes = M.can_wz,
		.can_flush = M.can_flush,
	};
}

static const struct cub_storage_ops mem_full_ops = {
	.readv = s_readv, .writev = s_writev, .flush = s_flush, .info = s_info,
	.discard = s_discard, .write_zeroes = s_write_zeroes,
};

/* Without write_zeroes the host writes zero buffers through writev. */
static const struct cub_storage_ops mem_min_ops = {
	.readv = s_readv, .writev = s_writev, .flush = s_flush, .info = s_info,
};

static int sh_open(struct cub_inst *in, const char *key, bool ro, struct cub_storage **out)
{
	struct cub_storage *s;

	if (strcmp(key, "backend") || M.st)
		return h_fail(in, -ENOENT, "no backend '%s'", key);
	s = calloc(1, sizeof(*s));
	if (!s)
		return h_fail(in, -ENOMEM, "out of memory");
	M.disk_ro |= ro;
	s->ops = M.full_ops ? &mem_full_ops : &mem_min_ops;
	s->name = "mem[fuzz]";
	s->ops->info(NULL, &s->info);
	M.st = s;
	*out = s;
	return 0;
}

static void sh_close(struct cub_inst *in, struct cub_storage *s)
{
	if (s != M.st)
		TRAP("close of a backend never opened");
	free(s);
	M.st = NULL;
}

/* The core's own default, which may hand writev a zero buffer of its own
 * rather than guest RAM. */
static int sh_write_zeroes(struct cub_storage *s, uint64_t off, uint64_t len, bool unmap)
{
	int ret;

	M.host_zeroes = true;
	ret = storage_write_zeroes(s, off, len, unmap);
	M.host_zeroes = false;
	return ret;
}

static const struct cub_storage_host storage_host = {
	.size = sizeof(struct cub_storage_host),
	.open = sh_open,
	.close = sh_close,
	.write_zeroes = sh_write_zeroes,
};

const struct cub_host devices_host = {
	.size = sizeof(struct cub_host),
	.log = h_log,
	.log_ratelimited = h_log,
	.fail = h_fail,
	.gpa_map = h_gpa_map,
	.region_add = h_region_add,
	.irq_set = h_irq_set,
	.fd_watch = h_fd_watch,
	.fd_unwatch = h_fd_unwatch,
	.vm_exit = h_vm_exit,
	.tty_raw = h_tty_raw,
	.clock_us = h_clock_us,
	.virtio = &virtio_host, /* the real core's */
	.storage = &storage_host,
};

/* The event loop's part: run every watch whose fd is readable, until none
 * is (a device that used its budget re-arms through an eventfd). */
void mach_loop(void)
{
	for (unsigned round = 0; round < LOOP_ROUNDS; round++) {
		struct pollfd p[INST_MAX_WATCHES];
		struct watch w[INST_MAX_WATCHES];
		unsigned n = M.n_w;
		int ready;

		memcpy(w, M.w, sizeof(w[0]) * n);
		for (unsigned i = 0; i < n; i++)
			p[i] = (struct pollfd){ .fd = w[i].fd, .events = POLLIN };
		ready = n ? poll(p, n, 0) : 0;
		if (ready <= 0)
			return;
		for (unsigned i = 0; i < n; i++)
			if (p[i].revents & POLLIN)
				w[i].cb(w[i].arg);
	}
}

/* ---- the device's config: every parameter's default, then ours ---- */

static void *cfg_build(const struct cub_plugin *p, bool ro, unsigned nq)
{
	static const char *const no_strings[] = { NULL };
	uint8_t *c = calloc(1, p->cfg_size ? p->cfg_size : 1);
	char nqs[8];

	if (!c)
		return NULL;
	snprintf(nqs, sizeof(nqs), "%u", nq);
	for (unsigned i = 0; i < p->n_params; i++) {
		const struct cub_param *pa = &p->params[i];
		const char *d = pa->def;
		void *slot = c + pa->offset;

		if (!strcmp(pa->name, "read_only"))
			d = ro ? "true" : "false";
		else if (!strcmp(pa->name, "num_queues"))
			d = nqs;
		else if (!strcmp(pa->name, "serial"))
			d = SERIAL;
		switch (pa->type) {
		case CUB_P_BOOL:
			*(bool *)slot = d && !strcmp(d, "true");
			break;
		case CUB_P_INT:
			*(int64_t *)slot = d ? strtoll(d, NULL, 0) : 0;
			break;
		case CUB_P_U64:
		case CUB_P_SIZE:
			*(uint64_t *)slot = d ? strtoull(d, NULL, 0) : 0;
			break;
		case CUB_P_STR:
		case CUB_P_PATH:
			*(const char **)slot = d ? d : "";
			break;
		case CUB_P_STORAGE:
			*(const char **)slot = "mem";
			break;
		case CUB_P_ENUM:
			for (int k = 0; d && pa->choices && pa->choices[k]; k++)
				if (!strcmp(pa->choices[k], d))
					*(int *)slot = k;
			break;
		case CUB_P_STRV:
			*(const char *const **)slot = no_strings;
			break;
		case CUB_P_NET:
		case CUB_P_RATELIMIT: /* none: the slot stays NULL, the device unlimited */
			break;
		}
	}
	return c;
}

/* ---- machine up and down ---- */

/* Allocated once: fresh pages per input cost more than the device. */
static uint8_t *ram;
static uint8_t disk_image[DISK_SIZE];

void mach_init(void)
{
	ram = malloc(RAM); /* malloc'd, so ASan guards both ends */
	if (!ram)
		abort();
	for (unsigned i = 0; i < DISK_SIZE; i++)
		disk_image[i] = (uint8_t)(i * 13 + i / 512);
}

bool mach_up(uint8_t conf)
{
	const struct cub_device_ops *ops = cubicle_plugin.ops;
	char err[256];

	memset(&M, 0, sizeof(M));
	M.pci = conf & 1;
	M.disk_ro = conf & 2;
	M.n_queues = 1 + ((conf >> 2) & 3);
	M.can_discard = conf & 0x10;
	M.can_wz = conf & 0x20;
	M.full_ops = conf & 0x30;
	M.can_flush = conf & 0x40;
	memcpy(M.disk, disk_image, DISK_SIZE);
	memcpy(M.shadow, disk_image, DISK_SIZE);
	M.ram = ram;
	memset(M.ram, 0, RAM);
	M.vm.kvm_fd = M.vm.vm_fd = -1; /* no KVM: notifies trap, MSIs are recorded */
	M.vm.mem = (struct guest_mem){
		.fd = -1, .host = M.ram, .size = RAM, .n_banks = 2,
		.bank = { { .gpa = 0, .size = BANK0, .off = 0 },
			  { .gpa = BANK1_GPA, .size = BANK1, .off = BANK0 } },
	};
	bus_init(&M.vm.pio, "pio");
	bus_init(&M.vm.mmio, "mmio");
	if (M.pci && pci_init(&M.vm, err, sizeof(err)))
		TRAP("pci_init: %s", err);

	M.pi = (struct plan_inst){ .name = "virtio-blk[fuzz]", .id = "fuzz", .where = "fuzz",
				   .transport = M.pci ? "pci" : "mmio" };
	M.in = calloc(1, sizeof(*M.in));
	M.cfg = cfg_build(&cubicle_plugin, M.disk_ro, M.n_queues);
	if (!M.in || !M.cfg)
		return false;
	M.in->vm = &M.vm;
	M.in->name = M.pi.name;
	M.in->cfg = M.cfg;
	M.in->pi = &M.pi;
	if (ops->create(M.in, &devices_host, M.cfg, &M.in->priv))
		TRAP("create failed: %s", M.in->err);
	M.in->created = true;
	if (!M.in->virtio)
		TRAP("virtio-blk did not become a virtio device");
	if (M.pci) {
		uint16_t vendor = 0;

		for (M.slot = 1; M.slot < PCI_MAX_DEVS; M.slot++) {
			pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, PCI_VENDOR_ID, &vendor, 2, false);
			if (vendor == VIRTIO_PCI_VENDOR)
				break;
		}
		if (M.slot == PCI_MAX_DEVS)
			TRAP("no virtio function on the PCI bus");
		for (uint8_t pos = 0, n = 0, id = 0;; n++) {
			pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, pos ? pos + 1 : PCI_CAP_PTR, &pos,
					1, false);
			if (!pos || n > 16)
				break;
			pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, pos, &id, 1, false);
			if (id == PCI_CAP_ID_MSIX)
				M.msix_cap = pos;
		}
		if (!M.msix_cap)
			TRAP("no MSI-X capability");
		pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, PCI_BAR0, &M.bar0, 4, false);
	}
	return true;
}

/* As the host does it (inst_free, then arch_vm_destroy). */
void mach_down(void)
{
	const struct cub_device_ops *ops = cubicle_plugin.ops;

	if (M.in) {
		M.n_w = 0; /* the event loop has stopped */
		for (unsigned i = 0; i < M.in->n_regions; i++)
			bus_del(M.in->regions[i].bus, M.in->regions[i].base);
		virtio_dev_free(M.in->virtio);
		if (M.in->created && ops->destroy)
			ops->destroy(M.in->priv);
		if (M.st)
			sh_close(M.in, M.st);
	}
	pci_destroy(&M.vm);
	bus_free(&M.vm.pio);
	bus_free(&M.vm.mmio);
	free(M.cfg);
	free(M.in);
	M.in = NULL;
	M.cfg = NULL;
	M.ram = NULL;
}

/* ---- the guest's view of the transport ---- */

static uint64_t bar0(void)
{
	uint32_t v = 0;

	pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, PCI_BAR0, &v, 4, false);
	return v & ~0xfull;
}

static void mach_io(uint64_t off, void *data, uint32_t len, bool w)
{
	uint64_t base = M.pci ? bar0() : MMIO_BASE;

	if (!base || !bus_access(&M.vm.mmio, base + off, data, len, w))
		if (!w)
			memset(data, 0xff, len); /* nothing decodes there */
}

uint64_t mach_rd(uint64_t off, uint32_t len)
{
	uint64_t v = 0;

	mach_io(off, &v, len, false);
	v = le64toh(v);
	return len == 8 ? v : v & ((1ull << (8 * len)) - 1);
}

void mach_wr(uint64_t off, uint32_t len, uint64_t v)
{
	v = htole64(v);
	mach_io(off, &v, len, true);
}

void mach_cfg_wr(uint16_t off, uint32_t len, uint32_t v)
{
	pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, off, &v, len, true);
}

/* What firmware and pci_enable_device leave: BAR0 where it was placed,
 * memory decoding and bus mastering on (raw config writes may have moved
 * or disabled it). */
void mach_pci_enable(void)
{
	if (M.pci) {
		mach_cfg_wr(PCI_BAR0, 4, M.bar0);
		mach_cfg_wr(PCI_COMMAND, 2, PCI_CMD_MEMORY | PCI_CMD_MASTER);
	}
}

/* The device's status as the core holds it, whatever decodes. */
uint8_t mach_status(void)
{
	return virtio_dev_get_status(M.in->virtio);
}

uint8_t mach_status_rd(void)
{
	return (uint8_t)(M.pci ? mach_rd(CC_STATUS, 1) : mach_rd(MMIO_STATUS, 4));
}

void mach_status_wr(uint8_t s)
{
	if (M.pci)
		mach_wr(CC_STATUS, 1, s);
	else
		mach_wr(MMIO_STATUS, 4, s);
}

void mach_kick(unsigned q)
{
	if (M.kicks++ >= MAX_KICKS)
		return;
	if (M.pci)
		mach_wr(VP_NOTIFY_OFF + VP_NOTIFY_MULT * q, 2, q);
	else
		mach_wr(MMIO_QUEUE_NOTIFY, 4, q);
	mach_loop();
}

/* ---- guest RAM ---- */

uint8_t *mach_gpa(uint64_t a, uint64_t len)
{
	uint8_t *p = mem_map(&M.vm.mem, a, len);

	if (!p)
		TRAP("driver model address 0x%llx+%llu outside RAM", (unsigned long long)a,
		     (unsigned long long)len);
	return p;
}

void mach_put16(uint64_t a, uint16_t v)
{
	v = htole16(v);
	memcpy(mach_gpa(a, 2), &v, 2);
}

uint16_t mach_get16(uint64_t a)
{
	uint16_t v;

	memcpy(&v, mach_gpa(a, 2), 2);
	return le16toh(v);
}

uint32_t mach_get32(uint64_t a)
{
	uint32_t v;

	memcpy(&v, mach_gpa(a, 4), 4);
	return le32toh(v);
}
