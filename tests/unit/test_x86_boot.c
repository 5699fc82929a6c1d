/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the x86 boot plan without /dev/kvm: bzImage and ELF
 * parsing, e820, zero page, MP and ACPI tables, RAM layout, device
 * placement, GDT, page tables and per-vCPU CPUID (KVM's supported table
 * asked ahead and kept: test_x86_cpuid). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../arch/x86_64/boot.h"
#include "../../arch/x86_64/layout.h"
#include "../../arch/x86_64/x86.h"
#include "cunit_main.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define IMG_LEN (64 * 1024)

/* A fake bzImage: protocol 2.15, 64-bit, relocatable, 4 setup sectors
 * (given as 0), a kernel of IMG_LEN - 5*512 bytes. */
static uint8_t *fake_bzimage(void)
{
	uint8_t *img = calloc(1, IMG_LEN);
	struct setup_header h;

	memset(&h, 0, sizeof(h));
	h.setup_sects = 0;
	h.syssize = (IMG_LEN - 5 * 512) / 16;
	h.boot_flag = 0xaa55;
	h.jump = 0x66eb; /* jmp +0x66: the header ends at 0x202 + 0x66 = 0x268 */
	h.header = X86_HDRS_MAGIC;
	h.version = 0x020f;
	h.loadflags = LOADED_HIGH;
	h.vid_mode = 0xffff;
	h.initrd_addr_max = 0x7fffffff;
	h.kernel_alignment = 2 * MiB;
	h.relocatable_kernel = 1;
	h.xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h.cmdline_size = 2047;
	h.pref_address = 16 * MiB;
	h.init_size = 40 * MiB;
	memcpy(img + X86_SETUP_HDR_OFF, &h, sizeof(h));
	return img;
}

static struct setup_header *hdr_of(uint8_t *img)
{
	return (struct setup_header *)(img + X86_SETUP_HDR_OFF);
}

static void test_bzimage_good(void)
{
	uint8_t *img = fake_bzimage();
	struct x86_kernel_info ki;
	char err[256] = "";
	uint64_t start, end;

	CU_ASSERT_EQUAL_FATAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(ki.version, 0x020f);
	CU_ASSERT_EQUAL(ki.setup_sects, 4);          /* 0 means 4 */
	CU_ASSERT_EQUAL(ki.pm_offset, 5 * 512);
	CU_ASSERT_EQUAL(ki.pm_size, IMG_LEN - 5 * 512);
	CU_ASSERT_EQUAL(ki.hdr_len, 0x268 - 0x1f1);
	CU_ASSERT_EQUAL(ki.cmdline_size, 2047);
	CU_ASSERT_EQUAL(ki.initrd_addr_max, 0x7fffffff);
	CU_ASSERT_TRUE(ki.relocatable);
	/* Loaded at 1 MiB, a relocatable kernel still runs at pref_address. */
	x86_bzimage_span(&ki, MiB, &start, &end);
	CU_ASSERT_EQUAL(start, 16 * MiB);
	CU_ASSERT_EQUAL(end, 56 * MiB);
	/* Loaded above pref_address, it runs at the load address aligned up. */
	x86_bzimage_span(&ki, 17 * MiB, &start, &end);
	CU_ASSERT_EQUAL(start, 18 * MiB);
	free(img);
}

static void test_bzimage_bad(void)
{
	uint8_t *img = fake_bzimage();
	struct x86_kernel_info ki;
	char err[256];

	memcpy(img + 0x202, "HdrZ", 4);
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "HdrS"));
	memcpy(img + 0x202, "HdrS", 4);

	hdr_of(img)->version = 0x0205;
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "2.05"));
	/* 2.11 predates xloadflags, even with the bit pattern present. */
	hdr_of(img)->version = 0x020b;
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), -ENOEXEC);
	hdr_of(img)->version = 0x020f;
	hdr_of(img)->xloadflags = 0;
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "64-bit"));
	hdr_of(img)->xloadflags = XLF_KERNEL_64;
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), 0);

	/* Truncated: shorter than the header, than setup_sects, than syssize. */
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, 0x240, &ki, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, 0x100, &ki, err, sizeof(err)), -ENOEXEC);
	hdr_of(img)->setup_sects = 200;
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "truncated"));
	hdr_of(img)->setup_sects = 4;
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN - 16, &ki, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "syssize"));
	hdr_of(img)->boot_flag = 0;
	CU_ASSERT_EQUAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), -ENOEXEC);
	free(img);
}

