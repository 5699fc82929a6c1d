/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the virtio-pci transport: a fake virtio device on PCI bus
 * 0, found through the conf1 ports and driven the way Linux's
 * virtio_pci_modern driver and its MSI-X setup drive it, with MSIs
 * recorded instead of sent to KVM. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "bus.h"
#include "cunit_main.h"
#include "fake_host.h"
#include "mem.h"
#include "msix.h"
#include "pci.h"
#include "virtio/transports.h"
#include "virtio/virtio_dev.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtqueue.h"
#include "vm.h"

/* struct virtio_pci_common_cfg */
enum {
	DFSELECT = 0x00, DF = 0x04, GFSELECT = 0x08, GF = 0x0c, MSIX_CONFIG = 0x10,
	NUMQ = 0x12, STATUS = 0x14, CFGGEN = 0x15, Q_SELECT = 0x16, Q_SIZE = 0x18,
	Q_MSIX = 0x1a, Q_ENABLE = 0x1c, Q_NOFF = 0x1e, Q_DESC = 0x20, Q_AVAIL = 0x28,
	Q_USED = 0x30,
};

#define S_ACK 1
#define S_DRIVER 2
#define S_DRIVER_OK 4
#define S_FEATURES_OK 8
#define S_NEEDS_RESET 0x40
#define NO_VECTOR 0xffff
#define MSI_ADDR 0xfee00000u

/* ---- a fake virtio device: entropy-like, two queues, 12 config bytes ---- */

struct fdev {
	unsigned starts, stops, notifies[4];
	struct cub_vq *vqs[4];
	unsigned n_vqs;
	uint8_t config[12];
};

static uint64_t f_features(void *priv)
{
	return 1ull << 5;
}

static void f_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	memcpy(buf, ((struct fdev *)priv)->config + off, len);
}

static int f_start(void *priv, struct cub_vq *const *vqs, unsigned n)
{
	struct fdev *fd = priv;

	fd->starts++;
	fd->n_vqs = n;
	for (unsigned i = 0; i < n && i < 4; i++)
		fd->vqs[i] = vqs[i];
	return 0;
}

static void f_notify(void *priv, unsigned q)
{
	if (q < 4)
		((struct fdev *)priv)->notifies[q]++;
}

static void f_stop(void *priv)
{
	struct fdev *fd = priv;

	fd->stops++;
	memset(fd->vqs, 0, sizeof(fd->vqs));
}

static const struct cub_virtio_ops fops = {
	.device_id = 4,
	.n_queues = 2,
	.queue_max = 256,
	.config_size = 12,
	.features = f_features,
	.config_read = f_config_read,
	.start = f_start,
	.notify = f_notify,
	.stop = f_stop,
};

/* ---- recorded MSIs ---- */

struct msis {
	unsigned n;
	uint64_t addr[16];
	uint32_t data[16];
};

static int rec_msi(void *arg, uint64_t addr, uint32_t data)
{
	struct msis *m = arg;

	if (m->n < 16) {
		m->addr[m->n] = addr;
		m->data[m->n] = data;
	}
	m->n++;
	return 0;
}

/* ---- the test machine ---- */

static struct fake_host fh;
static struct vm vm;
static struct fdev fdev;
static struct virtio_dev *dev;
static struct msis msis;
static unsigned slot;
static uint64_t bar;
static unsigned cap_at[6], msix_at;

static uint32_t cfg_rd(uint16_t off, uint32_t len)
{
	uint32_t v = 0, a = 0x80000000u | slot << 11 | (off & 0xfc);

	CU_ASSERT_TRUE(bus_access(&vm.pio, 0xcf8, &a, 4, true));
	CU_ASSERT_TRUE(bus_access(&vm.pio, 0xcfc + (off & 3), &v, len, false));
	return v;
}

