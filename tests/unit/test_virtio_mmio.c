/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the virtio core through the virtio-mmio register file: a
 * fake device behind it, a fake host for placement and the interrupt line,
 * and register accesses made through a real bus the way Linux's
 * virtio_mmio driver makes them. */
#include <errno.h>
#include <string.h>

#include "bus.h"
#include "cunit_main.h"
#include "fake_host.h"
#include "mem.h"
#include "virtio/transports.h"
#include "virtio/virtio_dev.h"
#include "virtio/virtqueue.h"
#include "vm.h"

enum {
	MAGIC = 0x000, VERSION = 0x004, DEVICE_ID = 0x008, VENDOR_ID = 0x00c,
	DEV_FEATURES = 0x010, DEV_FEATURES_SEL = 0x014,
	DRV_FEATURES = 0x020, DRV_FEATURES_SEL = 0x024,
	QUEUE_SEL = 0x030, QUEUE_NUM_MAX = 0x034, QUEUE_NUM = 0x038, QUEUE_READY = 0x044,
	QUEUE_NOTIFY = 0x050, INT_STATUS = 0x060, INT_ACK = 0x064, STATUS = 0x070,
	DESC_LO = 0x080, DESC_HI = 0x084, DRIVER_LO = 0x090, DRIVER_HI = 0x094,
	DEVICE_LO = 0x0a0, DEVICE_HI = 0x0a4, SHM_LEN_LO = 0x0b0, CONFIG_GEN = 0x0fc,
	CONFIG = 0x100,
};

#define S_ACK 1
#define S_DRIVER 2
#define S_DRIVER_OK 4
#define S_FEATURES_OK 8
#define S_NEEDS_RESET 0x40

#define DEV_FEATURE_BIT 5 /* the fake device offers bit 5 */

/* ---- a fake virtio device ---- */

struct fdev {
	int set_features_ret;
	uint64_t features_seen;
	unsigned starts, stops, notifies[4];
	int start_ret;
	struct cub_vq *vqs[4];
	unsigned n_vqs;
	uint8_t config[12];
	uint32_t last_write_off, last_write_len;
};

static uint64_t f_features(void *priv)
{
	/* bit 33 is a transport bit the core does not implement: never offered */
	return (1ull << DEV_FEATURE_BIT) | (1ull << 33);
}

static int f_set_features(void *priv, uint64_t f)
{
	struct fdev *fd = priv;

	fd->features_seen = f;
	return fd->set_features_ret;
}

static void f_config_read(void *priv, uint32_t off, void *buf, uint32_t len)
{
	struct fdev *fd = priv;

	CU_ASSERT_FATAL(off + len <= sizeof(fd->config));
	memcpy(buf, fd->config + off, len);
}

static void f_config_write(void *priv, uint32_t off, const void *buf, uint32_t len)
{
	struct fdev *fd = priv;

	CU_ASSERT_FATAL(off + len <= sizeof(fd->config));
	memcpy(fd->config + off, buf, len);
	fd->last_write_off = off;
	fd->last_write_len = len;
}

static int f_start(void *priv, struct cub_vq *const *vqs, unsigned n)
{
	struct fdev *fd = priv;

	fd->starts++;
	fd->n_vqs = n;
	for (unsigned i = 0; i < n && i < 4; i++)
		fd->vqs[i] = vqs[i];
	return fd->start_ret;
}

static void f_notify(void *priv, unsigned q)
{
	struct fdev *fd = priv;

	if (q < 4)
		fd->notifies[q]++;
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
	.config_size = sizeof(((struct fdev *)0)->config),
	.features = f_features,
	.set_features = f_set_features,
	.config_read = f_config_read,
	.config_write = f_config_write,
	.start = f_start,
	.notify = f_notify,
	.stop = f_stop,
};

/* ---- the test machine: guest RAM, a bus, the fake host ---- */

static struct fake_host fh;
static struct vm vm;
static struct bus bus;
static struct fdev fdev;
static struct virtio_dev *dev;
static uint64_t base;
static int irq;

