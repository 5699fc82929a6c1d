/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for a whole virtio device: the real virtio core, the
 * real virtio-mmio or virtio-pci transport and the real virtio-blk plugin
 * (compiled in) on an in-memory disk, driven by a fuzzed guest that pokes
 * registers, PCI config space and RAM, and kicks queues. A small driver
 * model inside the guest brings the device up and posts well-formed
 * requests, so inputs reach DRIVER_OK with live queues; raw writes then
 * break whatever they like. Checked after every step: sanitizers, every
 * buffer the device hands the disk lies in guest RAM and in the disk,
 * NEEDS_RESET only after the guest broke a rule, the interrupt line follows
 * InterruptStatus (MMIO), and, while the guest has followed the rules,
 * every request completes once with the status and data a disk model
 * predicts and an interrupt. Each input builds a fresh machine and ends
 * with a guest reset and a full teardown, so no state outlives it and
 * LeakSanitizer sees everything freed. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "bus.h"
#include "cubicle/storage.h"
#include "devices.h"
#include "log.h"
#include "mem.h"
#include "pci.h"
#include "plan.h"
#include "storage_zeroes.h"
#include "virtio/virtio_dev.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtqueue.h"
#include "vm.h"

/* The device under test: virtio_blk.c is compiled into this program. */
extern const struct cub_plugin cubicle_plugin;

/* ---- limits: what one input may do ---- */

#define MAX_STEPS 192
#define MAX_KICKS 48
#define LOOP_ROUNDS 64 /* event-loop passes after a kick (budgeted re-arms) */

/* Guest RAM: two banks with a hole, one malloc'd buffer so ASan sees any
 * access beside it. Driver-model queue q lives at q * QSTRIDE in bank 0;
 * request buffers come from the rest of bank 0 and from bank 1. Queues
 * are up to 256 entries, so a burst of requests can outrun a device's
 * per-wake-up budget. */
#define BANK0 0x8000u
#define BANK1_GPA 0x10000u
#define BANK1 0x8000u
#define RAM (BANK0 + BANK1)
#define QSTRIDE 0x2000u
#define MODEL_QUEUES 4
#define MODEL_QMAX 256

#define MMIO_BASE 0xd0000000ull
#define MMIO_IRQ 5
#define PCI_WIN 0xe0000000ull
#define MSI_ADDR 0xfee00000u
#define MSI_DATA0 0x40u

#define DISK_SECTORS 32u
#define DISK_SIZE (DISK_SECTORS * 512u)
#define SERIAL "fuzz-disk-0123456789" /* exactly 20 bytes: no NUL in GET_ID */

/* virtio-blk (5.2) */
#define F_SEG_MAX 2
#define F_RO 5
#define F_BLK_SIZE 6
#define F_FLUSH 9
#define F_MQ 12
#define F_DISCARD 13
#define F_WZ 14
#define T_IN 0
#define T_OUT 1
#define T_FLUSH 4
#define T_GET_ID 8
#define T_DISCARD 11
#define T_WZ 13
#define S_OK 0
#define S_IOERR 1
#define S_UNSUPP 2

#define D_NEXT 1
#define D_WRITE 2
#define D_INDIRECT 4

#define ST_ACK 1
#define ST_DRIVER 2
#define ST_DRIVER_OK 4
#define ST_FEATURES_OK 8
#define ST_NEEDS_RESET 0x40

#define TRAP(...)                                                      \
	do {                                                           \
		fprintf(stderr, "fuzz_virtio_dev: " __VA_ARGS__);      \
		fputc('\n', stderr);                                   \
		__builtin_trap();                                      \
	} while (0)

/* ---- one request as the driver model posted it ---- */

struct req {
	bool busy;
	uint32_t type;
	uint64_t sector;
	uint32_t nsec;       /* DISCARD / WRITE_ZEROES range */
	uint32_t range_flags;
	uint64_t data_gpa;   /* IN / OUT / GET_ID data, contiguous */
	uint32_t data_len;
	uint64_t status_gpa;
	uint16_t descs[8];
	unsigned n_descs;    /* ring descriptors taken (1 when indirect) */
};

struct mqueue {
	bool live;
	uint16_t size, avail_idx, last_used;
	uint64_t desc, avail, used;
	uint16_t free[MODEL_QMAX];
	unsigned n_free, busy;
	struct req r[MODEL_QMAX];
};

/* ---- the machine ---- */

struct watch {
	int fd;
	void (*cb)(void *);
	void *arg;
};

