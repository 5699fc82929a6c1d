/* SPDX-License-Identifier: Apache-2.0 */
/* arch_boot_load and arch_describe for arm64: the Image (or a flat payload)
 * and the initrd into guest RAM, then the vGIC's final init and the device
 * tree in its slot at the top of RAM. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "a64.h"
#include "arch.h"
#include "boot.h"
#include "bootfile.h"
#include "fdt_build.h"
#include "log.h"
#include "snap/genid.h"

static int load_image(struct vm *vm, const struct boot_cfg *b, struct bootfile *im, char *err,
		      size_t errlen)
{
	struct a64_vm *av = a64_of(vm);
	const struct mem_bank *ram = &vm->mem.bank[0];
	struct a64_boot_plan p = { .ram_base = ram->gpa, .ram_size = ram->size };
	struct a64_image_info ii;
	size_t clen = b->cmdline ? strlen(b->cmdline) : 0;
	struct bootfile rd = { .fd = -1 };
	char why[256];
	int ret;

	ret = a64_image_parse(im->map, im->size, &ii, why, sizeof(why));
	if (ret)
		return bootfile_fail(ret, err, errlen, b->kernel, "%s", why);
	if (clen >= A64_CMDLINE_MAX)
		return bootfile_fail(-E2BIG, err, errlen, b->kernel,
				     "command line is %zu bytes; arm64 Linux keeps at most %d",
				     clen, A64_CMDLINE_MAX - 1);
	if (b->initrd && b->initrd[0]) {
		ret = bootfile_open(&rd, b->initrd, ram->size, "guest RAM", 0, err, errlen);
		if (ret)
			return ret;
		p.initrd_size = rd.size;
	}
	p.text_offset = ii.text_offset;
	p.kernel_span = ii.image_size > im->size ? ii.image_size : im->size;
	ret = a64_boot_plan(&p, why, sizeof(why));
	if (ret) {
		bootfile_fail(ret, err, errlen, p.initrd_size && ret == -ENOSPC &&
			      p.kernel_end <= p.fdt_gpa ? b->initrd : b->kernel, "%s", why);
		goto out;
	}
	ret = bootfile_copy(im, &vm->mem, p.kernel_gpa, 0, im->size, err, errlen);
	if (ret)
		goto out;
	if (p.initrd_size) {
		ret = bootfile_read_to(&rd, &vm->mem, p.initrd_gpa, err, errlen);
		if (ret)
			goto out;
		av->initrd_gpa = p.initrd_gpa;
		av->initrd_size = p.initrd_size;
	}
	av->fdt_gpa = p.fdt_gpa;
	av->entry.pc = p.kernel_gpa;
	av->entry.x0 = p.fdt_gpa;
	log_debug("arm64 Image: text_offset 0x%llx, image_size 0x%llx, %u KiB pages; kernel at 0x%llx, initrd at 0x%llx, FDT at 0x%llx",
		  (unsigned long long)ii.text_offset, (unsigned long long)ii.image_size,
		  ii.page_kib, (unsigned long long)p.kernel_gpa,
		  (unsigned long long)p.initrd_gpa, (unsigned long long)p.fdt_gpa);
out:
	bootfile_close(&rd);
	return ret;
}

/* A raw payload for the KVM tests: copied as is to boot.load_addr and
 * entered at boot.entry in EL1 with the MMU off; X0 still holds the FDT. */
