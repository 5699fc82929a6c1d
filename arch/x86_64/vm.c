/* SPDX-License-Identifier: Apache-2.0 */
/* The x86 machine around the vCPUs: KVM's in-kernel PIC, IOAPIC and PIT
 * (or, with machine.irqchip = "split", KVM's LAPICs and ioapic.c's IOAPIC),
 * the arch state on vm->arch, and what `cubicle check-host` learns about
 * this host's KVM. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "arch.h"
#include "bus.h"
#include "cnode.h"
#include "log.h"
#include "pci.h"
#include "x86.h"

const char *const arch_name = "x86_64";

static bool has_cap(int fd, long cap)
{
	return ioctl(fd, KVM_CHECK_EXTENSION, cap) > 0;
}

/*
 * Leave the 8259s as a BIOS would: initialised (vectors 0x08 and 0x70) and
 * fully masked. KVM creates them unmasked with vector base 0, and a kernel
 * that never programs them (hardware-reduced ACPI) would otherwise take
 * any ISA IRQ a second time through the BSP's ExtINT LINT0 as an exception
 * vector.
 */
static int mask_pic(struct vm *vm)
{
	static const struct { uint32_t id; uint8_t base; } pics[] = {
		{ KVM_IRQCHIP_PIC_MASTER, 0x08 }, { KVM_IRQCHIP_PIC_SLAVE, 0x70 },
	};

	for (unsigned i = 0; i < 2; i++) {
		struct kvm_irqchip chip = { .chip_id = pics[i].id };

		if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &chip) < 0)
			return -errno;
		chip.chip.pic.imr = 0xff;
		chip.chip.pic.irq_base = pics[i].base;
		chip.chip.pic.init4 = 1;
		if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &chip) < 0)
			return -errno;
	}
	return 0;
}

/* machine.irqchip = "split": the IOAPIC's messages and KVM's routes. */
static int split_deliver(void *ctx, uint64_t addr, uint32_t data)
{
	struct x86_vm *xv = ctx;

	return irq_msi(xv->vm, addr, data);
}

static int split_routes(void *ctx, const struct x86_ioapic_route *r, unsigned n)
{
	struct x86_vm *xv = ctx;
	struct {
		struct kvm_irq_routing h;
		struct kvm_irq_routing_entry e[X86_IOAPIC_PINS];
	} t;

	memset(&t, 0, sizeof(t));
	t.h.nr = n;
	for (unsigned i = 0; i < n && i < X86_IOAPIC_PINS; i++) {
		t.e[i].gsi = r[i].pin;
		t.e[i].type = KVM_IRQ_ROUTING_MSI;
		t.e[i].u.msi.address_lo = (uint32_t)r[i].addr;
		t.e[i].u.msi.address_hi = (uint32_t)(r[i].addr >> 32);
		t.e[i].u.msi.data = r[i].data;
	}
	if (ioctl(xv->vm->vm_fd, KVM_SET_GSI_ROUTING, &t) < 0) {
		int e = errno;

		log_warn("ioapic: KVM_SET_GSI_ROUTING (%u level pins): %s", n, strerror(e));
		return -e;
	}
	return 0;
}

static int split_line(struct vm *vm, unsigned gsi, bool level)
{
	return x86_ioapic_line(&x86_of(vm)->ioapic, gsi, level);
}

static void split_mmio(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
	x86_ioapic_mmio(&((struct x86_vm *)priv)->ioapic, off, data, len, is_write);
}

/*
 * The LAPICs in KVM, the IOAPIC here (ioapic.c), no 8259 and no PIT.
 * KVM_CREATE_IRQCHIP's PIC and IOAPIC sit on KVM's I/O buses, and taking
 * them down again waits for grace periods: on the 6.18 host this was
 * measured on, a VM fd's close took 15.6 ms with them and 0.16 ms with a
 * split irqchip (half of a short VM's life; `make bench`'s churn row).
 */
static int split_setup(struct x86_vm *xv, char *err, size_t errlen)
{
	struct kvm_enable_cap cap = { .cap = KVM_CAP_SPLIT_IRQCHIP, .args = { X86_IOAPIC_PINS } };
	struct vm *vm = xv->vm;
	int ret;

	if (!has_cap(vm->kvm_fd, KVM_CAP_SPLIT_IRQCHIP))
		return errf(err, errlen, -ENOTSUP,
			    "machine.irqchip = \"split\": this host's KVM has no KVM_CAP_SPLIT_IRQCHIP (use \"kernel\")");
	if (ioctl(vm->vm_fd, KVM_ENABLE_CAP, &cap) < 0)
		return errf(err, errlen, -errno, "KVM_ENABLE_CAP(KVM_CAP_SPLIT_IRQCHIP): %s",
			    strerror(errno));
	/* the tables' IOAPIC id (mptable.c, acpi.c): the vCPU count */
	x86_ioapic_init(&xv->ioapic, (uint8_t)(vm->cfg ? vm->cfg->vcpus : 1), split_deliver,
			split_routes, xv);
	xv->split = true;
	ret = bus_add(&vm->mmio, X86_IOAPIC_ADDR, 0x1000, split_mmio, xv, "ioapic");
	if (ret)
		return errf(err, errlen, ret, "the IOAPIC's MMIO page: bus_add: %s", strerror(-ret));
	vm->irq_line_hook = split_line;
	return 0;
}

