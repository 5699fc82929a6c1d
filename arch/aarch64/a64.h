/* SPDX-License-Identifier: Apache-2.0 */
/* Private to arch/aarch64: the per-VM arch state hung on vm->arch and the
 * KVM-facing helpers its files share. */
#ifndef CUBICLE_A64_H
#define CUBICLE_A64_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "layout.h"
#include "vm.h"

/* The boot vCPU's first instruction and its X0. */
struct a64_entry {
	bool valid;
	uint64_t pc;
	uint64_t x0; /* the FDT's guest-physical address */
};

struct a64_vm {
	struct vm *vm;
	struct a64_layout layout;
	struct kvm_vcpu_init init; /* KVM_ARM_PREFERRED_TARGET, fetched once */
	int gic_fd;                /* the vGIC device, -1 before arch_vm_setup made it */
	unsigned gic_version;      /* 3 or 2 */
	bool gic_ready;            /* KVM_DEV_ARM_VGIC_CTRL_INIT done */
	struct a64_entry entry;
	enum boot_format format;   /* as loaded, BOOT_AUTO until then */
	uint64_t fdt_gpa;          /* the 2 MiB FDT slot */
	uint64_t initrd_gpa, initrd_size;
	uint64_t *mpidr;           /* per vCPU, read back after KVM_ARM_VCPU_INIT */
	uint64_t vmgenid_gpa;      /* the VM generation ID's 16 bytes; 0: none */
	unsigned n_mpidr;
};

static inline struct a64_vm *a64_of(struct vm *vm)
{
	return vm->arch;
}

/* gic.c */
/* Create the vGIC for @n_vcpus: GICv3 when KVM offers it, else GICv2 (at
 * most 8 vCPUs); set its addresses and number of interrupts. 0 or -errno
 * with a reason in err. */
int a64_gic_create(struct a64_vm *av, unsigned n_vcpus, char *err, size_t errlen);
/* KVM_DEV_ARM_VGIC_CTRL_INIT: only once every vCPU exists. */
int a64_gic_init(struct a64_vm *av, char *err, size_t errlen);
void a64_gic_destroy(struct a64_vm *av);
/* The vGIC models KVM can create on @vm_fd, without creating one:
 * bit 3 set for GICv3, bit 2 for GICv2. */
unsigned a64_gic_probe(int vm_fd);

#endif
