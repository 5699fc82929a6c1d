/* SPDX-License-Identifier: Apache-2.0 */
/* The arm64 machine around the vCPUs: the vGIC, the arch state on vm->arch,
 * the layout glue (placement, interrupt numbers, no PCI), the config keys
 * arm64 refuses, and what `cubicle check-host` learns about this host. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "a64.h"
#include "cnode.h"
#include "arch.h"

const char *const arch_name = "aarch64";

_Static_assert(KVM_ARM_IRQ_TYPE_SPI == 1 && KVM_ARM_IRQ_TYPE_SHIFT == 24,
	       "layout.c encodes KVM_IRQ_LINE's SPI type itself");
/* (The uapi's GICv3 sizes use the kernel-only SZ_64K.) */
_Static_assert(KVM_VGIC_V2_DIST_SIZE == A64_GICV2_DIST_SIZE &&
	       KVM_VGIC_V2_CPU_SIZE == A64_GICV2_CPU_SIZE,
	       "layout.h's GIC sizes are KVM's");

static int has_cap(int fd, long cap)
{
	int r = ioctl(fd, KVM_CHECK_EXTENSION, cap);

	return r < 0 ? 0 : r;
}

int arch_mem_layout(uint64_t ram_size, struct mem_bank *banks, unsigned max)
{
	return a64_mem_layout(ram_size, banks, max);
}

/* Nothing the setup waits long for: KVM_ARM_PREFERRED_TARGET is quick. */
void arch_prefetch(int kvm_fd)
{
	(void)kvm_fd;
}

void arch_preload(int kvm_fd)
{
	(void)kvm_fd;
}

int arch_vm_setup(struct vm *vm, char *err, size_t errlen)
{
	unsigned n = vm->cfg && vm->cfg->vcpus ? vm->cfg->vcpus : 1;
	struct kvm_enable_cap nisv = { .cap = KVM_CAP_ARM_NISV_TO_USER };
	struct a64_vm *av;

	av = calloc(1, sizeof(*av));
	if (!av)
		return errf(err, errlen, -ENOMEM, "arm64 VM state: out of memory");
	av->vm = vm;
	av->gic_fd = -1;
	vm->arch = av; /* from here on arch_vm_destroy cleans up */
	av->mpidr = calloc(n, sizeof(*av->mpidr));
	if (!av->mpidr)
		return errf(err, errlen, -ENOMEM, "arm64 VM state: out of memory");
	av->n_mpidr = n;

	/* PSCI 0.2 is how secondaries start (CPU_ON) and how the guest
	 * powers off and resets (SYSTEM_OFF, SYSTEM_RESET): all in KVM. */
	if (!has_cap(vm->kvm_fd, KVM_CAP_ARM_PSCI_0_2))
		return errf(err, errlen, -ENOTSUP,
			    "this host's KVM lacks PSCI 0.2 (KVM_CAP_ARM_PSCI_0_2): it cannot start secondary vCPUs or power the guest off");
	if (ioctl(vm->vm_fd, KVM_ARM_PREFERRED_TARGET, &av->init) < 0)
		return errf(err, errlen, -errno, "KVM_ARM_PREFERRED_TARGET: %s", strerror(errno));
	/* Without this an MMIO access KVM cannot decode (no ISV: a load pair,
	 * a write-back) fails KVM_RUN with ENOSYS; with it we can say where. */
	if (has_cap(vm->kvm_fd, KVM_CAP_ARM_NISV_TO_USER))
		ioctl(vm->vm_fd, KVM_ENABLE_CAP, &nisv);
	return a64_gic_create(av, n, err, errlen);
}

void arch_vm_destroy(struct vm *vm)
{
	struct a64_vm *av = a64_of(vm);

	if (!av)
		return;
	a64_gic_destroy(av);
	free(av->mpidr);
	free(av);
	vm->arch = NULL;
}

int arch_place(struct vm *vm, struct cub_region *r, char *err, size_t errlen)
{
	struct a64_vm *av = a64_of(vm);

	if (!av)
		return errf(err, errlen, -EINVAL, "arch_place before arch_vm_setup");
	return a64_layout_place(&av->layout, r, err, errlen);
}

/* Device-tree guests find virtio devices as virtio,mmio nodes. */
const char *arch_virtio_default_transport(void)
{
	return "mmio";
}

/* No PCI on arm64 yet (no host bridge node, no ECAM window): virtio-pci is
 * refused because vm->pci stays NULL. */
void arch_pci_window(uint64_t *base, uint64_t *size)
{
	*base = 0;
	*size = 0;
}

uint32_t arch_irq_kvm_line(unsigned line)
{
	return a64_irq_line_spi(line);
}

int arch_plan_check(const struct plan *c, char *err, size_t errlen)
{
	if (c->boot.where_mode)
		return errf(err, errlen, -EINVAL,
			    "%s: 'boot.mode' is x86-only (real, protected or long mode); an arm64 flat payload starts at EL1 with the MMU off",
			    c->boot.where_mode);
	if (c->boot.format == BOOT_BZIMAGE || c->boot.format == BOOT_ELF)
		return errf(err, errlen, -EINVAL,
			    "%s: boot.format = \"%s\" is x86-only; arm64 boots an Image (\"auto\") or a \"flat\" payload",
			    c->boot.where_format ? c->boot.where_format : c->boot.where,
			    c->boot.format == BOOT_BZIMAGE ? "bzimage" : "elf");
	if (c->split_irqchip)
		return errf(err, errlen, -EINVAL,
			    "%s: machine.irqchip = \"split\" is x86-only (KVM's LAPICs beside cubicle's IOAPIC); arm64's GIC is always KVM's",
			    c->path && *c->path ? c->path : "the VM");
	return 0;
}

