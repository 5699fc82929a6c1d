/* SPDX-License-Identifier: Apache-2.0 */
/* Interrupts into the in-kernel irqchip (or the arch's own, through
 * vm->irq_line_hook): line levels, irqfd and MSI. */
#include <errno.h>
#include <sys/ioctl.h>

#include "arch.h"
#include "vm.h"

int irq_line(struct vm *vm, unsigned gsi, bool level)
{
	struct kvm_irq_level l = { .irq = arch_irq_kvm_line(gsi), .level = level };

	if (vm->irq_line_hook)
		return vm->irq_line_hook(vm, gsi, level);
	return ioctl(vm->vm_fd, KVM_IRQ_LINE, &l) < 0 ? -errno : 0;
}

int irq_fd_attach(struct vm *vm, int efd, unsigned gsi)
{
	struct kvm_irqfd f = { .fd = (__u32)efd, .gsi = gsi };

	if (vm->irq_line_hook) /* no in-kernel pin behind the GSI */
		return -EOPNOTSUPP;
	return ioctl(vm->vm_fd, KVM_IRQFD, &f) < 0 ? -errno : 0;
}

int irq_fd_detach(struct vm *vm, int efd, unsigned gsi)
{
	struct kvm_irqfd f = { .fd = (__u32)efd, .gsi = gsi, .flags = KVM_IRQFD_FLAG_DEASSIGN };

	return ioctl(vm->vm_fd, KVM_IRQFD, &f) < 0 ? -errno : 0;
}

int irq_msi(struct vm *vm, uint64_t addr, uint32_t data)
{
	struct kvm_msi m = {
		.address_lo = (uint32_t)addr, .address_hi = (uint32_t)(addr >> 32), .data = data,
	};
	int r = ioctl(vm->vm_fd, KVM_SIGNAL_MSI, &m);

	/* > 0 delivered, 0 blocked by the guest (e.g. a masked LAPIC). */
	return r < 0 ? -errno : 0;
}
