/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of PCI bus 0: conf1 decoding, absent functions, BAR sizing and
 * moves, read-only header fields, capability lists, hostile accesses. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "cunit_main.h"
#include "pci.h"
#include "vm.h"

struct rec {
	unsigned calls;
	uint64_t off;
	unsigned moved;
	uint64_t moved_to;
	unsigned cfg_writes, cfg_reads;
	uint16_t last_off;
};

static void bar_io(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct rec *r = priv;

	r->calls++;
	r->off = off;
	if (!is_write)
		memset(data, 0x5a, len);
}

static void hook_read(void *priv, uint16_t off, uint32_t len)
{
	((struct rec *)priv)->cfg_reads++;
}

static void hook_write(void *priv, uint16_t off, uint32_t len)
{
	struct rec *r = priv;

	r->cfg_writes++;
	r->last_off = off;
}

static void hook_moved(void *priv, unsigned bar, uint64_t base)
{
	struct rec *r = priv;

	r->moved++;
	r->moved_to = base;
}

static const struct pci_dev_ops hooks = {
	.cfg_read = hook_read,
	.cfg_write = hook_write,
	.bar_moved = hook_moved,
};

static const struct pci_id test_id = {
	.vendor = 0x1af4, .device = 0x1044, .subsys_vendor = 0x1af4, .subsys = 0x44,
	.revision = 1, .class = 0xff0000,
};

static void vm_init(struct vm *vm)
{
	char err[256];

	memset(vm, 0, sizeof(*vm));
	vm->vm_fd = -1;
	bus_init(&vm->pio, "pio");
	bus_init(&vm->mmio, "mmio");
	CU_ASSERT_EQUAL_FATAL(pci_init(vm, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(pci_conf1_attach(vm, err, sizeof(err)), 0);
}

static void vm_fini(struct vm *vm)
{
	pci_destroy(vm);
	CU_ASSERT_EQUAL(vm->pio.n, 0);
	CU_ASSERT_EQUAL(vm->mmio.n, 0);
	bus_free(&vm->pio);
	bus_free(&vm->mmio);
}

static void outl(struct vm *vm, uint16_t port, uint32_t v)
{
	CU_ASSERT_TRUE(bus_access(&vm->pio, port, &v, 4, true));
}

static uint32_t in(struct vm *vm, uint16_t port, uint32_t len)
{
	uint32_t v = 0;

	CU_ASSERT_TRUE(bus_access(&vm->pio, port, &v, len, false));
	return v;
}

static uint32_t conf1_addr(unsigned bus, unsigned dev, unsigned fn, unsigned reg)
{
	return 0x80000000u | bus << 16 | dev << 11 | fn << 8 | (reg & 0xfc);
}

static uint32_t cfg_read(struct vm *vm, unsigned dev, uint16_t off, uint32_t len)
{
	uint32_t v = 0;

	pci_conf_access(vm, 0, (uint8_t)dev, 0, off, &v, len, false);
	return v;
}

static void cfg_write(struct vm *vm, unsigned dev, uint16_t off, uint32_t len, uint32_t v)
{
	pci_conf_access(vm, 0, (uint8_t)dev, 0, off, &v, len, true);
}

static void test_conf1(void)
{
	struct vm vm;
	uint8_t b = 1;

	vm_init(&vm);
	/* Linux's pci_check_type1: a byte to 0xcfb leaves the address alone. */
	outl(&vm, 0xcf8, 0x80000000);
	CU_ASSERT_TRUE(bus_access(&vm.pio, 0xcfb, &b, 1, true));
	CU_ASSERT_EQUAL(in(&vm, 0xcf8, 4), 0x80000000);
	/* Reserved bits 30:24 and 1:0 read back as 0. */
	outl(&vm, 0xcf8, 0xffffffff);
	CU_ASSERT_EQUAL(in(&vm, 0xcf8, 4), 0x80fffffc);

	/* Host bridge identity through the data port, at every sub-offset. */
	outl(&vm, 0xcf8, conf1_addr(0, 0, 0, 0));
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4), (uint32_t)PCI_HOST_DEVICE << 16 | PCI_HOST_VENDOR);
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 2), PCI_HOST_VENDOR);
	CU_ASSERT_EQUAL(in(&vm, 0xcfe, 2), PCI_HOST_DEVICE);
	CU_ASSERT_EQUAL(in(&vm, 0xcfd, 1), PCI_HOST_VENDOR >> 8);
	outl(&vm, 0xcf8, conf1_addr(0, 0, 0, 0x0a));
	CU_ASSERT_EQUAL(in(&vm, 0xcfe, 2), 0x0600); /* class: host bridge */
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4) >> 8, 0x060000);
	outl(&vm, 0xcf8, conf1_addr(0, 0, 0, 0x0e));
	CU_ASSERT_EQUAL(in(&vm, 0xcfe, 1), 0); /* header type 0, single function */

	/* Enable bit clear: the data port floats. */
	outl(&vm, 0xcf8, conf1_addr(0, 0, 0, 0) & 0x7fffffff);
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4), 0xffffffff);
	/* A word straddling 0xcff and beyond is no access of ours. */
	{
		uint32_t v = 0;

		CU_ASSERT_FALSE(bus_access(&vm.pio, 0xcfe, &v, 4, false));
	}
	/* Word reads of the address port are not the address register. */
	outl(&vm, 0xcf8, 0x80000000);
	CU_ASSERT_EQUAL(in(&vm, 0xcf8, 2), 0xffff);
	vm_fini(&vm);
}