static void test_mem_layout(void)
{
	struct mem_bank b[MEM_MAX_BANKS];

	CU_ASSERT_EQUAL(x86_mem_layout(16 * MiB, b, MEM_MAX_BANKS), 1);
	CU_ASSERT_EQUAL(b[0].gpa, 0);
	CU_ASSERT_EQUAL(b[0].size, 16 * MiB);
	CU_ASSERT_EQUAL(x86_mem_layout(3 * GiB - 4096, b, MEM_MAX_BANKS), 1);
	CU_ASSERT_EQUAL(b[0].size, 3 * GiB - 4096);
	CU_ASSERT_EQUAL(x86_mem_layout(3 * GiB, b, MEM_MAX_BANKS), 1);
	CU_ASSERT_EQUAL(b[0].size, 3 * GiB);
	CU_ASSERT_EQUAL(x86_mem_layout(3 * GiB + 4096, b, MEM_MAX_BANKS), 2);
	CU_ASSERT_EQUAL(b[0].size, 3 * GiB);
	CU_ASSERT_EQUAL(b[1].gpa, 4 * GiB);
	CU_ASSERT_EQUAL(b[1].size, 4096);
	CU_ASSERT_EQUAL(x86_mem_layout(8 * GiB, b, MEM_MAX_BANKS), 2);
	CU_ASSERT_EQUAL(b[1].size, 5 * GiB);
	CU_ASSERT_EQUAL(x86_mem_layout(0, b, MEM_MAX_BANKS), -EINVAL);
	CU_ASSERT_EQUAL(x86_mem_layout(MiB + 1, b, MEM_MAX_BANKS), -EINVAL);
	CU_ASSERT_EQUAL(x86_mem_layout(4 * GiB, b, 1), -EINVAL);
}

static void test_e820(void)
{
	struct boot_e820_entry e[X86_E820_MAX];
	struct mem_bank b[MEM_MAX_BANKS];
	int n;

	x86_mem_layout(16 * MiB, b, MEM_MAX_BANKS);
	n = x86_e820_build(b, 1, e, X86_E820_MAX);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(e[0].addr, 0);
	CU_ASSERT_EQUAL(e[0].size, 0x9fc00);
	CU_ASSERT_EQUAL(e[0].type, E820_RAM);
	CU_ASSERT_EQUAL(e[1].addr, 0x9fc00);
	CU_ASSERT_EQUAL(e[1].addr + e[1].size, MiB);
	CU_ASSERT_EQUAL(e[1].type, E820_RESERVED);
	CU_ASSERT_EQUAL(e[2].addr, MiB);
	CU_ASSERT_EQUAL(e[2].size, 15 * MiB);
	CU_ASSERT_EQUAL(e[2].type, E820_RAM);

	/* Just under the hole: one bank, no entry at 4 GiB. */
	x86_mem_layout(3 * GiB - 2 * MiB, b, MEM_MAX_BANKS);
	n = x86_e820_build(b, 1, e, X86_E820_MAX);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_EQUAL(e[2].addr + e[2].size, 3 * GiB - 2 * MiB);
	/* Above it: the rest is usable at 4 GiB, nothing in the hole. */
	n = x86_mem_layout(3 * GiB + 512 * MiB, b, MEM_MAX_BANKS);
	n = x86_e820_build(b, (unsigned)n, e, X86_E820_MAX);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CU_ASSERT_EQUAL(e[2].addr + e[2].size, 3 * GiB);
	CU_ASSERT_EQUAL(e[3].addr, 4 * GiB);
	CU_ASSERT_EQUAL(e[3].size, 512 * MiB);
	CU_ASSERT_EQUAL(e[3].type, E820_RAM);
	CU_ASSERT_EQUAL(x86_e820_build(b, 2, e, 3), -ENOSPC);

	/* Exactly 1 MiB: no usable RAM above it; less cannot boot Linux. */
	b[0] = (struct mem_bank){ .gpa = 0, .size = MiB };
	CU_ASSERT_EQUAL(x86_e820_build(b, 1, e, X86_E820_MAX), 2);
	b[0].size = 512 * 1024;
	CU_ASSERT_EQUAL(x86_e820_build(b, 1, e, X86_E820_MAX), -EINVAL);
}

