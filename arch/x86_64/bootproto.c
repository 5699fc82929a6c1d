/* SPDX-License-Identifier: Apache-2.0 */
/* The x86 Linux boot protocol as data: bzImage and ELF headers in, zero
 * page, e820 map, GDT and page tables out. No I/O here (see boot.c). */
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "boot.h"
#include "cnode.h"
#include "x86.h"

#define PAGE_SIZE 0x1000ULL

/*
 * Facts from Documentation/arch/x86/boot.rst: the setup header sits at
 * 0x1f1 and ends at 0x202 + the byte at 0x201; setup_sects == 0 means 4;
 * the protected-mode kernel starts at (setup_sects + 1) * 512; syssize
 * counts 16-byte paragraphs (32 bits from 2.04); xloadflags appeared in
 * 2.12 and XLF_KERNEL_64 says startup_64 sits 0x200 into the
 * protected-mode part.
 */
int x86_bzimage_parse(const void *img, size_t len, struct x86_kernel_info *out, char *err,
		      size_t errlen)
{
	const uint8_t *p = img;
	struct setup_header h;
	uint64_t hdr_end;

	if (!img || !out)
		return -EINVAL;
	if (len < 0x206 || memcmp(p + 0x202, "HdrS", 4))
		return errf(err, errlen, -ENOEXEC, "not a bzImage (no \"HdrS\" magic at 0x202)");
	if (len < X86_SETUP_HDR_OFF + sizeof(h))
		return errf(err, errlen, -ENOEXEC, "truncated bzImage: %zu bytes, the setup header alone needs %zu",
			    len, X86_SETUP_HDR_OFF + sizeof(h));
	memcpy(&h, p + X86_SETUP_HDR_OFF, sizeof(h));
	if (h.boot_flag != 0xaa55)
		return errf(err, errlen, -ENOEXEC, "not a bzImage (boot flag 0x%04x, expected 0xaa55)",
			    h.boot_flag);
	if (h.version < 0x0206)
		return errf(err, errlen, -ENOEXEC, "boot protocol %u.%02u is too old; cubicle needs 2.06 or later",
			    h.version >> 8, h.version & 0xff);
	if (h.version < 0x020c || !(h.xloadflags & XLF_KERNEL_64))
		return errf(err, errlen, -ENOEXEC,
			    "kernel has no 64-bit entry point (protocol %u.%02u, XLF_KERNEL_64 %s); build a 64-bit kernel",
			    h.version >> 8, h.version & 0xff,
			    h.xloadflags & XLF_KERNEL_64 ? "set" : "clear");

	memset(out, 0, sizeof(*out));
	out->version = h.version;
	out->setup_sects = h.setup_sects ? h.setup_sects : 4;
	out->pm_offset = (uint64_t)(out->setup_sects + 1) * 512;
	if (out->pm_offset >= len)
		return errf(err, errlen, -ENOEXEC,
			    "truncated bzImage: %u setup sectors but only %zu bytes in the file",
			    out->setup_sects, len);
	out->pm_size = len - out->pm_offset;
	if ((uint64_t)h.syssize * 16 > out->pm_size)
		return errf(err, errlen, -ENOEXEC,
			    "truncated bzImage: syssize says %llu bytes of kernel, the file has %llu",
			    (unsigned long long)h.syssize * 16, (unsigned long long)out->pm_size);

	hdr_end = 0x202 + (uint64_t)p[0x201];
	if (hdr_end > X86_SETUP_HDR_OFF + sizeof(h))
		hdr_end = X86_SETUP_HDR_OFF + sizeof(h);
	out->hdr_len = hdr_end - X86_SETUP_HDR_OFF;
	out->cmdline_size = h.cmdline_size;
	out->initrd_addr_max = h.initrd_addr_max;
	out->kernel_alignment = h.kernel_alignment;
	out->relocatable = h.relocatable_kernel;
	out->pref_address = h.pref_address;
	out->init_size = h.init_size;
	out->xloadflags = h.xloadflags;
	if (h.version >= 0x0208 && h.payload_length &&
	    (uint64_t)h.payload_offset + h.payload_length <= out->pm_size) {
		out->payload_offset = h.payload_offset;
		out->payload_length = h.payload_length;
	}
	if (out->relocatable &&
	    (!out->kernel_alignment || (out->kernel_alignment & (out->kernel_alignment - 1))))
		return errf(err, errlen, -ENOEXEC, "kernel_alignment 0x%x is not a power of two",
			    out->kernel_alignment);
	if (!out->init_size)
		return errf(err, errlen, -ENOEXEC, "setup header has init_size 0");
	return 0;
}

/*
 * The compressed kernel decompresses at its load address rounded up to
 * kernel_alignment, but never below LOAD_PHYSICAL_ADDR, which it announces
 * as pref_address (arch/x86/boot/compressed/head_64.S); a non-relocatable
 * kernel always runs at pref_address.
 */
