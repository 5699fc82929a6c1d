/* SPDX-License-Identifier: Apache-2.0 */
/* Where things go on an x86 guest: RAM banks around the PCI hole, and the
 * bus, base and IRQ of each device class (the table kvmtool keeps as #ifs
 * inside hw/serial.c lives here instead). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "cnode.h"
#include "layout.h"
#include "vm.h"
#include "x86.h"

#define PAGE_SIZE 0x1000ULL

int x86_mem_layout(uint64_t ram_size, struct mem_bank *banks, unsigned max)
{
	uint64_t low, high;

	if (!ram_size || (ram_size & (PAGE_SIZE - 1)) || !max)
		return -EINVAL;
	low = ram_size < X86_LOWMEM_MAX ? ram_size : X86_LOWMEM_MAX;
	high = ram_size - low;
	if (high > UINT64_MAX - X86_4G)
		return -EINVAL;
	banks[0] = (struct mem_bank){ .gpa = 0, .size = low };
	if (!high)
		return 1;
	if (max < 2)
		return -EINVAL;
	banks[1] = (struct mem_bank){ .gpa = X86_4G, .size = high };
	return 2;
}

int arch_mem_layout(uint64_t ram_size, struct mem_bank *banks, unsigned max)
{
	return x86_mem_layout(ram_size, banks, max);
}

/*
 * IRQs for generic MMIO devices. 0-2 are the PIT, keyboard and cascade,
 * 3 and 4 the UARTs; skipped: 8, which Linux's rtc_cmos claims for the
 * CMOS clock we emulate, 9, the ACPI SCI (level, active low: it cannot be
 * shared with an edge-triggered device), and 12, the PS/2 mouse line that
 * i8042 may still claim. Everything else up to the IOAPIC's last pin is
 * free: the MP table and the MADT route ISA IRQ n to pin n for all 24 pins.
 */
static const unsigned char generic_irqs[] = {
	5, 6, 7, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
};

int x86_layout_irq(unsigned n)
{
	return n < sizeof(generic_irqs) ? generic_irqs[n] : -1;
}

/* The legacy COM ports, in the order Linux numbers ttyS0..3. */
static const struct {
	uint16_t port;
	uint8_t irq;
} uart_slots[X86_UART_SLOTS] = {
	{ 0x3f8, 4 }, { 0x2f8, 3 }, { 0x3e8, 4 }, { 0x2e8, 3 },
};

static int check_len(const struct cub_region *r, uint64_t max, char *err, size_t errlen)
{
	if (!r->len || r->len > max)
		return errf(err, errlen, -EINVAL,
			    "class \"%s\": length %llu does not fit its x86 slot of %llu bytes",
			    r->class, (unsigned long long)r->len, (unsigned long long)max);
	return 0;
}

static int place_uart(struct x86_layout *l, struct cub_region *r, char *err, size_t errlen)
{
	int ret;

	if (r->want == CUB_BUS_MMIO)
		return errf(err, errlen, -EINVAL,
			    "class \"%s\" is port I/O on x86 (COM1-4 at 0x3f8, 0x2f8, 0x3e8, 0x2e8); it cannot go on MMIO",
			    r->class);
	ret = check_len(r, X86_UART_LEN, err, errlen);
	if (ret)
		return ret;
	if (l->n_uart >= X86_UART_SLOTS)
		return errf(err, errlen, -ENOSPC,
			    "class \"%s\": all 4 legacy COM ports are taken", r->class);
	r->bus = CUB_BUS_PIO;
	r->base = uart_slots[l->n_uart].port;
	r->irq = uart_slots[l->n_uart].irq;
	l->n_uart++;
	return 0;
}

static int place_boot_timer(struct x86_layout *l, struct cub_region *r, char *err,
			    size_t errlen)
{
	int ret;

	if (r->want == CUB_BUS_PIO)
		return errf(err, errlen, -EINVAL,
			    "class \"%s\" is MMIO on x86 (at 0xd0000000); it cannot go on port I/O",
			    r->class);
	ret = check_len(r, X86_BOOT_TIMER_LEN, err, errlen);
	if (ret)
		return ret;
	if (l->boot_timer)
		return errf(err, errlen, -ENOSPC,
			    "class \"%s\": only one per VM (its slot 0xd0000000 is taken)", r->class);
	r->bus = CUB_BUS_MMIO;
	r->base = X86_BOOT_TIMER_BASE;
	r->irq = -1;
	l->boot_timer = true;
	return 0;
}