static void test_boot_params(void)
{
	uint8_t *img = fake_bzimage();
	struct boot_params *bp = calloc(1, sizeof(*bp));
	struct boot_e820_entry e[X86_E820_MAX];
	struct mem_bank b[MEM_MAX_BANKS];
	struct x86_kernel_info ki;
	struct x86_boot_setup s;
	char err[128];

	CU_ASSERT_EQUAL_FATAL(sizeof(*bp), 4096);
	CU_ASSERT_EQUAL_FATAL(x86_bzimage_parse(img, IMG_LEN, &ki, err, sizeof(err)), 0);
	x86_mem_layout(256 * MiB, b, MEM_MAX_BANKS);
	memset(bp, 0xaa, sizeof(*bp));
	s = (struct x86_boot_setup){
		.hdr = img + X86_SETUP_HDR_OFF, .hdr_len = ki.hdr_len,
		.cmdline_gpa = X86_CMDLINE_ADDR, .cmdline_len = 14,
		.initrd_gpa = 200 * MiB, .initrd_size = 3 * MiB + 5,
		.e820 = e, .n_e820 = (unsigned)x86_e820_build(b, 1, e, X86_E820_MAX),
	};
	CU_ASSERT_EQUAL_FATAL(x86_boot_params_build(bp, &s), 0);
	CU_ASSERT_EQUAL(bp->hdr.header, X86_HDRS_MAGIC);
	CU_ASSERT_EQUAL(bp->hdr.version, 0x020f);
	CU_ASSERT_EQUAL(bp->hdr.type_of_loader, 0xff);
	CU_ASSERT_TRUE(bp->hdr.loadflags & LOADED_HIGH);
	CU_ASSERT_EQUAL(bp->hdr.cmd_line_ptr, 0x20000);
	CU_ASSERT_EQUAL(bp->ext_cmd_line_ptr, 0);
	CU_ASSERT_EQUAL(bp->hdr.cmdline_size, 2047);
	CU_ASSERT_EQUAL(bp->hdr.ramdisk_image, 200 * MiB);
	CU_ASSERT_EQUAL(bp->hdr.ramdisk_size, 3 * MiB + 5);
	CU_ASSERT_EQUAL(bp->e820_entries, 3);
	CU_ASSERT_EQUAL(bp->e820_table[2].addr, MiB);
	CU_ASSERT_EQUAL(bp->sentinel, 0); /* the rest is zeroed */
	CU_ASSERT_EQUAL(bp->acpi_rsdp_addr, 0);

	/* A vmlinux has no header: the minimal one, and no initrd. */
	s.hdr = NULL;
	s.hdr_len = 0;
	s.initrd_gpa = 0;
	s.initrd_size = 0;
	CU_ASSERT_EQUAL_FATAL(x86_boot_params_build(bp, &s), 0);
	CU_ASSERT_EQUAL(bp->hdr.boot_flag, 0xaa55);
	CU_ASSERT_EQUAL(bp->hdr.header, X86_HDRS_MAGIC);
	CU_ASSERT_EQUAL(bp->hdr.type_of_loader, 0xff);
	CU_ASSERT_EQUAL(bp->hdr.ramdisk_image, 0);
	CU_ASSERT_EQUAL(bp->hdr.ramdisk_size, 0);
	s.n_e820 = X86_E820_MAX + 1;
	CU_ASSERT_EQUAL(x86_boot_params_build(bp, &s), -EINVAL);
	free(bp);
	free(img);
}

