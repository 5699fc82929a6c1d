/* SPDX-License-Identifier: Apache-2.0 */
/* The pure parts of x86 booting (image parsing and the tables a kernel
 * reads at entry), split from file I/O so unit tests can call them. */
#ifndef CUBICLE_X86_BOOT_H
#define CUBICLE_X86_BOOT_H

#include <asm/bootparam.h>
#include <asm/e820.h>
#include <elf.h>
#include <linux/kvm.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "mem.h"

#define X86_SETUP_HDR_OFF  0x1f1 /* struct setup_header in a bzImage */
#define X86_HDRS_MAGIC     0x53726448 /* "HdrS" at 0x202 */
#define X86_E820_MAX       E820_MAX_ENTRIES_ZEROPAGE
#define X86_ELF_CMDLINE_MAX 2047 /* COMMAND_LINE_SIZE - 1; a vmlinux does not say */
#define X86_ELF_INITRD_MAX 0x7fffffffULL /* what every 64-bit bzImage announces */

/* What arch_boot_load needs from a bzImage's setup header. */
struct x86_kernel_info {
	uint16_t version;          /* boot protocol, 0x020f is 2.15 */
	unsigned setup_sects;      /* real-mode sectors, 0 already turned into 4 */
	uint64_t pm_offset;        /* file offset of the protected-mode kernel */
	uint64_t pm_size;          /* its length in the file */
	uint32_t hdr_len;          /* bytes of setup header to copy from 0x1f1 */
	uint32_t cmdline_size;     /* longest command line, without the NUL */
	uint32_t initrd_addr_max;  /* highest byte address the initrd may use */
	uint32_t kernel_alignment;
	bool relocatable;
	uint64_t pref_address;
	uint32_t init_size;        /* memory the kernel needs from its run address */
	uint16_t xloadflags;
	uint32_t payload_offset;   /* the compressed kernel, from pm_offset (2.08+; else 0) */
	uint32_t payload_length;
};

/* Where a 64-bit ELF vmlinux goes. */
struct x86_elf_info {
	uint64_t entry;   /* e_entry: physical address of startup_64 */
	uint64_t lo, hi;  /* [lo, hi): union of the PT_LOAD segments in memory */
	unsigned n_load;
};

/* The setup a kernel finds in its zero page. */
struct x86_boot_setup {
	const void *hdr;     /* setup header bytes from image offset 0x1f1; NULL: synthesize one */
	size_t hdr_len;
	uint64_t cmdline_gpa;
	uint32_t cmdline_len; /* without the NUL */
	uint64_t initrd_gpa, initrd_size; /* size 0: no initrd */
	const struct boot_e820_entry *e820;
	unsigned n_e820;
	uint64_t rsdp_gpa;   /* boot_params.acpi_rsdp_addr, 0 for none */
};

/*
 * Check a bzImage and fill @out. Refuses a missing "HdrS" magic or 0xAA55
 * boot flag, protocol < 2.06, no 64-bit entry (XLF_KERNEL_64, protocol
 * 2.12+), a setup_sects/syssize the file is too short for. 0 or -ENOEXEC
 * (-EINVAL for a bad argument) with a reason in err (no file name).
 * @len is the file's size; of @img only the setup header is read (below
 * 0x300: the file's head suffices, bootfile.h's BOOTFILE_HEAD).
 */
int x86_bzimage_parse(const void *img, size_t len, struct x86_kernel_info *out, char *err,
		      size_t errlen);
/* Where the kernel will run and how far its init_size reaches, for a
 * protected-mode part loaded at @load: [*start, *end). */
void x86_bzimage_span(const struct x86_kernel_info *ki, uint64_t load, uint64_t *start,
		      uint64_t *end);

/* Check a 64-bit little-endian x86-64 ELF executable whose PT_LOAD segments
 * all lie in the file. 0 or -ENOEXEC with a reason in err. */
int x86_elf_parse(const void *img, size_t len, struct x86_elf_info *out, char *err,
		  size_t errlen);
