/* SPDX-License-Identifier: Apache-2.0 */
/* The floor for bench/snapshot's restore figures: the least a KVM VMM can
 * do to run one guest instruction out of a snapshot's memory file. It maps
 * the file MAP_PRIVATE (as `cubicle restore` does: lazy, shared with other
 * clones through the page cache), gives all of it to a new VM as one
 * memslot, creates the in-kernel irqchip and one vCPU in real mode, and runs
 * it until the first port write. At that moment it writes one byte to
 * stdout, then waits to be killed. The code (6 bytes) is written into the
 * private mapping at 0x10000: one page copied on write.
 * Usage: snap_floor MEMORY_FILE */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CODE_AT 0x10000u

int main(int argc, char **argv)
{
	static const uint8_t code[] = { 0xb0, 0x01, 0xe6, 0x80, 0xeb, 0xfe }; /* mov al,1; out 0x80,al; jmp $ */
	struct kvm_userspace_memory_region r = { 0 };
	struct kvm_sregs s;
	struct kvm_regs regs = { .rip = 0, .rflags = 2 };
	struct kvm_run *run;
	struct stat sb;
	int fd, kvm, vm, cpu, sz;
	uint8_t *mem;

	if (argc != 2)
		return fprintf(stderr, "usage: snap_floor MEMORY_FILE\n"), 2;
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0)
		return perror(argv[1]), 1;
	if ((uint64_t)sb.st_size < CODE_AT + sizeof(code))
		return fprintf(stderr, "snap_floor: %s is too small\n", argv[1]), 1;
	mem = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE,
		   fd, 0);
	if (mem == MAP_FAILED)
		return perror("snap_floor: mmap"), 1;
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return perror("snap_floor: /dev/kvm"), 1;
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return perror("snap_floor: KVM_CREATE_VM"), 1;
	memcpy(mem + CODE_AT, code, sizeof(code));
	r.memory_size = (uint64_t)sb.st_size;
	r.userspace_addr = (uintptr_t)mem;
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r) < 0)
		return perror("snap_floor: memory"), 1;
	if (ioctl(vm, KVM_CREATE_IRQCHIP, 0) < 0)
		return perror("snap_floor: irqchip"), 1;
	cpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	sz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (cpu < 0 || sz < 0)
		return perror("snap_floor: vcpu"), 1;
	run = mmap(NULL, (size_t)sz, PROT_READ | PROT_WRITE, MAP_SHARED, cpu, 0);
	if (run == MAP_FAILED || ioctl(cpu, KVM_GET_SREGS, &s) < 0)
		return perror("snap_floor: vcpu"), 1;
	s.cs.base = CODE_AT;
	s.cs.selector = CODE_AT >> 4;
	if (ioctl(cpu, KVM_SET_SREGS, &s) < 0 || ioctl(cpu, KVM_SET_REGS, &regs) < 0)
		return perror("snap_floor: regs"), 1;
	do {
		if (ioctl(cpu, KVM_RUN, 0) < 0)
			return perror("snap_floor: KVM_RUN"), 1;
	} while (run->exit_reason != KVM_EXIT_IO);
	if (write(1, "!", 1) != 1)
		return 1;
	pause();
	return 0;
}