static int load_flat(struct vm *vm, const struct boot_cfg *b, struct bootfile *im, char *err,
		     size_t errlen)
{
	struct a64_vm *av = a64_of(vm);
	const struct mem_bank *ram = &vm->mem.bank[0];
	uint64_t lo = b->load_addr, entry = b->entry ? b->entry : b->load_addr, fdt;
	int ret;

	if (lo > UINT64_MAX - im->size || !mem_map(&vm->mem, lo, im->size))
		return bootfile_fail(-EFAULT, err, errlen, b->kernel,
				     "payload [0x%llx, +%llu) is not in guest RAM [0x%llx, 0x%llx); set boot.load_addr",
				     (unsigned long long)lo, (unsigned long long)im->size,
				     (unsigned long long)ram->gpa,
				     (unsigned long long)(ram->gpa + ram->size));
	if (a64_fdt_slot(ram->gpa, ram->size, &fdt) || lo + im->size > fdt)
		return bootfile_fail(-ENOSPC, err, errlen, b->kernel,
				     "payload [0x%llx, +%llu) reaches into the device tree's 2 MiB slot at the top of RAM; load it lower or raise machine.memory_mib",
				     (unsigned long long)lo, (unsigned long long)im->size);
	if (entry & 3)
		return bootfile_fail(-EINVAL, err, errlen, b->kernel,
				     "entry 0x%llx is not 4-byte aligned", (unsigned long long)entry);
	ret = bootfile_read_to(im, &vm->mem, lo, err, errlen);
	if (ret)
		return ret;
	av->fdt_gpa = fdt;
	av->entry.pc = entry;
	av->entry.x0 = fdt;
	return 0;
}

static enum boot_format detect(const struct bootfile *im)
{
	const uint8_t *p = im->map;

	if (im->size >= 4 && !memcmp(p, "\x7f" "ELF", 4))
		return BOOT_ELF;
	return BOOT_AUTO; /* an Image, or a64_image_parse says what it is not */
}

int arch_boot_load(struct vm *vm, const struct boot_cfg *b, char *err, size_t errlen)
{
	struct a64_vm *av = a64_of(vm);
	enum boot_format fmt = b->format;
	struct bootfile im;
	int ret;

	if (!av)
		return bootfile_fail(-EINVAL, err, errlen, "boot",
				     "arch_boot_load before arch_vm_setup");
	if (!b->kernel || !b->kernel[0])
		return bootfile_fail(-EINVAL, err, errlen, "boot", "no kernel given (boot.kernel)");
	if (vm->mem.n_banks != 1)
		return bootfile_fail(-EINVAL, err, errlen, b->kernel, "guest RAM is not one bank");
	ret = bootfile_open(&im, b->kernel, vm->mem.bank[0].size, "guest RAM",
			    fmt != BOOT_FLAT ? BOOTFILE_HEAD : 0,
			    err, errlen);
	if (ret)
		return ret;
	memset(&av->entry, 0, sizeof(av->entry));
	if (fmt == BOOT_AUTO)
		fmt = detect(&im);
	switch (fmt) {
	case BOOT_AUTO:
		ret = load_image(vm, b, &im, err, errlen);
		break;
	case BOOT_FLAT:
		ret = load_flat(vm, b, &im, err, errlen);
		break;
	case BOOT_ELF:
		ret = bootfile_fail(-ENOEXEC, err, errlen, b->kernel,
				    "an ELF kernel (vmlinux): arm64 boots the Image (arch/arm64/boot/Image, Debian's vmlinuz) or a flat payload");
		break;
	default:
		ret = bootfile_fail(-ENOEXEC, err, errlen, b->kernel,
				    "boot.format \"bzimage\" is x86-only; arm64 boots an Image");
	}
	bootfile_close(&im);
	if (ret)
		return ret;
	av->format = fmt;
	av->entry.valid = true;
	return 0;
}

