/* SPDX-License-Identifier: Apache-2.0 */
/* arch_boot_load for x86: reads the kernel, initrd and command line into
 * guest RAM (bzImage, ELF vmlinux or a flat payload) and records the BSP's
 * entry state for vcpu.c. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "arch.h"
#include "boot.h"
#include "bootfile.h"
#include "log.h"
#include "x86.h"

#define PAGE_SIZE 0x1000ULL

static uint64_t low_ram_end(const struct vm *vm)
{
	const struct guest_mem *m = &vm->mem;

	return m->n_banks && m->bank[0].gpa == 0 ? m->bank[0].size : 0;
}

/* GDT and, for long mode, the identity page tables: what the BSP's
 * segment and paging state in vcpu.c point at. */
static int write_cpu_tables(struct vm *vm, enum boot_mode mode)
{
	uint64_t gdt[X86_GDT_ENTRIES];
	uint64_t *pt;
	int ret;

	x86_gdt_build(gdt, mode);
	ret = mem_write(&vm->mem, X86_GDT_ADDR, gdt, sizeof(gdt));
	if (ret || mode != BOOT_MODE_LONG)
		return ret;
	pt = mem_map(&vm->mem, X86_PML4_ADDR, X86_PT_END - X86_PML4_ADDR);
	if (!pt)
		return -EFAULT;
	x86_pagetables_build(pt, X86_PML4_ADDR);
	return 0;
}

/*
 * Everything a Linux kernel reads besides itself: command line, initrd,
 * zero page with the e820 map, GDT, page tables and a clean stack page.
 * @kend is the end of the memory the kernel claims; the initrd goes above.
 */
