/* SPDX-License-Identifier: Apache-2.0 */
/* Where things go on an arm64 guest: one RAM bank at 1 GiB and, below it,
 * an MMIO window and an SPI for each device class (see layout.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cnode.h"
#include "layout.h"

#define A64_IRQ_TYPE_SHIFT 24 /* KVM_ARM_IRQ_TYPE_SHIFT */
#define A64_IRQ_TYPE_SPI   1  /* KVM_ARM_IRQ_TYPE_SPI */

int a64_mem_layout(uint64_t ram_size, struct mem_bank *banks, unsigned max)
{
	if (!ram_size || (ram_size & (A64_SLOT_SIZE - 1)) || !max ||
	    ram_size > A64_IPA_LIMIT - A64_RAM_BASE)
		return -EINVAL;
	banks[0] = (struct mem_bank){ .gpa = A64_RAM_BASE, .size = ram_size };
	return 1;
}

bool a64_gicv3_fits(unsigned n_vcpus)
{
	return n_vcpus &&
	       n_vcpus <= (A64_GICV3_REDIST_END - A64_GICV3_REDIST_BASE) / A64_GICV3_REDIST_SIZE;
}

uint32_t a64_irq_line_spi(unsigned spi)
{
	return (A64_IRQ_TYPE_SPI << A64_IRQ_TYPE_SHIFT) | (32 + spi);
}

static int check_len(const struct cub_region *r, uint64_t max, char *err, size_t errlen)
{
	if (!r->len || r->len > max)
		return errf(err, errlen, -EINVAL,
			    "class \"%s\": length %llu does not fit its arm64 slot of %llu bytes",
			    r->class, (unsigned long long)r->len, (unsigned long long)max);
	return 0;
}

static int record(struct a64_layout *l, struct cub_region *r, enum a64_dev_kind kind,
		  uint64_t base, int spi, char *err, size_t errlen)
{
	if (l->n_dev >= A64_MAX_DEVS)
		return errf(err, errlen, -ENOSPC, "class \"%s\": too many devices", r->class);
	r->bus = CUB_BUS_MMIO;
	r->base = base;
	r->irq = spi;
	l->dev[l->n_dev++] = (struct a64_dev){ .kind = kind, .base = base, .len = r->len,
					       .spi = spi };
	return 0;
}

/* Fixed slots: uart n at A64_UART_BASE + n pages with SPI n, the one
 * boot-timer, testdev n without an interrupt. */
static int place_fixed(struct a64_layout *l, struct cub_region *r, enum a64_dev_kind kind,
		       char *err, size_t errlen)
{
	int ret = check_len(r, A64_SLOT_SIZE, err, errlen);
	uint64_t base;
	int spi = -1;

	if (ret)
		return ret;
	switch (kind) {
	case A64_DEV_UART:
		if (l->n_uart >= A64_UART_SLOTS)
			return errf(err, errlen, -ENOSPC, "class \"%s\": all %d UART slots are taken",
				    r->class, A64_UART_SLOTS);
		base = A64_UART_BASE + A64_SLOT_SIZE * l->n_uart;
		spi = (int)l->n_uart;
		ret = record(l, r, kind, base, spi, err, errlen);
		l->n_uart += !ret;
		return ret;
	case A64_DEV_BOOT_TIMER:
		if (l->boot_timer)
			return errf(err, errlen, -ENOSPC,
				    "class \"%s\": only one per VM (its slot 0x%llx is taken)",
				    r->class, A64_BOOT_TIMER_BASE);
		ret = record(l, r, kind, A64_BOOT_TIMER_BASE, -1, err, errlen);
		l->boot_timer = !ret;
		return ret;
	default:
		if (l->n_testdev >= A64_TESTDEV_SLOTS)
			return errf(err, errlen, -ENOSPC, "class \"%s\": all %d test-device slots are taken",
				    r->class, A64_TESTDEV_SLOTS);
		base = A64_TESTDEV_BASE + A64_SLOT_SIZE * l->n_testdev;
		ret = record(l, r, kind, base, -1, err, errlen);
		l->n_testdev += !ret;
		return ret;
	}
}

static int place_generic(struct a64_layout *l, struct cub_region *r, enum a64_dev_kind kind,
			 char *err, size_t errlen)
{
	uint64_t len, room = A64_MMIO_SLOTS_END - A64_MMIO_SLOTS_BASE - l->mmio_used;
	int ret;

	if (!r->len)
		return check_len(r, room, err, errlen);
	/* room is page-aligned, so comparing before rounding cannot overflow */
	len = r->len > room ? room + 1 : (r->len + A64_SLOT_SIZE - 1) & ~(A64_SLOT_SIZE - 1);
	if (len > room)
		return errf(err, errlen, -ENOSPC, "class \"%s\": the MMIO device window is full",
			    r->class);
	if (A64_SPI_GENERIC_FIRST + l->n_spi >= A64_NR_SPIS)
		return errf(err, errlen, -ENOSPC,
			    "class \"%s\": no interrupt left (all SPIs %d-%d are taken)", r->class,
			    A64_SPI_GENERIC_FIRST, A64_NR_SPIS - 1);
	ret = record(l, r, kind, A64_MMIO_SLOTS_BASE + l->mmio_used,
		     (int)(A64_SPI_GENERIC_FIRST + l->n_spi), err, errlen);
	if (ret)
		return ret;
	l->mmio_used += len;
	l->n_spi++;
	return 0;
}

int a64_layout_place(struct a64_layout *l, struct cub_region *r, char *err, size_t errlen)
{
	if (!r->class || !r->class[0])
		return errf(err, errlen, -ENOENT, "region has no class");
	if (r->want == CUB_BUS_PIO)
		return errf(err, errlen, -EINVAL,
			    "class \"%s\" asks for port I/O, but ARM64 has no port I/O: every device is MMIO (use bus \"any\" or \"mmio\")",
			    r->class);
	if (r->want != CUB_BUS_ANY && r->want != CUB_BUS_MMIO)
		return errf(err, errlen, -EINVAL, "class \"%s\": unknown bus request", r->class);
	if (!strcmp(r->class, "uart"))
		return place_fixed(l, r, A64_DEV_UART, err, errlen);
	if (!strcmp(r->class, "boot-timer"))
		return place_fixed(l, r, A64_DEV_BOOT_TIMER, err, errlen);
	if (!strcmp(r->class, "testdev"))
		return place_fixed(l, r, A64_DEV_TESTDEV, err, errlen);
	if (!strcmp(r->class, "virtio-mmio"))
		return place_generic(l, r, A64_DEV_VIRTIO_MMIO, err, errlen);
	return place_generic(l, r, A64_DEV_OTHER, err, errlen);
}