/* The supported CPUID table: 0.4 ms under PVM, where KVM's own cpuid
 * instructions trap. */
void arch_prefetch(int kvm_fd)
{
	x86_cpuid_ask_ahead(kvm_fd);
}

void arch_preload(int kvm_fd)
{
	x86_cpuid_preload(kvm_fd);
}

int arch_vm_setup(struct vm *vm, char *err, size_t errlen)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	uint64_t idmap = X86_IDMAP_ADDR;
	struct x86_vm *xv;
	int ret;

	xv = calloc(1, sizeof(*xv));
	if (!xv)
		return errf(err, errlen, -ENOMEM, "x86 VM state: out of memory");
	xv->vm = vm;
	vm->arch = xv; /* from here on arch_vm_destroy cleans up */

	/*
	 * Intel without unrestricted guest runs real mode through vm86 and
	 * needs three pages for a TSS and one for an identity page table,
	 * both in guest-physical space that is not RAM: the top of the MMIO
	 * hole, below the BIOS area. Hosts without the capability (AMD, PVM)
	 * do not need them.
	 */
	if (has_cap(vm->kvm_fd, KVM_CAP_SET_TSS_ADDR) &&
	    ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)X86_TSS_ADDR) < 0)
		return errf(err, errlen, -errno, "KVM_SET_TSS_ADDR: %s", strerror(errno));
	if (has_cap(vm->kvm_fd, KVM_CAP_SET_IDENTITY_MAP_ADDR) &&
	    ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &idmap) < 0)
		return errf(err, errlen, -errno, "KVM_SET_IDENTITY_MAP_ADDR: %s", strerror(errno));
	/* PIC + IOAPIC + per-vCPU LAPIC in the kernel (or the LAPICs only:
	 * split_setup); vCPUs 1..n then wait for INIT/SIPI there and HLT
	 * never exits to us. */
	if (vm->cfg && vm->cfg->split_irqchip) {
		ret = split_setup(xv, err, errlen);
		if (ret)
			return ret;
	} else if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		return errf(err, errlen, -errno, "KVM_CREATE_IRQCHIP: %s", strerror(errno));
	} else if ((ret = mask_pic(vm))) {
		return errf(err, errlen, ret, "KVM_GET/SET_IRQCHIP (PIC): %s", strerror(-ret));
	}
	/* The PIT on GSI 0, and port 0x61 (speaker, PIT channel 2 gate) that
	 * Linux's TSC calibration reads; machine.pit = false leaves it out (a
	 * payload guest that needs no timer: the PIT's teardown is much of a
	 * short VM's close). */
	if (!(vm->cfg && vm->cfg->no_pit) && ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return errf(err, errlen, -errno, "KVM_CREATE_PIT2: %s", strerror(errno));

	xv->cpuid = x86_cpuid_supported_once(vm->kvm_fd);
	if (!xv->cpuid)
		return errf(err, errlen, -errno, "KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
	xv->tsc_deadline = has_cap(vm->kvm_fd, KVM_CAP_TSC_DEADLINE_TIMER);
	ret = x86_platform_setup(xv, err, errlen);
	/* PCI bus 0 behind the conf1 ports: virtio's transport on x86. */
	ret = ret ?: pci_init(vm, err, errlen);
	return ret ?: pci_conf1_attach(vm, err, errlen);
}

void arch_vm_destroy(struct vm *vm)
{
	struct x86_vm *xv = x86_of(vm);

	/* vCPUs are stopped; the core frees the buses that still point at
	 * our platform handlers, and never calls them again. */
	if (!xv)
		return;
	pci_destroy(vm);
	x86_platform_destroy(xv);
	if (xv->split) {
		vm->irq_line_hook = NULL;
		x86_ioapic_destroy(&xv->ioapic);
	}
	free(xv->pause_tsc);
	free(xv->cpuid);
	free(xv);
	vm->arch = NULL;
}

/* Every key of the core schema means something on x86 (boot.mode and the
 * bzimage and elf formats are x86's own). */
int arch_plan_check(const struct plan *c, char *err, size_t errlen)
{
	return 0;
}

/* "vmx", "svm" or NULL, from the flags line of /proc/cpuinfo. */
static const char *cpu_virt(void)
{
	static const char *const names[] = { "vmx", "svm" };
	const char *found = NULL;
	char line[4096];
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		char *save, *tok;

		if (strncmp(line, "flags", 5))
			continue;
		for (tok = strtok_r(strchr(line, ':'), " \t\n:", &save); tok && !found;
		     tok = strtok_r(NULL, " \t\n", &save))
			for (unsigned i = 0; i < 2; i++)
				if (!strcmp(tok, names[i]))
					found = names[i];
		break; /* every CPU has the same flags */
	}
	fclose(f);
	return found;
}

