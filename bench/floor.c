/* SPDX-License-Identifier: Apache-2.0 */
/* The floor for bench/startup: the least a KVM VMM can do to run one guest
 * instruction (open /dev/kvm, KVM_CREATE_VM, one page of RAM, one vCPU in
 * real mode, KVM_RUN until the first port write). It maps as much RAM as the
 * cubicle run it is compared with (16 MiB: KVM's memslot setup cost grows with
 * it), so the ratio shows what cubicle adds. Writes one byte to stdout
 * at that moment, then waits to be killed so its memory can be read.
 *
 * "floor irqchip" also creates the in-kernel irqchip after the RAM, as
 * cubicle does, and "floor irqchip pit" the PIT too: what KVM itself costs
 * for the machine cubicle asks for. Their devices' registration on KVM's
 * I/O buses leaves an SRCU grace period pending that the VM's close waits
 * for when it comes first, so a short life is mostly that wait. "floor
 * split" enables the split irqchip instead (KVM_CAP_SPLIT_IRQCHIP, 24
 * pins: the LAPICs only), as machine.irqchip = "split" does. */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define RAM (16u << 20)

int main(int argc, char **argv)
{
	static const uint8_t code[] = { 0xb0, 0x01, 0xe6, 0x80, 0xeb, 0xfe }; /* mov al,1; out 0x80,al; jmp $ */
	struct kvm_userspace_memory_region r = { 0 };
	struct kvm_sregs s;
	struct kvm_regs regs = { .rip = 0, .rflags = 2 };
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	struct kvm_enable_cap split_cap = { .cap = KVM_CAP_SPLIT_IRQCHIP, .args = { 24 } };
	int irqchip = argc > 1 && !strcmp(argv[1], "irqchip");
	int split = argc > 1 && !strcmp(argv[1], "split");
	int with_pit = irqchip && argc > 2 && !strcmp(argv[2], "pit");
	struct kvm_run *run;
	int kvm, vm, cpu, sz;
	uint8_t *mem;

	if (argc > 1 + irqchip + split + with_pit) {
		fprintf(stderr, "usage: floor [irqchip [pit] | split]\n");
		return 2;
	}
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	mem = mmap(NULL, RAM, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (kvm < 0 || vm < 0 || mem == MAP_FAILED)
		return perror("floor: kvm"), 1;
	memcpy(mem + 0x10000, code, sizeof(code));
	r.guest_phys_addr = 0;
	r.memory_size = RAM;
	r.userspace_addr = (uintptr_t)mem;
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r) < 0)
		return perror("floor: memory"), 1;
	if (irqchip && ioctl(vm, KVM_CREATE_IRQCHIP, 0) < 0)
		return perror("floor: irqchip"), 1;
	if (split && ioctl(vm, KVM_ENABLE_CAP, &split_cap) < 0)
		return perror("floor: split irqchip"), 1;
	if (with_pit && ioctl(vm, KVM_CREATE_PIT2, &pit) < 0)
		return perror("floor: pit"), 1;
	cpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	run = mmap(NULL, (size_t)sz, PROT_READ | PROT_WRITE, MAP_SHARED, cpu, 0);
	if (cpu < 0 || run == MAP_FAILED || ioctl(cpu, KVM_GET_SREGS, &s) < 0)
		return perror("floor: vcpu"), 1;
	s.cs.base = 0x10000;
	s.cs.selector = 0x1000;
	if (ioctl(cpu, KVM_SET_SREGS, &s) < 0 || ioctl(cpu, KVM_SET_REGS, &regs) < 0)
		return perror("floor: regs"), 1;
	do {
		if (ioctl(cpu, KVM_RUN, 0) < 0)
			return perror("floor: KVM_RUN"), 1;
	} while (run->exit_reason != KVM_EXIT_IO);
	if (write(1, "!", 1) != 1)
		return 1;
	pause();
	return 0;
}