static struct machine {
	struct vm vm;
	uint8_t *ram;
	struct plan_inst pi;
	struct cub_inst *in;
	void *cfg;
	bool pci;
	unsigned slot, msix_cap;
	uint32_t bar0;           /* where the PCI core first placed BAR0 */
	bool irq_level;          /* MMIO line as the transport drives it */
	unsigned msis[MODEL_QUEUES + 1];
	struct watch w[INST_MAX_WATCHES];
	unsigned n_w;
	/* the disk */
	uint8_t disk[DISK_SIZE];
	bool disk_ro, can_flush, can_discard, can_wz, full_ops;
	struct cub_storage *st;
	bool host_zeroes;        /* inside the host's write_zeroes */
	/* the guest */
	bool tainted;            /* the guest broke (or may have broken) a rule */
	bool irq_unsure;         /* a raw access may have eaten an interrupt */
	bool msix_on;
	uint64_t acked;          /* features the driver model accepted */
	unsigned n_queues, kicks;
	struct mqueue q[MODEL_QUEUES];
	uint8_t shadow[DISK_SIZE];
	uint64_t data_next;      /* bump allocator over bank 0's tail, then bank 1 */
	char why[256];           /* the core's first NEEDS_RESET reason */
	unsigned checked;        /* completions checked against the model */
} M;

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

static bool verbose;

static void h_vlog(const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (!strncmp(line, "device needs reset: ", 20) && !M.why[0])
		snprintf(M.why, sizeof(M.why), "%s", line + 20);
	if (verbose)
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
static void event_loop(void)
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
		else if (!strcmp(pa->name, "iothread"))
			d = "false"; /* inline: the kick's thread serves the queue */
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
			break;
		}
	}
	return c;
}

/* ---- machine up and down ---- */

/* Allocated once: fresh pages per input cost more than the device. */
static uint8_t *ram;
static uint8_t disk_image[DISK_SIZE];

static bool machine_up(uint8_t conf)
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
static void machine_down(void)
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

static void t_io(uint64_t off, void *data, uint32_t len, bool w)
{
	uint64_t base = M.pci ? bar0() : MMIO_BASE;

	if (!base || !bus_access(&M.vm.mmio, base + off, data, len, w))
		if (!w)
			memset(data, 0xff, len); /* nothing decodes there */
}

static uint64_t t_rd(uint64_t off, uint32_t len)
{
	uint64_t v = 0;

	t_io(off, &v, len, false);
	v = le64toh(v);
	return len == 8 ? v : v & ((1ull << (8 * len)) - 1);
}

static void t_wr(uint64_t off, uint32_t len, uint64_t v)
{
	v = htole64(v);
	t_io(off, &v, len, true);
}

static void cfg_wr(uint16_t off, uint32_t len, uint32_t v)
{
	pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, off, &v, len, true);
}

/* What firmware and pci_enable_device leave: BAR0 where it was placed,
 * memory decoding and bus mastering on (raw config writes may have moved
 * or disabled it). */
static void pci_enable(void)
{
	if (M.pci) {
		cfg_wr(PCI_BAR0, 4, M.bar0);
		cfg_wr(PCI_COMMAND, 2, PCI_CMD_MEMORY | PCI_CMD_MASTER);
	}
}

/* The device's status as the core holds it, whatever decodes. */
static uint8_t core_status(void)
{
	return virtio_dev_get_status(M.in->virtio);
}

static uint8_t status_rd(void)
{
	return (uint8_t)(M.pci ? t_rd(0x14, 1) : t_rd(0x70, 4));
}

static void status_wr(uint8_t s)
{
	if (M.pci)
		t_wr(0x14, 1, s);
	else
		t_wr(0x70, 4, s);
}

static uint32_t dev_features(unsigned sel)
{
	t_wr(M.pci ? 0x00 : 0x14, 4, sel);
	return (uint32_t)t_rd(M.pci ? 0x04 : 0x10, 4);
}

static void drv_features(unsigned sel, uint32_t v)
{
	t_wr(M.pci ? 0x08 : 0x24, 4, sel);
	t_wr(M.pci ? 0x0c : 0x20, 4, v);
}

static void kick(unsigned q)
{
	if (M.kicks++ >= MAX_KICKS)
		return;
	if (M.pci)
		t_wr(VP_NOTIFY_OFF + VP_NOTIFY_MULT * q, 2, q);
	else
		t_wr(0x50, 4, q);
	event_loop();
}

