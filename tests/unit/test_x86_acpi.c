/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the x86 ACPI tables (arch/x86_64/acpi.c) read the way a
 * guest reads them: found by Linux's BIOS-area scan, every table checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../arch/x86_64/boot.h"
#include "../../arch/x86_64/x86.h"
#include "cunit_main.h"

/* What Linux scans for the RSDP when boot_params.acpi_rsdp_addr is 0
 * (acpi_find_root_pointer, drivers/acpi/acpica/tbxfroot.c). */
#define BIOS_LO 0xe0000ULL
#define BIOS_HI 0x100000ULL
#define SENTINEL 0xa5

#define FADT_HW_REDUCED (1u << 20)
#define FADT_RESET_REG  (1u << 10)

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* The RSDP as ACPICA's scan accepts it: 16-byte aligned, "RSD PTR ",
 * the 20-byte checksum and, from revision 2, the 36-byte one. */
static const uint8_t *linux_scan(const uint8_t *bios)
{
	uint64_t a;

	for (a = BIOS_LO; a + 36 <= BIOS_HI; a += 16) {
		const uint8_t *p = bios + (a - BIOS_LO);

		if (memcmp(p, "RSD PTR ", 8) || sum(p, 20))
			continue;
		if (p[15] >= 2 && sum(p, 36))
			continue;
		return p;
	}
	return NULL;
}

/* The table at @gpa in the BIOS image: inside it, right signature, a
 * length that covers the header, checksum 0, our OEM id. */
static const uint8_t *table(const uint8_t *bios, uint64_t gpa, const char *sig)
{
	const uint8_t *t;
	uint32_t len;

	CU_ASSERT_FATAL(gpa >= BIOS_LO && gpa + 36 <= BIOS_HI);
	t = bios + (gpa - BIOS_LO);
	len = get32(t + 4);
	CU_ASSERT_EQUAL(memcmp(t, sig, 4), 0);
	CU_ASSERT_FATAL(len >= 36 && gpa + len <= BIOS_HI);
	CU_ASSERT_EQUAL(sum(t, len), 0);
	CU_ASSERT_EQUAL(memcmp(t + 10, "CUBICL", 6), 0);
	return t;
}

/* FADT fields (ACPI 6.5, 5.2.9): the ones a guest acts on. */
static void check_fadt(const uint8_t *bios, const uint8_t *f)
{
	uint32_t flags = get32(f + 112);
	uint64_t x_dsdt = get64(f + 140);
	uint16_t boot_arch;

	CU_ASSERT_EQUAL(get32(f + 4), 276);
	CU_ASSERT_EQUAL(f[8], 6);
	table(bios, x_dsdt, "DSDT");
	/* The 32-bit DSDT field is 0 or the same table. */
	CU_ASSERT_TRUE(get32(f + 40) == 0 || get32(f + 40) == x_dsdt);
	memcpy(&boot_arch, f + 109, 2);
	CU_ASSERT_TRUE(boot_arch & (1u << 1)); /* 8042: Linux probes the i8042 */
	CU_ASSERT_TRUE(boot_arch & (1u << 2)); /* VGA not present */
	if (!(flags & FADT_HW_REDUCED)) {
		/* A full FADT needs an SCI and the PM1a blocks (4.8.3). */
		CU_ASSERT_NOT_EQUAL(f[46] | f[47] << 8, 0);
		CU_ASSERT_NOT_EQUAL(get32(f + 56), 0);
		CU_ASSERT_NOT_EQUAL(get32(f + 64), 0);
		CU_ASSERT_TRUE(f[88] >= 4);
		CU_ASSERT_TRUE(f[89] >= 2);
		/* GPE0 at 0x620: 2 bytes of status, 2 of enable (the VM
		 * generation ID's GPE 0) */
		CU_ASSERT_EQUAL(get32(f + 80), 0x620);
		CU_ASSERT_EQUAL(f[92], 4);
	}
	if (flags & FADT_RESET_REG) {
		/* System I/O 0x64 <- 0xfe: the i8042 reset platform.c acts on. */
		CU_ASSERT_EQUAL(f[116], 1);
		CU_ASSERT_EQUAL(get64(f + 120), 0x64);
		CU_ASSERT_EQUAL(f[128], 0xfe);
	}
}