static void cfg_wr(uint16_t off, uint32_t len, uint32_t v)
{
	uint32_t a = 0x80000000u | slot << 11 | (off & 0xfc);

	CU_ASSERT_TRUE(bus_access(&vm.pio, 0xcf8, &a, 4, true));
	CU_ASSERT_TRUE(bus_access(&vm.pio, 0xcfc + (off & 3), &v, len, true));
}

static uint64_t rd(uint64_t off, uint32_t len)
{
	uint64_t v = 0xdeadbeefdeadbeefull;

	CU_ASSERT_TRUE(bus_access(&vm.mmio, bar + off, &v, len, false));
	return len == 8 ? v : v & ((1ull << (8 * len)) - 1);
}

static void wr(uint64_t off, uint32_t len, uint64_t v)
{
	CU_ASSERT_TRUE(bus_access(&vm.mmio, bar + off, &v, len, true));
}

static void machine_up(void)
{
	static const struct mem_bank bank = { .gpa = 0, .size = 0x100000 };
	char err[256] = "";

	memset(&fdev, 0, sizeof(fdev));
	memset(&msis, 0, sizeof(msis));
	memcpy(fdev.config, "cubicle-cfg", 12);
	fake_host_init(&fh);
	memset(&vm, 0, sizeof(vm));
	vm.vm_fd = vm.kvm_fd = -1; /* no KVM: notify writes trap, MSIs recorded */
	CU_ASSERT_EQUAL_FATAL(mem_create(&vm.mem, 0x100000, &bank, 1), 0);
	bus_init(&vm.pio, "pio");
	bus_init(&vm.mmio, "mmio");
	CU_ASSERT_EQUAL_FATAL(pci_init(&vm, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(pci_conf1_attach(&vm, err, sizeof(err)), 0);
	dev = virtio_dev_new(fake_inst(&fh), &vm, &fops, &fdev);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
	dev->host = &fh.ops;
	CU_ASSERT_EQUAL_FATAL(virtio_pci_attach(dev, err, sizeof(err)), 0);
	virtio_pci_set_msi(dev, rec_msi, &msis);
	slot = 0;
	bar = 0;
}

static void machine_down(void)
{
	virtio_dev_free(dev);
	dev = NULL;
	pci_destroy(&vm);
	CU_ASSERT_EQUAL(vm.mmio.n, 0);
	CU_ASSERT_EQUAL(vm.pio.n, 0);
	bus_free(&vm.pio);
	bus_free(&vm.mmio);
	mem_destroy(&vm.mem);
	fake_host_fini(&fh);
}

/* Linux's pci_scan_slot and virtio_pci_find_capability: find the device,
 * walk its list, size and enable BAR0. */
static void probe(void)
{
	uint32_t bar0;

	for (slot = 0; slot < 32; slot++)
		if (cfg_rd(0, 2) == VIRTIO_PCI_VENDOR)
			break;
	CU_ASSERT_EQUAL_FATAL(slot, 1);
	memset(cap_at, 0, sizeof(cap_at));
	msix_at = 0;
	for (unsigned pos = cfg_rd(PCI_CAP_PTR, 1), n = 0; pos && n < 48; n++) {
		uint8_t id = (uint8_t)cfg_rd((uint16_t)pos, 1);

		if (id == PCI_CAP_ID_VNDR) {
			uint8_t type = (uint8_t)cfg_rd((uint16_t)pos + 3, 1);

			CU_ASSERT_FATAL(type >= 1 && type <= 5);
			CU_ASSERT_EQUAL(cfg_rd((uint16_t)pos + 4, 1), 0); /* BAR0 */
			cap_at[type] = pos;
		} else if (id == PCI_CAP_ID_MSIX) {
			msix_at = pos;
		}
		pos = cfg_rd((uint16_t)pos + 1, 1);
	}
	for (unsigned t = 1; t <= 5; t++)
		CU_ASSERT_NOT_EQUAL_FATAL(cap_at[t], 0);
	CU_ASSERT_NOT_EQUAL_FATAL(msix_at, 0);

	bar0 = cfg_rd(PCI_BAR0, 4);
	cfg_wr(PCI_BAR0, 4, 0xffffffff);
	CU_ASSERT_EQUAL(cfg_rd(PCI_BAR0, 4), (uint32_t)~(VP_BAR_SIZE - 1));
	cfg_wr(PCI_BAR0, 4, bar0);
	cfg_wr(PCI_COMMAND, 2, PCI_CMD_MEMORY | PCI_CMD_MASTER);
	bar = bar0 & ~0xfull;
}

/* msix_capability_init: enable with everything masked, fill the table,
 * lift the function mask, then unmask each vector as request_irq does. */
static void msix_setup(unsigned n)
{
	cfg_wr((uint16_t)msix_at + 2, 2, MSIX_FLAGS_ENABLE | MSIX_FLAGS_MASKALL);
	for (unsigned v = 0; v < n; v++) {
		wr(VP_MSIX_TABLE_OFF + 16 * v, 4, MSI_ADDR);
		wr(VP_MSIX_TABLE_OFF + 16 * v + 4, 4, 0);
		wr(VP_MSIX_TABLE_OFF + 16 * v + 8, 4, 0x40 + v);
	}
	cfg_wr((uint16_t)msix_at + 2, 2, MSIX_FLAGS_ENABLE);
	for (unsigned v = 0; v < n; v++)
		wr(VP_MSIX_TABLE_OFF + 16 * v + 12, 4, 0);
}

#define DESC_GPA 0x1000
#define AVAIL_GPA 0x2000
#define USED_GPA 0x3000
#define Q_STRIDE 0x4000

static const uint64_t all_features = (1ull << 5) | (1ull << VIRTIO_F_VERSION_1) |
				     (1ull << VIRTIO_F_EVENT_IDX) |
				     (1ull << VIRTIO_F_INDIRECT_DESC);

/* vp_modern_probe + virtio_dev_probe + vp_modern_find_vqs, per-vq vectors. */
static void linux_bring_up(void)
{
	wr(STATUS, 1, 0);
	CU_ASSERT_EQUAL(rd(STATUS, 1), 0);
	wr(STATUS, 1, S_ACK);
	wr(STATUS, 1, S_ACK | S_DRIVER);
	wr(DFSELECT, 4, 0);
	CU_ASSERT_EQUAL(rd(DF, 4), (uint32_t)all_features);
	wr(DFSELECT, 4, 1);
	CU_ASSERT_EQUAL(rd(DF, 4), (uint32_t)(all_features >> 32));
	wr(GFSELECT, 4, 0);
	wr(GF, 4, (uint32_t)all_features);
	wr(GFSELECT, 4, 1);
	wr(GF, 4, (uint32_t)(all_features >> 32));
	CU_ASSERT_EQUAL(rd(GF, 4), 1);
	wr(STATUS, 1, S_ACK | S_DRIVER | S_FEATURES_OK);
	CU_ASSERT_EQUAL(rd(STATUS, 1), S_ACK | S_DRIVER | S_FEATURES_OK);

	msix_setup(3);
	wr(MSIX_CONFIG, 2, 0);
	CU_ASSERT_EQUAL(rd(MSIX_CONFIG, 2), 0);
	CU_ASSERT_EQUAL(rd(NUMQ, 2), 2);
	for (unsigned q = 0; q < 2; q++) {
		uint64_t base = q * Q_STRIDE;

		wr(Q_SELECT, 2, q);
		CU_ASSERT_EQUAL(rd(Q_SIZE, 2), 256);
		CU_ASSERT_EQUAL(rd(Q_ENABLE, 2), 0);
		wr(Q_SIZE, 2, 128);
		/* vp_iowrite64_twopart: low dword, then high */
		wr(Q_DESC, 4, DESC_GPA + base);
		wr(Q_DESC + 4, 4, 0);
		wr(Q_AVAIL, 4, AVAIL_GPA + base);
		wr(Q_AVAIL + 4, 4, 0);
		wr(Q_USED, 4, USED_GPA + base);
		wr(Q_USED + 4, 4, 0);
		CU_ASSERT_EQUAL(rd(Q_NOFF, 2), q);
		wr(Q_MSIX, 2, q + 1);
		CU_ASSERT_EQUAL(rd(Q_MSIX, 2), q + 1);
	}
	for (unsigned q = 0; q < 2; q++) {
		wr(Q_SELECT, 2, q);
		wr(Q_ENABLE, 2, 1);
		CU_ASSERT_EQUAL(rd(Q_ENABLE, 2), 1);
	}
	wr(STATUS, 1, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	CU_ASSERT_EQUAL(rd(STATUS, 1), S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
}

static void test_identity(void)
{
	uint32_t notify_mult, table, pba;

	machine_up();
	probe();
	CU_ASSERT_EQUAL(cfg_rd(PCI_DEVICE_ID, 2), 0x1044);
	CU_ASSERT_EQUAL(cfg_rd(PCI_REVISION_ID, 1), 1);
	CU_ASSERT_EQUAL(cfg_rd(PCI_SUBSYS_VENDOR, 2), VIRTIO_PCI_VENDOR);
	CU_ASSERT(cfg_rd(PCI_SUBSYS_ID, 2) >= 0x40);
	CU_ASSERT_EQUAL(cfg_rd(PCI_REVISION_ID, 4) >> 8, 0xff0000);
	CU_ASSERT_EQUAL(cfg_rd(PCI_INT_PIN, 1), 0);
	CU_ASSERT(cfg_rd(PCI_STATUS, 2) & PCI_STATUS_CAP);

	/* Each structure where its capability says, long enough for Linux. */
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[1] + 8, 4), VP_COMMON_OFF);
	CU_ASSERT(cfg_rd((uint16_t)cap_at[1] + 12, 4) >= 0x38);
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[3] + 8, 4), VP_ISR_OFF);
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[3] + 12, 4), 1);
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[4] + 8, 4), VP_DEVICE_OFF);
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[4] + 12, 4), 12);
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[2] + 2, 1), 20);
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[2] + 8, 4), VP_NOTIFY_OFF);
	CU_ASSERT(cfg_rd((uint16_t)cap_at[2] + 12, 4) >= 2 * 4);
	notify_mult = cfg_rd((uint16_t)cap_at[2] + 16, 4);
	CU_ASSERT_EQUAL(notify_mult, 4);
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)cap_at[5] + 2, 1), 20);

	/* MSI-X: 3 vectors (2 queues + config), table and PBA in BAR0. */
	CU_ASSERT_EQUAL(cfg_rd((uint16_t)msix_at + 2, 2), 2);
	table = cfg_rd((uint16_t)msix_at + 4, 4);
	pba = cfg_rd((uint16_t)msix_at + 8, 4);
	CU_ASSERT_EQUAL(table, VP_MSIX_TABLE_OFF);
	CU_ASSERT_EQUAL(pba, VP_MSIX_PBA_OFF);
	/* Vectors come up masked. */
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF + 12, 4), MSIX_CTRL_MASKED);
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF + 2 * 16 + 12, 4), MSIX_CTRL_MASKED);

	/* Device config through its window; past the end reads 0. */
	CU_ASSERT_EQUAL(rd(VP_DEVICE_OFF + 8, 4), 0x00676663); /* "cfg\0" */
	CU_ASSERT_EQUAL(rd(VP_DEVICE_OFF + 12, 4), 0);
	CU_ASSERT_EQUAL(rd(CFGGEN, 1), 0);
	machine_down();
}

