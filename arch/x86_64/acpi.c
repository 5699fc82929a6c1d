/* SPDX-License-Identifier: Apache-2.0 */
/* Minimal ACPI tables (RSDP, XSDT, FADT, an empty DSDT and the MADT): the
 * only way a distribution kernel built without CONFIG_X86_MPPARSE (Debian's
 * cloud kernel) learns about its other CPUs. */
#include <errno.h>
#include <string.h>

#include "boot.h"
#include "x86.h"

#define ACPI_HDR_LEN   36
#define RSDP_LEN       36
#define FADT_LEN       276 /* revision 6 */
#define MADT_LAPIC_LEN 8
#define MADT_IOAPIC_LEN 12
#define MADT_NMI_LEN   6
#define MADT_ISO_LEN   10

/* FADT offsets and flags (ACPI 6.x, 5.2.9; Linux: include/acpi/actbl.h). */
#define FADT_DSDT         40
#define FADT_SCI_INT      46
#define FADT_PM1A_EVT     56
#define FADT_PM1A_CNT     64
#define FADT_GPE0_BLK     80
#define FADT_GPE0_BLK_LEN 92
#define FADT_PM1_EVT_LEN  88
#define FADT_PM1_CNT_LEN  89
#define FADT_BOOT_ARCH    109
#define FADT_FLAGS        112
#define FADT_RESET_REG    116
#define FADT_RESET_VALUE  128
#define FADT_MINOR        131
#define FADT_X_DSDT       140
#define BOOT_ARCH_8042    (1u << 1)
#define BOOT_ARCH_NO_VGA  (1u << 2)
#define FLAG_PWR_BUTTON   (1u << 4)  /* no fixed-feature power button */
#define FLAG_SLP_BUTTON   (1u << 5)
#define FLAG_RESET_REG    (1u << 10)
#define GAS_SYSTEM_IO     1

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint8_t checksum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;

	while (len--)
		sum += *p++;
	return (uint8_t)-sum;
}

static void header(uint8_t *t, const char *sig, uint32_t len, uint8_t rev)
{
	memcpy(t, sig, 4);
	put32(t + 4, len);
	t[8] = rev;
	memcpy(t + 10, "CUBICL", 6);
	memcpy(t + 16, "MICROVM ", 8);
	put32(t + 24, 1);
	memcpy(t + 28, "CUBI", 4);
	put32(t + 32, 1);
}

static void finish(uint8_t *t)
{
	uint32_t len;

	memcpy(&len, t + 4, 4);
	t[9] = 0;
	t[9] = checksum(t, len);
}

/*
 * A full (not hardware-reduced) FADT. Hardware-reduced would spare the PM1
 * registers, but Linux then drops the legacy PIC and with it the ISA IRQs
 * 0-15 that platform drivers request by number (i8042 on 1, rtc_cmos on 8,
 * the COM ports on 3 and 4) unless a DSDT describes each device in AML
 * (acpi_generic_reduced_hw_init, arch/x86/kernel/acpi/boot.c). So: SMI_CMD
 * 0 (always in ACPI mode), the SCI on IRQ 9, PM1a event and control blocks
 * from platform.c, no PM timer. The reset register is the i8042 command
 * port, so the default reboot=acpi resets the same way reboot=k does.
 */
static void build_fadt(uint8_t *t, uint64_t dsdt)
{
	header(t, "FACP", FADT_LEN, 6);
	put32(t + FADT_DSDT, (uint32_t)dsdt);
	put16(t + FADT_SCI_INT, X86_ACPI_SCI_IRQ);
	put32(t + FADT_PM1A_EVT, X86_PM1A_EVT_PORT);
	put32(t + FADT_PM1A_CNT, X86_PM1A_CNT_PORT);
	t[FADT_PM1_EVT_LEN] = 4;
	t[FADT_PM1_CNT_LEN] = 2;
	put32(t + FADT_GPE0_BLK, X86_GPE0_PORT);
	t[FADT_GPE0_BLK_LEN] = 4; /* 16 GPEs: 2 bytes of status, 2 of enable */
	put16(t + FADT_BOOT_ARCH, BOOT_ARCH_8042 | BOOT_ARCH_NO_VGA);
	put32(t + FADT_FLAGS, FLAG_RESET_REG | FLAG_PWR_BUTTON | FLAG_SLP_BUTTON);
	t[FADT_RESET_REG] = GAS_SYSTEM_IO;
	t[FADT_RESET_REG + 1] = 8;  /* bit width */
	t[FADT_RESET_REG + 3] = 1;  /* byte access */
	put64(t + FADT_RESET_REG + 4, 0x64);
	t[FADT_RESET_VALUE] = 0xfe;
	t[FADT_MINOR] = 0;
	put64(t + FADT_X_DSDT, dsdt);
	finish(t);
}

/* MADT: one enabled LAPIC per vCPU (APIC id = index), the IOAPIC with
 * GSI base 0 (ISA IRQ n is GSI n: no overrides needed), NMI on LINT1. */