/* ---- guest RAM ---- */

static uint8_t *gpa(uint64_t a, uint64_t len)
{
	uint8_t *p = mem_map(&M.vm.mem, a, len);

	if (!p)
		TRAP("driver model address 0x%llx+%llu outside RAM", (unsigned long long)a,
		     (unsigned long long)len);
	return p;
}

static void put16(uint64_t a, uint16_t v)
{
	v = htole16(v);
	memcpy(gpa(a, 2), &v, 2);
}

static uint16_t get16(uint64_t a)
{
	uint16_t v;

	memcpy(&v, gpa(a, 2), 2);
	return le16toh(v);
}

static uint32_t get32(uint64_t a)
{
	uint32_t v;

	memcpy(&v, gpa(a, 4), 4);
	return le32toh(v);
}

static void put_desc(uint64_t at, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t d[16];
	uint64_t a = htole64(addr);
	uint32_t l = htole32(len);
	uint16_t f = htole16(flags), n = htole16(next);

	memcpy(d, &a, 8);
	memcpy(d + 8, &l, 4);
	memcpy(d + 12, &f, 2);
	memcpy(d + 14, &n, 2);
	memcpy(gpa(at, 16), d, 16);
}

/* Request buffers: bump-allocated, never shared by two requests in flight;
 * the pointer goes back to the start once none is. 0 when full. */
static uint64_t data_alloc(uint32_t len)
{
	uint64_t a = M.data_next ? M.data_next : M.n_queues * QSTRIDE;

	if (a + len > BANK0 && a < BANK1_GPA)
		a = BANK1_GPA;
	if (a + len > BANK1_GPA + BANK1)
		return 0;
	M.data_next = (a + len + 7) & ~7ull;
	return a;
}

static unsigned busy_total(void)
{
	unsigned n = 0;

	for (unsigned q = 0; q < MODEL_QUEUES; q++)
		n += M.q[q].busy;
	return n;
}

/* ---- the driver model: Linux's virtio_blk, much simplified ---- */

static void model_reset(void)
{
	memset(M.q, 0, sizeof(M.q));
	M.acked = 0;
	M.msix_on = false;
	M.data_next = 0;
}

static bool has(unsigned bit)
{
	return M.acked & (1ull << bit);
}

static void msix_setup(unsigned n)
{
	cfg_wr((uint16_t)M.msix_cap + 2, 2, 0xc000); /* enable, function masked */
	for (unsigned v = 0; v < n; v++) {
		t_wr(VP_MSIX_TABLE_OFF + 16 * v, 4, MSI_ADDR);
		t_wr(VP_MSIX_TABLE_OFF + 16 * v + 4, 4, 0);
		t_wr(VP_MSIX_TABLE_OFF + 16 * v + 8, 4, MSI_DATA0 + v);
	}
	cfg_wr((uint16_t)M.msix_cap + 2, 2, 0x8000);
	for (unsigned v = 0; v < n; v++)
		t_wr(VP_MSIX_TABLE_OFF + 16 * v + 12, 4, 0);
	t_wr(0x10, 2, 0); /* config vector */
	M.msix_on = true;
}

static void queue_setup(unsigned q, uint16_t size)
{
	struct mqueue *mq = &M.q[q];
	uint64_t base = (uint64_t)q * QSTRIDE;

	*mq = (struct mqueue){ .size = size, .desc = base, .avail = base + 0x1000,
			       .used = base + 0x1400 };
	memset(gpa(base, QSTRIDE), 0, QSTRIDE);
	for (unsigned i = 0; i < size; i++)
		mq->free[mq->n_free++] = (uint16_t)(size - 1 - i);
	if (M.pci) {
		t_wr(0x16, 2, q);
		if (t_rd(0x18, 2) < size)
			return;
		t_wr(0x18, 2, size);
		t_wr(0x20, 8, mq->desc);
		t_wr(0x28, 4, mq->avail);
		t_wr(0x2c, 4, 0);
		t_wr(0x30, 8, mq->used);
		if (M.msix_on)
			t_wr(0x1a, 2, q + 1);
		t_wr(0x1c, 2, 1);
		mq->live = t_rd(0x1c, 2) == 1;
	} else {
		t_wr(0x30, 4, q);
		if (t_rd(0x34, 4) < size)
			return;
		t_wr(0x38, 4, size);
		t_wr(0x80, 4, (uint32_t)mq->desc);
		t_wr(0x84, 4, 0);
		t_wr(0x90, 4, (uint32_t)mq->avail);
		t_wr(0x94, 4, 0);
		t_wr(0xa0, 4, (uint32_t)mq->used);
		t_wr(0xa4, 4, 0);
		t_wr(0x44, 4, 1);
		mq->live = t_rd(0x44, 4) == 1;
	}
}

