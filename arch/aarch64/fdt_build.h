/* SPDX-License-Identifier: Apache-2.0 */
/* The flattened device tree an arm64 guest boots with, built from a plain
 * description so unit tests need neither KVM nor an arm64 host. */
#ifndef CUBICLE_A64_FDT_BUILD_H
#define CUBICLE_A64_FDT_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "mem.h"

#define A64_FDT_GIC_PHANDLE 1
#define A64_UART_CLOCK_HZ   1843200 /* the PC UART crystal the 8250 divisors assume */

/* Everything the tree says; the builder reads nothing else. */
struct a64_fdt_desc {
	const struct mem_bank *banks;   /* RAM, one /memory node each */
	unsigned n_banks;
	unsigned n_cpus;
	const uint64_t *mpidr;          /* MPIDR_EL1 per vCPU; NULL: a64_mpidr_default() */
	unsigned gic_version;           /* 3 or 2 */
	uint64_t gic_dist_base, gic_dist_size;
	uint64_t gic_redist_base, gic_redist_size; /* GICv3: all vCPUs' frames */
	uint64_t gic_cpu_base, gic_cpu_size;       /* GICv2 */
	const char *bootargs;           /* NULL or "" : none */
	uint64_t initrd_start, initrd_end; /* equal: no initrd */
	const struct a64_dev *devs;     /* placed devices, in placement order */
	unsigned n_devs;
	const uint8_t *rng_seed;        /* /chosen/rng-seed, may be NULL */
	size_t rng_seed_len;
	uint64_t kaslr_seed;            /* /chosen/kaslr-seed, 0: none */
	uint64_t vmgenid_gpa;           /* the VM generation ID's 16 bytes (in a
					 * page the blob reserves), 0: none */
	unsigned vmgenid_spi;           /* its notification, an edge SPI */
};

/*
 * Write the device tree for @d into @buf (@cap bytes): the root with
 * interrupt-parent = the GIC, /chosen (bootargs, initrd, stdout-path = the
 * first UART, seeds), /aliases (serialN), /memory@, /cpus with one cpu@N
 * per vCPU (reg = MPIDR affinity, enable-method "psci"), /psci (hvc),
 * the GIC (arm,gic-v3 or arm,cortex-a15-gic, phandle 1), /timer
 * (arm,armv8-timer) and one node per placed UART (ns16550a), virtio-mmio
 * (virtio,mmio), boot-timer and testdev, and with vmgenid_gpa a
 * /memreserve/ of its page and vmgenid@ (microsoft,vmgenid: Linux 6.10's
 * vmgenid driver reads it, and re-reads it on the SPI's edge).
 * A64_DEV_OTHER regions get no node. Returns the blob's size, -ENOSPC (@cap too small) or -EINVAL
 * (bad description).
 */
int a64_fdt_build(void *buf, size_t cap, const struct a64_fdt_desc *d);

/* The MPIDR_EL1 KVM gives vCPU @id when userspace does not set one:
 * Aff0 = id[3:0], Aff1 = id[11:4], Aff2 = id[19:12], bit 31 (RES1) set. */
uint64_t a64_mpidr_default(unsigned id);

#endif