static void test_initrd_place(void)
{
	uint64_t gpa = 0;

	CU_ASSERT_EQUAL(x86_initrd_place(MiB, 0x7fffffff, 256 * MiB, 56 * MiB, &gpa), 0);
	CU_ASSERT_EQUAL(gpa, 255 * MiB);
	CU_ASSERT_EQUAL(x86_initrd_place(MiB + 1, 0x7fffffff, 256 * MiB, 56 * MiB, &gpa), 0);
	CU_ASSERT_EQUAL(gpa, 254 * MiB + 0xff000); /* page aligned, ends below the top */
	/* initrd_addr_max caps it below RAM's end. */
	CU_ASSERT_EQUAL(x86_initrd_place(MiB, 0x37ffffff, 3 * GiB, 56 * MiB, &gpa), 0);
	CU_ASSERT_EQUAL(gpa, 0x38000000 - MiB);
	CU_ASSERT_EQUAL(x86_initrd_place(250 * MiB, 0x7fffffff, 256 * MiB, 56 * MiB, &gpa), -ENOSPC);
	CU_ASSERT_EQUAL(x86_initrd_place(512 * MiB, 0x7fffffff, 256 * MiB, 0, &gpa), -ENOSPC);
}

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

static void check_mptable(unsigned n)
{
	size_t size = x86_mptable_size(n);
	uint8_t *buf = calloc(1, size);
	uint8_t *cfg = buf + 16, *p;
	uint16_t len, count;
	uint32_t physptr;
	unsigned cpus = 0, bsp = 0, ioapics = 0, irqs = 0;

	CU_ASSERT_EQUAL_FATAL(x86_mptable_build(buf, size, X86_EBDA_START, n, 0x806c1, 0x1), (int)size);
	CU_ASSERT_EQUAL(memcmp(buf, "_MP_", 4), 0);
	CU_ASSERT_EQUAL(sum(buf, 16), 0);
	memcpy(&physptr, buf + 4, 4);
	CU_ASSERT_EQUAL(physptr, X86_EBDA_START + 16);
	CU_ASSERT_EQUAL(buf[8], 1); /* length in paragraphs */
	CU_ASSERT_EQUAL(buf[9], 4); /* spec 1.4 */
	CU_ASSERT_EQUAL(memcmp(cfg, "PCMP", 4), 0);
	memcpy(&len, cfg + 4, 2);
	memcpy(&count, cfg + 34, 2);
	CU_ASSERT_EQUAL(len, size - 16);
	CU_ASSERT_EQUAL(sum(cfg, len), 0);
	for (p = cfg + 44; p < cfg + len; count--) {
		switch (p[0]) {
		case 0:
			CU_ASSERT_EQUAL(p[1], cpus); /* APIC id = vCPU index */
			CU_ASSERT_TRUE(p[3] & 1);
			bsp += !!(p[3] & 2);
			CU_ASSERT_EQUAL(!!(p[3] & 2), cpus == 0);
			cpus++;
			p += 20;
			break;
		case 2:
			CU_ASSERT_EQUAL(p[1], n);
			CU_ASSERT_EQUAL(p[2], 0x11);
			ioapics++;
			p += 8;
			break;
		case 3:
			CU_ASSERT_EQUAL(p[5], p[7]); /* ISA IRQ n -> pin n */
			irqs++;
			p += 8;
			break;
		default:
			p += 8;
		}
	}
	CU_ASSERT_EQUAL(count, 0);
	CU_ASSERT_EQUAL(cpus, n);
	CU_ASSERT_EQUAL(bsp, 1);
	CU_ASSERT_EQUAL(ioapics, 1);
	CU_ASSERT_TRUE(irqs >= 16);
	CU_ASSERT_TRUE(X86_EBDA_START + size <= X86_MPTABLE_LIMIT);
	free(buf);
}

