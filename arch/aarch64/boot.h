/* SPDX-License-Identifier: Apache-2.0 */
/* The pure parts of arm64 booting: the Image header and where the kernel,
 * initrd and FDT go in RAM, split from file I/O so unit tests can call them. */
#ifndef CUBICLE_A64_BOOT_H
#define CUBICLE_A64_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define A64_IMAGE_HDR_LEN   64
#define A64_IMAGE_MAGIC_OFF 56 /* "ARM\x64" */
#define A64_KERNEL_ALIGN    0x200000ULL /* the Image's base is 2 MiB aligned */
/* Documentation/arch/arm64/booting.rst: the DTB is at most 2 MiB and sits
 * on an 8-byte boundary; it is mapped cacheably in 2 MiB blocks, so we give
 * it a 2 MiB-aligned slot of its own at the top of RAM. */
#define A64_FDT_MAX         0x200000ULL
#define A64_VMGENID_PAGE    0x1000ULL /* the slot's last page: the VM generation ID */
/* The initrd must lie in the 1 GiB-aligned, 32 GiB window that holds the
 * kernel. */
#define A64_INITRD_WINDOW   (32ULL << 30)
/* arm64 COMMAND_LINE_SIZE: longer bootargs are cut short by the kernel. */
#define A64_CMDLINE_MAX     2048

/* What arch_boot_load needs from an Image header. */
struct a64_image_info {
	uint64_t text_offset; /* load offset from a 2 MiB-aligned base */
	uint64_t image_size;  /* bytes the kernel uses from there, bss included */
	uint64_t flags;
	unsigned page_kib;    /* 4, 16, 64, or 0 if the kernel does not say */
	bool phys_anywhere;   /* flags bit 3: base may be anywhere in RAM */
};

/*
 * Check an arm64 Image header (magic "ARM\x64" at 56) and fill @out.
 * Refuses a short file, a big-endian kernel, image_size 0 (kernels before
 * 3.17, whose text_offset endianness is unknown) and a text_offset that is
 * not 4 KiB-aligned or reaches past 2 MiB. Names gzip and EFI zboot files.
 * 0 or -ENOEXEC with a reason in err (no file name). @len is the file's
 * size; of @img only the 64-byte header is read (bootfile.h's BOOTFILE_HEAD).
 */
int a64_image_parse(const void *img, size_t len, struct a64_image_info *out, char *err,
		    size_t errlen);

/* Inputs and results of the boot plan. */
struct a64_boot_plan {
	/* in */
	uint64_t ram_base, ram_size;
	uint64_t text_offset;
	uint64_t kernel_span; /* max(file size, image_size) */
	uint64_t initrd_size; /* 0: none */
	/* out */
	uint64_t kernel_gpa;  /* ram_base + text_offset: the entry point */
	uint64_t kernel_end;
	uint64_t initrd_gpa;
	uint64_t fdt_gpa;     /* a 2 MiB slot at the top of RAM */
};

/*
 * Place the kernel at the (2 MiB-aligned) RAM base + text_offset, the FDT
 * in the highest 2 MiB-aligned slot of RAM and the initrd, page-aligned,
 * just below the FDT (and inside the kernel's 32 GiB window). 0, -EINVAL
 * (RAM base not 2 MiB-aligned) or -ENOSPC with "what needs how much" in err.
 */
int a64_boot_plan(struct a64_boot_plan *p, char *err, size_t errlen);

/* The FDT slot alone, for flat payloads: top 2 MiB of RAM, or -ENOSPC if
 * RAM is smaller than 2 MiB. */
int a64_fdt_slot(uint64_t ram_base, uint64_t ram_size, uint64_t *gpa);

#endif