void x86_bzimage_span(const struct x86_kernel_info *ki, uint64_t load, uint64_t *start,
		      uint64_t *end)
{
	uint64_t run = ki->pref_address;

	if (ki->relocatable) {
		uint64_t a = ki->kernel_alignment;
		uint64_t aligned = (load + a - 1) & ~(a - 1);

		if (aligned > run)
			run = aligned;
	}
	if (run < load)
		run = load;
	*start = run;
	*end = run + ki->init_size;
}

int x86_elf_parse(const void *img, size_t len, struct x86_elf_info *out, char *err,
		  size_t errlen)
{
	const uint8_t *p = img;
	Elf64_Ehdr eh;
	unsigned i;

	if (!img || !out)
		return -EINVAL;
	if (len < sizeof(eh) || memcmp(p, ELFMAG, SELFMAG))
		return errf(err, errlen, -ENOEXEC, "not an ELF file");
	memcpy(&eh, p, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64)
		return errf(err, errlen, -ENOEXEC, "not a 64-bit x86-64 ELF (a vmlinux is one)");
	if (eh.e_type != ET_EXEC)
		return errf(err, errlen, -ENOEXEC, "ELF type %u is not an executable", eh.e_type);
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || !eh.e_phnum || eh.e_phoff > len ||
	    (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > len - eh.e_phoff)
		return errf(err, errlen, -ENOEXEC, "ELF program headers are missing or truncated");

	memset(out, 0, sizeof(*out));
	out->lo = UINT64_MAX;
	out->entry = eh.e_entry;
	for (i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, p + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_memsz)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
			return errf(err, errlen, -ENOEXEC, "ELF segment %u lies outside the file", i);
		if (ph.p_paddr > UINT64_MAX - ph.p_memsz)
			return errf(err, errlen, -ENOEXEC, "ELF segment %u wraps the address space", i);
		if (ph.p_paddr < out->lo)
			out->lo = ph.p_paddr;
		if (ph.p_paddr + ph.p_memsz > out->hi)
			out->hi = ph.p_paddr + ph.p_memsz;
		out->n_load++;
	}
	if (!out->n_load)
		return errf(err, errlen, -ENOEXEC, "ELF file has no loadable segment");
	if (out->entry < out->lo || out->entry >= out->hi)
		return errf(err, errlen, -ENOEXEC, "ELF entry 0x%llx is outside its segments",
			    (unsigned long long)out->entry);
	return 0;
}