/* The IOAPIC id the MP table gives, so the two descriptions agree. */
static int mptable_ioapic_id(unsigned n)
{
	size_t size = x86_mptable_size(n);
	uint8_t *mp = calloc(1, size);
	const uint8_t *e, *end;
	int id = -1;

	CU_ASSERT_FATAL(mp != NULL);
	CU_ASSERT_FATAL(x86_mptable_build(mp, size, X86_EBDA_START, n, 0x600, 0x201) > 0);
	end = mp + 16 + (mp[16 + 4] | mp[16 + 5] << 8);
	for (e = mp + 16 + 44; e < end; e += e[0] == 0 ? 20 : 8)
		if (e[0] == 2)
			id = e[1];
	free(mp);
	return id;
}

/* MADT (5.2.12): n enabled LAPICs 0..n-1, one IOAPIC, LINT1 NMI, and
 * ISA IRQ0 left on GSI 0 where KVM's PIT fires it. */
static void check_madt(const uint8_t *m, unsigned n)
{
	const uint8_t *e = m + 44, *end = m + get32(m + 4);
	unsigned cpus = 0, ioapics = 0, nmis = 0, sci = 0;

	CU_ASSERT_EQUAL(get32(m + 36), 0xfee00000);
	CU_ASSERT_EQUAL(get32(m + 40) & 1, 1); /* PCAT_COMPAT: KVM's 8259s */
	while (e < end) {
		CU_ASSERT_FATAL(e[1] >= 2 && e + e[1] <= end);
		switch (e[0]) {
		case 0:
			CU_ASSERT_EQUAL(e[1], 8);
			CU_ASSERT_EQUAL(e[2], cpus); /* ACPI processor UID */
			CU_ASSERT_EQUAL(e[3], cpus); /* APIC id */
			CU_ASSERT_EQUAL(get32(e + 4) & 1, 1);
			cpus++;
			break;
		case 1:
			CU_ASSERT_EQUAL(e[1], 12);
			CU_ASSERT_EQUAL(e[2], n);
			CU_ASSERT_EQUAL(e[2], mptable_ioapic_id(n));
			CU_ASSERT_EQUAL(get32(e + 4), 0xfec00000);
			CU_ASSERT_EQUAL(get32(e + 8), 0);
			ioapics++;
			break;
		case 2:
			CU_ASSERT_EQUAL(e[1], 10);
			CU_ASSERT_TRUE(e[3] != 0 || get32(e + 4) == 0);
			/* the SCI: ISA 9 on GSI 9, level, active high */
			if (e[3] == 9) {
				CU_ASSERT_EQUAL(get32(e + 4), 9);
				CU_ASSERT_EQUAL(e[8] | e[9] << 8, 0x000d);
				sci++;
			}
			break;
		case 4:
			CU_ASSERT_EQUAL(e[1], 6);
			CU_ASSERT_EQUAL(e[2], 0xff);
			CU_ASSERT_EQUAL(e[5], 1);
			nmis++;
			break;
		default:
			CU_FAIL("unexpected MADT entry type");
		}
		e += e[1];
	}
	CU_ASSERT_PTR_EQUAL(e, end);
	CU_ASSERT_EQUAL(cpus, n);
	CU_ASSERT_EQUAL(ioapics, 1);
	CU_ASSERT_EQUAL(sci, 1);
	CU_ASSERT_EQUAL(nmis, 1);
}

/* Write every table to $CUBICLE_ACPI_DUMP/<SIG>.dat for `iasl -d`. */
static void dump(const uint8_t *t)
{
	const char *dir = getenv("CUBICLE_ACPI_DUMP");
	char path[512];
	FILE *f;

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/%.4s.dat", dir, (const char *)t);
	f = fopen(path, "wb");
	if (f) {
		fwrite(t, 1, get32(t + 4), f);
		fclose(f);
	}
}

/* A DSDT body: Scope (\_SB) {}, as iasl compiles it. */
static const uint8_t aml[] = { 0x10, 0x06, 0x5c, 0x5f, 0x53, 0x42, 0x5f };

