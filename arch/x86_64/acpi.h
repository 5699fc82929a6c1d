/* SPDX-License-Identifier: Apache-2.0 */
/* The ACPI tables an x86 guest finds in its BIOS area (RSDP, XSDT, FADT,
 * DSDT, MADT): where they go and the pure builder the unit tests call. */
#ifndef CUBICLE_X86_ACPI_H
#define CUBICLE_X86_ACPI_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct vm;

/*
 * The RSDP sits at the bottom of the BIOS area, on the 16-byte boundary
 * Linux's scan of [0xe0000, 0x100000) starts at (acpi_find_root_pointer);
 * the tables follow it. The e820 map reserves all of it.
 */
#define X86_ACPI_RSDP_ADDR 0xe0000ULL
#define X86_ACPI_END       0x100000ULL

/* Legacy devices the DSDT can list: the four COM ports, the i8042 and
 * the CMOS clock, so the guest learns their IRQs. */
#define X86_ACPI_MAX_DEVS 6
#define X86_ACPI_MAX_IO   2

/*
 * A PC device on the ISA ports, described as a DSDT Device with _HID,
 * _UID and a _CRS of fixed 16-bit I/O ranges plus at most one ISA IRQ
 * (edge, active high, as ISA conforms).
 */
struct x86_acpi_dev {
	char name[5];          /* AML NameSeg under \_SB_, "COM1" */
	char hid[8];           /* EISA id, "PNP0501" */
	uint8_t uid;
	struct {
		uint16_t base;
		uint8_t len;   /* 0: slot unused */
	} io[X86_ACPI_MAX_IO];
	int irq;               /* ISA IRQ 0-15, or -1 */
};

/* What the tables describe. */
struct x86_acpi_cfg {
	unsigned n_cpus;       /* APIC ids 0..n-1; the IOAPIC gets id n */
	const struct x86_acpi_dev *devs;
	unsigned n_devs;
};

/* Upper bound of x86_acpi_size() for @n CPUs and X86_ACPI_MAX_DEVS
 * devices, for compile-time checks. */
#define X86_ACPI_MAX_SIZE(n) (1024 + 8 * (size_t)(n) + X86_ACPI_MAX_DEVS * 96)

/* The legacy devices: COM1..4 (@n 0..3), the i8042 keyboard controller
 * and the CMOS RTC. x86_acpi_com returns -EINVAL for @n > 3. */
int x86_acpi_com(unsigned n, struct x86_acpi_dev *d);
void x86_acpi_i8042(struct x86_acpi_dev *d);
void x86_acpi_rtc(struct x86_acpi_dev *d);

/* Bytes x86_acpi_build() writes for @c. */
size_t x86_acpi_size(const struct x86_acpi_cfg *c);

/*
 * Build RSDP, XSDT, FADT (hardware-reduced), DSDT and MADT for guest
 * address @gpa into @buf (@len bytes). Returns the size written, -EINVAL
 * (no CPU, more than CONFIG_MAX_VCPUS, too many devices, @gpa not 16-byte
 * aligned) or -ENOSPC (@len too small, or the tables would pass
 * X86_ACPI_END where Linux stops scanning).
 */
int x86_acpi_build(void *buf, size_t len, uint64_t gpa, const struct x86_acpi_cfg *c);

/* Write the tables for @n_cpus into guest RAM at X86_ACPI_RSDP_ADDR,
 * listing the legacy devices present on the PIO bus, and point the zero
 * page's acpi_rsdp_addr at them. 0 or -errno with a reason in err. */
int x86_acpi_setup(struct vm *vm, unsigned n_cpus, char *err, size_t errlen);

#endif
