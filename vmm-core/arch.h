/* SPDX-License-Identifier: Apache-2.0 */
/* The arch interface. Each arch/<arch>/ defines these under the same names;
 * configure picks the folder. No #ifdef on the architecture in vmm-core. */
#ifndef CUBICLE_ARCH_H
#define CUBICLE_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubicle/plugin.h"
#include "mem.h"

struct vm;
struct vcpu;
struct boot_cfg;
struct plan;

extern const char *const arch_name; /* "x86_64", "aarch64" */

/* Lay out ram_size bytes of RAM in guest-physical banks (around holes).
 * Returns the number of banks, or -EINVAL if ram_size cannot be placed. */
int arch_mem_layout(uint64_t ram_size, struct mem_bank *banks, unsigned max);
/* Start asking the host (on @kvm_fd, which it duplicates) what
 * arch_vm_setup will need, beside the rest of the setup; nothing to do is
 * fine, and so is a failure (arch_vm_setup then asks, and says why). */
void arch_prefetch(int kvm_fd);
/* The same, before a jail hides the host's files: what an earlier start
 * kept, else asked of KVM here (on @kvm_fd) and kept; arch_prefetch then
 * has nothing left to ask. */
void arch_preload(int kvm_fd);
/* After KVM_CREATE_VM and RAM: irqchip, timers, platform devices (x86:
 * i8042 reset, PIT; arm64: GIC). 0 or -errno with a reason in err. */
int arch_vm_setup(struct vm *vm, char *err, size_t errlen);
/* Place a device region: pick bus, base and irq for its class (layout.c).
 * 0, or -ENOSPC / -ENOENT (unknown class) with a reason in err. */
int arch_place(struct vm *vm, struct cub_region *r, char *err, size_t errlen);
/* The virtio transport a device gets when its config names none: "pci"
 * (x86) or "mmio" (arm64). */
const char *arch_virtio_default_transport(void);
/* The irq field of KVM_IRQ_LINE for a device's interrupt line (the
 * r->irq arch_place handed out): x86 passes the GSI through; arm64 encodes
 * SPI n as (KVM_ARM_IRQ_TYPE_SPI << 24) | (32 + n). irqfd GSIs need no
 * such mapping: KVM's default arm64 routing sends GSI n to SPI n. */
uint32_t arch_irq_kvm_line(unsigned line);
/* Config values this arch cannot honour (arm64: boot.mode, x86's boot
 * formats), after the core's schema check. 0, or -EINVAL with
 * "FILE:LINE: reason" in err. */
int arch_plan_check(const struct plan *c, char *err, size_t errlen);
/* The guest-physical window below 4 GiB that PCI memory BARs are placed in
 * (pci.c) and that the firmware tables describe as the root bridge's
 * memory range. *size 0: the arch has no PCI. */
void arch_pci_window(uint64_t *base, uint64_t *size);
/* Load kernel/initrd/cmdline into RAM and remember the entry state.
 * 0 or -errno with "FILE: reason" in err. */
int arch_boot_load(struct vm *vm, const struct boot_cfg *b, char *err, size_t errlen);
/* After KVM_CREATE_VCPU (vm_create_vcpus, after arch_boot_load): CPUID,
 * MSRs, LAPIC vs KVM_ARM_VCPU_INIT; the boot vCPU (id 0) also gets the
 * entry registers from arch_boot_load (not on a restored VM: its registers
 * come from the snapshot). */
int arch_vcpu_setup(struct vcpu *v, char *err, size_t errlen);
/* Last step before the vCPUs run, once every device is placed and every
 * vCPU is set up: tables the guest reads (x86: MP table, ACPI; arm64: the
 * FDT, which names each vCPU by the MPIDR KVM gave it) and, on arm64, the
 * vGIC's final init, which KVM allows only after all vCPUs exist. On a
 * restored VM (vm->restored) no table is written: guest RAM already holds
 * them. */
