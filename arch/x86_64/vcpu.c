/* SPDX-License-Identifier: Apache-2.0 */
/* Per-vCPU x86 state at power-on (CPUID, MSRs, LAPIC, FPU, the BSP's entry
 * registers) and the exits the common run loop leaves to the arch. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "arch.h"
#include "boot.h"
#include "x86.h"

#define CR0_PE   0x1ULL
#define CR0_ET   0x10ULL
#define CR0_PG   0x80000000ULL
#define CR4_PAE  0x20ULL
#define EFER_LME 0x100ULL
#define EFER_LMA 0x400ULL

#define MSR_IA32_TSC          0x10
#define MSR_IA32_SYSENTER_CS  0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE  0x1a0
#define MSR_MTRR_DEF_TYPE     0x2ff
#define MSR_STAR              0xc0000081
#define MSR_LSTAR             0xc0000082
#define MSR_CSTAR             0xc0000083
#define MSR_SYSCALL_MASK      0xc0000084
#define MSR_KERNEL_GS_BASE    0xc0000102

#define APIC_LVT_LINT0 0x350
#define APIC_LVT_LINT1 0x360
#define APIC_MODE_NMI    0x4
#define APIC_MODE_EXTINT 0x7

static unsigned vm_vcpus(const struct vm *vm)
{
	/* vm->n_vcpus grows while vCPUs are created; the config has the total. */
	return vm->cfg && vm->cfg->vcpus ? vm->cfg->vcpus : vm->n_vcpus;
}

static int setup_cpuid(struct vcpu *v, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(v->vm);
	struct kvm_cpuid2 *c;
	int ret = 0;

	c = x86_cpuid_for_vcpu(xv->cpuid, v->id, vm_vcpus(v->vm), xv->tsc_deadline);
	if (!c)
		return -ENOMEM;
	if (ioctl(v->fd, KVM_SET_CPUID2, c) < 0) {
		ret = -errno;
		snprintf(err, errlen, "vCPU %u: KVM_SET_CPUID2: %s", v->id, strerror(-ret));
	}
	free(c);
	return ret;
}

/*
 * What firmware leaves behind: fast strings on, MTRRs on with write-back as
 * the default type (without it a guest treats all RAM as uncached), and
 * the syscall MSRs cleared.
 */
static int setup_msrs(struct vcpu *v, char *err, size_t errlen)
{
	static const struct { uint32_t index; uint64_t data; } init[] = {
		{ MSR_IA32_SYSENTER_CS, 0 }, { MSR_IA32_SYSENTER_ESP, 0 },
		{ MSR_IA32_SYSENTER_EIP, 0 }, { MSR_STAR, 0 }, { MSR_LSTAR, 0 },
		{ MSR_CSTAR, 0 }, { MSR_SYSCALL_MASK, 0 }, { MSR_KERNEL_GS_BASE, 0 },
		{ MSR_IA32_TSC, 0 }, { MSR_IA32_MISC_ENABLE, 1 },
		{ MSR_MTRR_DEF_TYPE, (1 << 11) | 6 },
	};
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[sizeof(init) / sizeof(init[0])];
	} m;
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = sizeof(init) / sizeof(init[0]);
	for (unsigned i = 0; i < m.hdr.nmsrs; i++) {
		m.e[i].index = init[i].index;
		m.e[i].data = init[i].data;
	}
	n = ioctl(v->fd, KVM_SET_MSRS, &m);
	if (n < 0) {
		n = -errno;
		snprintf(err, errlen, "vCPU %u: KVM_SET_MSRS: %s", v->id, strerror(-n));
		return n;
	}
	/* KVM stops at the first MSR it refuses and returns how many it set. */
	if ((unsigned)n < m.hdr.nmsrs) {
		snprintf(err, errlen, "vCPU %u: KVM_SET_MSRS: KVM refused MSR 0x%x", v->id,
			 m.e[n].index);
		return -EINVAL;
	}
	return 0;
}

static uint32_t lvt_mode(uint32_t lvt, uint32_t mode)
{
	/* Delivery mode in bits 10:8, unmasked (bit 16 clear). */
	return (lvt & ~(0x700u | (1u << 16))) | (mode << 8);
}