static void test_absent(void)
{
	struct vm vm;

	vm_init(&vm);
	outl(&vm, 0xcf8, conf1_addr(0, 5, 0, 0));
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4), 0xffffffff);
	outl(&vm, 0xcf8, conf1_addr(0, 0, 1, 0)); /* function 1 of the host bridge */
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4), 0xffffffff);
	outl(&vm, 0xcf8, conf1_addr(1, 0, 0, 0)); /* bus 1 */
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4), 0xffffffff);
	outl(&vm, 0xcf8, conf1_addr(255, 31, 7, 0xfc));
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 2), 0xffff);
	/* Writes there vanish. */
	outl(&vm, 0xcf8, conf1_addr(0, 7, 0, 4));
	outl(&vm, 0xcfc, 0xffffffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 7, 0, 4), 0xffffffff);
	vm_fini(&vm);
}

static void test_bar_sizing(void)
{
	struct vm vm;
	struct rec r = { 0 };
	struct pci_dev *pd;
	uint64_t wb, ws;
	uint32_t bar0;
	char err[256];

	vm_init(&vm);
	/* the host bridge alone is no device (x86 describes no root bridge) */
	CU_ASSERT_FALSE(pci_has_devices(&vm));
	pd = pci_dev_add(&vm, &test_id, &hooks, &r, "t", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
	CU_ASSERT_TRUE(pci_has_devices(&vm));
	CU_ASSERT_EQUAL(pci_dev_slot(pd), 1);
	CU_ASSERT_EQUAL(pci_bar_add(pd, 0, 0x8000, bar_io, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(pci_bar_add(pd, 2, 0x1000, bar_io, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(pci_bar_add(pd, 2, 0x1000, bar_io, &r, err, sizeof(err)), -EBUSY);
	CU_ASSERT_EQUAL(pci_bar_add(pd, 3, 0x1800, bar_io, &r, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(pci_bar_add(pd, 6, 0x1000, bar_io, &r, err, sizeof(err)), -EINVAL);

	/* Placed by the host, naturally aligned, inside the window. */
	arch_pci_window(&wb, &ws);
	bar0 = cfg_read(&vm, 1, PCI_BAR0, 4);
	CU_ASSERT_EQUAL(bar0 & 0xf, 0); /* memory, 32-bit, not prefetchable */
	CU_ASSERT_EQUAL(bar0 & 0x7fff, 0);
	CU_ASSERT(bar0 >= wb && bar0 + 0x8000ULL <= wb + ws);
	CU_ASSERT(cfg_read(&vm, 1, PCI_BAR0 + 8, 4) >= wb);

	/* The sizing protocol, through the conf1 ports as a guest does it. */
	outl(&vm, 0xcf8, conf1_addr(0, 1, 0, PCI_BAR0));
	outl(&vm, 0xcfc, 0xffffffff);
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4), 0xffff8000);
	outl(&vm, 0xcfc, bar0);
	CU_ASSERT_EQUAL(in(&vm, 0xcfc, 4), bar0);
	cfg_write(&vm, 1, PCI_BAR0 + 8, 4, 0xffffffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_BAR0 + 8, 4), 0xfffff000);
	/* Unimplemented BARs and the expansion ROM size as 0. */
	cfg_write(&vm, 1, PCI_BAR0 + 4, 4, 0xffffffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_BAR0 + 4, 4), 0);
	cfg_write(&vm, 1, PCI_ROM_ADDRESS, 4, 0xffffffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_ROM_ADDRESS, 4), 0);
	/* Memory decoding is off: nothing on the MMIO bus yet. */
	CU_ASSERT_EQUAL(vm.mmio.n, 0);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), 0);
	vm_fini(&vm);
}