static uint32_t rd(uint64_t off)
{
	uint32_t v = 0xdeadbeef;

	CU_ASSERT_TRUE(bus_access(&bus, base + off, &v, 4, false));
	return v;
}

static void wr(uint64_t off, uint32_t v)
{
	CU_ASSERT_TRUE(bus_access(&bus, base + off, &v, 4, true));
}

static void machine_up(void)
{
	static const struct mem_bank bank = { .gpa = 0, .size = 0x100000 };
	char err[256] = "";

	memset(&fdev, 0, sizeof(fdev));
	memcpy(fdev.config, "cubicle-cfg", 12);
	fake_host_init(&fh);
	memset(&vm, 0, sizeof(vm));
	vm.vm_fd = vm.kvm_fd = -1; /* no KVM: QueueNotify writes trap */
	CU_ASSERT_EQUAL_FATAL(mem_create(&vm.mem, 0x100000, &bank, 1), 0);
	bus_init(&bus, "mmio");
	dev = virtio_dev_new(fake_inst(&fh), &vm, &fops, &fdev);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
	dev->host = &fh.ops;
	CU_ASSERT_EQUAL_FATAL(virtio_mmio_attach(dev, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(fh.n_regions, 1);
	CU_ASSERT_STRING_EQUAL(fh.regions[0].class, "virtio-mmio");
	CU_ASSERT_EQUAL(fh.regions[0].len, 0x200);
	CU_ASSERT_EQUAL(fh.regions[0].bus, CUB_BUS_MMIO);
	base = fh.regions[0].base;
	irq = fh.regions[0].irq;
	CU_ASSERT_FATAL(irq >= 0 && irq < FAKE_MAX_IRQS);
	CU_ASSERT_EQUAL_FATAL(bus_add(&bus, base, fh.regions[0].len, fh.regions[0].io,
				      fh.regions[0].priv, "virtio-mmio"), 0);
}

static void machine_down(void)
{
	virtio_dev_free(dev);
	dev = NULL;
	bus_free(&bus);
	mem_destroy(&vm.mem);
	fake_host_fini(&fh);
}

#define DESC_GPA 0x1000
#define AVAIL_GPA 0x2000
#define USED_GPA 0x3000

/* Linux's virtio_mmio probe and virtio_dev_probe, up to FEATURES_OK. */
static void driver_features(uint64_t accept)
{
	wr(STATUS, 0);
	CU_ASSERT_EQUAL(rd(STATUS), 0);
	wr(STATUS, S_ACK);
	wr(STATUS, S_ACK | S_DRIVER);
	wr(DRV_FEATURES_SEL, 0);
	wr(DRV_FEATURES, (uint32_t)accept);
	wr(DRV_FEATURES_SEL, 1);
	wr(DRV_FEATURES, (uint32_t)(accept >> 32));
	wr(STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
}

static void setup_queue(unsigned q, uint32_t num, uint64_t desc, uint64_t avail, uint64_t used)
{
	wr(QUEUE_SEL, q);
	CU_ASSERT_EQUAL(rd(QUEUE_READY), 0);
	CU_ASSERT_EQUAL(rd(QUEUE_NUM_MAX), 256);
	wr(QUEUE_NUM, num);
	wr(DESC_LO, (uint32_t)desc);
	wr(DESC_HI, (uint32_t)(desc >> 32));
	wr(DRIVER_LO, (uint32_t)avail);
	wr(DRIVER_HI, (uint32_t)(avail >> 32));
	wr(DEVICE_LO, (uint32_t)used);
	wr(DEVICE_HI, (uint32_t)(used >> 32));
	wr(QUEUE_READY, 1);
	CU_ASSERT_EQUAL(rd(QUEUE_READY), 1);
}

static const uint64_t all_features = (1ull << DEV_FEATURE_BIT) | (1ull << VIRTIO_F_VERSION_1) |
				     (1ull << VIRTIO_F_EVENT_IDX) |
				     (1ull << VIRTIO_F_INDIRECT_DESC);

static void test_identity(void)
{
	uint8_t b;
	uint16_t h;

	machine_up();
	CU_ASSERT_EQUAL(rd(MAGIC), 0x74726976);
	CU_ASSERT_EQUAL(rd(VERSION), 2);
	CU_ASSERT_EQUAL(rd(DEVICE_ID), 4);
	CU_ASSERT_EQUAL(rd(VENDOR_ID), 0x49425543);
	CU_ASSERT_EQUAL(rd(SHM_LEN_LO), 0xffffffff);
	CU_ASSERT_EQUAL(rd(CONFIG_GEN), 0);
	/* features: device bit 5, the core's 28, 29 and 32; never bit 33 */
	wr(DEV_FEATURES_SEL, 0);
	CU_ASSERT_EQUAL(rd(DEV_FEATURES), (uint32_t)all_features);
	wr(DEV_FEATURES_SEL, 1);
	CU_ASSERT_EQUAL(rd(DEV_FEATURES), (uint32_t)(all_features >> 32));
	wr(DEV_FEATURES_SEL, 2);
	CU_ASSERT_EQUAL(rd(DEV_FEATURES), 0);
	/* registers are 32-bit: narrow accesses read 0 and writes are dropped */
	b = 0xff;
	CU_ASSERT_TRUE(bus_access(&bus, base + MAGIC, &b, 1, false));
	CU_ASSERT_EQUAL(b, 0);
	b = S_ACK;
	CU_ASSERT_TRUE(bus_access(&bus, base + STATUS, &b, 1, true));
	CU_ASSERT_EQUAL(rd(STATUS), 0);
	CU_ASSERT_EQUAL(rd(MAGIC + 2), 0); /* misaligned */
	/* config space: any width, bounds-checked */
	CU_ASSERT_TRUE(bus_access(&bus, base + CONFIG + 1, &b, 1, false));
	CU_ASSERT_EQUAL(b, 'u');
	CU_ASSERT_TRUE(bus_access(&bus, base + CONFIG + 2, &h, 2, false));
	CU_ASSERT_EQUAL(memcmp(&h, "bi", 2), 0);
	CU_ASSERT_EQUAL(rd(CONFIG + 8), 0x00676663); /* "cfg\0" */
	CU_ASSERT_EQUAL(rd(CONFIG + 12), 0);         /* past the end */
	CU_ASSERT_EQUAL(rd(CONFIG + 10), 0);         /* straddles the end */
	CU_ASSERT_EQUAL(rd(CONFIG + 0xfc), 0);
	wr(CONFIG + 4, 0x21212121);
	CU_ASSERT_EQUAL(fdev.last_write_off, 4);
	CU_ASSERT_EQUAL(fdev.last_write_len, 4);
	CU_ASSERT_EQUAL(memcmp(fdev.config, "cubi!!!!cfg", 12), 0);
	wr(CONFIG + 10, 0x42424242); /* straddles: dropped */
	CU_ASSERT_EQUAL(memcmp(fdev.config, "cubi!!!!cfg", 12), 0);
	machine_down();
}

static void test_bring_up(void)
{
	struct cub_vq_chain *c = calloc(1, sizeof(*c));
	struct cub_vq *vq;
	uint8_t desc[16] = { 0 };
	uint64_t addr = 0x8000;
	uint32_t len = 64;
	uint16_t flags = 2, one = 1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	machine_up();
	driver_features(all_features);
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER | S_FEATURES_OK);
	CU_ASSERT_EQUAL(fdev.features_seen, all_features);
	wr(DRV_FEATURES_SEL, 0);
	wr(DRV_FEATURES, 0); /* after FEATURES_OK: ignored */
	CU_ASSERT_EQUAL(virtio_dev_get_driver_features(dev, 0), (uint32_t)all_features);

	setup_queue(0, 128, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(QUEUE_SEL, 2); /* no such queue */
	CU_ASSERT_EQUAL(rd(QUEUE_NUM_MAX), 0);
	wr(QUEUE_READY, 1);
	CU_ASSERT_EQUAL(rd(QUEUE_READY), 0);
	CU_ASSERT_EQUAL(fdev.starts, 0);
	wr(STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	CU_ASSERT_EQUAL(fdev.starts, 1);
	CU_ASSERT_EQUAL(fdev.n_vqs, 2);
	CU_ASSERT_PTR_NOT_NULL(fdev.vqs[0]);
	CU_ASSERT_PTR_NULL(fdev.vqs[1]); /* the driver did not enable queue 1 */

	/* Queue registers are frozen once running. */
	wr(QUEUE_SEL, 0);
	wr(QUEUE_NUM, 4);
	CU_ASSERT_EQUAL(virtio_dev_queue(dev, 0)->size, 128);

	/* Kicks: only for live queues. */
	wr(QUEUE_NOTIFY, 0);
	wr(QUEUE_NOTIFY, 1);
	wr(QUEUE_NOTIFY, 7);
	wr(QUEUE_NOTIFY, 0xffffffff);
	CU_ASSERT_EQUAL(fdev.notifies[0], 1);
	CU_ASSERT_EQUAL(fdev.notifies[1], 0);

	/* The guest posts one writable buffer; the device fills it and
	 * interrupts; the driver reads and acknowledges InterruptStatus. */
	vq = fdev.vqs[0];
	memcpy(desc, &addr, 8);
	memcpy(desc + 8, &len, 4);
	memcpy(desc + 12, &flags, 2);
	mem_write(&vm.mem, DESC_GPA, desc, 16);
	mem_write(&vm.mem, AVAIL_GPA + 2, &one, 2);
	CU_ASSERT_EQUAL(virtio_host.pop(vq, c), 1);
	CU_ASSERT_EQUAL(c->n_in, 1);
	CU_ASSERT_EQUAL(c->in_len, 64);
	CU_ASSERT_EQUAL(virtio_host.pop(vq, c), 0);
	virtio_host.push(vq, c, 64);
	CU_ASSERT_FALSE(fh.irq_level[irq]);
	virtio_host.notify(vq);
	CU_ASSERT_TRUE(fh.irq_level[irq]);
	CU_ASSERT_EQUAL(rd(INT_STATUS), 1);
	wr(INT_ACK, 1);
	CU_ASSERT_EQUAL(rd(INT_STATUS), 0);
	CU_ASSERT_FALSE(fh.irq_level[irq]);
	virtio_host.notify(vq); /* nothing new pushed: no interrupt */
	CU_ASSERT_FALSE(fh.irq_level[irq]);

	/* Reset: the device stops, everything returns to power-on values. */
	wr(STATUS, 0);
	CU_ASSERT_EQUAL(rd(STATUS), 0);
	CU_ASSERT_EQUAL(fdev.stops, 1);
	CU_ASSERT_EQUAL(rd(QUEUE_READY), 0);
	CU_ASSERT_EQUAL(virtio_dev_get_driver_features(dev, 1), 0);
	CU_ASSERT_PTR_NULL(dev->vqs[0]);
	wr(QUEUE_NOTIFY, 0); /* not running: ignored */
	CU_ASSERT_EQUAL(fdev.notifies[0], 1);
	wr(STATUS, 0); /* a second reset does not stop again */
	CU_ASSERT_EQUAL(fdev.stops, 1);
	machine_down();
	CU_ASSERT_EQUAL(fdev.stops, 1);
	free(c);
}

static void test_feature_refusal(void)
{
	machine_up();
	/* a bit the device never offered */
	driver_features(all_features | (1ull << 33));
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER);
	CU_ASSERT_EQUAL(fdev.features_seen, 0); /* refused before asking the device */
	/* no VERSION_1: a legacy driver */
	driver_features(1ull << DEV_FEATURE_BIT);
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER);
	/* the device says no */
	fdev.set_features_ret = -EINVAL;
	driver_features(all_features);
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER);
	CU_ASSERT_EQUAL(fdev.features_seen, all_features);
	/* the device says yes to a subset */
	fdev.set_features_ret = 0;
	driver_features(1ull << VIRTIO_F_VERSION_1);
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER | S_FEATURES_OK);
	/* clearing a bit without a reset is ignored */
	wr(STATUS, S_ACK);
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER | S_FEATURES_OK);
	CU_ASSERT_EQUAL(fdev.starts, 0);
	machine_down();
}