/* Virtual-wire mode, as the MP table says: the PIC on LINT0, NMI on LINT1. */
static int setup_lapic(struct vcpu *v, char *err, size_t errlen)
{
	struct kvm_lapic_state s;
	uint32_t r;
	int e;

	if (ioctl(v->fd, KVM_GET_LAPIC, &s) < 0)
		goto fail;
	memcpy(&r, &s.regs[APIC_LVT_LINT0], 4);
	r = lvt_mode(r, APIC_MODE_EXTINT);
	memcpy(&s.regs[APIC_LVT_LINT0], &r, 4);
	memcpy(&r, &s.regs[APIC_LVT_LINT1], 4);
	r = lvt_mode(r, APIC_MODE_NMI);
	memcpy(&s.regs[APIC_LVT_LINT1], &r, 4);
	if (ioctl(v->fd, KVM_SET_LAPIC, &s) < 0)
		goto fail;
	return 0;
fail:
	e = errno;
	snprintf(err, errlen, "vCPU %u: KVM_GET/SET_LAPIC: %s", v->id, strerror(e));
	return -e;
}

static int setup_fpu(struct vcpu *v, char *err, size_t errlen)
{
	/* FNINIT's control word and the power-on MXCSR: all exceptions masked. */
	struct kvm_fpu fpu = { .fcw = 0x37f, .mxcsr = 0x1f80 };

	if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0) {
		int e = errno;

		snprintf(err, errlen, "vCPU %u: KVM_SET_FPU: %s", v->id, strerror(e));
		return -e;
	}
	return 0;
}

static void real_segment(struct kvm_segment *s, uint16_t sel, bool code)
{
	memset(s, 0, sizeof(*s));
	s->selector = sel;
	s->base = (uint64_t)sel << 4;
	s->limit = 0xffff;
	s->type = code ? 0xb : 0x3;
	s->present = 1;
	s->s = 1;
}

/* Segments and control registers for the entry mode arch_boot_load chose;
 * they match the GDT and page tables boot.c wrote. */
static void entry_sregs(const struct x86_entry *en, struct kvm_sregs *sr)
{
	uint64_t gdt[X86_GDT_ENTRIES];
	struct kvm_segment data;

	if (en->mode == BOOT_MODE_REAL) {
		real_segment(&sr->cs, en->real_seg, true);
		real_segment(&data, en->real_seg, false);
		sr->cr0 &= ~(CR0_PE | CR0_PG);
		sr->cr4 = 0;
		sr->efer = 0;
	} else {
		x86_gdt_build(gdt, en->mode);
		x86_gdt_segment(gdt[X86_BOOT_CS / 8], X86_BOOT_CS, &sr->cs);
		x86_gdt_segment(gdt[X86_BOOT_DS / 8], X86_BOOT_DS, &data);
		sr->gdt.base = X86_GDT_ADDR;
		sr->gdt.limit = sizeof(gdt) - 1;
		sr->idt.base = 0;
		sr->idt.limit = 0;
		sr->cr0 = CR0_PE | CR0_ET;
		sr->cr4 = 0;
		sr->efer = 0;
		if (en->mode == BOOT_MODE_LONG) {
			sr->cr0 |= CR0_PG;
			sr->cr3 = X86_PML4_ADDR;
			sr->cr4 = CR4_PAE;
			sr->efer = EFER_LME | EFER_LMA;
		}
	}
	sr->ds = sr->es = sr->fs = sr->gs = sr->ss = data;
}

static int setup_entry(struct vcpu *v, char *err, size_t errlen)
{
	const struct x86_entry *en = &x86_of(v->vm)->entry;
	struct kvm_sregs sr;
	struct kvm_regs r = { .rflags = 0x2 }; /* bit 1 is always set; IF clear */
	int ret;

	if (!en->valid) {
		snprintf(err, errlen, "vCPU 0: no entry point (no kernel was loaded)");
		return -EINVAL;
	}
	if (ioctl(v->fd, KVM_GET_SREGS, &sr) < 0)
		goto fail;
	entry_sregs(en, &sr);
	if (ioctl(v->fd, KVM_SET_SREGS, &sr) < 0)
		goto fail;
	r.rip = en->rip;
	r.rsp = en->rsp;
	r.rsi = en->rsi;
	if (ioctl(v->fd, KVM_SET_REGS, &r) < 0)
		goto fail;
	return 0;
fail:
	ret = errno;
	snprintf(err, errlen, "vCPU 0: setting entry registers: %s", strerror(ret));
	return -ret;
}