static void test_bar_move(void)
{
	struct vm vm;
	struct rec r = { 0 }, r2 = { 0 };
	struct pci_dev *pd, *pd2;
	struct bus_range found;
	uint32_t bar0, other, v = 0;
	char err[256];

	vm_init(&vm);
	pd = pci_dev_add(&vm, &test_id, &hooks, &r, "t", err, sizeof(err));
	pd2 = pci_dev_add(&vm, &test_id, NULL, NULL, "t2", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pd2);
	CU_ASSERT_EQUAL(pci_bar_add(pd, 0, 0x8000, bar_io, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(pci_bar_add(pd2, 0, 0x1000, bar_io, &r2, err, sizeof(err)), 0);
	bar0 = cfg_read(&vm, 1, PCI_BAR0, 4);
	other = cfg_read(&vm, 2, PCI_BAR0, 4);
	CU_ASSERT_NOT_EQUAL(bar0, other);

	/* Memory enable maps it; the handler sees offsets within the BAR. */
	cfg_write(&vm, 1, PCI_COMMAND, 2, PCI_CMD_MEMORY);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), bar0);
	CU_ASSERT_EQUAL(r.moved_to, bar0);
	CU_ASSERT_TRUE(bus_find(&vm.mmio, bar0 + 0x7fff, &found));
	CU_ASSERT_EQUAL(found.base, bar0);
	CU_ASSERT_EQUAL(found.len, 0x8000);
	CU_ASSERT_TRUE(bus_access(&vm.mmio, bar0 + 0x3004, &v, 4, false));
	CU_ASSERT_EQUAL(r.calls, 1);
	CU_ASSERT_EQUAL(r.off, 0x3004);
	CU_ASSERT_EQUAL(v, 0x5a5a5a5a);

	/* The guest moves it: the old range goes, the new one decodes. */
	cfg_write(&vm, 1, PCI_BAR0, 4, 0xf0000000);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), 0xf0000000);
	CU_ASSERT_EQUAL(r.moved_to, 0xf0000000);
	CU_ASSERT_FALSE(bus_find(&vm.mmio, bar0, &found));
	CU_ASSERT_TRUE(bus_access(&vm.mmio, 0xf0000010, &v, 4, true));
	CU_ASSERT_EQUAL(r.off, 0x10);
	CU_ASSERT_EQUAL(vm.mmio.n, 1);
	/* Low bits are not writable: an unaligned address is truncated. */
	cfg_write(&vm, 1, PCI_BAR0, 4, 0xf0001234);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_BAR0, 4), 0xf0000000);

	/* Onto another device's enabled BAR: not decoded, nothing breaks. */
	cfg_write(&vm, 2, PCI_COMMAND, 2, PCI_CMD_MEMORY);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd2, 0), other);
	cfg_write(&vm, 1, PCI_BAR0, 4, other & ~0x7fffu);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), 0);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd2, 0), other);
	CU_ASSERT_EQUAL(vm.mmio.n, 1);
	cfg_write(&vm, 1, PCI_BAR0, 4, 0xf0000000);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), 0xf0000000);

	/* Sizing with decoding on maps at the all-ones address; then back. */
	cfg_write(&vm, 1, PCI_BAR0, 4, 0xffffffff);
	cfg_write(&vm, 1, PCI_BAR0, 4, 0xf0000000);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), 0xf0000000);

	/* Memory decoding off: unmapped, reported as base 0. */
	cfg_write(&vm, 1, PCI_COMMAND, 2, 0);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), 0);
	CU_ASSERT_EQUAL(r.moved_to, 0);
	CU_ASSERT_FALSE(bus_find(&vm.mmio, 0xf0000000, &found));
	CU_ASSERT_EQUAL(vm.mmio.n, 1);
	/* A byte write to the command register's high half leaves it off. */
	cfg_write(&vm, 1, PCI_COMMAND + 1, 1, 0xff);
	CU_ASSERT_EQUAL(pci_bar_mapped(pd, 0), 0);
	vm_fini(&vm);
}