/* What the device tree says, from the arch state; seeds from getrandom. */
static void describe(struct vm *vm, struct a64_fdt_desc *d, uint8_t *seed, size_t seed_len)
{
	struct a64_vm *av = a64_of(vm);
	const struct boot_cfg *b = &vm->cfg->boot;
	uint64_t kaslr = 0;

	memset(d, 0, sizeof(*d));
	d->banks = vm->mem.bank;
	d->n_banks = vm->mem.n_banks;
	d->n_cpus = vm->n_vcpus;
	d->mpidr = av->mpidr;
	d->gic_version = av->gic_version;
	d->gic_dist_base = A64_GIC_DIST_BASE;
	if (av->gic_version == 3) {
		d->gic_dist_size = A64_GICV3_DIST_SIZE;
		d->gic_redist_base = A64_GICV3_REDIST_BASE;
		d->gic_redist_size = A64_GICV3_REDIST_SIZE * vm->n_vcpus;
	} else {
		d->gic_dist_size = A64_GICV2_DIST_SIZE;
		d->gic_cpu_base = A64_GICV2_CPU_BASE;
		d->gic_cpu_size = A64_GICV2_CPU_SIZE;
	}
	d->bootargs = av->format == BOOT_FLAT ? NULL : b->cmdline;
	d->initrd_start = av->initrd_gpa;
	d->initrd_end = av->initrd_gpa + av->initrd_size;
	d->devs = av->layout.dev;
	d->n_devs = av->layout.n_dev;
	/* What firmware would hand over: entropy for the early RNG and the
	 * kernel's own address randomisation. Without it the guest boots
	 * anyway, just less random. */
	if (getrandom(seed, seed_len, GRND_NONBLOCK) == (ssize_t)seed_len) {
		d->rng_seed = seed;
		d->rng_seed_len = seed_len;
	}
	if (getrandom(&kaslr, sizeof(kaslr), GRND_NONBLOCK) == (ssize_t)sizeof(kaslr))
		d->kaslr_seed = kaslr;
	/* The VM generation ID: the last page of the device tree's slot. */
	d->vmgenid_gpa = av->fdt_gpa + A64_FDT_MAX - A64_VMGENID_PAGE;
	d->vmgenid_spi = A64_SPI_VMGENID;
}

int arch_describe(struct vm *vm, char *err, size_t errlen)
{
	struct a64_vm *av = a64_of(vm);
	struct a64_fdt_desc d;
	uint8_t seed[64];
	void *buf;
	int ret;

	/* Restored: the device tree is in the snapshot's RAM; the vGIC needs
	 * its init before its state can be loaded. */
	if (av && vm->restored)
		return vm->n_vcpus && vm->n_vcpus <= av->n_mpidr ? a64_gic_init(av, err, errlen)
								 : -EINVAL;
	if (!av || !av->entry.valid)
		return bootfile_fail(-EINVAL, err, errlen, "boot",
				     "arch_describe before arch_boot_load");
	if (!vm->n_vcpus || vm->n_vcpus > av->n_mpidr)
		return bootfile_fail(-EINVAL, err, errlen, "boot",
				     "arch_describe needs the vCPUs created first (their MPIDRs, the vGIC)");
	/* KVM sizes the vGIC from the vCPUs that exist at this point. */
	ret = a64_gic_init(av, err, errlen);
	if (ret)
		return ret;
	buf = mem_map(&vm->mem, av->fdt_gpa, A64_FDT_MAX);
	if (!buf)
		return bootfile_fail(-EFAULT, err, errlen, "device tree",
				     "slot 0x%llx is not in guest RAM", (unsigned long long)av->fdt_gpa);
	describe(vm, &d, seed, sizeof(seed));
	ret = a64_fdt_build(buf, A64_FDT_MAX - A64_VMGENID_PAGE, &d);
	if (ret == -ENOSPC)
		return bootfile_fail(ret, err, errlen, "device tree",
				     "does not fit in its 2 MiB slot (its last page: the VM generation ID)");
	if (ret < 0)
		return bootfile_fail(ret, err, errlen, "device tree",
				     "cannot describe this machine (%s)", strerror(-ret));
	genid_new((uint8_t *)buf + A64_FDT_MAX - A64_VMGENID_PAGE);
	av->vmgenid_gpa = d.vmgenid_gpa;
	log_debug("device tree: %d bytes at 0x%llx, GICv%u, %u vCPUs, %u devices", ret,
		  (unsigned long long)av->fdt_gpa, av->gic_version, vm->n_vcpus,
		  av->layout.n_dev);
	return 0;
}