static int load_linux_rest(struct vm *vm, const struct boot_cfg *b, const void *hdr,
			   size_t hdr_len, uint32_t cmdline_max, uint64_t initrd_max,
			   uint64_t kend, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	struct boot_params *bp = mem_map(&vm->mem, X86_ZERO_PAGE, sizeof(*bp));
	struct boot_e820_entry e820[X86_E820_MAX];
	struct x86_boot_setup s = { .hdr = hdr, .hdr_len = hdr_len, .cmdline_gpa = X86_CMDLINE_ADDR,
				    .rsdp_gpa = X86_ACPI_RSDP };
	void *stack = mem_map(&vm->mem, X86_STACK_BASE, PAGE_SIZE);
	const char *cmd = b->cmdline ? b->cmdline : "";
	size_t clen = strlen(cmd);
	int n, ret;

	if (!bp || !stack)
		return bootfile_fail(-EFAULT, err, errlen, b->kernel,
				     "guest RAM does not cover 0x7000-0x9000");
	if (clen > cmdline_max || clen >= X86_CMDLINE_MAX)
		return bootfile_fail(-E2BIG, err, errlen, b->kernel,
				     "command line is %zu bytes; this kernel accepts at most %u",
				     clen, cmdline_max);
	ret = mem_write(&vm->mem, X86_CMDLINE_ADDR, cmd, clen + 1);
	if (ret)
		return bootfile_fail(ret, err, errlen, b->kernel,
				     "no RAM for the command line at 0x%llx", X86_CMDLINE_ADDR);
	s.cmdline_len = clen;

	if (b->initrd && b->initrd[0]) {
		struct bootfile rd;
		uint64_t top = low_ram_end(vm);

		ret = bootfile_open(&rd, b->initrd, top, "low guest RAM", 0, err, errlen);
		if (ret)
			return ret;
		if (x86_initrd_place(rd.size, initrd_max, top, kend, &s.initrd_gpa)) {
			bootfile_fail(-ENOSPC, err, errlen, b->initrd,
				      "%llu bytes do not fit between the kernel's end (0x%llx) and 0x%llx; raise machine.memory_mib",
				      (unsigned long long)rd.size, (unsigned long long)kend,
				      (unsigned long long)(top < initrd_max + 1 ? top
									 : initrd_max + 1));
			bootfile_close(&rd);
			return -ENOSPC;
		}
		s.initrd_size = rd.size;
		ret = bootfile_read_to(&rd, &vm->mem, s.initrd_gpa, err, errlen);
		bootfile_close(&rd);
		if (ret)
			return ret;
	}

	n = x86_e820_build(vm->mem.bank, vm->mem.n_banks, e820, X86_E820_MAX);
	if (n < 0)
		return bootfile_fail(n, err, errlen, b->kernel,
				     "cannot describe guest RAM in an e820 map");
	s.e820 = e820;
	s.n_e820 = n;
	memset(stack, 0, PAGE_SIZE);
	ret = x86_boot_params_build(bp, &s);
	ret = ret ?: write_cpu_tables(vm, BOOT_MODE_LONG);
	if (ret)
		return bootfile_fail(ret, err, errlen, b->kernel,
				     "cannot write the boot tables below 1 MiB");

	xv->entry.mode = BOOT_MODE_LONG;
	xv->entry.rsi = X86_ZERO_PAGE;
	xv->entry.rsp = X86_STACK_TOP;
	return 0;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/*
 * boot.decompress = "vmm": the bzImage's payload decompressed here and laid
 * out as the kernel's own decompressor would (unpack.c), relocated by a
 * random kernel_alignment-aligned virtual offset as its KASLR would (not
 * with "nokaslr" on the command line), and entered at startup_64 with the
 * bzImage's setup header (KASLR_FLAG set when relocated). The kernel runs
 * at its link-time physical address: the decompressor's physical
 * randomization is not done. -ENOTSUP when the payload is in a compression
 * cubicle does not read: the caller boots the bzImage as it is.
 */
static int load_bzimage_unpacked(struct vm *vm, const struct boot_cfg *b, struct bootfile *im,
				 const struct x86_kernel_info *ki, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	struct x86_vmlinux v;
	struct setup_header hdr;
	struct timespec t0;
	uint64_t delta = 0, r;
	uint8_t *payload;
	size_t count[3] = { 0 };
	bool kaslr = false;
	const char *no_kaslr = "the kernel has no relocations";
	char why[256];
	int ret, sets;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!ki->payload_length)
		return -ENOTSUP;
	/* Read into 2 MiB pages rather than mapped from the file in place: on
	 * a host whose MMU is shadowed (a PVM guest) the mapping's 4 KiB pages
	 * each fault at first touch, and the unpack of Debian's 14 MiB payload
	 * took 24.4 ms instead of 18.8 (medians of 20; faster only in the
	 * nested harness's emulation, 225 ms instead of 300). */
	payload = x86_unpack_alloc(ki->payload_length);
	if (!payload)
		return bootfile_fail(-ENOMEM, err, errlen, b->kernel, "%s", strerror(errno));
	ret = bootfile_read(im, payload, ki->pm_offset + ki->payload_offset, ki->payload_length,
			    err, errlen);
	if (!ret) {
		ret = x86_vmlinux_unpack(&vm->mem, X86_HIMEM_START, low_ram_end(vm), payload,
					 ki->payload_length, &v, why, sizeof(why));
		if (ret == -ENOTSUP)
			log_debug("boot: %s: %s: the kernel decompresses itself", b->kernel, why);
		else if (ret)
			bootfile_fail(ret, err, errlen, b->kernel, "%s (boot.decompress = \"guest\" leaves it to the kernel)",
				      why);
	}
	if (!ret)
		log_debug("boot: %s: %s payload, %u bytes, decompressed to %llu in %.2f ms",
			  b->kernel, x86_payload_name(payload, ki->payload_length),
			  ki->payload_length, (unsigned long long)v.size, ms_since(&t0));
	x86_unpack_release(payload, ki->payload_length);
	if (ret)
		return ret;

	sets = x86_vmlinux_reloc_sets(&v, count);
	if (sets < 0) {
		no_kaslr = "a relocation table cubicle does not read";
		log_warn("boot: %s: the %zu bytes after the kernel are not a relocation table cubicle reads: it runs at its link address (no KASLR)",
			 b->kernel, v.relocs_len);
	} else if (sets && x86_cmdline_has(b->cmdline, "nokaslr")) {
		no_kaslr = "nokaslr";
	} else if (sets) {
		uint64_t slots = x86_kaslr_slots(ki->pref_address, v.elf.hi - v.elf.lo,
						 ki->kernel_alignment);

		if (getrandom(&r, sizeof(r), 0) == (ssize_t)sizeof(r)) {
			delta = (r % slots) * ki->kernel_alignment;
			kaslr = true;
		} else {
			no_kaslr = "no random numbers";
			log_warn("boot: no random numbers (%s): the kernel runs at its link address (no KASLR)",
				 strerror(errno));
		}
	}
	ret = delta ? x86_vmlinux_relocate(&vm->mem, &v, (int64_t)delta, why, sizeof(why)) : 0;
	x86_vmlinux_free(&v);
	if (ret)
		return bootfile_fail(ret, err, errlen, b->kernel, "%s", why);
	if (kaslr)
		log_debug("boot: KASLR: virtual offset 0x%llx (%zu relocations), ready in %.2f ms",
			  (unsigned long long)delta, count[0] + count[1] + count[2], ms_since(&t0));
	else
		log_debug("boot: no KASLR (%s), ready in %.2f ms", no_kaslr, ms_since(&t0));

	memset(&hdr, 0, sizeof(hdr));
	memcpy(&hdr, (const uint8_t *)im->map + X86_SETUP_HDR_OFF, ki->hdr_len);
	if (kaslr)
		hdr.loadflags |= KASLR_FLAG;
	ret = load_linux_rest(vm, b, &hdr, ki->hdr_len, ki->cmdline_size, ki->initrd_addr_max,
			      (v.elf.hi + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1), err, errlen);
	xv->entry.rip = v.elf.entry;
	return ret;
}