static void test_mptable(void)
{
	uint8_t buf[64];

	check_mptable(1);
	check_mptable(64);
	CU_ASSERT_EQUAL(x86_mptable_size(64), 1564);
	CU_ASSERT_EQUAL(x86_mptable_build(buf, sizeof(buf), X86_EBDA_START, 0, 0, 0), -EINVAL);
	CU_ASSERT_EQUAL(x86_mptable_build(buf, sizeof(buf), X86_EBDA_START, PLAN_MAX_VCPUS + 1,
					  0, 0), -EINVAL);
	CU_ASSERT_EQUAL(x86_mptable_build(buf, sizeof(buf), X86_EBDA_START, 1, 0, 0), -ENOSPC);
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

/* The table at guest address gpa inside buf (placed at base): signature,
 * checksum over its length. */
static const uint8_t *acpi_table(const uint8_t *buf, uint64_t base, uint64_t gpa,
				 const char *sig)
{
	const uint8_t *t = buf + (gpa - base);

	CU_ASSERT_EQUAL(memcmp(t, sig, 4), 0);
	CU_ASSERT_EQUAL(sum(t, get32(t + 4)), 0);
	return t;
}

static void check_acpi(unsigned n, const void *aml, size_t aml_len)
{
	size_t size = x86_acpi_tables_size(n, aml_len);
	uint8_t *buf = calloc(1, size);
	const uint8_t *xsdt, *fadt, *madt, *dsdt, *p;
	unsigned cpus = 0, ioapics = 0;

	CU_ASSERT_EQUAL_FATAL(x86_acpi_tables_build(buf, size, X86_ACPI_RSDP, n, aml, aml_len),
			      (int)size);
	CU_ASSERT_TRUE(size <= X86_ACPI_SIZE(n, aml_len));
	CU_ASSERT_EQUAL(memcmp(buf, "RSD PTR ", 8), 0);
	CU_ASSERT_EQUAL(sum(buf, 20), 0);
	CU_ASSERT_EQUAL(sum(buf, 36), 0);
	CU_ASSERT_EQUAL(buf[15], 2);
	xsdt = acpi_table(buf, X86_ACPI_RSDP, get64(buf + 24), "XSDT");
	CU_ASSERT_EQUAL(get32(xsdt + 4), 36 + 16);
	fadt = acpi_table(buf, X86_ACPI_RSDP, get64(xsdt + 36), "FACP");
	madt = acpi_table(buf, X86_ACPI_RSDP, get64(xsdt + 44), "APIC");
	CU_ASSERT_EQUAL(get32(fadt + 4), 276);
	dsdt = acpi_table(buf, X86_ACPI_RSDP, get64(fadt + 140), "DSDT");
	CU_ASSERT_EQUAL(get32(dsdt + 4), 36 + aml_len);
	if (aml_len)
		CU_ASSERT_EQUAL(memcmp(dsdt + 36, aml, aml_len), 0);
	CU_ASSERT_PTR_EQUAL(dsdt + 36 + aml_len, buf + size); /* the DSDT is last */
	CU_ASSERT_EQUAL(get32(fadt + 40), get64(fadt + 140)); /* DSDT == X_DSDT */
	CU_ASSERT_EQUAL(fadt[128], 0xfe);                       /* reset value */
	CU_ASSERT_EQUAL(get64(fadt + 120), 0x64);               /* reset port */
	CU_ASSERT_EQUAL(get32(fadt + 112) & (1u << 20), 0);     /* not HW-reduced */
	CU_ASSERT_EQUAL(get32(madt + 36), 0xfee00000);
	for (p = madt + 44; p < madt + get32(madt + 4); p += p[1]) {
		CU_ASSERT_FATAL(p[1] >= 2);
		if (p[0] == 0) {
			CU_ASSERT_EQUAL(p[3], cpus);
			CU_ASSERT_EQUAL(get32(p + 4) & 1, 1);
			cpus++;
		} else if (p[0] == 1) {
			CU_ASSERT_EQUAL(p[2], n);
			CU_ASSERT_EQUAL(get32(p + 4), 0xfec00000);
			ioapics++;
		}
	}
	CU_ASSERT_EQUAL(cpus, n);
	CU_ASSERT_EQUAL(ioapics, 1);
	CU_ASSERT_TRUE(X86_ACPI_RSDP + size <= X86_ACPI_LIMIT);
	free(buf);
}

static void test_acpi(void)
{
	uint8_t buf[64];

	static const uint8_t aml[] = { 0x10, 0x05, '_', 'S', 'B', '_' }; /* Scope (\_SB) {} */

	check_acpi(1, NULL, 0);
	check_acpi(64, NULL, 0);
	check_acpi(3, aml, sizeof(aml));
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, sizeof(buf), X86_ACPI_RSDP, 0, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, sizeof(buf), X86_ACPI_RSDP, 2, NULL, 0), -ENOSPC);
	CU_ASSERT_EQUAL(x86_acpi_tables_build(buf, sizeof(buf), X86_ACPI_RSDP, 2, NULL, 4), -EINVAL);
}

