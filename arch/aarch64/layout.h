/* SPDX-License-Identifier: Apache-2.0 */
/* The arm64 address and interrupt plan: RAM, the vGIC, and where each device
 * class is placed. Pure functions, so unit tests run on any build host. */
#ifndef CUBICLE_A64_LAYOUT_H
#define CUBICLE_A64_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubicle/plugin.h"
#include "mem.h"

/*
 * Guest-physical map. Everything below 1 GiB is MMIO, RAM starts at 1 GiB
 * (where QEMU's virt machine, kvmtool and Firecracker put it too):
 *
 *   0x0800_0000  GIC distributor, 64 KiB (GICv2 decodes its first 4 KiB)
 *   0x0801_0000  GICv2 CPU interface, 8 KiB
 *   0x0810_0000  GICv3 redistributors, 128 KiB per vCPU, up to 0x0900_0000
 *   0x0900_0000  "uart" slots: 4 x 4 KiB, SPI 0-3
 *   0x0901_0000  "boot-timer": one 4 KiB window, no interrupt
 *   0x0902_0000  "testdev" slots: 16 x 4 KiB, no interrupt
 *   0x0a00_0000  every other class (virtio-mmio, ...): 4 KiB-aligned slots
 *                up to 0x0c00_0000, one SPI each from SPI 16
 *   0x4000_0000  RAM, one bank of machine.memory_mib
 */
#define A64_RAM_BASE          0x40000000ULL
/* KVM_CREATE_VM with type 0 gives a 40-bit IPA space. */
#define A64_IPA_LIMIT         (1ULL << 40)

#define A64_GIC_DIST_BASE     0x08000000ULL
#define A64_GICV3_DIST_SIZE   0x10000ULL
#define A64_GICV2_DIST_SIZE   0x1000ULL
#define A64_GICV2_CPU_BASE    0x08010000ULL
#define A64_GICV2_CPU_SIZE    0x2000ULL
#define A64_GICV3_REDIST_BASE 0x08100000ULL
#define A64_GICV3_REDIST_SIZE 0x20000ULL /* per vCPU: RD_base + SGI_base frames */
#define A64_GICV3_REDIST_END  0x09000000ULL
#define A64_GICV2_MAX_CPUS    8

#define A64_SLOT_SIZE         0x1000ULL
#define A64_UART_BASE         0x09000000ULL
#define A64_UART_SLOTS        4
#define A64_BOOT_TIMER_BASE   0x09010000ULL
#define A64_TESTDEV_BASE      0x09020000ULL
#define A64_TESTDEV_SLOTS     16
#define A64_MMIO_SLOTS_BASE   0x0a000000ULL
#define A64_MMIO_SLOTS_END    0x0c000000ULL

/*
 * Interrupts: 32 private (SGIs and PPIs) plus 224 SPIs. A device's line is
 * its SPI number n: INTID 32 + n in the GIC, <0 n flags> in the FDT, and
 * the irqfd GSI n under KVM's default routing.
 */
#define A64_NR_IRQS           256
#define A64_NR_SPIS           (A64_NR_IRQS - 32)
#define A64_SPI_GENERIC_FIRST 16
#define A64_SPI_VMGENID       15 /* the VM generation ID's notification (edge) */

/* The arch timer's PPIs (INTID - 16): secure, non-secure physical, virtual,
 * hypervisor; Linux's arm,armv8-timer binding lists them in this order. */
#define A64_PPI_TIMER_SEC     13
#define A64_PPI_TIMER_PHYS    14
#define A64_PPI_TIMER_VIRT    11
#define A64_PPI_TIMER_HYP     10

enum a64_dev_kind {
	A64_DEV_UART,       /* 8250 on MMIO: ns16550a */
	A64_DEV_BOOT_TIMER,
	A64_DEV_TESTDEV,
	A64_DEV_VIRTIO_MMIO,
	A64_DEV_OTHER,      /* placed, but the FDT has no binding for it */
};

/* One placed region, remembered for the FDT. */
struct a64_dev {
	enum a64_dev_kind kind;
	uint64_t base, len;
	int spi; /* -1: no interrupt */
};

#define A64_MAX_DEVS (A64_UART_SLOTS + 1 + A64_TESTDEV_SLOTS + A64_NR_SPIS)

/* Per-VM placement cursors and the record of every placement; all-zero
 * means "nothing placed yet". */
struct a64_layout {
	unsigned n_uart;
	bool boot_timer;
	unsigned n_testdev;
	uint64_t mmio_used;  /* bytes handed out from A64_MMIO_SLOTS_BASE */
	unsigned n_spi;      /* generic SPIs handed out */
	struct a64_dev dev[A64_MAX_DEVS];
	unsigned n_dev;
};

/* One bank [A64_RAM_BASE, +ram_size). Returns 1, or -EINVAL (size 0, not
 * 4 KiB-aligned, past the 40-bit IPA space, max 0). */
int a64_mem_layout(uint64_t ram_size, struct mem_bank *banks, unsigned max);

/*
 * Place @r by its class and fill r->bus (always MMIO), r->base and r->irq
 * (an SPI number or -1), and remember it in @l. Returns 0, -EINVAL (port
 * I/O asked for, or a length the slot cannot hold), -ENOSPC (no slot or SPI
 * left) or -ENOENT (no class), with a one-line reason in err.
 */
int a64_layout_place(struct a64_layout *l, struct cub_region *r, char *err, size_t errlen);

/* The GICv3 redistributor region for n vCPUs fits below A64_GICV3_REDIST_END. */
bool a64_gicv3_fits(unsigned n_vcpus);

/* KVM_IRQ_LINE's irq field for SPI @spi: type SPI, INTID 32 + spi. */
uint32_t a64_irq_line_spi(unsigned spi);

#endif
