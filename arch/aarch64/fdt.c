/* SPDX-License-Identifier: Apache-2.0 */
/* The arm64 device tree, written with libfdt's sequential-write API from a
 * struct a64_fdt_desc. Bindings: Documentation/devicetree/bindings in Linux
 * (cpus, psci, arm,gic-v3, arm,gic, arm,arch_timer, 8250, virtio-mmio). */
#include <errno.h>
#include <inttypes.h>
#include <libfdt.h>
#include <stdio.h>
#include <string.h>

#include "fdt_build.h"

#define MPIDR_AFF_MASK 0xff00ffffffULL

/* The third cell of a GIC interrupt specifier. */
#define GIC_SPI            0
#define GIC_PPI            1
#define IRQ_TYPE_EDGE_RISING 1
#define IRQ_TYPE_LEVEL_HIGH 4
#define IRQ_TYPE_LEVEL_LOW  8
#define GICV2_PPI_CPU_SHIFT 8

uint64_t a64_mpidr_default(unsigned id)
{
	return (uint64_t)(id & 0xf) | (uint64_t)((id >> 4) & 0xff) << 8 |
	       (uint64_t)((id >> 12) & 0xff) << 16 | 1ULL << 31;
}

/* Every libfdt call below goes through this: stop at the first error. */
#define TRY(call)                              \
	do {                                   \
		int r_ = (call);               \
		if (r_ < 0)                    \
			return r_;             \
	} while (0)

static int prop_reg(void *fdt, const char *name, uint64_t base, uint64_t size)
{
	fdt64_t cells[2] = { cpu_to_fdt64(base), cpu_to_fdt64(size) };

	return fdt_property(fdt, name, cells, sizeof(cells));
}

static int prop_irq(void *fdt, unsigned type, unsigned num, unsigned flags)
{
	fdt32_t cells[3] = { cpu_to_fdt32(type), cpu_to_fdt32(num), cpu_to_fdt32(flags) };

	return fdt_property(fdt, "interrupts", cells, sizeof(cells));
}

static void node_name(char *buf, size_t len, const char *name, uint64_t addr)
{
	snprintf(buf, len, "%s@%" PRIx64, name, addr);
}

static const struct a64_dev *first_uart(const struct a64_fdt_desc *d)
{
	for (unsigned i = 0; i < d->n_devs; i++)
		if (d->devs[i].kind == A64_DEV_UART)
			return &d->devs[i];
	return NULL;
}

static int chosen(void *fdt, const struct a64_fdt_desc *d)
{
	const struct a64_dev *uart = first_uart(d);
	char path[48];

	TRY(fdt_begin_node(fdt, "chosen"));
	if (d->bootargs && d->bootargs[0])
		TRY(fdt_property_string(fdt, "bootargs", d->bootargs));
	if (uart) {
		node_name(path, sizeof(path), "/serial", uart->base);
		TRY(fdt_property_string(fdt, "stdout-path", path));
	}
	if (d->initrd_end > d->initrd_start) {
		TRY(fdt_property_u64(fdt, "linux,initrd-start", d->initrd_start));
		TRY(fdt_property_u64(fdt, "linux,initrd-end", d->initrd_end));
	}
	if (d->rng_seed && d->rng_seed_len)
		TRY(fdt_property(fdt, "rng-seed", d->rng_seed, (int)d->rng_seed_len));
	if (d->kaslr_seed)
		TRY(fdt_property_u64(fdt, "kaslr-seed", d->kaslr_seed));
	return fdt_end_node(fdt);
}

static int aliases(void *fdt, const struct a64_fdt_desc *d)
{
	char name[16], path[48];
	unsigned n = 0;

	TRY(fdt_begin_node(fdt, "aliases"));
	for (unsigned i = 0; i < d->n_devs; i++) {
		if (d->devs[i].kind != A64_DEV_UART)
			continue;
		snprintf(name, sizeof(name), "serial%u", n++);
		node_name(path, sizeof(path), "/serial", d->devs[i].base);
		TRY(fdt_property_string(fdt, name, path));
	}
	return fdt_end_node(fdt);
}

static int memory(void *fdt, const struct a64_fdt_desc *d)
{
	char name[40];

	for (unsigned i = 0; i < d->n_banks; i++) {
		node_name(name, sizeof(name), "memory", d->banks[i].gpa);
		TRY(fdt_begin_node(fdt, name));
		TRY(fdt_property_string(fdt, "device_type", "memory"));
		TRY(prop_reg(fdt, "reg", d->banks[i].gpa, d->banks[i].size));
		TRY(fdt_end_node(fdt));
	}
	return 0;
}