static void test_layout(void)
{
	struct x86_layout l;
	struct cub_region r;
	char err[256];
	int i;

	memset(&l, 0, sizeof(l));
	r = (struct cub_region){ .class = "uart", .len = 8 };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.bus, CUB_BUS_PIO);
	CU_ASSERT_EQUAL(r.base, 0x3f8);
	CU_ASSERT_EQUAL(r.irq, 4);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.base, 0x2f8);
	CU_ASSERT_EQUAL(r.irq, 3);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.base, 0x2e8);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), -ENOSPC);
	r = (struct cub_region){ .class = "uart", .len = 8, .want = CUB_BUS_MMIO };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "MMIO"));

	r = (struct cub_region){ .class = "boot-timer", .len = 0x1000 };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.bus, CUB_BUS_MMIO);
	CU_ASSERT_EQUAL(r.base, 0xd0000000);
	CU_ASSERT_EQUAL(r.irq, -1);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), -ENOSPC);

	r = (struct cub_region){ .class = "testdev", .len = 16 };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.bus, CUB_BUS_PIO);
	CU_ASSERT_EQUAL(r.base, 0x500);
	r = (struct cub_region){ .class = "testdev", .len = 16, .want = CUB_BUS_MMIO };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.bus, CUB_BUS_MMIO);
	CU_ASSERT_EQUAL(r.base, 0xd0001000);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.base, 0xd0002000);
	r = (struct cub_region){ .class = "testdev", .len = 17 };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), -EINVAL);

	/* Other classes: 4 KiB MMIO slots, IRQs 5, 6, 7, 10 (8 and 9 skipped). */
	r = (struct cub_region){ .class = "virtio", .len = 0x200 };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.base, 0xd0100000);
	CU_ASSERT_EQUAL(r.irq, 5);
	r.len = 0x1800;
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.base, 0xd0101000);
	CU_ASSERT_EQUAL(r.irq, 6);
	r.len = 0x200;
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.base, 0xd0103000);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.irq, 10);
	for (i = 4; i < 16; i++)
		CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(r.irq, 23);
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), -ENOSPC);
	r = (struct cub_region){ .class = "virtio", .len = 0x200, .want = CUB_BUS_PIO };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), -EINVAL);
	r = (struct cub_region){ .class = NULL, .len = 8 };
	CU_ASSERT_EQUAL(x86_layout_place(&l, &r, err, sizeof(err)), -ENOENT);
}

