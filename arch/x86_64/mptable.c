/* SPDX-License-Identifier: Apache-2.0 */
/* The Intel MultiProcessor Specification 1.4 table that tells a guest
 * without ACPI how many CPUs it has and how ISA IRQs reach the IOAPIC, and
 * arch_describe, which writes it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "boot.h"
#include "dsdt.h"
#include "pci.h"
#include "snap/genid.h"
#include "x86.h"

/* Layouts from the MP spec 1.4, chapter 4 (Linux: asm/mpspec_def.h). */
struct mpf {                  /* floating pointer, 16 bytes */
	char signature[4];    /* "_MP_" */
	uint32_t physptr;     /* configuration table */
	uint8_t length;       /* in 16-byte units: 1 */
	uint8_t spec;         /* 4: version 1.4 */
	uint8_t checksum;
	uint8_t feature[5];   /* 0: a configuration table follows; no IMCR */
} __attribute__((packed));

struct mpc_header {           /* configuration table header, 44 bytes */
	char signature[4];    /* "PCMP" */
	uint16_t length;      /* header + entries */
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char product[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t count;       /* entries */
	uint32_t lapic;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct mpc_cpu {              /* entry type 0, 20 bytes */
	uint8_t type, apicid, apicver, cpuflag;
	uint32_t signature, features;
	uint32_t reserved[2];
} __attribute__((packed));

struct mpc_bus {              /* entry type 1 */
	uint8_t type, busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {           /* entry type 2 */
	uint8_t type, apicid, apicver, flags;
	uint32_t addr;
} __attribute__((packed));

struct mpc_irq {              /* entry types 3 (I/O) and 4 (local) */
	uint8_t type, irqtype;
	uint16_t irqflag;     /* 0: polarity and trigger conform to the bus */
	uint8_t srcbus, srcbusirq, dstapic, dstirq;
} __attribute__((packed));

#define MP_CPU_ENABLED   1
#define MP_CPU_BSP       2
#define MP_IRQ_INT       0
#define MP_IRQ_NMI       1
#define MP_IRQ_EXTINT    3
#define MP_LAPIC_VERSION 0x14 /* what KVM's local APIC reports */
#define MP_IOAPIC_VERSION 0x11 /* KVM's IOAPIC */
#define MP_IOAPIC_PINS   24
#define MP_ISA_BUS       0

/* 64 vCPUs need 1564 bytes, more than the 1 KiB at 0x9fc00; the table
 * grows into the legacy VGA window, which the e820 map also reserves and
 * nothing in a cubicle guest uses. Linux finds the floating pointer by
 * scanning 0x9fc00 (default_find_smp_config, arch/x86/kernel/mpparse.c)
 * and follows physptr from there. */
_Static_assert(sizeof(struct mpf) == 16 && sizeof(struct mpc_header) == 44 &&
	       sizeof(struct mpc_cpu) == 20 && sizeof(struct mpc_bus) == 8 &&
	       sizeof(struct mpc_ioapic) == 8 && sizeof(struct mpc_irq) == 8,
	       "MP spec 1.4 entry sizes");
_Static_assert(X86_MPTABLE_SIZE(MP_IOAPIC_PINS) > 0 &&
	       X86_EBDA_START + X86_MPTABLE_SIZE(PLAN_MAX_VCPUS) <= X86_MPTABLE_LIMIT,
	       "the MP table for PLAN_MAX_VCPUS must fit below X86_MPTABLE_LIMIT");

size_t x86_mptable_size(unsigned n_cpus)
{
	return X86_MPTABLE_SIZE(n_cpus);
}

static uint8_t checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (len--)
		sum += *b++;
	return (uint8_t)-sum;
}

int x86_mptable_build(void *buf, size_t len, uint64_t gpa, unsigned n_cpus, uint32_t cpu_sig,
		      uint32_t cpu_features)
{
	size_t size = x86_mptable_size(n_cpus);
	struct mpf *mpf = buf;
	struct mpc_header *h = (struct mpc_header *)(mpf + 1);
	uint8_t *p = (uint8_t *)(h + 1);
	uint8_t ioapic_id = (uint8_t)n_cpus;
	unsigned i, count = 0;

	if (!n_cpus || n_cpus > PLAN_MAX_VCPUS)
		return -EINVAL;
	if (len < size || gpa + size > X86_MPTABLE_LIMIT)
		return -ENOSPC;
	memset(buf, 0, size);

	for (i = 0; i < n_cpus; i++, count++, p += sizeof(struct mpc_cpu))
		*(struct mpc_cpu *)p = (struct mpc_cpu){
			.type = 0, .apicid = (uint8_t)i, .apicver = MP_LAPIC_VERSION,
			.cpuflag = MP_CPU_ENABLED | (i == 0 ? MP_CPU_BSP : 0),
			.signature = cpu_sig, .features = cpu_features,
		};
	*(struct mpc_bus *)p = (struct mpc_bus){ .type = 1, .busid = MP_ISA_BUS };
	memcpy(((struct mpc_bus *)p)->bustype, "ISA   ", 6);
	p += sizeof(struct mpc_bus);
	count++;
	*(struct mpc_ioapic *)p = (struct mpc_ioapic){
		.type = 2, .apicid = ioapic_id, .apicver = MP_IOAPIC_VERSION, .flags = 1,
		.addr = (uint32_t)X86_IOAPIC_ADDR,
	};
	p += sizeof(struct mpc_ioapic);
	count++;
	/* ISA IRQ n -> IOAPIC pin n, as KVM's default GSI routing wires
	 * them; 16-23 carry the MMIO devices layout.c numbers there. */
	for (i = 0; i < MP_IOAPIC_PINS; i++, count++, p += sizeof(struct mpc_irq))
		*(struct mpc_irq *)p = (struct mpc_irq){
			.type = 3, .irqtype = MP_IRQ_INT, .srcbus = MP_ISA_BUS,
			.srcbusirq = (uint8_t)i, .dstapic = ioapic_id, .dstirq = (uint8_t)i,
		};
	/* Virtual-wire mode: the PIC reaches every LINT0, NMI every LINT1. */
	*(struct mpc_irq *)p = (struct mpc_irq){
		.type = 4, .irqtype = MP_IRQ_EXTINT, .srcbus = MP_ISA_BUS, .dstapic = 0xff, .dstirq = 0,
	};
	p += sizeof(struct mpc_irq);
	*(struct mpc_irq *)p = (struct mpc_irq){
		.type = 4, .irqtype = MP_IRQ_NMI, .srcbus = MP_ISA_BUS, .dstapic = 0xff, .dstirq = 1,
	};
	p += sizeof(struct mpc_irq);
	count += 2;

	memcpy(h->signature, "PCMP", 4);
	h->length = (uint16_t)(p - (uint8_t *)h);
	h->spec = 4;
	memcpy(h->oem, "CUBICLE ", 8);
	memcpy(h->product, "MICROVM     ", 12);
	h->count = (uint16_t)count;
	h->lapic = (uint32_t)X86_LAPIC_ADDR;
	h->checksum = checksum(h, h->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = (uint32_t)(gpa + sizeof(*mpf));
	mpf->length = 1;
	mpf->spec = 4;
	mpf->checksum = checksum(mpf, sizeof(*mpf));
	return (int)size;
}

/* Map [gpa, gpa + size) for a table, or NULL when a flat payload owns that
 * RAM (or there is none): payloads get tables only where they fit. */
static void *table_area(struct vm *vm, uint64_t gpa, size_t size)
{
	struct x86_vm *xv = x86_of(vm);
	void *p = mem_map(&vm->mem, gpa, size);

	if (xv->format == BOOT_FLAT && p && xv->payload_lo < gpa + size && gpa < xv->payload_hi)
		return NULL;
	return p;
}

/*
 * Both an MP table (kernels without ACPI) and ACPI tables (kernels built
 * without CONFIG_X86_MPPARSE, such as Debian's cloud kernel); a kernel
 * with both uses the MADT.
 */
int arch_describe(struct vm *vm, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	unsigned n = vm->cfg && vm->cfg->vcpus ? vm->cfg->vcpus : vm->n_vcpus;
	uint32_t sig = 0x600, feat = 0x201; /* family 6; FPU and APIC */
	struct kvm_cpuid_entry2 *e;
	uint8_t aml[X86_DSDT_PCI_LEN + X86_DSDT_VMGENID_LEN];
	size_t aml_len = 0;
	void *mp, *acpi, *genid;
	int ret;

	if (!xv)
		return -EINVAL;
	if (vm->restored)
		return 0; /* the tables are in the snapshot's RAM */
	if (!n)
		n = 1;
	if (n > PLAN_MAX_VCPUS) {
		snprintf(err, errlen, "%u vCPUs: the x86 tables describe at most %d", n,
			 PLAN_MAX_VCPUS);
		return -EINVAL;
	}
	/*
	 * The DSDT's PCI root bridge: without it, Linux never scans bus 0.
	 * Only when a device is there: on a machine of serial and MMIO
	 * devices, a described bridge costs the guest a scan of 32 slots
	 * (267 config-space exits, and its acpi_init 88 ms instead of 36 in
	 * the nested harness) for nothing. The conf1 ports stay: a probe
	 * of them finds the host bridge alone.
	 */
	if (vm->pci && pci_has_devices(vm)) {
		ret = x86_dsdt_pci(aml, sizeof(aml), X86_PCI_WINDOW_BASE, X86_PCI_WINDOW_SIZE);
		if (ret < 0) {
			snprintf(err, errlen, "DSDT PCI root bridge: %s", strerror(-ret));
			return ret;
		}
		aml_len = (size_t)ret;
	}
	/* The VM generation ID (a restore gives clones new ones). */
	genid = table_area(vm, X86_VMGENID_GPA, 16);
	if (genid) {
		ret = x86_dsdt_vmgenid(aml + aml_len, sizeof(aml) - aml_len, X86_VMGENID_GPA,
				       X86_GPE_VMGENID);
		if (ret < 0) {
			snprintf(err, errlen, "DSDT VM generation ID: %s", strerror(-ret));
			return ret;
		}
		aml_len += (size_t)ret;
		genid_new(genid);
		xv->vmgenid_gpa = X86_VMGENID_GPA;
	}
	mp = table_area(vm, X86_EBDA_START, x86_mptable_size(n));
	acpi = table_area(vm, X86_ACPI_RSDP, x86_acpi_tables_size(n, aml_len));
	if (xv->format != BOOT_FLAT && (!mp || !acpi)) {
		snprintf(err, errlen, "guest RAM does not reach 0x%llx for the MP and ACPI tables",
			 (unsigned long long)X86_ACPI_LIMIT);
		return -ENOMEM;
	}
	e = xv->cpuid ? x86_cpuid_find(xv->cpuid, 1, 0) : NULL;
	if (e) {
		sig = e->eax;
		feat = e->edx;
	}
	ret = mp ? x86_mptable_build(mp, x86_mptable_size(n), X86_EBDA_START, n, sig, feat) : 0;
	if (ret >= 0 && acpi)
		ret = x86_acpi_tables_build(acpi, x86_acpi_tables_size(n, aml_len), X86_ACPI_RSDP, n,
					    aml, aml_len);
	if (ret < 0) {
		snprintf(err, errlen, "MP/ACPI tables for %u vCPUs: %s", n, strerror(-ret));
		return ret;
	}
	return 0;
}