static int load_bzimage(struct vm *vm, const struct boot_cfg *b, struct bootfile *im, char *err,
			size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	struct x86_kernel_info ki;
	char why[200];
	uint64_t run, end;
	int ret;

	ret = x86_bzimage_parse(im->map, im->size, &ki, why, sizeof(why));
	if (ret)
		return bootfile_fail(ret, err, errlen, b->kernel, "%s", why);
	if (b->decompress == BOOT_DECOMPRESS_VMM &&
	    (ret = load_bzimage_unpacked(vm, b, im, &ki, err, errlen)) != -ENOTSUP)
		return ret;
	x86_bzimage_span(&ki, X86_KERNEL_LOAD, &run, &end);
	if (end > low_ram_end(vm) || X86_KERNEL_LOAD + ki.pm_size > low_ram_end(vm))
		return bootfile_fail(-ENOMEM, err, errlen, b->kernel,
				     "the kernel needs RAM up to 0x%llx (runs at 0x%llx, init_size %u) but low RAM ends at 0x%llx; raise machine.memory_mib",
				     (unsigned long long)end, (unsigned long long)run, ki.init_size,
				     (unsigned long long)low_ram_end(vm));
	ret = bootfile_copy(im, &vm->mem, X86_KERNEL_LOAD, ki.pm_offset, ki.pm_size, err, errlen);
	if (ret)
		return ret;
	if (end < X86_KERNEL_LOAD + ki.pm_size)
		end = X86_KERNEL_LOAD + ki.pm_size;
	ret = load_linux_rest(vm, b, (const uint8_t *)im->map + X86_SETUP_HDR_OFF, ki.hdr_len,
			      ki.cmdline_size, ki.initrd_addr_max, end, err, errlen);
	/* 64-bit boot protocol: startup_64 is 0x200 into the loaded image. */
	xv->entry.rip = X86_KERNEL_LOAD + 0x200;
	return ret;
}

static int load_elf(struct vm *vm, const struct boot_cfg *b, struct bootfile *im, char *err,
		    size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	struct x86_elf_info ei;
	char why[200];
	int ret;

	/* the program headers may lie anywhere in the file: all of it */
	ret = bootfile_head(im, im->size, err, errlen);
	if (ret)
		return ret;
	ret = x86_elf_parse(im->map, im->size, &ei, why, sizeof(why));
	if (ret)
		return bootfile_fail(ret, err, errlen, b->kernel, "%s", why);
	if (ei.lo < X86_HIMEM_START || ei.hi > low_ram_end(vm))
		return bootfile_fail(-ENOMEM, err, errlen, b->kernel,
				     "segments span [0x%llx, 0x%llx); they must lie between 1 MiB and the end of low RAM (0x%llx)",
				     (unsigned long long)ei.lo, (unsigned long long)ei.hi,
				     (unsigned long long)low_ram_end(vm));
	ret = x86_elf_load(&vm->mem, im->map, im->size, why, sizeof(why));
	if (ret)
		return bootfile_fail(ret, err, errlen, b->kernel, "%s", why);
	ret = load_linux_rest(vm, b, NULL, 0, X86_ELF_CMDLINE_MAX, X86_ELF_INITRD_MAX,
			      (ei.hi + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1), err, errlen);
	xv->entry.rip = ei.entry;
	return ret;
}

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* A raw payload for the KVM tests: copied as is, entered in the mode the
 * config names with nothing but a GDT (and page tables for long mode). */