static bool host_is_pvm(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0;
}

bool arch_host_can_boot_linux(char *why, size_t len)
{
	if (host_is_pvm()) {
		snprintf(why, len,
			 "host KVM is PVM (paravirtual): it cannot run a stock Linux kernel; run under tests/e2e/nested/run-nested.sh or on a host with VT-x/AMD-V");
		return false;
	}
	if (!cpu_virt()) {
		snprintf(why, len,
			 "/proc/cpuinfo shows neither vmx nor svm: this CPU has no hardware virtualization for KVM (enable VT-x/AMD-V, or nested virtualization on the outer hypervisor)");
		return false;
	}
	return true;
}

/* hostcheck.c already prints kvm.irqchip and whether the host is PVM; these
 * are the x86-only facts. */
void arch_host_report(int kvm_fd, void (*line)(const char *key, const char *val, void *arg),
		      void *arg)
{
	static const struct { const char *key; long cap; } caps[] = {
		{ "kvm.pit2", KVM_CAP_PIT2 },
		{ "kvm.split_irqchip", KVM_CAP_SPLIT_IRQCHIP }, /* machine.irqchip = "split" */
		{ "kvm.tsc_deadline_timer", KVM_CAP_TSC_DEADLINE_TIMER },
		{ "kvm.x2apic_api", KVM_CAP_X2APIC_API },
		{ "kvm.set_tss_addr", KVM_CAP_SET_TSS_ADDR },
	};
	const char *virt = cpu_virt();
	struct kvm_cpuid2 *c;
	char buf[128];

	line("cpu.virtualization", virt ? virt : "none (no vmx or svm in /proc/cpuinfo)", arg);
	for (unsigned i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		line(caps[i].key, has_cap(kvm_fd, caps[i].cap) ? "yes" : "no", arg);
	c = x86_cpuid_supported(kvm_fd);
	if (c)
		snprintf(buf, sizeof(buf), "%u", c->nent);
	else
		snprintf(buf, sizeof(buf), "unknown (%s)", strerror(errno));
	line("kvm.cpuid_entries", buf, arg);
	free(c);
}

/*
 * Pausing stops the vCPUs, not the clocks the guest reads: kvmclock and the
 * TSC run on with the host's. So the pause saves both (KVM_GET_CLOCK, each
 * vCPU's IA32_TSC) and the resume writes them back: KVM moves its offsets,
 * and the guest resumes at the instant it stopped, whichever clocksource it
 * uses. Wall-clock time is the guest's business (NTP), as after a snapshot.
 */
#define MSR_IA32_TSC 0x10

static int tsc_io(struct vcpu *v, unsigned long req, uint64_t *val)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e;
	} m = { .h.nmsrs = 1, .e.index = MSR_IA32_TSC, .e.data = *val };

	if (ioctl(v->fd, req, &m) != 1)
		return errno ? -errno : -EIO;
	*val = m.e.data;
	return 0;
}

int arch_vm_pause(struct vm *vm, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	int ret;

	if (!xv->pause_tsc)
		xv->pause_tsc = calloc(vm->n_vcpus, sizeof(*xv->pause_tsc));
	if (!xv->pause_tsc)
		return errf(err, errlen, -ENOMEM, "pause: out of memory");
	memset(&xv->pause_clock, 0, sizeof(xv->pause_clock));
	if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &xv->pause_clock) < 0)
		return errf(err, errlen, -errno, "pause: KVM_GET_CLOCK: %s", strerror(errno));
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		ret = tsc_io(&vm->vcpus[i], KVM_GET_MSRS, &xv->pause_tsc[i]);
		if (ret)
			return errf(err, errlen, ret, "pause: vCPU %u: reading its TSC: %s", i,
				    strerror(-ret));
	}
	return 0;
}

int arch_vm_resume(struct vm *vm, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	struct kvm_clock_data c = { .clock = xv->pause_clock.clock };
	int ret;

	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		ret = tsc_io(&vm->vcpus[i], KVM_SET_MSRS, &xv->pause_tsc[i]);
		if (ret)
			return errf(err, errlen, ret, "resume: vCPU %u: writing its TSC: %s", i,
				    strerror(-ret));
	}
	if (ioctl(vm->vm_fd, KVM_SET_CLOCK, &c) < 0)
		return errf(err, errlen, -errno, "resume: KVM_SET_CLOCK: %s", strerror(errno));
	return 0;
}