static int cpus(void *fdt, const struct a64_fdt_desc *d)
{
	bool aff3 = false;
	char name[40];

	for (unsigned i = 0; d->mpidr && i < d->n_cpus; i++)
		aff3 |= (d->mpidr[i] & MPIDR_AFF_MASK) >> 32 != 0;
	TRY(fdt_begin_node(fdt, "cpus"));
	/* Two address cells only when some MPIDR uses Aff3 (bits 39:32). */
	TRY(fdt_property_u32(fdt, "#address-cells", aff3 ? 2 : 1));
	TRY(fdt_property_u32(fdt, "#size-cells", 0));
	for (unsigned i = 0; i < d->n_cpus; i++) {
		uint64_t reg = (d->mpidr ? d->mpidr[i] : a64_mpidr_default(i)) & MPIDR_AFF_MASK;

		node_name(name, sizeof(name), "cpu", reg);
		TRY(fdt_begin_node(fdt, name));
		TRY(fdt_property_string(fdt, "device_type", "cpu"));
		TRY(fdt_property_string(fdt, "compatible", "arm,arm-v8"));
		if (aff3)
			TRY(fdt_property_u64(fdt, "reg", reg));
		else
			TRY(fdt_property_u32(fdt, "reg", (uint32_t)reg));
		/* Secondaries start powered off; Linux brings them up with
		 * PSCI CPU_ON, which KVM handles in the kernel. */
		TRY(fdt_property_string(fdt, "enable-method", "psci"));
		TRY(fdt_end_node(fdt));
	}
	return fdt_end_node(fdt);
}

static int psci(void *fdt)
{
	static const char compat[] = "arm,psci-1.0\0arm,psci-0.2";

	TRY(fdt_begin_node(fdt, "psci"));
	TRY(fdt_property(fdt, "compatible", compat, sizeof(compat)));
	TRY(fdt_property_string(fdt, "method", "hvc"));
	return fdt_end_node(fdt);
}

static int gic(void *fdt, const struct a64_fdt_desc *d)
{
	fdt64_t reg[4];
	char name[40];

	node_name(name, sizeof(name), "intc", d->gic_dist_base);
	TRY(fdt_begin_node(fdt, name));
	if (d->gic_version == 3) {
		TRY(fdt_property_string(fdt, "compatible", "arm,gic-v3"));
		reg[2] = cpu_to_fdt64(d->gic_redist_base);
		reg[3] = cpu_to_fdt64(d->gic_redist_size);
	} else {
		TRY(fdt_property_string(fdt, "compatible", "arm,cortex-a15-gic"));
		reg[2] = cpu_to_fdt64(d->gic_cpu_base);
		reg[3] = cpu_to_fdt64(d->gic_cpu_size);
	}
	reg[0] = cpu_to_fdt64(d->gic_dist_base);
	reg[1] = cpu_to_fdt64(d->gic_dist_size);
	TRY(fdt_property(fdt, "reg", reg, sizeof(reg)));
	TRY(fdt_property_u32(fdt, "#interrupt-cells", 3));
	TRY(fdt_property(fdt, "interrupt-controller", NULL, 0));
	/* No children (no ITS), but dtc expects an interrupt provider to
	 * say how its child addresses look; QEMU's virt does the same. */
	TRY(fdt_property_u32(fdt, "#address-cells", 2));
	TRY(fdt_property_u32(fdt, "#size-cells", 2));
	TRY(fdt_property(fdt, "ranges", NULL, 0));
	TRY(fdt_property_u32(fdt, "phandle", A64_FDT_GIC_PHANDLE));
	return fdt_end_node(fdt);
}

static int timer(void *fdt, const struct a64_fdt_desc *d)
{
	static const unsigned ppis[4] = {
		A64_PPI_TIMER_SEC, A64_PPI_TIMER_PHYS, A64_PPI_TIMER_VIRT, A64_PPI_TIMER_HYP,
	};
	unsigned flags = IRQ_TYPE_LEVEL_LOW;
	fdt32_t cells[12];

	/* GICv2 PPI specifiers also carry a mask of the CPUs they reach. */
	if (d->gic_version == 2)
		flags |= ((1u << d->n_cpus) - 1) << GICV2_PPI_CPU_SHIFT;
	for (unsigned i = 0; i < 4; i++) {
		cells[3 * i] = cpu_to_fdt32(GIC_PPI);
		cells[3 * i + 1] = cpu_to_fdt32(ppis[i]);
		cells[3 * i + 2] = cpu_to_fdt32(flags);
	}
	TRY(fdt_begin_node(fdt, "timer"));
	TRY(fdt_property_string(fdt, "compatible", "arm,armv8-timer"));
	TRY(fdt_property(fdt, "interrupts", cells, sizeof(cells)));
	/* The counter keeps running in every power state KVM gives us. */
	TRY(fdt_property(fdt, "always-on", NULL, 0));
	return fdt_end_node(fdt);
}