static int load_flat(struct vm *vm, const struct boot_cfg *b, struct bootfile *im, char *err,
		     size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	uint64_t lo = b->load_addr, entry = b->entry ? b->entry : b->load_addr;
	int ret;

	if (b->mode != BOOT_MODE_REAL && b->mode != BOOT_MODE_PROTECTED && b->mode != BOOT_MODE_LONG)
		return bootfile_fail(-EINVAL, err, errlen, b->kernel, "unknown boot mode %d",
				     b->mode);
	if (lo > UINT64_MAX - im->size || !mem_map(&vm->mem, lo, im->size))
		return bootfile_fail(-EFAULT, err, errlen, b->kernel,
				     "payload [0x%llx, +%llu) is not in guest RAM",
				     (unsigned long long)lo, (unsigned long long)im->size);
	if (b->mode != BOOT_MODE_REAL && overlaps(lo, im->size, X86_GDT_ADDR, 8 * X86_GDT_ENTRIES))
		return bootfile_fail(-EINVAL, err, errlen, b->kernel,
				     "payload at 0x%llx overlaps the GDT at 0x500; load it elsewhere",
				     (unsigned long long)lo);
	if (b->mode == BOOT_MODE_LONG &&
	    overlaps(lo, im->size, X86_PML4_ADDR, X86_PT_END - X86_PML4_ADDR))
		return bootfile_fail(-EINVAL, err, errlen, b->kernel,
				     "payload at 0x%llx overlaps the page tables at [0x9000, 0xf000); load it elsewhere",
				     (unsigned long long)lo);
	if (b->mode == BOOT_MODE_REAL &&
	    (lo & 0xf || lo >= X86_HIMEM_START || entry < lo || entry - lo > 0xffff))
		return bootfile_fail(-EINVAL, err, errlen, b->kernel,
				     "real mode needs a 16-byte aligned load_addr below 1 MiB and an entry within 64 KiB of it (load 0x%llx, entry 0x%llx)",
				     (unsigned long long)lo, (unsigned long long)entry);
	if (b->mode == BOOT_MODE_PROTECTED && entry > 0xffffffffULL)
		return bootfile_fail(-EINVAL, err, errlen, b->kernel,
				     "protected-mode entry 0x%llx is above 4 GiB",
				     (unsigned long long)entry);

	ret = bootfile_read_to(im, &vm->mem, lo, err, errlen);
	if (ret)
		return ret;
	if (b->mode != BOOT_MODE_REAL && write_cpu_tables(vm, b->mode))
		return bootfile_fail(-EFAULT, err, errlen, b->kernel,
				     "no RAM for the GDT at 0x500");

	xv->payload_lo = lo;
	xv->payload_hi = lo + im->size;
	xv->entry.mode = b->mode;
	if (b->mode == BOOT_MODE_REAL) {
		/* CS = DS = ES = SS = load >> 4; SP 0 wraps to the top of
		 * the payload's 64 KiB segment on the first push. */
		xv->entry.real_seg = lo >> 4;
		xv->entry.rip = entry - lo;
		xv->entry.rsp = 0;
	} else {
		xv->entry.rip = entry;
		xv->entry.rsp = X86_STACK_TOP;
	}
	return 0;
}

static enum boot_format detect(const struct bootfile *im)
{
	const uint8_t *p = im->map;

	if (im->size >= 0x206 && !memcmp(p + 0x202, "HdrS", 4))
		return BOOT_BZIMAGE;
	if (im->size >= 4 && !memcmp(p, "\x7f" "ELF", 4))
		return BOOT_ELF;
	return BOOT_AUTO;
}

int arch_boot_load(struct vm *vm, const struct boot_cfg *b, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	enum boot_format fmt = b->format;
	uint64_t low = low_ram_end(vm);
	struct bootfile im;
	int ret;

	if (!xv)
		return bootfile_fail(-EINVAL, err, errlen, "boot",
				     "arch_boot_load before arch_vm_setup");
	if (!b->kernel || !b->kernel[0])
		return bootfile_fail(-EINVAL, err, errlen, "boot", "no kernel given (boot.kernel)");
	if (!low)
		return bootfile_fail(-EINVAL, err, errlen, b->kernel,
				     "guest RAM has no bank at address 0");
	ret = bootfile_open(&im, b->kernel, low, "low guest RAM",
			    fmt != BOOT_FLAT ? BOOTFILE_HEAD : 0, err, errlen);
	if (ret)
		return ret;
	memset(&xv->entry, 0, sizeof(xv->entry));
	if (fmt == BOOT_AUTO) {
		fmt = detect(&im);
		if (fmt == BOOT_AUTO) {
			bootfile_close(&im);
			return bootfile_fail(-ENOEXEC, err, errlen, b->kernel,
					     "not a bzImage or ELF kernel; set boot.format = \"flat\" for a raw payload");
		}
	}
	switch (fmt) {
	case BOOT_BZIMAGE:
		ret = load_bzimage(vm, b, &im, err, errlen);
		break;
	case BOOT_ELF:
		ret = load_elf(vm, b, &im, err, errlen);
		break;
	case BOOT_FLAT:
		ret = load_flat(vm, b, &im, err, errlen);
		break;
	default:
		ret = bootfile_fail(-EINVAL, err, errlen, b->kernel, "unknown boot format %d", fmt);
	}
	bootfile_close(&im);
	if (ret)
		return ret;
	xv->format = fmt;
	xv->entry.valid = true;
	return 0;
}