static void test_bring_up_and_interrupts(void)
{
	struct cub_vq_chain *c = calloc(1, sizeof(*c));
	uint8_t desc[16] = { 0 };
	uint64_t addr = 0x8000;
	uint32_t len = 64;
	uint16_t flags = 2, one = 1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	machine_up();
	probe();
	linux_bring_up();
	CU_ASSERT_EQUAL(fdev.starts, 1);
	CU_ASSERT_EQUAL(fdev.n_vqs, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fdev.vqs[0]);
	CU_ASSERT_PTR_NOT_NULL(fdev.vqs[1]);

	/* vp_notify: a 16-bit write of the index at notify_off * multiplier. */
	wr(VP_NOTIFY_OFF + 4 * 1, 2, 1);
	wr(VP_NOTIFY_OFF, 2, 0);
	CU_ASSERT_EQUAL(fdev.notifies[0], 1);
	CU_ASSERT_EQUAL(fdev.notifies[1], 1);

	/* A used buffer on queue 0 fires its vector, 1. */
	memcpy(desc, &addr, 8);
	memcpy(desc + 8, &len, 4);
	memcpy(desc + 12, &flags, 2);
	mem_write(&vm.mem, DESC_GPA, desc, 16);
	mem_write(&vm.mem, AVAIL_GPA + 2, &one, 2);
	CU_ASSERT_EQUAL(virtio_host.pop(fdev.vqs[0], c), 1);
	virtio_host.push(fdev.vqs[0], c, 64);
	virtio_host.notify(fdev.vqs[0]);
	CU_ASSERT_EQUAL(msis.n, 1);
	CU_ASSERT_EQUAL(msis.addr[0], MSI_ADDR);
	CU_ASSERT_EQUAL(msis.data[0], 0x41);
	/* With MSI-X the ISR's queue bit stays clear. */
	CU_ASSERT_EQUAL(rd(VP_ISR_OFF, 1), 0);

	/* Config change: vector 0, and the ISR config bit, read to clear. */
	dev->tops->interrupt(dev->tpriv, -1);
	CU_ASSERT_EQUAL(msis.n, 2);
	CU_ASSERT_EQUAL(msis.data[1], 0x40);
	CU_ASSERT_EQUAL(rd(VP_ISR_OFF, 1), 2);
	CU_ASSERT_EQUAL(rd(VP_ISR_OFF, 1), 0);

	/* A vector the table lacks reads back as NO_VECTOR; none fires. */
	wr(Q_SELECT, 2, 1);
	wr(Q_MSIX, 2, 3);
	CU_ASSERT_EQUAL(rd(Q_MSIX, 2), NO_VECTOR);
	dev->tops->interrupt(dev->tpriv, 1);
	CU_ASSERT_EQUAL(msis.n, 2);
	wr(MSIX_CONFIG, 2, 0x7fff);
	CU_ASSERT_EQUAL(rd(MSIX_CONFIG, 2), NO_VECTOR);

	/* Reset: the device stops, vectors are forgotten. */
	wr(STATUS, 1, 0);
	CU_ASSERT_EQUAL(rd(STATUS, 1), 0);
	CU_ASSERT_EQUAL(fdev.stops, 1);
	CU_ASSERT_EQUAL(rd(MSIX_CONFIG, 2), NO_VECTOR);
	wr(Q_SELECT, 2, 0);
	CU_ASSERT_EQUAL(rd(Q_MSIX, 2), NO_VECTOR);
	CU_ASSERT_EQUAL(rd(Q_ENABLE, 2), 0);
	CU_ASSERT_EQUAL(rd(Q_SIZE, 2), 256);
	machine_down();
	free(c);
}

