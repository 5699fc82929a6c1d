/* SPDX-License-Identifier: Apache-2.0 */
/* Per-vCPU arm64 state at power-on (KVM_ARM_VCPU_INIT with PSCI, the boot
 * vCPU's entry registers) and the exits the common run loop leaves to us:
 * PSCI power-off and reset arrive as KVM_EXIT_SYSTEM_EVENT. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "a64.h"
#include "arch.h"

#define CORE_REG(off) \
	(KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | ((off) / sizeof(__u32)))
#define REG_X(n)    CORE_REG(offsetof(struct kvm_regs, regs.regs) + 8 * (n))
#define REG_PC      CORE_REG(offsetof(struct kvm_regs, regs.pc))
#define REG_PSTATE  CORE_REG(offsetof(struct kvm_regs, regs.pstate))
#define REG_MPIDR   ARM64_SYS_REG(3, 0, 0, 0, 5) /* MPIDR_EL1: op0 3, op1 0, CRn 0, CRm 0, op2 5 */

/* EL1 using SP_EL1, with debug, SError, IRQ and FIQ masked: what
 * Documentation/arch/arm64/booting.rst asks of the boot CPU. */
#define ENTRY_PSTATE (PSR_MODE_EL1h | PSR_D_BIT | PSR_A_BIT | PSR_I_BIT | PSR_F_BIT)

static int get_reg(struct vcpu *v, uint64_t id, uint64_t *val)
{
	struct kvm_one_reg r = { .id = id, .addr = (uintptr_t)val };

	return ioctl(v->fd, KVM_GET_ONE_REG, &r) < 0 ? -errno : 0;
}

static int set_reg(struct vcpu *v, uint64_t id, uint64_t val)
{
	struct kvm_one_reg r = { .id = id, .addr = (uintptr_t)&val };

	return ioctl(v->fd, KVM_SET_ONE_REG, &r) < 0 ? -errno : 0;
}

static int setup_entry(struct vcpu *v, char *err, size_t errlen)
{
	const struct a64_entry *en = &a64_of(v->vm)->entry;
	int ret;

	if (!en->valid) {
		snprintf(err, errlen, "vCPU 0: no entry point (no kernel was loaded)");
		return -EINVAL;
	}
	ret = set_reg(v, REG_PSTATE, ENTRY_PSTATE);
	ret = ret ?: set_reg(v, REG_PC, en->pc);
	ret = ret ?: set_reg(v, REG_X(0), en->x0);
	for (unsigned i = 1; i <= 3 && !ret; i++) /* reserved for future use: zero */
		ret = set_reg(v, REG_X(i), 0);
	if (ret)
		snprintf(err, errlen, "vCPU 0: setting entry registers: %s", strerror(-ret));
	return ret;
}

int arch_vcpu_setup(struct vcpu *v, char *err, size_t errlen)
{
	struct a64_vm *av = a64_of(v->vm);
	struct kvm_vcpu_init init;
	int ret;

	if (!av)
		return -EINVAL;
	if (v->id >= av->n_mpidr) {
		snprintf(err, errlen, "vCPU %u: only %u were planned", v->id, av->n_mpidr);
		return -EINVAL;
	}
	init = av->init;
	init.features[0] |= 1u << KVM_ARM_VCPU_PSCI_0_2;
	/* Secondaries wait powered off until the guest's PSCI CPU_ON, which
	 * KVM handles in the kernel (it sets their PC and X0). */
	if (v->id)
		init.features[0] |= 1u << KVM_ARM_VCPU_POWER_OFF;
	if (ioctl(v->fd, KVM_ARM_VCPU_INIT, &init) < 0) {
		ret = -errno;
		snprintf(err, errlen, "vCPU %u: KVM_ARM_VCPU_INIT (target %u): %s", v->id,
			 init.target, strerror(-ret));
		return ret;
	}
	/* The FDT's cpu@ nodes and PSCI CPU_ON name CPUs by this value. */
	ret = get_reg(v, REG_MPIDR, &av->mpidr[v->id]);
	if (ret) {
		snprintf(err, errlen, "vCPU %u: reading MPIDR_EL1: %s", v->id, strerror(-ret));
		return ret;
	}
	/* Restored: every register comes from the snapshot (arch_snap_load). */
	return v->id == 0 && !v->vm->restored ? setup_entry(v, err, errlen) : 0;
}

void arch_vcpu_destroy(struct vcpu *v)
{
	/* No per-vCPU arch state. */
}

static uint64_t vcpu_pc(struct vcpu *v)
{
	uint64_t pc = 0;

	return get_reg(v, REG_PC, &pc) ? 0 : pc;
}

static int system_event(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	struct vm *vm = v->vm;

	switch (run->system_event.type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
		vm_request_exit(vm, VM_EXIT_OK, "guest powered off");
		return 1;
	case KVM_SYSTEM_EVENT_RESET:
		/*
		 * Linux resets through PSCI SYSTEM_RESET, panic or not, except
		 * when reboot_mode is warm: then it uses SYSTEM_RESET2 (PSCI
		 * 1.1) and KVM flags the exit. "reboot=panic_warm" on the
		 * guest's command line makes panic() switch to warm, so a
		 * flagged reset is a panic (the x86 warm-reset flag's twin).
		 */
		if (run->system_event.flags & KVM_SYSTEM_EVENT_RESET_FLAG_PSCI_RESET2) {
			vm_request_exit(vm, VM_EXIT_PANIC,
					"guest kernel panicked (PSCI SYSTEM_RESET2 warm reset)");
			return 1;
		}
		vm_request_exit(vm, VM_EXIT_OK, "guest requested reset");
		return 1;
	case KVM_SYSTEM_EVENT_CRASH:
		vm_request_exit(vm, VM_EXIT_PANIC, "guest kernel panicked (crash event)");
		return 1;
	}
	vm_request_exit(vm, VM_EXIT_CRASH, "vCPU %u: unhandled system event %u (flags 0x%llx)",
			v->id, run->system_event.type,
			(unsigned long long)run->system_event.flags);
	return 1;
}

int arch_exit(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	struct vm *vm = v->vm;

	switch (run->exit_reason) {
	case KVM_EXIT_SYSTEM_EVENT:
		return system_event(v);
	case KVM_EXIT_ARM_NISV:
		vm_request_exit(vm, VM_EXIT_CRASH,
				"vCPU %u: MMIO access at 0x%llx that KVM cannot decode (no syndrome; PC 0x%" PRIx64 ")",
				v->id, (unsigned long long)run->arm_nisv.fault_ipa, vcpu_pc(v));
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
				"KVM internal error on vCPU %u (suberror %u, PC 0x%" PRIx64 ")", v->id,
				run->internal.suberror, vcpu_pc(v));
		return 1;
	}
	vm_request_exit(vm, VM_EXIT_CRASH, "vCPU %u: unhandled KVM exit reason %u (PC 0x%" PRIx64 ")",
			v->id, run->exit_reason, vcpu_pc(v));
	return 1;
}