int arch_describe(struct vm *vm, char *err, size_t errlen);
/* An exit reason the common run loop does not handle. Returns 0 to keep
 * running, or calls vm_request_exit() and returns 1 to stop this vCPU. */
int arch_exit(struct vcpu *v);
void arch_vm_destroy(struct vm *vm);
/* Every vCPU parked: save the guest's clocks (arch_vm_pause), and put them
 * back on resume so that no time seems to pass for the guest. 0 or -errno
 * with err. */
int arch_vm_pause(struct vm *vm, char *err, size_t errlen);
int arch_vm_resume(struct vm *vm, char *err, size_t errlen);
void arch_vcpu_destroy(struct vcpu *v);

/*
 * Snapshots (snap/). Save: the VM is paused (arch_vm_pause ran, and its
 * clocks are the ones saved): write the machine's state (irqchip, timers,
 * platform devices, the guest clock) and every vCPU's into @w. Load: after
 * vm_create_vcpus and arch_describe on a VM made by vm_create_restored, or
 * with the VM paused (rollback): put them back from @r; the clocks go into
 * the pause record, so that vm_resume starts them at the snapshot's
 * instant. Both 0 or -errno with one line in err; an arch without
 * snapshots says so (-ENOTSUP).
 */
struct snap_w;
struct snap_r;
int arch_snap_save(struct vm *vm, struct snap_w *w, char *err, size_t errlen);
int arch_snap_load(struct vm *vm, const struct snap_r *r, char *err, size_t errlen);
/* The host CPU as a snapshot's manifest records it ("GenuineIntel family 6
 * model 85"): a restore on another CPU model is refused. */
void arch_cpu_id(char *buf, size_t len);

/* Host check: can this host's KVM boot a stock kernel? Fills a one-line
 * reason when not. */
bool arch_host_can_boot_linux(char *why, size_t len);
/* Extra lines for `cubicle check-host`. */
void arch_host_report(int kvm_fd, void (*line)(const char *key, const char *val, void *arg),
		      void *arg);

/*
 * System call @nr with six arguments, straight to the kernel: the result,
 * or -errno. Unlike syscall(3) it writes no errno and touches no
 * thread-local storage, so code running on another process's memory (the
 * jail's init, a CLONE_VM child on its own stack, and the jail's caller
 * once the VMM has its memory) can call it without writing into that
 * process's threads (rawsys.c).
 */
long arch_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6);

/*
 * clone3(@ca, @size) for a CLONE_VM child with no stack of its own (@ca's
 * stack 0): the child returns from this call, with 0, on the caller's
 * stack and in the caller's frames, as from fork(2); the parent never
 * returns: it moves to @stack_top (16-byte aligned) at once, before it
 * writes anything, and calls @fn(@arg, the child's pid), which must not
 * return, use the caller's thread-local storage (the child's now) or call
 * libc: arch_raw_syscall only. The result, in the caller, is the child's
 * 0 or clone3's -errno. The jail's VMM keeps the address space it was set
 * up in this way (jail.c), where fork would copy it (rawsys.c).
 */
long arch_clone_vm_split(void *ca, unsigned long size, void *stack_top, void (*fn)(void *, long),
			 void *arg);
/*
 * clone3(@ca, @size) for a child on the stack @ca names (stack and
 * stack_size), which calls @fn(@arg) there and exits with what it returns;
 * @fn must not use thread-local storage or libc when @ca has CLONE_VM. The
 * child's pid in the parent, or -errno (rawsys.c; glibc's clone(3) cannot
 * pass clone3's arguments, such as CLONE_INTO_CGROUP).
 */
long arch_clone3_fn(void *ca, unsigned long size, int (*fn)(void *), void *arg);
/* The thread pointer (x86_64: fs's base; arm64: tpidr_el0), which glibc's
 * __rseq_offset is relative to (rawsys.c). */
void *arch_thread_pointer(void);

#endif
