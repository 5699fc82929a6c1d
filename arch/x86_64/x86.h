/* SPDX-License-Identifier: Apache-2.0 */
/* Private to arch/x86_64: the per-VM arch state hung on vm->arch and the
 * guest-physical map every file of this folder agrees on. */
#ifndef CUBICLE_X86_H
#define CUBICLE_X86_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "plan.h"
#include "layout.h"
#include "vm.h"

/*
 * Guest-physical map below 1 MiB. Everything Linux needs before it reads
 * its own memory map lives in the first 640 KiB, away from the kernel at
 * 1 MiB and the initrd at the top of low RAM.
 */
#define X86_GDT_ADDR        0x500ULL   /* 4 descriptors */
#define X86_GDT_ENTRIES     4
#define X86_ZERO_PAGE       0x7000ULL  /* struct boot_params, 4 KiB */
#define X86_STACK_BASE      0x8000ULL  /* boot stack page */
#define X86_STACK_TOP       0x8ff0ULL  /* initial RSP, 16-byte aligned */
#define X86_PML4_ADDR       0x9000ULL  /* PML4, PDPT, then 4 PDs */
#define X86_PT_END          0xf000ULL
#define X86_CMDLINE_ADDR    0x20000ULL
#define X86_CMDLINE_MAX     0x10000ULL /* bytes reserved at 0x20000 */
#define X86_EBDA_START      0x9fc00ULL /* top 1 KiB of base RAM: MP table */
#define X86_MPTABLE_LIMIT   0xc0000ULL /* MP table may spill into the VGA window */
#define X86_ACPI_RSDP       0xe0000ULL /* RSDP, then the tables; BIOS scan area */
#define X86_ACPI_LIMIT      0xf0000ULL
#define X86_ACPI_SCI_IRQ    9
#define X86_PM1A_EVT_PORT   0x600 /* PM1 status, enable: 2 bytes each */
#define X86_PM1A_CNT_PORT   0x604 /* PM1 control: 2 bytes */
#define X86_GPE0_PORT       0x620 /* GPE0 status, enable: 2 bytes each */
#define X86_GPE_VMGENID     0     /* the GPE a new VM generation raises */
/* The VM generation ID's 16 bytes: the last of the ACPI table area. */
#define X86_VMGENID_GPA     (X86_ACPI_LIMIT - 16)
#define X86_HIMEM_START     0x100000ULL
#define X86_KERNEL_LOAD     0x100000ULL /* bzImage protected-mode part */

/* Fixed MMIO inside the 3–4 GiB hole. */
#define X86_MMIO_HOLE_START 0xc0000000ULL
#define X86_4G              0x100000000ULL
#define X86_IOAPIC_ADDR     0xfec00000ULL
#define X86_LAPIC_ADDR      0xfee00000ULL
#define X86_IDMAP_ADDR      0xfffbc000ULL /* KVM_SET_IDENTITY_MAP_ADDR, 1 page */
#define X86_TSS_ADDR        0xfffbd000ULL /* KVM_SET_TSS_ADDR, 3 pages */

/* Selectors the Linux boot protocol expects (__BOOT_CS, __BOOT_DS). */
#define X86_BOOT_CS 0x10
#define X86_BOOT_DS 0x18

/* The BSP's first instruction and the state it needs. */
struct x86_entry {
	bool valid;
	enum boot_mode mode;
	uint64_t rip;
	uint64_t rsi;      /* boot_params for Linux, 0 for flat payloads */
	uint64_t rsp;
	uint16_t real_seg; /* BOOT_MODE_REAL: CS = DS = ES = SS */
};

/* The i8042 keyboard controller, only as much as Linux probes and resets. */
struct x86_i8042 {
	pthread_mutex_t lock;
	uint8_t ctr;       /* controller command byte */
	uint8_t outport;
	uint8_t out;       /* output buffer */
	bool out_full, out_aux;
	uint8_t pending;   /* command waiting for its data byte, 0 if none */
	bool last_cmd;     /* status bit 3: last write went to port 0x64 */
};

/* CMOS RAM and a read-only RTC that shows host UTC time. */
struct x86_cmos {
	pthread_mutex_t lock;
	uint8_t index;
	uint8_t ram[128];
};

/* ACPI PM1a event and control registers: just enough for ACPICA; and the
 * GPE0 block (status, enable), whose SCI is (gpe_sts & gpe_en) != 0. */
struct x86_pm {
	pthread_mutex_t lock;
	uint16_t enable, control;
	uint16_t gpe_sts, gpe_en;
};