static void reap_all(void);
static void guest_reset(void);

/* a: queue size code and options; f: which offered features to accept. */
static void bring_up(uint8_t a, uint8_t f)
{
	static const unsigned fbits[] = { VIRTIO_F_EVENT_IDX, VIRTIO_F_INDIRECT_DESC, F_FLUSH,
					  F_DISCARD, F_WZ, F_MQ, F_RO, F_SEG_MAX };
	uint16_t size = (uint16_t)(2u << (a & 7)); /* 2..256 */
	uint64_t offered, want = 1ull << VIRTIO_F_VERSION_1 | 1ull << F_BLK_SIZE;

	guest_reset();
	status_wr(ST_ACK);
	status_wr(ST_ACK | ST_DRIVER);
	offered = dev_features(0) | (uint64_t)dev_features(1) << 32;
	for (unsigned i = 0; i < 8; i++)
		if (f & (1u << i))
			want |= 1ull << fbits[i];
	if (a & 0x40)
		want &= ~(1ull << VIRTIO_F_VERSION_1); /* a legacy driver: refused */
	M.acked = offered & want;
	drv_features(0, (uint32_t)M.acked);
	drv_features(1, (uint32_t)(M.acked >> 32));
	status_wr(ST_ACK | ST_DRIVER | ST_FEATURES_OK);
	if (!(status_rd() & ST_FEATURES_OK)) {
		if (M.acked & (1ull << VIRTIO_F_VERSION_1))
			TRAP("features %#llx refused", (unsigned long long)M.acked);
		model_reset();
		return;
	}
	if (M.pci && !(a & 8))
		msix_setup(M.n_queues + 1);
	else if (M.pci)
		cfg_wr((uint16_t)M.msix_cap + 2, 2, 0); /* INTx-less: the ISR only */
	for (unsigned q = 0; q < M.n_queues; q++)
		if (!(a & 0x10) || q == 0)
			queue_setup(q, size);
	status_wr(ST_ACK | ST_DRIVER | ST_FEATURES_OK | ST_DRIVER_OK);
	event_loop();
	reap_all();
}

/* What a correct device answers, from the disk model; applies the request
 * to the model. Returns the used length expected. */
static uint32_t expect(struct req *r, uint8_t st, uint32_t used_len)
{
	bool ro = M.disk_ro;
	uint8_t want = S_OK;
	uint32_t len = 1;
	const uint8_t *data = r->data_len ? gpa(r->data_gpa, r->data_len) : NULL;

	switch (r->type) {
	case T_IN:
	case T_OUT:
		if ((r->type == T_OUT && ro) || r->data_len % 512 ||
		    r->sector + r->data_len / 512 > DISK_SECTORS)
			want = S_IOERR;
		break;
	case T_FLUSH:
		want = M.can_flush ? S_OK : S_UNSUPP;
		break;
	case T_GET_ID:
		break;
	case T_DISCARD:
	case T_WZ:
		if (!has(r->type == T_DISCARD ? F_DISCARD : F_WZ))
			want = S_UNSUPP;
		else if (r->type == T_DISCARD && r->range_flags)
			want = S_UNSUPP;
		else if (r->sector + r->nsec > DISK_SECTORS)
			want = S_IOERR;
		break;
	default:
		want = S_UNSUPP;
	}
	if (st != want)
		TRAP("request type %u sector %llu len %u: status %u, expected %u", r->type,
		     (unsigned long long)r->sector, r->data_len, st, want);
	if (want != S_OK)
		return used_len <= 1 + r->data_len ? used_len : 1; /* partial data may count */
	switch (r->type) {
	case T_IN:
		if (memcmp(data, M.shadow + r->sector * 512, r->data_len))
			TRAP("read of sector %llu returned other data", (unsigned long long)r->sector);
		len += r->data_len;
		break;
	case T_OUT:
		memcpy(M.shadow + r->sector * 512, data, r->data_len);
		break;
	case T_GET_ID:
		len += r->data_len < 20 ? r->data_len : 20;
		if (memcmp(data, SERIAL, len - 1))
			TRAP("GET_ID returned other bytes");
		break;
	case T_WZ:
		memset(M.shadow + r->sector * 512, 0, r->nsec * 512);
		break;
	}
	return len;
}

