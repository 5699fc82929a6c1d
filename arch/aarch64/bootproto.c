/* SPDX-License-Identifier: Apache-2.0 */
/* The arm64 Linux boot protocol as data: Image header in, kernel, initrd
 * and FDT addresses out. No I/O here (see boot.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "boot.h"
#include "cnode.h"

#define PAGE_SIZE 0x1000ULL
#define GiB       (1ULL << 30)

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * Facts from Documentation/arch/arm64/booting.rst: the 64-byte header holds
 * code0/code1, text_offset (8), image_size (16) and flags (24), all
 * little-endian since 3.17, and the magic at 56. flags bit 0 is the
 * kernel's endianness, bits 1-2 its page size, bit 3 "the 2 MiB-aligned
 * base may be anywhere in physical memory".
 */
int a64_image_parse(const void *img, size_t len, struct a64_image_info *out, char *err,
		    size_t errlen)
{
	static const unsigned page_kib[] = { 0, 4, 16, 64 };
	const uint8_t *p = img;

	if (!img || !out)
		return -EINVAL;
	if (len >= 2 && p[0] == 0x1f && p[1] == 0x8b)
		return errf(err, errlen, -ENOEXEC,
			    "gzip-compressed kernel: unpack it first (an arm64 Image is booted uncompressed)");
	if (len >= 8 && !memcmp(p, "MZ", 2) && !memcmp(p + 4, "zimg", 4))
		return errf(err, errlen, -ENOEXEC,
			    "EFI zboot (compressed) kernel: cubicle needs the plain arm64 Image");
	if (len < A64_IMAGE_HDR_LEN)
		return errf(err, errlen, -ENOEXEC,
			    "truncated: %zu bytes, an arm64 Image header alone needs %d", len,
			    A64_IMAGE_HDR_LEN);
	if (memcmp(p + A64_IMAGE_MAGIC_OFF, "ARM\x64", 4))
		return errf(err, errlen, -ENOEXEC,
			    "not an arm64 Image (no \"ARM\\x64\" magic at offset 56)");
	memset(out, 0, sizeof(*out));
	out->text_offset = le64(p + 8);
	out->image_size = le64(p + 16);
	out->flags = le64(p + 24);
	if (out->flags & 1)
		return errf(err, errlen, -ENOEXEC,
			    "big-endian kernel (Image flags bit 0): cubicle boots little-endian guests only");
	if (!out->image_size)
		return errf(err, errlen, -ENOEXEC,
			    "image_size is 0: a kernel older than 3.17, whose header cubicle cannot trust");
	if (out->text_offset >= A64_KERNEL_ALIGN || out->text_offset & (PAGE_SIZE - 1))
		return errf(err, errlen, -ENOEXEC,
			    "text_offset 0x%llx is not a 4 KiB multiple below 2 MiB",
			    (unsigned long long)out->text_offset);
	if (out->image_size > (1ULL << 40))
		return errf(err, errlen, -ENOEXEC, "image_size 0x%llx is not plausible",
			    (unsigned long long)out->image_size);
	out->page_kib = page_kib[(out->flags >> 1) & 3];
	out->phys_anywhere = out->flags & 8;
	return 0;
}

int a64_fdt_slot(uint64_t ram_base, uint64_t ram_size, uint64_t *gpa)
{
	uint64_t end = ram_base + ram_size, slot;

	if (ram_size < A64_FDT_MAX || end < ram_base)
		return -ENOSPC;
	slot = (end - A64_FDT_MAX) & ~(A64_FDT_MAX - 1);
	if (slot < ram_base)
		return -ENOSPC;
	*gpa = slot;
	return 0;
}

int a64_boot_plan(struct a64_boot_plan *p, char *err, size_t errlen)
{
	uint64_t ram_end = p->ram_base + p->ram_size, top, floor, window;

	if (p->ram_base & (A64_KERNEL_ALIGN - 1) || ram_end < p->ram_base)
		return errf(err, errlen, -EINVAL, "RAM base 0x%llx is not 2 MiB-aligned",
			    (unsigned long long)p->ram_base);
	p->kernel_gpa = p->ram_base + p->text_offset;
	p->kernel_end = (p->kernel_gpa + p->kernel_span + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
	if (a64_fdt_slot(p->ram_base, p->ram_size, &p->fdt_gpa) || p->kernel_end > p->fdt_gpa ||
	    p->kernel_end < p->kernel_gpa)
		return errf(err, errlen, -ENOSPC,
			    "the kernel needs RAM up to 0x%llx plus a 2 MiB slot for the device tree, but RAM is [0x%llx, 0x%llx); raise machine.memory_mib",
			    (unsigned long long)p->kernel_end, (unsigned long long)p->ram_base,
			    (unsigned long long)ram_end);
	p->initrd_gpa = 0;
	if (!p->initrd_size)
		return 0;
	window = (p->kernel_gpa & ~(GiB - 1)) + A64_INITRD_WINDOW;
	top = p->fdt_gpa < window ? p->fdt_gpa : window;
	floor = p->kernel_end;
	if (top < floor || p->initrd_size > top - floor)
		return errf(err, errlen, -ENOSPC,
			    "%llu bytes of initrd do not fit between the kernel's end (0x%llx) and 0x%llx; raise machine.memory_mib",
			    (unsigned long long)p->initrd_size, (unsigned long long)floor,
			    (unsigned long long)top);
	p->initrd_gpa = (top - p->initrd_size) & ~(PAGE_SIZE - 1);
	return 0;
}