static void test_msix_masking(void)
{
	machine_up();
	probe();
	linux_bring_up();

	/* Per-vector mask: the message waits in the PBA. */
	wr(VP_MSIX_TABLE_OFF + 16 * 2 + 12, 4, MSIX_CTRL_MASKED);
	dev->tops->interrupt(dev->tpriv, 1);
	CU_ASSERT_EQUAL(msis.n, 0);
	CU_ASSERT_EQUAL(rd(VP_MSIX_PBA_OFF, 8), 1u << 2);
	CU_ASSERT_EQUAL(rd(VP_MSIX_PBA_OFF, 4), 1u << 2);
	wr(VP_MSIX_PBA_OFF, 8, 0); /* read-only */
	CU_ASSERT_EQUAL(rd(VP_MSIX_PBA_OFF, 4), 1u << 2);
	/* Unmasking sends it and clears the bit. */
	wr(VP_MSIX_TABLE_OFF + 16 * 2 + 12, 4, 0);
	CU_ASSERT_EQUAL(msis.n, 1);
	CU_ASSERT_EQUAL(msis.data[0], 0x42);
	CU_ASSERT_EQUAL(rd(VP_MSIX_PBA_OFF, 4), 0);

	/* The function mask holds every vector; lifting it releases them. */
	cfg_wr((uint16_t)msix_at + 2, 2, MSIX_FLAGS_ENABLE | MSIX_FLAGS_MASKALL);
	dev->tops->interrupt(dev->tpriv, 0);
	dev->tops->interrupt(dev->tpriv, -1);
	CU_ASSERT_EQUAL(msis.n, 1);
	CU_ASSERT_EQUAL(rd(VP_MSIX_PBA_OFF, 4), 3);
	/* A qword write of data + control while masked: new data is used. */
	wr(VP_MSIX_TABLE_OFF + 8, 8, 0x55);
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF + 8, 4), 0x55);
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF + 12, 4), 0);
	cfg_wr((uint16_t)msix_at + 2, 2, MSIX_FLAGS_ENABLE);
	CU_ASSERT_EQUAL(msis.n, 3);
	CU_ASSERT_EQUAL(msis.data[1], 0x55);
	CU_ASSERT_EQUAL(msis.data[2], 0x41);
	CU_ASSERT_EQUAL(rd(VP_MSIX_PBA_OFF, 4), 0);

	/* MSI-X off: nothing is sent; the ISR carries both causes. */
	cfg_wr((uint16_t)msix_at + 2, 2, 0);
	dev->tops->interrupt(dev->tpriv, 0);
	dev->tops->interrupt(dev->tpriv, -1);
	CU_ASSERT_EQUAL(msis.n, 3);
	CU_ASSERT_EQUAL(rd(VP_ISR_OFF, 1), 3);
	CU_ASSERT_EQUAL(rd(VP_ISR_OFF, 4), 0);
	machine_down();
}