static void reap(unsigned qi, bool irq_seen)
{
	struct mqueue *q = &M.q[qi];
	uint16_t idx, n = 0;

	if (!q->live)
		return;
	idx = get16(q->used + 2);
	while (q->last_used != idx && n++ < q->size) {
		uint64_t e = q->used + 4 + 8 * (uint64_t)(q->last_used % q->size);
		uint32_t id = get32(e), len = get32(e + 4);
		struct req *r = id < q->size ? &q->r[id] : NULL;

		q->last_used++;
		if (!r || !r->busy) {
			if (!M.tainted)
				TRAP("queue %u: used id %u was not in flight", qi, id);
			continue;
		}
		if (!M.tainted) {
			uint8_t st = *gpa(r->status_gpa, 1);
			uint32_t want = expect(r, st, len);

			if (len != want)
				TRAP("queue %u: used len %u, expected %u (type %u)", qi, len, want,
				     r->type);
			if (!irq_seen && !M.irq_unsure)
				TRAP("queue %u: a request completed without an interrupt", qi);
			M.checked++;
		}
		r->busy = false;
		q->busy--;
		for (unsigned i = 0; i < r->n_descs; i++)
			q->free[q->n_free++] = r->descs[i];
	}
	if (!M.tainted && q->last_used != idx)
		TRAP("queue %u: used idx ran %u past what was posted", qi,
		     (uint16_t)(idx - q->last_used));
	if (has(VIRTIO_F_EVENT_IDX))
		put16(q->avail + 4 + 2 * (uint64_t)q->size, q->last_used); /* used_event */
	if (!busy_total())
		M.data_next = 0;
}

/* The driver's interrupt handler: what fired, then every used ring. */
static void reap_all(void)
{
	bool seen[MODEL_QUEUES];

	for (unsigned q = 0; q < MODEL_QUEUES; q++) {
		if (M.pci && M.msix_on) {
			seen[q] = M.msis[q + 1] != 0;
			M.msis[q + 1] = 0;
		}
	}
	if (!M.pci || !M.msix_on) {
		uint32_t isr = (uint32_t)(M.pci ? t_rd(VP_ISR_OFF, 1) : t_rd(0x60, 4));

		if (!M.pci)
			t_wr(0x64, 4, isr);
		for (unsigned q = 0; q < MODEL_QUEUES; q++)
			seen[q] = isr & 1;
	}
	for (unsigned q = 0; q < MODEL_QUEUES; q++)
		reap(q, seen[q]);
	M.irq_unsure = false;
}

/*
 * Post one request on queue qi. type picks the command; sector may run
 * past the disk; shape: bits 0-1 sectors (1..4), 2-3 data descriptors
 * (1..4), 4 a length that is not whole sectors, 5 header in two
 * descriptors, 6 status byte inside the last data descriptor, 7 indirect.
 */