bool arch_host_can_boot_linux(char *why, size_t len)
{
	/* No paravirtual KVM on arm64: a KVM that opens boots Linux. */
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, len, "/dev/kvm: %s", strerror(errno));
		return false;
	}
	close(fd);
	return true;
}

/* PSCI version KVM gives a fresh vCPU ("1.1"), or why not. */
static void psci_version(int vm_fd, const struct kvm_vcpu_init *target, char *buf, size_t len)
{
	struct kvm_vcpu_init init = *target;
	uint64_t v = 0;
	struct kvm_one_reg reg = { .id = KVM_REG_ARM_PSCI_VERSION, .addr = (uintptr_t)&v };
	int fd = ioctl(vm_fd, KVM_CREATE_VCPU, 0UL);

	init.features[0] |= 1u << KVM_ARM_VCPU_PSCI_0_2;
	if (fd < 0 || ioctl(fd, KVM_ARM_VCPU_INIT, &init) < 0 || ioctl(fd, KVM_GET_ONE_REG, &reg) < 0)
		snprintf(buf, len, "unknown (%s)", strerror(errno));
	else
		snprintf(buf, len, "%u.%u", (unsigned)(v >> 16), (unsigned)(v & 0xffff));
	if (fd >= 0)
		close(fd);
}

void arch_host_report(int kvm_fd, void (*line)(const char *key, const char *val, void *arg),
		      void *arg)
{
	static const struct { const char *key; long cap; } caps[] = {
		{ "kvm.arm_psci_0_2", KVM_CAP_ARM_PSCI_0_2 },
		{ "kvm.arm_pmu_v3", KVM_CAP_ARM_PMU_V3 },
		{ "kvm.arm_sve", KVM_CAP_ARM_SVE },
		{ "kvm.arm_ptrauth", KVM_CAP_ARM_PTRAUTH_ADDRESS },
		{ "kvm.arm_mte", KVM_CAP_ARM_MTE },
		{ "kvm.arm_el1_32bit", KVM_CAP_ARM_EL1_32BIT },
		{ "kvm.arm_irq_line_layout_2", KVM_CAP_ARM_IRQ_LINE_LAYOUT_2 },
		{ "kvm.arm_nisv_to_user", KVM_CAP_ARM_NISV_TO_USER },
	};
	struct kvm_vcpu_init init = { 0 };
	char buf[96];
	unsigned gics;
	int vm_fd;

	for (unsigned i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		line(caps[i].key, has_cap(kvm_fd, caps[i].cap) ? "yes" : "no", arg);
	snprintf(buf, sizeof(buf), "%d bits", has_cap(kvm_fd, KVM_CAP_ARM_VM_IPA_SIZE));
	line("kvm.arm_max_ipa", buf, arg);
	vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0UL);
	if (vm_fd < 0) {
		snprintf(buf, sizeof(buf), "unknown (KVM_CREATE_VM: %s)", strerror(errno));
		line("kvm.vgic", buf, arg);
		return;
	}
	gics = a64_gic_probe(vm_fd);
	snprintf(buf, sizeof(buf), "%s", gics & 8 ? (gics & 4 ? "GICv3 (GICv2 too)" : "GICv3") :
		 gics & 4 ? "GICv2 only (at most 8 vCPUs)" : "none: cubicle cannot run here");
	line("kvm.vgic", buf, arg);
	if (ioctl(vm_fd, KVM_ARM_PREFERRED_TARGET, &init) < 0) {
		snprintf(buf, sizeof(buf), "unknown (%s)", strerror(errno));
		line("kvm.arm_preferred_target", buf, arg);
	} else {
		snprintf(buf, sizeof(buf), "%u", init.target);
		line("kvm.arm_preferred_target", buf, arg);
		psci_version(vm_fd, &init, buf, sizeof(buf));
		line("kvm.psci_version", buf, arg);
	}
	close(vm_fd);
}

/* The generic timer's virtual counter keeps counting while the vCPUs are
 * parked (Linux 6.4's KVM_ARM_SET_COUNTER_OFFSET could stop it; not used
 * yet): an arm64 guest sees the pause as time passing. */
int arch_vm_pause(struct vm *vm, char *err, size_t errlen)
{
	(void)vm, (void)err, (void)errlen;
	return 0;
}

int arch_vm_resume(struct vm *vm, char *err, size_t errlen)
{
	(void)vm, (void)err, (void)errlen;
	return 0;
}

void arch_cpu_id(char *buf, size_t len)
{
	unsigned long midr = 0;
	FILE *f = fopen("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", "r");

	if (f) {
		if (fscanf(f, "%lx", &midr) != 1)
			midr = 0;
		fclose(f);
	}
	snprintf(buf, len, "arm64 midr 0x%lx", midr);
}