static void test_cfg_window(void)
{
	uint16_t c;

	machine_up();
	probe();
	c = (uint16_t)cap_at[VIRTIO_PCI_CAP_PCI_CFG];
	/* Read num_queues through VIRTIO_PCI_CAP_PCI_CFG. */
	cfg_wr(c + 4, 1, 0);
	cfg_wr(c + 8, 4, 0x12);
	cfg_wr(c + 12, 4, 2);
	CU_ASSERT_EQUAL(cfg_rd(c + 16, 2), 2);
	/* Write queue_select through it, see it in BAR0. */
	cfg_wr(c + 8, 4, 0x16);
	cfg_wr(c + 16, 2, 1);
	CU_ASSERT_EQUAL(rd(Q_SELECT, 2), 1);
	/* Bad BAR, length or alignment: ignored. */
	cfg_wr(c + 4, 1, 1);
	cfg_wr(c + 16, 2, 0);
	CU_ASSERT_EQUAL(rd(Q_SELECT, 2), 1);
	cfg_wr(c + 4, 1, 0);
	cfg_wr(c + 12, 4, 3);
	cfg_wr(c + 16, 2, 0);
	CU_ASSERT_EQUAL(rd(Q_SELECT, 2), 1);
	cfg_wr(c + 12, 4, 2);
	cfg_wr(c + 8, 4, 0x17);
	cfg_wr(c + 16, 2, 0);
	CU_ASSERT_EQUAL(rd(Q_SELECT, 2), 1);
	cfg_wr(c + 8, 4, 0xfffffffe);
	cfg_wr(c + 16, 2, 0);
	CU_ASSERT_EQUAL(cfg_rd(c + 16, 2), 0);
	/* The capability's header is read-only. */
	cfg_wr(c, 4, 0);
	CU_ASSERT_EQUAL(cfg_rd(c, 1), PCI_CAP_ID_VNDR);
	CU_ASSERT_EQUAL(cfg_rd(c + 3, 1), VIRTIO_PCI_CAP_PCI_CFG);
	machine_down();
}