static void post(unsigned qi, uint8_t type, uint8_t sector, uint8_t shape)
{
	static const uint32_t types[] = { T_IN, T_OUT, T_FLUSH, T_GET_ID, T_DISCARD, T_WZ, 99,
					  T_IN };
	struct mqueue *q = &M.q[qi % MODEL_QUEUES];
	struct { uint64_t a; uint32_t len; uint16_t flags; } seg[8];
	unsigned n = 0, nsec = 1 + (shape & 3), nd = 1 + ((shape >> 2) & 3);
	bool indirect = (shape & 0x80) && has(VIRTIO_F_INDIRECT_DESC);
	bool merged = shape & 0x40;
	uint32_t dlen = 0;
	uint64_t hdr, data = 0, status, range = 0;
	struct req r = { .type = types[type & 7] };
	uint16_t head;

	if (!q->live)
		return;
	r.sector = sector % (DISK_SECTORS + 4);
	if (r.type == T_IN || r.type == T_OUT)
		dlen = nsec * 512 - (shape & 0x10 ? 7 : 0);
	else if (r.type == T_GET_ID)
		dlen = shape & 0x10 ? 8 : 20;
	hdr = data_alloc(32 + dlen + 1 + (indirect ? 15 + 16 * 8 : 0));
	if (!hdr)
		return;
	if (r.type == T_DISCARD || r.type == T_WZ) {
		r.nsec = nsec;
		r.range_flags = (type >> 3) & 1;
		range = hdr + 16;
	}
	data = hdr + 32;
	status = data + dlen;
	r.data_gpa = data;
	r.data_len = dlen;
	r.status_gpa = status;

	/* Header: le32 type, le32 reserved, le64 sector. */
	{
		uint8_t h[16] = { 0 };
		uint32_t t = htole32(r.type);
		uint64_t s = htole64(r.sector);

		memcpy(h, &t, 4);
		memcpy(h + 8, &s, 8);
		memcpy(gpa(hdr, 16), h, 16);
	}
	if (shape & 0x20) {
		seg[n++] = (typeof(seg[0])){ hdr, 8, 0 };
		seg[n++] = (typeof(seg[0])){ hdr + 8, 8, 0 };
	} else {
		seg[n++] = (typeof(seg[0])){ hdr, 16, 0 };
	}
	if (range) {
		uint8_t g[16] = { 0 };
		uint64_t s = htole64(r.sector);
		uint32_t ns = htole32(r.nsec), fl = htole32(r.range_flags);

		memcpy(g, &s, 8);
		memcpy(g + 8, &ns, 4);
		memcpy(g + 12, &fl, 4);
		memcpy(gpa(range, 16), g, 16);
		seg[n++] = (typeof(seg[0])){ range, 16, 0 };
	}
	if (dlen) {
		uint16_t fl = r.type == T_OUT ? 0 : D_WRITE;
		uint8_t *p = gpa(data, dlen);

		for (uint32_t i = 0; i < dlen; i++) /* what the guest wrote, or a canary */
			p[i] = r.type == T_OUT ? (uint8_t)(i * 7 + sector + type) : 0xee;
		if (nd > dlen)
			nd = dlen;
		for (unsigned i = 0, off = 0; i < nd; i++) {
			uint32_t l = i == nd - 1 ? dlen - off : dlen / nd;

			seg[n++] = (typeof(seg[0])){ data + off, l, fl };
			off += l;
		}
	}
	*gpa(status, 1) = 0xff;
	if (merged && dlen && r.type != T_OUT)
		seg[n - 1].len++; /* the status byte ends the last data buffer */
	else
		seg[n++] = (typeof(seg[0])){ status, 1, D_WRITE };

	if (n > q->size) /* a chain longer than the queue is a driver bug */
		return;
	if (indirect) {
		uint64_t table = (status + 1 + 15) & ~15ull;

		if (!q->n_free)
			return;
		for (unsigned i = 0; i < n; i++)
			put_desc(table + 16 * i, seg[i].a, seg[i].len,
				 seg[i].flags | (i + 1 < n ? D_NEXT : 0), (uint16_t)(i + 1));
		head = q->free[--q->n_free];
		r.descs[r.n_descs++] = head;
		put_desc(q->desc + 16 * (uint64_t)head, table, 16 * n, D_INDIRECT, 0);
	} else {
		if (q->n_free < n)
			return;
		for (unsigned i = 0; i < n; i++)
			r.descs[r.n_descs++] = q->free[--q->n_free];
		for (unsigned i = 0; i < n; i++)
			put_desc(q->desc + 16 * (uint64_t)r.descs[i], seg[i].a, seg[i].len,
				 seg[i].flags | (i + 1 < n ? D_NEXT : 0),
				 i + 1 < n ? r.descs[i + 1] : 0);
		head = r.descs[0];
	}
	r.busy = true;
	q->r[head] = r;
	q->busy++;
	put16(q->avail + 4 + 2 * (uint64_t)(q->avail_idx % q->size), head);
	put16(q->avail + 2, ++q->avail_idx);
}

/* ---- invariants after every step ---- */

static void check(void)
{
	uint8_t s = core_status();

	if ((s & ST_NEEDS_RESET) && !M.tainted)
		TRAP("NEEDS_RESET (%s) though the guest broke no rule", M.why[0] ? M.why : "?");
	if (!M.pci && M.irq_level != (t_rd(0x60, 4) != 0))
		TRAP("irq line %d with InterruptStatus %#llx", M.irq_level,
		     (unsigned long long)t_rd(0x60, 4));
}

/* The guest resets the device through the transport: it must come back
 * with status 0 and no interrupt pending. Rules broken before no longer
 * matter: the driver model starts over and trusts the disk as it is. */
static void guest_reset(void)
{
	pci_enable();
	status_wr(0);
	event_loop();
	if (core_status() != 0)
		TRAP("status %#x after a reset", core_status());
	if (!M.pci && (M.irq_level || t_rd(0x60, 4)))
		TRAP("interrupt still pending after a reset");
	model_reset();
	memcpy(M.shadow, M.disk, DISK_SIZE);
	M.tainted = false;
	M.why[0] = '\0';
}