static void test_read_only(void)
{
	static const uint16_t ro[] = { PCI_VENDOR_ID, PCI_DEVICE_ID, PCI_STATUS, 0x08, 0x0a,
				       PCI_SUBSYS_VENDOR, PCI_SUBSYS_ID, PCI_CAP_PTR };
	struct vm vm;
	struct rec r = { 0 };
	uint32_t before[sizeof(ro) / sizeof(ro[0])];
	char err[256];

	vm_init(&vm);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pci_dev_add(&vm, &test_id, &hooks, &r, "t", err, sizeof(err)));
	for (unsigned i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		before[i] = cfg_read(&vm, 1, ro[i], 2);
		cfg_write(&vm, 1, ro[i], 2, 0x1234);
		CU_ASSERT_EQUAL(cfg_read(&vm, 1, ro[i], 2), before[i]);
	}
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, 0, 4), 0x10441af4);
	cfg_write(&vm, 1, PCI_HEADER_TYPE, 1, 0x80);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_HEADER_TYPE, 1), 0);
	cfg_write(&vm, 1, PCI_INT_PIN, 1, 1);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_INT_PIN, 1), 0);
	/* Command: memory, master, INTx disable are writable; I/O is not. */
	cfg_write(&vm, 1, PCI_COMMAND, 2, 0xffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_COMMAND, 2),
			PCI_CMD_MEMORY | PCI_CMD_MASTER | PCI_CMD_PARITY | PCI_CMD_SERR |
				PCI_CMD_INTX_DIS);
	/* Scratch registers the OS writes. */
	cfg_write(&vm, 1, PCI_INT_LINE, 1, 0x0b);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_INT_LINE, 1), 0x0b);
	cfg_write(&vm, 1, PCI_CACHE_LINE, 1, 0x10);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_CACHE_LINE, 1), 0x10);
	/* The hooks saw every access to the device. */
	CU_ASSERT(r.cfg_writes > 0 && r.cfg_reads > 0);
	CU_ASSERT_EQUAL(r.last_off, PCI_CACHE_LINE);
	vm_fini(&vm);
}

static void test_caps(void)
{
	struct vm vm;
	struct pci_dev *pd;
	uint8_t a[8] = { 0x09, 0xee, 8, 1, 2, 3, 4, 5 };
	uint8_t b[12] = { 0x11, 0, 0x07, 0x00, 0x00, 0x40, 0, 0, 0x00, 0x50, 0, 0 };
	uint8_t bw[12] = { 0xff, 0xff, 0x00, 0xc0 };
	uint8_t c[5] = { 0x09, 0, 5, 9, 9 };
	uint8_t seen[3];
	unsigned n = 0, pos;
	char err[256];

	vm_init(&vm);
	pd = pci_dev_add(&vm, &test_id, NULL, NULL, "t", err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, PCI_STATUS, 2) & PCI_STATUS_CAP, 0);
	CU_ASSERT_EQUAL(pci_cap_add(pd, a, sizeof(a), NULL), 0x40);
	CU_ASSERT_EQUAL(pci_cap_add(pd, b, sizeof(b), bw), 0x48);
	CU_ASSERT_EQUAL(pci_cap_add(pd, c, sizeof(c), NULL), 0x54);
	CU_ASSERT_EQUAL(pci_cap_add(pd, c, 3, NULL), -EINVAL);
	CU_ASSERT(cfg_read(&vm, 1, PCI_STATUS, 2) & PCI_STATUS_CAP);

	/* Walk it as Linux's pci_find_capability does. */
	for (pos = cfg_read(&vm, 1, PCI_CAP_PTR, 1); pos && n < 3; n++) {
		CU_ASSERT_EQUAL(pos & 3, 0);
		seen[n] = (uint8_t)cfg_read(&vm, 1, (uint16_t)pos, 1);
		pos = cfg_read(&vm, 1, (uint16_t)pos + 1, 1);
	}
	CU_ASSERT_EQUAL(n, 3);
	CU_ASSERT_EQUAL(pos, 0);
	CU_ASSERT_EQUAL(seen[0], 0x09);
	CU_ASSERT_EQUAL(seen[1], 0x11);
	CU_ASSERT_EQUAL(seen[2], 0x09);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, 0x44, 4), 0x05040302);

	/* Only the bits the mask allows change; id and next never do. */
	cfg_write(&vm, 1, 0x48, 4, 0xffffffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, 0x48, 4), 0xc0070011 | (0x54 << 8));
	cfg_write(&vm, 1, 0x4a, 2, 0);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, 0x4a, 2), 0x0007);
	cfg_write(&vm, 1, 0x4c, 4, 0);
	CU_ASSERT_EQUAL(cfg_read(&vm, 1, 0x4c, 4), 0x4000);

	/* Config space fills up. */
	while (pci_cap_add(pd, a, sizeof(a), NULL) > 0)
		n++;
	CU_ASSERT_EQUAL(pci_cap_add(pd, a, sizeof(a), NULL), -ENOSPC);
	CU_ASSERT(n > 20);
	vm_fini(&vm);
}