static void test_hostile(void)
{
	machine_up();
	probe();
	/* Wrong widths on the common structure: read 0, writes dropped. */
	CU_ASSERT_EQUAL(rd(NUMQ, 4), 0);
	CU_ASSERT_EQUAL(rd(DF, 2), 0);
	CU_ASSERT_EQUAL(rd(STATUS, 2), 0);
	wr(STATUS, 4, S_ACK);
	CU_ASSERT_EQUAL(rd(STATUS, 1), 0);
	CU_ASSERT_EQUAL(rd(Q_DESC + 2, 4), 0);
	CU_ASSERT_EQUAL(rd(0x36, 2), 0);
	/* A queue the device lacks: reads 0, writes go nowhere. */
	wr(Q_SELECT, 2, 0xffff);
	CU_ASSERT_EQUAL(rd(Q_SIZE, 2), 0);
	wr(Q_ENABLE, 2, 1);
	CU_ASSERT_EQUAL(rd(Q_ENABLE, 2), 0);
	wr(Q_DESC, 8, 0x1000);
	CU_ASSERT_EQUAL(rd(Q_DESC, 8), 0);
	wr(Q_MSIX, 2, 1);
	CU_ASSERT_EQUAL(rd(Q_MSIX, 2), 0);
	/* A whole qword to a 64-bit field works too. */
	wr(Q_SELECT, 2, 0);
	wr(Q_DESC, 8, 0x123456789000ull);
	CU_ASSERT_EQUAL(rd(Q_DESC, 8), 0x123456789000ull);
	CU_ASSERT_EQUAL(rd(Q_DESC + 4, 4), 0x1234);
	/* Frozen once enabled. */
	wr(Q_ENABLE, 2, 1);
	wr(Q_SIZE, 2, 4);
	CU_ASSERT_EQUAL(rd(Q_SIZE, 2), 256);
	/* Notifies before DRIVER_OK, off the grid, past the queues: nothing. */
	wr(VP_NOTIFY_OFF, 2, 0);
	wr(VP_NOTIFY_OFF + 2, 2, 0);
	wr(VP_NOTIFY_OFF + 4 * 7, 2, 7);
	CU_ASSERT_EQUAL(fdev.notifies[0] + fdev.notifies[1], 0);
	/* MSI-X table: misaligned and odd sizes, past the table. */
	wr(VP_MSIX_TABLE_OFF + 2, 4, 0xffffffff);
	wr(VP_MSIX_TABLE_OFF + 8, 2, 0xffff);
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF, 4), 0);
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF + 8, 4), 0);
	wr(VP_MSIX_TABLE_OFF + 16 * 3, 4, 1);
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF + 16 * 3, 4), 0);
	wr(VP_MSIX_TABLE_OFF, 4, 0xfee00003); /* address bits 1:0 are zero */
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF, 4), MSI_ADDR);
	wr(VP_MSIX_TABLE_OFF + 12, 4, 0xfffffffe); /* reserved bits: 0 */
	CU_ASSERT_EQUAL(rd(VP_MSIX_TABLE_OFF + 12, 4), 0);
	/* The last bytes of the BAR and the gaps between structures. */
	CU_ASSERT_EQUAL(rd(VP_BAR_SIZE - 8, 8), 0);
	CU_ASSERT_EQUAL(rd(VP_ISR_OFF + 4, 4), 0);
	CU_ASSERT_EQUAL(rd(VP_COMMON_LEN, 4), 0);
	/* Oversized queue: DRIVER_OK leaves the device needing a reset. */
	wr(STATUS, 1, 0);
	wr(STATUS, 1, S_ACK | S_DRIVER);
	wr(GFSELECT, 4, 1);
	wr(GF, 4, 1);
	wr(STATUS, 1, S_ACK | S_DRIVER | S_FEATURES_OK);
	wr(Q_SELECT, 2, 0);
	wr(Q_SIZE, 2, 1024);
	wr(Q_ENABLE, 2, 1);
	wr(STATUS, 1, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	CU_ASSERT(rd(STATUS, 1) & S_NEEDS_RESET);
	CU_ASSERT_EQUAL(fdev.starts, 0);
	machine_down();
}