static size_t build_madt(uint8_t *t, unsigned n_cpus)
{
	uint8_t *p = t + ACPI_HDR_LEN + 8;
	size_t len;

	put32(t + ACPI_HDR_LEN, (uint32_t)X86_LAPIC_ADDR);
	put32(t + ACPI_HDR_LEN + 4, 1); /* PCAT_COMPAT: there are 8259s */
	for (unsigned i = 0; i < n_cpus; i++, p += MADT_LAPIC_LEN) {
		p[0] = 0;
		p[1] = MADT_LAPIC_LEN;
		p[2] = (uint8_t)i; /* ACPI processor UID */
		p[3] = (uint8_t)i; /* APIC id */
		put32(p + 4, 1);   /* enabled */
	}
	p[0] = 1;
	p[1] = MADT_IOAPIC_LEN;
	p[2] = (uint8_t)n_cpus;
	put32(p + 4, (uint32_t)X86_IOAPIC_ADDR);
	put32(p + 8, 0);
	p += MADT_IOAPIC_LEN;
	/* The SCI: level-triggered, active high (KVM's IOAPIC takes a line's
	 * level as asserted whatever the polarity; ACPI's default for the
	 * SCI would be active low). */
	p[0] = 2;
	p[1] = MADT_ISO_LEN;
	p[2] = 0; /* ISA */
	p[3] = X86_ACPI_SCI_IRQ;
	put32(p + 4, X86_ACPI_SCI_IRQ);
	put16(p + 8, 0x000d);
	p += MADT_ISO_LEN;
	p[0] = 4;
	p[1] = MADT_NMI_LEN;
	p[2] = 0xff; /* all processors */
	put16(p + 3, 0);
	p[5] = 1;    /* LINT1 */
	p += MADT_NMI_LEN;
	len = (size_t)(p - t);
	header(t, "APIC", (uint32_t)len, 5);
	finish(t);
	return len;
}

/* Table offsets from the RSDP, each 16-byte aligned. The DSDT comes last
 * so its AML can grow (dsdt.c's PCI root bridge, devices). */
#define XSDT_OFF 48
#define FADT_OFF 112
#define MADT_OFF 400
#define MADT_LEN(n) (ACPI_HDR_LEN + 8 + (n) * MADT_LAPIC_LEN + MADT_IOAPIC_LEN + MADT_ISO_LEN + \
		     MADT_NMI_LEN)
#define DSDT_OFF(n) ((MADT_OFF + MADT_LEN(n) + 15) & ~(size_t)15)
_Static_assert(XSDT_OFF >= RSDP_LEN && FADT_OFF >= XSDT_OFF + ACPI_HDR_LEN + 16 &&
	       MADT_OFF >= FADT_OFF + FADT_LEN, "ACPI table layout");
_Static_assert(X86_ACPI_SIZE(0, 0) >= DSDT_OFF(0) + ACPI_HDR_LEN &&
	       X86_ACPI_SIZE(PLAN_MAX_VCPUS, 0) >= DSDT_OFF(PLAN_MAX_VCPUS) + ACPI_HDR_LEN,
	       "X86_ACPI_SIZE must cover the layout");
_Static_assert(X86_ACPI_RSDP + X86_ACPI_SIZE(PLAN_MAX_VCPUS, 4096) <= X86_VMGENID_GPA,
	       "ACPI tables for PLAN_MAX_VCPUS and 4 KiB of AML must end below the VM generation ID");

size_t x86_acpi_tables_size(unsigned n_cpus, size_t aml_len)
{
	return DSDT_OFF((size_t)n_cpus) + ACPI_HDR_LEN + aml_len;
}

int x86_acpi_tables_build(void *buf, size_t len, uint64_t gpa, unsigned n_cpus,
			  const void *aml, size_t aml_len)
{
	const size_t xsdt = XSDT_OFF, fadt = FADT_OFF, madt = MADT_OFF;
	const size_t dsdt = DSDT_OFF((size_t)n_cpus);
	size_t need = x86_acpi_tables_size(n_cpus, aml_len);
	uint8_t *b = buf;

	if (!n_cpus || n_cpus > PLAN_MAX_VCPUS || (aml_len && !aml) || aml_len > 0xffff)
		return -EINVAL;
	if (len < need || gpa + need > X86_ACPI_LIMIT)
		return -ENOSPC;
	memset(b, 0, need);

	header(b + dsdt, "DSDT", (uint32_t)(ACPI_HDR_LEN + aml_len), 2);
	if (aml_len)
		memcpy(b + dsdt + ACPI_HDR_LEN, aml, aml_len);
	finish(b + dsdt);
	build_fadt(b + fadt, gpa + dsdt);
	build_madt(b + madt, n_cpus);

	header(b + xsdt, "XSDT", ACPI_HDR_LEN + 16, 1);
	put64(b + xsdt + ACPI_HDR_LEN, gpa + fadt);
	put64(b + xsdt + ACPI_HDR_LEN + 8, gpa + madt);
	finish(b + xsdt);

	memcpy(b, "RSD PTR ", 8);
	memcpy(b + 9, "CUBICL", 6);
	b[15] = 2;                      /* ACPI 2.0+: use the XSDT */
	put32(b + 20, RSDP_LEN);
	put64(b + 24, gpa + xsdt);
	b[8] = checksum(b, 20);         /* ACPI 1.0 part */
	b[32] = checksum(b, RSDP_LEN);  /* whole structure */
	return (int)need;
}