static void test_hostile(void)
{
	struct vm vm;
	uint32_t v;
	char err[256];

	vm_init(&vm);
	/* Crossing a dword, odd lengths, past the end: all ones, no effect. */
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0xfe, 4), 0xffffffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0x03, 2), 0xffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0x00, 3), 0xffffff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0x100, 1), 0xff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0xffff, 1), 0xff);
	CU_ASSERT_EQUAL(cfg_read(&vm, 40, 0, 4), 0xffffffff);
	v = 0;
	pci_conf_access(&vm, 0, 0, 0, 0xfd, &v, 4, true);
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0, 4), (uint32_t)PCI_HOST_DEVICE << 16 | PCI_HOST_VENDOR);
	/* Unaligned but inside one dword is what conf1 byte lanes give. */
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0x01, 2), (PCI_HOST_DEVICE & 0xff) << 8 | PCI_HOST_VENDOR >> 8);

	/* The bus holds 31 devices besides the host bridge. */
	for (unsigned i = 1; i < PCI_MAX_DEVS; i++)
		CU_ASSERT_PTR_NOT_NULL(pci_dev_add(&vm, &test_id, NULL, NULL, "t", err, sizeof(err)));
	CU_ASSERT_PTR_NULL(pci_dev_add(&vm, &test_id, NULL, NULL, "t", err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "full"));
	vm_fini(&vm);

	/* No bus at all. */
	memset(&vm, 0, sizeof(vm));
	CU_ASSERT_EQUAL(cfg_read(&vm, 0, 0, 4), 0xffffffff);
	CU_ASSERT_PTR_NULL(pci_dev_add(&vm, &test_id, NULL, NULL, "t", err, sizeof(err)));
}

static void test_window_full(void)
{
	struct vm vm;
	struct pci_dev *pd = NULL;
	uint64_t wb, ws;
	unsigned placed = 0;
	char err[256];
	struct rec r = { 0 };

	vm_init(&vm);
	arch_pci_window(&wb, &ws);
	for (unsigned i = 0; i < 6 && ws; i++) {
		pd = pci_dev_add(&vm, &test_id, NULL, NULL, "big", err, sizeof(err));
		CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
		for (unsigned b = 0; b < PCI_NUM_BARS; b++)
			if (!pci_bar_add(pd, b, 0x10000000, bar_io, &r, err, sizeof(err)))
				placed++;
	}
	CU_ASSERT_EQUAL(placed, ws / 0x10000000);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "window"));
	placed = pci_dev_slot(pd);
	pci_dev_remove(pd);
	CU_ASSERT_EQUAL(cfg_read(&vm, placed, 0, 4), 0xffffffff);
	vm_fini(&vm);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "conf1 address decoding", test_conf1 },
		{ "absent functions read all ones", test_absent },
		{ "BAR sizing", test_bar_sizing },
		{ "BAR move re-registers the MMIO range", test_bar_move },
		{ "read-only fields stay", test_read_only },
		{ "capability list walk", test_caps },
		{ "hostile config accesses", test_hostile },
		{ "PCI window exhaustion", test_window_full },
		{ NULL, NULL },
	};
	uint64_t win_base, win_size;

	/* The PCI core needs the arch's BAR window; arm64 has no PCI yet. */
	arch_pci_window(&win_base, &win_size);
	if (!win_size) {
		printf("no PCI window on %s: skipped\n", arch_name);
		return 77;
	}

	return cu_run("pci", tests);
}