static void test_gdt_and_pagetables(void)
{
	uint64_t gdt[4], *pt = calloc(6 * 512, 8);
	struct kvm_segment s;

	x86_gdt_build(gdt, BOOT_MODE_LONG);
	CU_ASSERT_EQUAL(gdt[0], 0);
	x86_gdt_segment(gdt[X86_BOOT_CS / 8], X86_BOOT_CS, &s);
	CU_ASSERT_EQUAL(s.selector, 0x10);
	CU_ASSERT_EQUAL(s.base, 0);
	CU_ASSERT_EQUAL(s.limit, 0xffffffff);
	CU_ASSERT_EQUAL(s.type, 0xb);
	CU_ASSERT_EQUAL(s.l, 1);
	CU_ASSERT_EQUAL(s.db, 0);
	CU_ASSERT_EQUAL(s.present, 1);
	CU_ASSERT_EQUAL(s.s, 1);
	x86_gdt_segment(gdt[X86_BOOT_DS / 8], X86_BOOT_DS, &s);
	CU_ASSERT_EQUAL(s.type, 0x3);
	CU_ASSERT_EQUAL(s.db, 1);
	CU_ASSERT_EQUAL(s.limit, 0xffffffff);
	x86_gdt_build(gdt, BOOT_MODE_PROTECTED);
	x86_gdt_segment(gdt[X86_BOOT_CS / 8], X86_BOOT_CS, &s);
	CU_ASSERT_EQUAL(s.l, 0);
	CU_ASSERT_EQUAL(s.db, 1);

	x86_pagetables_build(pt, X86_PML4_ADDR);
	CU_ASSERT_EQUAL(pt[0], 0xa000 | 3);
	CU_ASSERT_EQUAL(pt[1], 0);
	CU_ASSERT_EQUAL(pt[512 + 0], 0xb000 | 3);
	CU_ASSERT_EQUAL(pt[512 + 3], 0xe000 | 3);
	CU_ASSERT_EQUAL(pt[512 + 4], 0);
	CU_ASSERT_EQUAL(pt[1024 + 0], 0x83);
	CU_ASSERT_EQUAL(pt[1024 + 2047], 0xffe00000 | 0x83);
	CU_ASSERT_EQUAL(X86_PML4_ADDR + 6 * 4096, X86_PT_END);
	free(pt);
}

/* A one-segment vmlinux look-alike: 0x100 bytes at paddr 16 MiB, bss 0x1000. */
static size_t fake_elf(uint8_t *buf, size_t cap)
{
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };
	size_t off = sizeof(eh) + sizeof(ph);

	memset(buf, 0, cap);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_entry = 16 * MiB;
	eh.e_phoff = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	ph.p_type = PT_LOAD;
	ph.p_offset = off;
	ph.p_paddr = 16 * MiB;
	ph.p_vaddr = 0xffffffff81000000ULL;
	ph.p_filesz = 0x100;
	ph.p_memsz = 0x1100;
	memcpy(buf, &eh, sizeof(eh));
	memcpy(buf + sizeof(eh), &ph, sizeof(ph));
	memset(buf + off, 0x90, 0x100);
	return off + 0x100;
}