static void check_tables(unsigned n, size_t aml_len)
{
	size_t size = x86_acpi_tables_size(n, aml_len), i;
	uint8_t *bios = malloc(BIOS_HI - BIOS_LO);
	uint8_t *at = bios + (X86_ACPI_RSDP - BIOS_LO);
	const uint8_t *rsdp, *xsdt, *fadt = NULL, *madt = NULL, *dsdt;
	uint32_t xlen;

	CU_ASSERT_FATAL(bios != NULL);
	memset(bios, 0, BIOS_HI - BIOS_LO);
	memset(at, SENTINEL, size + 64);
	CU_ASSERT_EQUAL_FATAL(x86_acpi_tables_build(at, size, X86_ACPI_RSDP, n, aml, aml_len),
			      (int)size);
	for (i = size; i < size + 64; i++)
		CU_ASSERT_EQUAL(at[i], SENTINEL);

	rsdp = linux_scan(bios);
	CU_ASSERT_PTR_EQUAL_FATAL(rsdp, at);
	CU_ASSERT_EQUAL(rsdp[15], 2);
	CU_ASSERT_EQUAL(get32(rsdp + 20), 36);
	CU_ASSERT_EQUAL(memcmp(rsdp + 9, "CUBICL", 6), 0);

	xsdt = table(bios, get64(rsdp + 24), "XSDT");
	xlen = get32(xsdt + 4);
	CU_ASSERT_EQUAL((xlen - 36) % 8, 0);
	for (i = 36; i + 8 <= xlen; i += 8) {
		uint64_t gpa = get64(xsdt + i);
		const uint8_t *t;

		CU_ASSERT_FATAL(gpa >= BIOS_LO && gpa + 36 <= BIOS_HI);
		t = bios + (gpa - BIOS_LO);
		if (!memcmp(t, "FACP", 4))
			fadt = table(bios, gpa, "FACP");
		else if (!memcmp(t, "APIC", 4))
			madt = table(bios, gpa, "APIC");
		else
			CU_FAIL("XSDT entry is neither FADT nor MADT");
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(fadt);
	CU_ASSERT_PTR_NOT_NULL_FATAL(madt);
	check_fadt(bios, fadt);
	check_madt(madt, n);
	dsdt = bios + (get64(fadt + 140) - BIOS_LO);
	CU_ASSERT_EQUAL(get32(dsdt + 4), 36 + aml_len);
	CU_ASSERT_EQUAL(memcmp(dsdt + 36, aml, aml_len), 0);
	if (n == 2) {
		dump(xsdt);
		dump(fadt);
		dump(madt);
		dump(dsdt);
	}
	free(bios);
}

static void test_tables_1(void)
{
	check_tables(1, 0);
	check_tables(1, sizeof(aml));
}

static void test_tables_2(void)
{
	check_tables(2, sizeof(aml));
}

static void test_tables_max(void)
{
	check_tables(PLAN_MAX_VCPUS, 0);
	check_tables(PLAN_MAX_VCPUS, sizeof(aml));
}

/* Every vCPU count fits between the RSDP and the end of the scan area. */
static void test_fits(void)
{
	unsigned n;

	CU_ASSERT_EQUAL(X86_ACPI_RSDP % 16, 0);
	CU_ASSERT_TRUE(X86_ACPI_RSDP >= BIOS_LO && X86_ACPI_LIMIT <= BIOS_HI);
	for (n = 1; n <= PLAN_MAX_VCPUS; n++)
		CU_ASSERT_TRUE(X86_ACPI_RSDP + x86_acpi_tables_size(n, 4096) <= X86_ACPI_LIMIT);
}

static void test_refusals(void)
{
	size_t size = x86_acpi_tables_size(2, 0);
	uint64_t high = ((X86_ACPI_LIMIT - size) & ~15ULL) + 16;
	uint8_t *buf = calloc(1, x86_acpi_tables_size(PLAN_MAX_VCPUS + 1, 0));

	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, size, X86_ACPI_RSDP, 0, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, x86_acpi_tables_size(PLAN_MAX_VCPUS + 1, 0),
					      X86_ACPI_RSDP, PLAN_MAX_VCPUS + 1, NULL, 0),
			-EINVAL);
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, size, X86_ACPI_RSDP, 2, NULL, 1), -EINVAL);
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, size - 1, X86_ACPI_RSDP, 2, NULL, 0), -ENOSPC);
	/* Tables that would run past X86_ACPI_LIMIT: Linux would not look. */
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, size, high, 2, NULL, 0), -ENOSPC);
	free(buf);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "tables for 1 vCPU, found as Linux scans", test_tables_1 },
		{ "tables for 2 vCPUs with a DSDT body", test_tables_2 },
		{ "tables for PLAN_MAX_VCPUS", test_tables_max },
		{ "every vCPU count fits below X86_ACPI_LIMIT with 4 KiB of AML", test_fits },
		{ "bad vCPU counts and short room refused", test_refusals },
		{ NULL, NULL },
	};

	return cu_run("x86_acpi", tests);
}