static int device(void *fdt, const struct a64_dev *dv)
{
	static const char *const names[] = {
		[A64_DEV_UART] = "serial", [A64_DEV_BOOT_TIMER] = "boot-timer",
		[A64_DEV_TESTDEV] = "testdev", [A64_DEV_VIRTIO_MMIO] = "virtio_mmio",
	};
	static const char *const compat[] = {
		[A64_DEV_UART] = "ns16550a", [A64_DEV_BOOT_TIMER] = "cubicle,boot-timer",
		[A64_DEV_TESTDEV] = "cubicle,testdev", [A64_DEV_VIRTIO_MMIO] = "virtio,mmio",
	};
	char name[48];

	if (dv->kind >= A64_DEV_OTHER)
		return 0;
	node_name(name, sizeof(name), names[dv->kind], dv->base);
	TRY(fdt_begin_node(fdt, name));
	TRY(fdt_property_string(fdt, "compatible", compat[dv->kind]));
	TRY(prop_reg(fdt, "reg", dv->base, dv->len));
	/* Both the 8250 and virtio-mmio drive a level (irq_set(line, level)). */
	if (dv->spi >= 0)
		TRY(prop_irq(fdt, GIC_SPI, (unsigned)dv->spi, IRQ_TYPE_LEVEL_HIGH));
	if (dv->kind == A64_DEV_UART) {
		TRY(fdt_property_u32(fdt, "clock-frequency", A64_UART_CLOCK_HZ));
		TRY(fdt_property_u32(fdt, "reg-shift", 0));
		TRY(fdt_property_u32(fdt, "reg-io-width", 1));
	}
	/* Guest RAM is ordinary cacheable memory to the VMM's threads. */
	if (dv->kind == A64_DEV_VIRTIO_MMIO)
		TRY(fdt_property(fdt, "dma-coherent", NULL, 0));
	return fdt_end_node(fdt);
}

static int vmgenid(void *fdt, const struct a64_fdt_desc *d)
{
	char name[48];

	node_name(name, sizeof(name), "vmgenid", d->vmgenid_gpa);
	TRY(fdt_begin_node(fdt, name));
	TRY(fdt_property_string(fdt, "compatible", "microsoft,vmgenid"));
	TRY(prop_reg(fdt, "reg", d->vmgenid_gpa, 16));
	TRY(prop_irq(fdt, GIC_SPI, d->vmgenid_spi, IRQ_TYPE_EDGE_RISING));
	return fdt_end_node(fdt);
}

static bool desc_ok(const struct a64_fdt_desc *d)
{
	if (!d->n_banks || !d->banks || !d->n_cpus || (d->n_devs && !d->devs))
		return false;
	if (d->vmgenid_gpa && (d->vmgenid_gpa % 8 || d->vmgenid_spi >= A64_NR_SPIS))
		return false;
	if (d->gic_version == 3)
		return d->gic_redist_size != 0;
	return d->gic_version == 2 && d->gic_cpu_size && d->n_cpus <= A64_GICV2_MAX_CPUS;
}

static int build(void *fdt, size_t cap, const struct a64_fdt_desc *d)
{
	TRY(fdt_create(fdt, (int)cap));
	if (d->vmgenid_gpa)
		TRY(fdt_add_reservemap_entry(fdt, d->vmgenid_gpa & ~0xfffull, 0x1000));
	TRY(fdt_finish_reservemap(fdt));
	TRY(fdt_begin_node(fdt, ""));
	TRY(fdt_property_string(fdt, "compatible", "linux,dummy-virt"));
	TRY(fdt_property_string(fdt, "model", "cubicle"));
	TRY(fdt_property_u32(fdt, "#address-cells", 2));
	TRY(fdt_property_u32(fdt, "#size-cells", 2));
	TRY(fdt_property_u32(fdt, "interrupt-parent", A64_FDT_GIC_PHANDLE));
	TRY(chosen(fdt, d));
	TRY(aliases(fdt, d));
	TRY(memory(fdt, d));
	TRY(cpus(fdt, d));
	TRY(psci(fdt));
	TRY(gic(fdt, d));
	TRY(timer(fdt, d));
	for (unsigned i = 0; i < d->n_devs; i++)
		TRY(device(fdt, &d->devs[i]));
	if (d->vmgenid_gpa)
		TRY(vmgenid(fdt, d));
	TRY(fdt_end_node(fdt));
	return fdt_finish(fdt);
}

int a64_fdt_build(void *buf, size_t cap, const struct a64_fdt_desc *d)
{
	int ret;

	if (!buf || !d || cap > INT32_MAX || !desc_ok(d))
		return -EINVAL;
	ret = build(buf, cap, d);
	if (ret == -FDT_ERR_NOSPACE)
		return -ENOSPC;
	if (ret < 0)
		return -EINVAL;
	return (int)fdt_totalsize(buf);
}