/* Test devices default to port I/O (an `out` is the cheapest exit); a
 * payload that wants to exercise the MMIO path asks for it. */
static int place_testdev(struct x86_layout *l, struct cub_region *r, char *err, size_t errlen)
{
	bool mmio = r->want == CUB_BUS_MMIO;
	unsigned *n = mmio ? &l->n_testdev_mmio : &l->n_testdev_pio;
	int ret;

	ret = check_len(r, mmio ? PAGE_SIZE : X86_TESTDEV_PIO_LEN, err, errlen);
	if (ret)
		return ret;
	if (*n >= X86_TESTDEV_SLOTS)
		return errf(err, errlen, -ENOSPC, "class \"%s\": all 16 test-device slots are taken",
			    r->class);
	r->bus = mmio ? CUB_BUS_MMIO : CUB_BUS_PIO;
	r->base = mmio ? X86_TESTDEV_MMIO_BASE + PAGE_SIZE * *n
		       : X86_TESTDEV_PIO_BASE + X86_TESTDEV_PIO_LEN * *n;
	r->irq = -1;
	(*n)++;
	return 0;
}

static int place_generic(struct x86_layout *l, struct cub_region *r, char *err, size_t errlen)
{
	uint64_t len, room = X86_MMIO_SLOTS_END - X86_MMIO_SLOTS_BASE - l->mmio_used;
	int irq;

	if (r->want == CUB_BUS_PIO)
		return errf(err, errlen, -EINVAL,
			    "class \"%s\": x86 places only uart and testdev on port I/O; this class is MMIO",
			    r->class);
	if (!r->len)
		return check_len(r, room, err, errlen);
	/* room is page-aligned, so comparing before rounding cannot overflow */
	len = r->len > room ? room + 1 : (r->len + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
	if (len > room)
		return errf(err, errlen, -ENOSPC, "class \"%s\": the MMIO device window is full",
			    r->class);
	irq = x86_layout_irq(l->n_irq);
	if (irq < 0)
		return errf(err, errlen, -ENOSPC,
			    "class \"%s\": no interrupt line left (all %zu IRQs between 5 and 23 are taken)",
			    r->class, sizeof(generic_irqs));
	r->bus = CUB_BUS_MMIO;
	r->base = X86_MMIO_SLOTS_BASE + l->mmio_used;
	r->irq = irq;
	l->mmio_used += len;
	l->n_irq++;
	return 0;
}

int x86_layout_place(struct x86_layout *l, struct cub_region *r, char *err, size_t errlen)
{
	if (!r->class || !r->class[0])
		return errf(err, errlen, -ENOENT, "region has no class");
	if (r->want != CUB_BUS_ANY && r->want != CUB_BUS_PIO && r->want != CUB_BUS_MMIO)
		return errf(err, errlen, -EINVAL, "class \"%s\": unknown bus request", r->class);
	if (!strcmp(r->class, "uart"))
		return place_uart(l, r, err, errlen);
	if (!strcmp(r->class, "boot-timer"))
		return place_boot_timer(l, r, err, errlen);
	if (!strcmp(r->class, "testdev"))
		return place_testdev(l, r, err, errlen);
	return place_generic(l, r, err, errlen);
}

_Static_assert(X86_PCI_WINDOW_BASE >= X86_MMIO_SLOTS_END &&
	       X86_PCI_WINDOW_BASE + X86_PCI_WINDOW_SIZE <= X86_IOAPIC_ADDR,
	       "the PCI window sits between the MMIO slots and the IOAPIC");

void arch_pci_window(uint64_t *base, uint64_t *size)
{
	*base = X86_PCI_WINDOW_BASE;
	*size = X86_PCI_WINDOW_SIZE;
}

int arch_place(struct vm *vm, struct cub_region *r, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);

	if (!xv)
		return errf(err, errlen, -EINVAL, "arch_place before arch_vm_setup");
	return x86_layout_place(&xv->layout, r, err, errlen);
}

/* Lines are GSIs: the IOAPIC pin (or PIC line) itself. */
uint32_t arch_irq_kvm_line(unsigned line)
{
	return line;
}

/* x86 guests find virtio devices by PCI enumeration; virtio-mmio needs
 * firmware tables or a command-line hint. */
const char *arch_virtio_default_transport(void)
{
	return "pci";
}