/* Teardown in either order: the bus first (arch_vm_destroy before the
 * device), or the device first (a failed create). */
static void test_teardown_orders(void)
{
	machine_up();
	probe();
	pci_destroy(&vm);
	CU_ASSERT_EQUAL(vm.mmio.n, 0);
	virtio_dev_free(dev);
	dev = NULL;
	bus_free(&vm.pio);
	bus_free(&vm.mmio);
	mem_destroy(&vm.mem);
	fake_host_fini(&fh);

	machine_up();
	probe();
	virtio_dev_free(dev);
	dev = NULL;
	/* The function is gone from the bus. */
	CU_ASSERT_EQUAL(cfg_rd(0, 4), 0xffffffff);
	CU_ASSERT_EQUAL(vm.mmio.n, 0);
	pci_destroy(&vm);
	bus_free(&vm.pio);
	bus_free(&vm.mmio);
	mem_destroy(&vm.mem);
	fake_host_fini(&fh);
}

static void test_no_bus(void)
{
	static const struct cub_virtio_ops big = {
		.device_id = 4, .n_queues = 2, .queue_max = 256, .config_size = 0x2000,
		.features = f_features, .config_read = f_config_read, .start = f_start,
		.notify = f_notify, .stop = f_stop,
	};
	struct virtio_dev *d;
	char err[256] = "";

	machine_up();
	/* Config space larger than the BAR window: refused, nothing left. */
	d = virtio_dev_new(fake_inst(&fh), &vm, &big, &fdev);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	d->host = &fh.ops;
	CU_ASSERT_EQUAL(virtio_pci_attach(d, err, sizeof(err)), -EINVAL);
	virtio_dev_free(d);
	machine_down();

	/* A machine without PCI. */
	memset(&vm, 0, sizeof(vm));
	fake_host_init(&fh);
	d = virtio_dev_new(fake_inst(&fh), &vm, &fops, &fdev);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	d->host = &fh.ops;
	CU_ASSERT_EQUAL(virtio_pci_attach(d, err, sizeof(err)), -ENODEV);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "PCI"));
	virtio_dev_free(d);
	fake_host_fini(&fh);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "identity and capability walk", test_identity },
		{ "Linux bring-up, notify, MSI-X delivery, reset", test_bring_up_and_interrupts },
		{ "MSI-X masking, pending bits, ISR fallback", test_msix_masking },
		{ "PCI config access capability", test_cfg_window },
		{ "hostile driver", test_hostile },
		{ "teardown in either order", test_teardown_orders },
		{ "refusals", test_no_bus },
		{ NULL, NULL },
	};
	uint64_t win_base, win_size;

	/* The PCI core needs the arch's BAR window; arm64 has no PCI yet. */
	arch_pci_window(&win_base, &win_size);
	if (!win_size) {
		printf("no PCI window on %s: skipped\n", arch_name);
		return 77;
	}

	return cu_run("virtio-pci", tests);
}