static void expect_needs_reset(void)
{
	CU_ASSERT_EQUAL(rd(STATUS) & S_NEEDS_RESET, S_NEEDS_RESET);
	CU_ASSERT_EQUAL(rd(INT_STATUS) & 2, 2); /* config change interrupt */
	CU_ASSERT_TRUE(fh.irq_level[irq]);
}

static void test_broken(void)
{
	struct cub_vq_chain *c = calloc(1, sizeof(*c));
	uint16_t one = 1, bad_head = 200;

	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	machine_up();
	/* DRIVER_OK before FEATURES_OK */
	wr(STATUS, S_ACK | S_DRIVER);
	wr(STATUS, S_ACK | S_DRIVER | S_DRIVER_OK);
	expect_needs_reset();
	CU_ASSERT_EQUAL(fdev.starts, 0);
	/* Reset clears it, and the line drops. */
	wr(STATUS, 0);
	CU_ASSERT_EQUAL(rd(STATUS), 0);
	CU_ASSERT_EQUAL(rd(INT_STATUS), 0);
	CU_ASSERT_FALSE(fh.irq_level[irq]);

	/* A queue outside RAM, a bad size, a size above the maximum. */
	static const struct {
		uint32_t num;
		uint64_t desc;
	} bad[] = { { 128, 0x200000 }, { 100, DESC_GPA }, { 512, DESC_GPA }, { 0, DESC_GPA },
		    { 128, DESC_GPA + 8 } };
	for (unsigned i = 0; i < CUB_ARRAY_SIZE(bad); i++) {
		driver_features(all_features);
		setup_queue(0, bad[i].num, bad[i].desc, AVAIL_GPA, USED_GPA);
		wr(STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
		expect_needs_reset();
		CU_ASSERT_EQUAL(fdev.starts, 0);
		wr(QUEUE_NOTIFY, 0); /* broken: ignored */
		CU_ASSERT_EQUAL(fdev.notifies[0], 0);
	}

	/* The device fails to start. */
	fdev.start_ret = -ENODEV;
	driver_features(all_features);
	setup_queue(0, 128, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	expect_needs_reset();
	CU_ASSERT_EQUAL(fdev.starts, 1);
	wr(STATUS, 0);
	CU_ASSERT_EQUAL(fdev.stops, 0); /* a failed start owes no stop */

	/* A malformed chain: pop says -EIO, the device needs a reset, and
	 * every queue stays dead until the driver resets. */
	fdev.start_ret = 0;
	driver_features(all_features);
	setup_queue(0, 128, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	CU_ASSERT_EQUAL(rd(STATUS) & S_NEEDS_RESET, 0);
	mem_write(&vm.mem, AVAIL_GPA + 4, &bad_head, 2);
	mem_write(&vm.mem, AVAIL_GPA + 2, &one, 2);
	CU_ASSERT_EQUAL(virtio_host.pop(fdev.vqs[0], c), -EIO);
	expect_needs_reset();
	CU_ASSERT_TRUE(fake_log_has(&fh, "needs reset"));
	CU_ASSERT_EQUAL(virtio_host.pop(fdev.vqs[0], c), -EIO);
	wr(STATUS, 0);
	CU_ASSERT_EQUAL(fdev.stops, 1);
	CU_ASSERT_EQUAL(rd(STATUS), 0);

	/* After the reset the same device comes up clean. */
	memset(vm.mem.host, 0, 0x4000);
	driver_features(all_features);
	setup_queue(0, 128, DESC_GPA, AVAIL_GPA, USED_GPA);
	wr(STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	CU_ASSERT_EQUAL(rd(STATUS), S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	CU_ASSERT_EQUAL(virtio_host.pop(fdev.vqs[0], c), 0);
	machine_down();
	CU_ASSERT_EQUAL(fdev.stops, 2); /* freeing a running device stops it */
	free(c);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "identity, features, config space", test_identity },
		{ "bring-up, kick, interrupt, reset", test_bring_up },
		{ "feature refusal", test_feature_refusal },
		{ "NEEDS_RESET paths", test_broken },
		{ NULL, NULL },
	};

	return cu_run("virtio-mmio", tests);
}