/* Only after x86_elf_parse() accepted img. */
int x86_elf_load(const struct guest_mem *m, const void *img, size_t len, char *err,
		 size_t errlen)
{
	const uint8_t *p = img;
	Elf64_Ehdr eh;
	unsigned i;

	memcpy(&eh, p, sizeof(eh));
	for (i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		uint8_t *dst;

		memcpy(&ph, p + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_memsz)
			continue;
		dst = mem_map(m, ph.p_paddr, ph.p_memsz);
		if (!dst)
			return errf(err, errlen, -EFAULT,
				    "ELF segment %u [0x%llx, 0x%llx) is not in guest RAM", i,
				    (unsigned long long)ph.p_paddr,
				    (unsigned long long)(ph.p_paddr + ph.p_memsz));
		memcpy(dst, p + ph.p_offset, ph.p_filesz);
		memset(dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
	}
	return 0;
}

static int e820_add(struct boot_e820_entry *out, unsigned *n, unsigned max, uint64_t addr,
		    uint64_t size, uint32_t type)
{
	if (!size)
		return 0;
	if (*n >= max)
		return -ENOSPC;
	out[*n] = (struct boot_e820_entry){ .addr = addr, .size = size, .type = type };
	(*n)++;
	return 0;
}

int x86_e820_build(const struct mem_bank *banks, unsigned n, struct boot_e820_entry *out,
		   unsigned max)
{
	unsigned i, cnt = 0;
	int ret;

	if (!n || banks[0].gpa != 0 || banks[0].size < X86_HIMEM_START)
		return -EINVAL;
	ret = e820_add(out, &cnt, max, 0, X86_EBDA_START, E820_RAM);
	ret = ret ?: e820_add(out, &cnt, max, X86_EBDA_START, X86_HIMEM_START - X86_EBDA_START,
			      E820_RESERVED);
	ret = ret ?: e820_add(out, &cnt, max, X86_HIMEM_START, banks[0].size - X86_HIMEM_START,
			      E820_RAM);
	for (i = 1; i < n && !ret; i++)
		ret = e820_add(out, &cnt, max, banks[i].gpa, banks[i].size, E820_RAM);
	return ret ? ret : (int)cnt;
}

int x86_boot_params_build(struct boot_params *bp, const struct x86_boot_setup *s)
{
	struct setup_header *h = &bp->hdr;

	if (s->n_e820 > X86_E820_MAX || s->hdr_len > sizeof(*h) || (s->hdr && !s->hdr_len))
		return -EINVAL;
	memset(bp, 0, sizeof(*bp));
	if (s->hdr) {
		memcpy(h, s->hdr, s->hdr_len);
	} else {
		/* A vmlinux carries no setup header; these are the fields the
		 * kernel reads on the 64-bit path. */
		h->boot_flag = 0xaa55;
		h->header = X86_HDRS_MAGIC;
		h->kernel_alignment = 0x1000000;
		h->cmdline_size = X86_ELF_CMDLINE_MAX;
		h->initrd_addr_max = X86_ELF_INITRD_MAX;
	}
	/* 0xff: "undefined" loader. It must not be 0: the kernel ignores the
	 * initrd fields when type_of_loader is 0 (early_reserve_initrd). */
	h->type_of_loader = 0xff;
	h->loadflags |= LOADED_HIGH;
	h->loadflags &= ~(KEEP_SEGMENTS | QUIET_FLAG);
	h->cmd_line_ptr = (uint32_t)s->cmdline_gpa;
	bp->ext_cmd_line_ptr = (uint32_t)(s->cmdline_gpa >> 32);
	h->ramdisk_image = (uint32_t)s->initrd_gpa;
	h->ramdisk_size = (uint32_t)s->initrd_size;
	bp->ext_ramdisk_image = (uint32_t)(s->initrd_gpa >> 32);
	bp->ext_ramdisk_size = (uint32_t)(s->initrd_size >> 32);
	if (!s->initrd_size)
		h->ramdisk_image = bp->ext_ramdisk_image = 0;
	bp->acpi_rsdp_addr = s->rsdp_gpa;
	bp->e820_entries = (uint8_t)s->n_e820;
	if (s->n_e820)
		memcpy(bp->e820_table, s->e820, s->n_e820 * sizeof(*s->e820));
	return 0;
}

int x86_initrd_place(uint64_t size, uint64_t addr_max, uint64_t ram_top, uint64_t floor,
		     uint64_t *gpa)
{
	uint64_t top = ram_top;

	if (addr_max < UINT64_MAX && addr_max + 1 < top)
		top = addr_max + 1;
	if (!size || size > top)
		return -ENOSPC;
	*gpa = (top - size) & ~(PAGE_SIZE - 1);
	return *gpa >= floor ? 0 : -ENOSPC;
}

/* Flat 4 GiB descriptors, accessed bit preset so the CPU never writes the
 * GDT: 64-bit code (L=1), 32-bit code (D=1, G=1), read/write data. */
#define GDT_CODE64 0x00af9b000000ffffULL
#define GDT_CODE32 0x00cf9b000000ffffULL
#define GDT_DATA   0x00cf93000000ffffULL

void x86_gdt_build(uint64_t gdt[4], enum boot_mode mode)
{
	gdt[0] = 0;
	gdt[1] = 0;
	gdt[2] = mode == BOOT_MODE_LONG ? GDT_CODE64 : GDT_CODE32;
	gdt[3] = GDT_DATA;
}

void x86_gdt_segment(uint64_t d, uint16_t sel, struct kvm_segment *s)
{
	uint32_t limit = (uint32_t)((d & 0xffff) | ((d >> 32) & 0xf0000));

	memset(s, 0, sizeof(*s));
	s->selector = sel;
	s->base = ((d >> 16) & 0xffffff) | (((d >> 56) & 0xff) << 24);
	s->type = (d >> 40) & 0xf;
	s->s = (d >> 44) & 1;
	s->dpl = (d >> 45) & 3;
	s->present = (d >> 47) & 1;
	s->avl = (d >> 52) & 1;
	s->l = (d >> 53) & 1;
	s->db = (d >> 54) & 1;
	s->g = (d >> 55) & 1;
	/* KVM takes the limit in bytes: scale it as the CPU would. */
	s->limit = s->g ? (limit << 12) | 0xfff : limit;
}

void x86_pagetables_build(uint64_t *pt, uint64_t base)
{
	uint64_t *pml4 = pt, *pdpt = pt + 512, *pd = pt + 1024;
	unsigned i;

	memset(pt, 0, 6 * PAGE_SIZE);
	pml4[0] = (base + PAGE_SIZE) | 0x3;                 /* present, writable */
	for (i = 0; i < 4; i++)
		pdpt[i] = (base + (2 + i) * PAGE_SIZE) | 0x3;
	for (i = 0; i < 4 * 512; i++)
		pd[i] = ((uint64_t)i << 21) | 0x83;         /* present, writable, 2 MiB */
}