static void test_elf(void)
{
	uint8_t buf[1024];
	struct x86_elf_info ei;
	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + sizeof(Elf64_Ehdr));
	char err[256];
	size_t len = fake_elf(buf, sizeof(buf));

	CU_ASSERT_EQUAL_FATAL(x86_elf_parse(buf, len, &ei, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(ei.entry, 16 * MiB);
	CU_ASSERT_EQUAL(ei.lo, 16 * MiB);
	CU_ASSERT_EQUAL(ei.hi, 16 * MiB + 0x1100);
	CU_ASSERT_EQUAL(ei.n_load, 1);
	CU_ASSERT_EQUAL(x86_elf_parse(buf, len - 1, &ei, err, sizeof(err)), -ENOEXEC);
	ph->p_paddr = 32 * MiB; /* entry no longer inside */
	CU_ASSERT_EQUAL(x86_elf_parse(buf, len, &ei, err, sizeof(err)), -ENOEXEC);
	buf[EI_CLASS] = ELFCLASS32;
	CU_ASSERT_EQUAL(x86_elf_parse(buf, len, &ei, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_EQUAL(x86_elf_parse("MZ", 2, &ei, err, sizeof(err)), -ENOEXEC);
}

static void test_cpuid(void)
{
	struct kvm_cpuid2 *sup = calloc(1, sizeof(*sup) + 4 * sizeof(sup->entries[0]));
	struct kvm_cpuid2 *c;
	struct kvm_cpuid_entry2 *e;

	sup->nent = 4;
	sup->entries[0] = (struct kvm_cpuid_entry2){ .function = 0, .eax = 0xd, .ebx = 0x756e6547 };
	sup->entries[1] = (struct kvm_cpuid_entry2){ .function = 1, .eax = 0x806c1,
						     .ebx = 0x12340800, .edx = 1u << 28 };
	sup->entries[2] = (struct kvm_cpuid_entry2){ .function = 0xb, .index = 0, .ebx = 2,
						     .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX };
	sup->entries[3] = (struct kvm_cpuid_entry2){ .function = 0xb, .index = 1, .ebx = 8,
						     .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX };
	c = x86_cpuid_for_vcpu(sup, 5, 6, true);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	e = x86_cpuid_find(c, 1, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_EQUAL(e->ebx >> 24, 5);
	CU_ASSERT_EQUAL((e->ebx >> 16) & 0xff, 8);
	CU_ASSERT_EQUAL(e->ebx & 0xffff, 0x0800);
	CU_ASSERT_TRUE(e->ecx & (1u << 31));
	CU_ASSERT_TRUE(e->ecx & (1u << 24));
	CU_ASSERT_TRUE(e->edx & (1u << 28));
	e = x86_cpuid_find(c, 0xb, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_EQUAL(e->ebx, 1);
	CU_ASSERT_EQUAL(e->edx, 5);
	CU_ASSERT_EQUAL((e->ecx >> 8) & 0xff, 1);
	e = x86_cpuid_find(c, 0xb, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_EQUAL(e->ebx, 6);
	CU_ASSERT_EQUAL(e->eax, 3);
	CU_ASSERT_EQUAL(e->edx, 5);
	e = x86_cpuid_find(c, 0xb, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	CU_ASSERT_EQUAL((e->ecx >> 8) & 0xff, 0);
	free(c);
	c = x86_cpuid_for_vcpu(sup, 0, 1, false);
	e = x86_cpuid_find(c, 1, 0);
	CU_ASSERT_FALSE(e->edx & (1u << 28));
	CU_ASSERT_FALSE(e->ecx & (1u << 24));
	free(c);
	free(sup);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "bzImage header: good", test_bzimage_good },
		{ "bzImage header: refusals", test_bzimage_bad },
		{ "RAM banks around the 3 GiB hole", test_mem_layout },
		{ "e820 maps", test_e820 },
		{ "zero page fields", test_boot_params },
		{ "initrd placement", test_initrd_place },
		{ "MP table for 1 and 64 vCPUs", test_mptable },
		{ "ACPI tables for 1 and 64 vCPUs", test_acpi },
		{ "device placement", test_layout },
		{ "GDT and page tables", test_gdt_and_pagetables },
		{ "ELF vmlinux parsing", test_elf },
		{ "per-vCPU CPUID", test_cpuid },
		{ NULL, NULL },
	};

	return cu_run("x86 boot", tests);
}