int arch_vcpu_setup(struct vcpu *v, char *err, size_t errlen)
{
	int ret;

	if (!x86_of(v->vm))
		return -EINVAL;
	ret = setup_cpuid(v, err, errlen);
	ret = ret ?: setup_msrs(v, err, errlen);
	ret = ret ?: setup_lapic(v, err, errlen);
	ret = ret ?: setup_fpu(v, err, errlen);
	/* Other vCPUs wait for INIT/SIPI in the in-kernel LAPIC. */
	if (!ret && v->id == 0 && !v->vm->restored)
		ret = setup_entry(v, err, errlen);
	return ret;
}

void arch_vcpu_destroy(struct vcpu *v)
{
	/* No per-vCPU arch state: the CPUID table is freed once set. */
}

static uint64_t vcpu_rip(struct vcpu *v)
{
	struct kvm_regs r;

	return ioctl(v->fd, KVM_GET_REGS, &r) < 0 ? 0 : r.rip;
}

static const char *internal_error_name(uint32_t sub)
{
	switch (sub) {
	case KVM_INTERNAL_ERROR_EMULATION: return "instruction emulation failed";
	case KVM_INTERNAL_ERROR_SIMUL_EX: return "exception while delivering an exception";
	case KVM_INTERNAL_ERROR_DELIVERY_EV: return "cannot deliver an event";
	case KVM_INTERNAL_ERROR_UNEXPECTED_EXIT_REASON: return "unexpected exit reason";
	default: return "unknown";
	}
}

int arch_exit(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	struct vm *vm = v->vm;

	switch (run->exit_reason) {
	case KVM_EXIT_SHUTDOWN:
		vm_request_exit(vm, VM_EXIT_CRASH, "guest triple-faulted (vCPU %u, RIP 0x%" PRIx64 ")",
				v->id, vcpu_rip(v));
		return 1;
	case KVM_EXIT_HLT:
		/* Only without an in-kernel LAPIC; ours always has one. */
		vm_request_exit(vm, VM_EXIT_OK, "guest halted (vCPU %u)", v->id);
		return 1;
	case KVM_EXIT_FAIL_ENTRY:
		vm_request_exit(vm, VM_EXIT_CRASH,
				"KVM could not enter the guest (vCPU %u, hardware reason 0x%llx, host CPU %u)",
				v->id,
				(unsigned long long)run->fail_entry.hardware_entry_failure_reason,
				run->fail_entry.cpu);
		return 1;
	case KVM_EXIT_INTERNAL_ERROR:
		vm_request_exit(vm, VM_EXIT_CRASH,
				"KVM internal error on vCPU %u: %s (suberror %u, RIP 0x%" PRIx64 ")",
				v->id, internal_error_name(run->internal.suberror),
				run->internal.suberror, vcpu_rip(v));
		return 1;
	case KVM_EXIT_SYSTEM_EVENT:
		switch (run->system_event.type) {
		case KVM_SYSTEM_EVENT_SHUTDOWN:
			vm_request_exit(vm, VM_EXIT_OK, "guest powered off");
			return 1;
		case KVM_SYSTEM_EVENT_RESET:
			vm_request_exit(vm, VM_EXIT_OK, "guest requested reset");
			return 1;
		case KVM_SYSTEM_EVENT_CRASH:
			vm_request_exit(vm, VM_EXIT_PANIC, "guest kernel panicked (crash event)");
			return 1;
		}
		break;
	case KVM_EXIT_IRQ_WINDOW_OPEN:
		return 0;
	case KVM_EXIT_IOAPIC_EOI: /* machine.irqchip = "split": a level pin's EOI */
		if (x86_of(vm)->split) {
			x86_ioapic_eoi(&x86_of(vm)->ioapic, run->eoi.vector);
			return 0;
		}
		break;
	}
	vm_request_exit(vm, VM_EXIT_CRASH, "vCPU %u: unhandled KVM exit reason %u", v->id,
			run->exit_reason);
	return 1;
}