/* ---- the program ---- */

struct cursor {
	const uint8_t *p;
	size_t n;
};

static bool take(struct cursor *c, void *out, size_t len)
{
	if (c->n < len)
		return false;
	memcpy(out, c->p, len);
	c->p += len;
	c->n -= len;
	return true;
}

enum {
	OP_REG_WR, OP_REG_RD, OP_RAM_WR, OP_KICK, OP_BRING_UP, OP_REQ, OP_IRQ, OP_PCI_CFG,
	OP_RESET, OP_CFG_RD, OP_REQ_KICK, OP_KICK_ALL, OP_BURST, N_OPS
};

static bool step(struct cursor *c)
{
	static const uint8_t widths[] = { 4, 4, 1, 2, 4, 8, 4, 4 };
	uint8_t op, a[7];
	uint16_t off;
	uint32_t v;

	if (!take(c, &op, 1))
		return false;
	switch (op % N_OPS) {
	case OP_REG_WR: /* off16 width val32 */
		if (!take(c, a, 7))
			return false;
		memcpy(&off, a, 2);
		memcpy(&v, a + 3, 4);
		t_wr(le16toh(off) & (M.pci ? VP_BAR_SIZE - 1 : 0x1ff), widths[a[2] & 7],
		     le32toh(v) | (a[2] & 8 ? (uint64_t)le32toh(v) << 32 : 0));
		M.tainted = M.irq_unsure = true;
		break;
	case OP_REG_RD: /* off16 width */
		if (!take(c, a, 3))
			return false;
		memcpy(&off, a, 2);
		(void)t_rd(le16toh(off) & (M.pci ? VP_BAR_SIZE - 1 : 0x1ff), widths[a[2] & 7]);
		M.irq_unsure = true; /* the PCI ISR clears on read */
		break;
	case OP_RAM_WR: { /* off16 len bytes */
		uint8_t buf[16];
		uint64_t g;

		if (!take(c, a, 3) || !take(c, buf, 1 + a[2] % 16))
			return false;
		memcpy(&off, a, 2);
		off = le16toh(off) % RAM;
		g = off < BANK0 ? off : BANK1_GPA + off - BANK0;
		if (off + 1u + a[2] % 16 <= (off < BANK0 ? BANK0 : RAM))
			memcpy(gpa(g, 1 + a[2] % 16), buf, 1 + a[2] % 16);
		M.tainted = true;
		break;
	}
	case OP_KICK:
		if (!take(c, a, 1))
			return false;
		kick(a[0] % (M.n_queues + 1)); /* one past the last: ignored */
		reap_all();
		break;
	case OP_BRING_UP:
		if (!take(c, a, 2))
			return false;
		bring_up(a[0], a[1]);
		break;
	case OP_REQ:
	case OP_REQ_KICK: /* queue type sector shape */
		if (!take(c, a, 4))
			return false;
		post(a[0] % M.n_queues, a[1], a[2], a[3]);
		if (op % N_OPS == OP_REQ_KICK) {
			kick(a[0] % M.n_queues);
			reap_all();
		}
		break;
	case OP_IRQ:
		reap_all();
		break;
	case OP_PCI_CFG: /* off width val32: write if width bit 2 */
		if (!take(c, a, 6))
			return false;
		memcpy(&v, a + 2, 4);
		if (M.pci) {
			uint32_t len = 1u << (a[1] & 3);

			if (a[1] & 4) {
				cfg_wr(a[0], len > 4 ? 4 : len, le32toh(v));
				M.tainted = M.irq_unsure = true;
			} else { /* may read BAR0 through the PCI-config window */
				pci_conf_access(&M.vm, 0, (uint8_t)M.slot, 0, a[0], &v,
						len > 4 ? 4 : len, false);
				M.irq_unsure = true;
			}
		}
		break;
	case OP_RESET:
		guest_reset();
		break;
	case OP_CFG_RD: /* off width */
		if (!take(c, a, 2))
			return false;
		(void)t_rd((M.pci ? VP_DEVICE_OFF : 0x100) + a[0] % 0x48, widths[a[1] & 7]);
		break;
	case OP_KICK_ALL:
		for (unsigned q = 0; q < M.n_queues; q++)
			kick(q);
		reap_all();
		break;
	case OP_BURST: /* queue type sector shape count: a full queue, one kick */
		if (!take(c, a, 5))
			return false;
		for (unsigned i = 0; i <= a[4]; i++)
			post(a[0] % M.n_queues, a[1], (uint8_t)(a[2] + i), a[3]);
		kick(a[0] % M.n_queues);
		reap_all();
		break;
	}
	check();
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { data + 1, size - 1 };

	if (size < 1)
		return 0;
	if (!machine_up(data[0])) {
		machine_down();
		return 0;
	}
	for (unsigned i = 0; i < MAX_STEPS && step(&c); i++)
		;
	guest_reset(); /* it must come back clean */
	if (verbose)
		fprintf(stderr, "[fuzz] %s, %u completions checked\n", M.pci ? "pci" : "mmio",
			M.checked);
	machine_down();
	return 0;
}