/* Copy the PT_LOAD segments to their p_paddr and zero their bss. 0 or
 * -EFAULT (a segment outside RAM) with a reason in err. */
int x86_elf_load(const struct guest_mem *m, const void *img, size_t len, char *err,
		 size_t errlen);

/* unpack.c: a bzImage's kernel decompressed by cubicle (boot.decompress). */
enum x86_payload_kind { X86_PAYLOAD_LZ4, X86_PAYLOAD_ZSTD, X86_PAYLOAD_GZIP, X86_PAYLOAD_OTHER };
#define X86_VMLINUX_MAX (1ULL << 30) /* the most a payload may decompress to */

/* The kernel decompressed into guest RAM: its loadable segments (in
 * place) and the relocation table that followed them (malloc'd). */
struct x86_vmlinux {
	struct x86_elf_info elf;
	Elf64_Phdr seg[16];
	unsigned n_seg;
	uint8_t *relocs;
	size_t relocs_len;
	uint64_t size; /* decompressed bytes */
};

/* Which compression a bzImage's payload (setup header payload_offset and
 * payload_length) uses: one cubicle decompresses, or X86_PAYLOAD_OTHER. */
enum x86_payload_kind x86_payload_kind(const void *payload, size_t len);
/* Its name for messages: "lz4", "zstd", "gzip", "xz", "bzip2", "lzma",
 * "lzo" or "an unknown format". */
const char *x86_payload_name(const void *payload, size_t len);
/*
 * Decompress @payload (lz4 legacy frames, zstd or gzip) and copy the
 * vmlinux ELF file's PT_LOAD segments to their p_paddr in @m, through an
 * 8 MiB window (the whole file is never held), zeroing their bss; the
 * bytes after the ELF file are kept in out->relocs. Every segment must lie
 * in [@ram_lo, @ram_hi): nothing is written before that is known. 0, or
 * -ENOTSUP (another compression), -ENOEXEC (corrupt, a size that is not
 * the trailer's, not an x86-64 ELF), -ENOMEM/-EFAULT with a reason in err;
 * on failure guest RAM may hold part of the kernel and out is empty.
 */
int x86_vmlinux_unpack(const struct guest_mem *m, uint64_t ram_lo, uint64_t ram_hi,
		       const void *payload, size_t len, struct x86_vmlinux *out, char *err,
		       size_t errlen);
void x86_vmlinux_free(struct x86_vmlinux *v);
/* @len bytes of scratch memory on 2 MiB pages where the host has them
 * (NULL with errno), and its release. */
void *x86_unpack_alloc(size_t len);
void x86_unpack_release(void *p, size_t len);
/* The relocation table's sets: 0 (no table), 2 (64-bit and 32-bit, Linux
 * 6.12 and later) or 3 (and the inverse 32-bit ones between), their sizes
 * in count[0] (64-bit), count[1] (inverse), count[2] (32-bit); -ENOEXEC if
 * the bytes are not such a table. */
int x86_vmlinux_reloc_sets(const struct x86_vmlinux *v, size_t count[3]);
/* Shift the kernel's virtual addresses by @delta: every place the table
 * names must lie in a segment (checked for all before any is written).
 * 0, or -ENOEXEC with a reason in err. */
int x86_vmlinux_relocate(const struct guest_mem *m, const struct x86_vmlinux *v, int64_t delta,
			 char *err, size_t errlen);
/* How many virtual offsets KASLR chooses from for a kernel that runs at
 * @pref and spans @span bytes, aligned to @align (at least 1). */
uint64_t x86_kaslr_slots(uint64_t pref, uint64_t span, uint64_t align);
/* Whether @word is one of the command line's options before a "--"
 * ("nokaslr"), as the kernel splits it (double quotes group). */
bool x86_cmdline_has(const char *cmdline, const char *word);