/* ioapic.c: the IOAPIC of machine.irqchip = "split" (KVM has the LAPICs). */
#define X86_IOAPIC_PINS 24
#define X86_IOAPIC_VERSION 0x11 /* as KVM's own, and the MP table says */
struct x86_ioapic_route {  /* a level pin's MSI, for KVM's EOI exits */
	uint64_t addr;
	uint32_t data, pin;
};
/* What a snapshot keeps ("ioapic-user"): fixed layout, no padding. */
struct x86_ioapic_state {
	uint64_t rte[X86_IOAPIC_PINS];
	uint32_t regsel;
	uint32_t lines;  /* pins asserted now, bit n = pin n */
	uint32_t id;
	uint32_t pad;
};
struct x86_ioapic {
	pthread_mutex_t lock;
	struct x86_ioapic_state st;
	int (*deliver)(void *ctx, uint64_t addr, uint32_t data);
	int (*routes)(void *ctx, const struct x86_ioapic_route *r, unsigned n);
	void *ctx;
	struct x86_ioapic_route last_routes[X86_IOAPIC_PINS];
	unsigned n_routes;
};
void x86_ioapic_init(struct x86_ioapic *io, uint8_t id,
		     int (*deliver)(void *ctx, uint64_t addr, uint32_t data),
		     int (*routes)(void *ctx, const struct x86_ioapic_route *r, unsigned n),
		     void *ctx);
void x86_ioapic_destroy(struct x86_ioapic *io);
/* The MSI (address, data) a redirection entry sends. */
void x86_ioapic_msi(uint64_t rte, uint64_t *addr, uint32_t *data);
/* A guest access at offset @off of its 4 KiB page. */
void x86_ioapic_mmio(struct x86_ioapic *io, uint64_t off, void *data, uint32_t len, bool is_write);
/* Pin @pin's line asserted or not; -EINVAL for a pin it does not have. */
int x86_ioapic_line(struct x86_ioapic *io, unsigned pin, bool level);
/* The guest's EOI of @vector (KVM_EXIT_IOAPIC_EOI). */
void x86_ioapic_eoi(struct x86_ioapic *io, uint8_t vector);
void x86_ioapic_get(struct x86_ioapic *io, struct x86_ioapic_state *st);
/* A snapshot's state; its level pins' routes go to KVM again. */
int x86_ioapic_set(struct x86_ioapic *io, const struct x86_ioapic_state *st, char *err,
		   size_t errlen);

struct x86_vm {
	struct vm *vm;
	struct x86_layout layout;
	struct x86_entry entry;
	enum boot_format format;   /* as loaded, BOOT_AUTO until then */
	uint64_t payload_lo, payload_hi; /* flat payload range, [lo, hi) */
	struct kvm_cpuid2 *cpuid;  /* KVM_GET_SUPPORTED_CPUID, fetched once */
	bool tsc_deadline;         /* KVM_CAP_TSC_DEADLINE_TIMER */
	struct x86_i8042 i8042;
	struct x86_cmos cmos;
	struct x86_pm pm;
	uint64_t vmgenid_gpa;      /* the VM generation ID's address; 0: none */
	bool split;                /* machine.irqchip = "split": ioapic is ours */
	struct x86_ioapic ioapic;
	bool locks_ready;
	/* vm_pause: the guest's clocks as they were (vm.c arch_vm_pause). */
	struct kvm_clock_data pause_clock;
	uint64_t *pause_tsc; /* one per vCPU */
};

static inline struct x86_vm *x86_of(struct vm *vm)
{
	return vm->arch;
}

/* cpuid.c */
/* KVM_GET_SUPPORTED_CPUID on the /dev/kvm fd, growing the buffer on E2BIG.
 * Returns a malloc'd table or NULL with errno set. */
struct kvm_cpuid2 *x86_cpuid_supported(int kvm_fd);
/* Ask it now (arch_prefetch): the table an earlier start kept
 * (CUBICLE_CPUID_CACHE), else KVM's answer on a thread of its own, kept for
 * the next; the next x86_cpuid_supported_once takes that answer (later
 * ones ask KVM again). x86_cpuid_preload (arch_preload, before a jail
 * hides the cache) reads the kept table, else asks KVM here and keeps it. */
void x86_cpuid_ask_ahead(int kvm_fd);
void x86_cpuid_preload(int kvm_fd);
struct kvm_cpuid2 *x86_cpuid_supported_once(int kvm_fd);
/* The table vCPU @id of @n_vcpus gets: topology, APIC id, hypervisor bit.
 * Returns a malloc'd table or NULL (ENOMEM). */
struct kvm_cpuid2 *x86_cpuid_for_vcpu(const struct kvm_cpuid2 *sup, unsigned id,
				      unsigned n_vcpus, bool tsc_deadline);
/* The entry for (function, index) or NULL. */
struct kvm_cpuid_entry2 *x86_cpuid_find(struct kvm_cpuid2 *c, uint32_t fn, uint32_t idx);

/* platform.c: i8042, POST port, CMOS on the PIO bus. */
int x86_platform_setup(struct x86_vm *xv, char *err, size_t errlen);
/* Set GPE @gpe's status bit (the SCI follows when the guest enabled it). */
void x86_gpe_raise(struct x86_vm *xv, unsigned gpe);
/* Drive the SCI from the GPE registers (after a snapshot's were loaded). */
void x86_gpe_sync(struct x86_vm *xv);
void x86_platform_destroy(struct x86_vm *xv);

#endif