/* ---- seeds ---- */

/* Seeds: well-formed programs the fuzzer mutates from, built here so the
 * tree holds no binary files; with FUZZ_SEED_DIR set (make fuzz-smoke sets
 * it to the corpus folder), LLVMFuzzerInitialize writes them there. */
struct seed {
	uint8_t b[512];
	size_t n;
};

static void emit(struct seed *s, unsigned n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (unsigned i = 0; i < n && s->n < sizeof(s->b); i++)
		s->b[s->n++] = (uint8_t)va_arg(ap, int);
	va_end(ap);
}

static void write_seed(const char *dir, const char *name, const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!access(path, F_OK))
		return;
	f = fopen(path, "wb");
	if (f) {
		fwrite(s->b, 1, s->n, f);
		fclose(f);
	}
}

static void seeds(const char *dir)
{
	/* conf: bit 0 PCI, 1 read-only, 2-3 queues - 1, 4 discard, 5 write
	 * zeroes, 6 flush. Bring-up: size code 7 (256) or smaller, features. */
	static const struct {
		const char *name;
		uint8_t conf, up, feat;
	} v[] = {
		{ "seed-mmio", 0x70, 7, 0xff },
		{ "seed-pci-msix", 0x71, 7, 0xff },
		{ "seed-pci-isr-2q", 0x75, 0x0b, 0x3f },
		{ "seed-mmio-ro-4q", 0x0e, 0x03, 0x63 },
	};

	for (unsigned i = 0; i < CUB_ARRAY_SIZE(v); i++) {
		struct seed s = { .n = 0 };

		emit(&s, 1, v[i].conf);
		emit(&s, 3, OP_BRING_UP, v[i].up, v[i].feat);
		emit(&s, 5, OP_REQ, 0, 1, 2, 0x05);          /* write 2 sectors at 2 */
		emit(&s, 5, OP_REQ_KICK, 0, 0, 2, 0x05);     /* read them back */
		emit(&s, 5, OP_REQ_KICK, 0, 0, 1, 0xc7);     /* indirect, status merged */
		emit(&s, 5, OP_REQ_KICK, 1, 3, 0, 0x00);     /* GET_ID */
		emit(&s, 5, OP_REQ, 0, 2, 0, 0x00);          /* FLUSH */
		emit(&s, 5, OP_REQ, 0, 5, 4, 0x01);          /* write zeroes */
		emit(&s, 5, OP_REQ_KICK, 0, 4, 8, 0x00);     /* discard */
		emit(&s, 5, OP_REQ_KICK, 0, 0, 30, 0x03);    /* read past the end */
		emit(&s, 6, OP_BURST, 0, 0, 0, 0x00, 99);    /* 100 one-sector reads */
		emit(&s, 1, OP_IRQ);
		write_seed(dir, v[i].name, &s);
	}
}

/* Each input creates and frees a device of a few hundred KiB; ASan's
 * default 256 MiB quarantine then hands out fresh, never-touched pages
 * every time, and page faults cost more than the device (3x the exec/s).
 * 16 MiB still holds the last few dozen inputs' frees, so a use after
 * free within an input is still caught. */
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
	return "quarantine_size_mb=16";
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_SEED_DIR");

	verbose = getenv("FUZZ_VERBOSE") != NULL;
	ram = malloc(RAM); /* malloc'd, so ASan guards both ends */
	if (!ram)
		abort();
	for (unsigned i = 0; i < DISK_SIZE; i++)
		disk_image[i] = (uint8_t)(i * 13 + i / 512);
	log_set_level(verbose ? CUB_LOG_DEBUG : CUB_LOG_ERR);
	if (dir)
		seeds(dir);
	return 0;
}