/*
 * The e820 map for RAM @banks (bank 0 at gpa 0, at least 1 MiB): usable
 * [0, 0x9fc00), reserved [0x9fc00, 1 MiB) for the MP table and the legacy
 * holes, usable [1 MiB, end of bank 0), then each further bank usable.
 * Returns the entry count, -EINVAL (no usable bank 0) or -ENOSPC (> max).
 */
int x86_e820_build(const struct mem_bank *banks, unsigned n, struct boot_e820_entry *out,
		   unsigned max);

/* Fill a zero page: the image's setup header (or a minimal one), loader
 * type 0xff, command line, initrd, e820. 0 or -EINVAL. */
int x86_boot_params_build(struct boot_params *bp, const struct x86_boot_setup *s);

/* Highest page-aligned gpa for @size bytes of initrd ending at or below
 * min(@addr_max + 1, @ram_top) and not below @floor. 0 or -ENOSPC. */
int x86_initrd_place(uint64_t size, uint64_t addr_max, uint64_t ram_top, uint64_t floor,
		     uint64_t *gpa);

/* Bytes of MP table (floating pointer, header, n CPUs, ISA bus, IOAPIC,
 * 24 I/O and 2 local interrupt entries). */
#define X86_MPTABLE_SIZE(n) (16 + 44 + 20 * (size_t)(n) + 8 + 8 + 26 * 8)
size_t x86_mptable_size(unsigned n_cpus);
/*
 * Build the MP 1.4 floating pointer and configuration table for guest
 * address @gpa into @buf (@len bytes): @n_cpus processors with APIC ids
 * 0..n-1 (0 is the BSP), one ISA bus, the IOAPIC (id n_cpus) with ISA IRQ
 * n on pin n for all 24 pins, LINT0 ExtINT and LINT1 NMI. Returns the size
 * written, -EINVAL (n_cpus 0 or > PLAN_MAX_VCPUS) or -ENOSPC (@len too
 * small or the table would pass X86_MPTABLE_LIMIT).
 */
int x86_mptable_build(void *buf, size_t len, uint64_t gpa, unsigned n_cpus, uint32_t cpu_sig,
		      uint32_t cpu_features);

/* Bytes of ACPI tables for n CPUs and aml bytes of DSDT body: at most
 * this (the DSDT's 16-byte alignment is rounded up). */
#define X86_ACPI_SIZE(n, aml) (528 + 8 * (size_t)(n) + (size_t)(aml))
size_t x86_acpi_tables_size(unsigned n_cpus, size_t aml_len);
/*
 * Build the ACPI tables for guest address @gpa (the RSDP first) into @buf:
 * XSDT -> FADT (SCI on IRQ 9, PM1 blocks at 0x600, reset register = i8042
 * port 0x64 value 0xfe), a MADT with @n_cpus enabled LAPICs (APIC id =
 * index), the IOAPIC (id n_cpus, GSI base 0) and LINT1 NMI, and last the
 * DSDT whose body is the @aml_len bytes at @aml (may be 0). Returns the
 * size, -EINVAL (bad n_cpus or aml) or -ENOSPC (@len, or past
 * X86_ACPI_LIMIT).
 */
int x86_acpi_tables_build(void *buf, size_t len, uint64_t gpa, unsigned n_cpus,
			  const void *aml, size_t aml_len);

/* GDT at X86_GDT_ADDR: null, null, code at __BOOT_CS (64-bit for
 * BOOT_MODE_LONG, else 32-bit), flat data at __BOOT_DS. */
void x86_gdt_build(uint64_t gdt[4], enum boot_mode mode);
/* The KVM view of descriptor @desc loaded with selector @sel. */
void x86_gdt_segment(uint64_t desc, uint16_t sel, struct kvm_segment *s);
/* Identity map of 0-4 GiB in 2 MiB pages: PML4, PDPT, 4 PDs, six 4 KiB
 * pages meant for gpa @base (@pt holds 6 * 512 entries). */
void x86_pagetables_build(uint64_t *pt, uint64_t base);

#endif
