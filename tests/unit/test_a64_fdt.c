/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the arm64 boot plan on any build host: the device tree
 * (read back with libfdt, and decoded by dtc when it is installed), the
 * Image header, where kernel, initrd and FDT go, and device placement. */
#include <errno.h>
#include <libfdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../arch/aarch64/boot.h"
#include "../../arch/aarch64/fdt_build.h"
#include "../../arch/aarch64/layout.h"
#include "cunit_main.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define FDT_CAP (64 * 1024)

static void io_nop(void *priv, uint64_t off, void *data, uint32_t len, bool is_write)
{
}

static int place(struct a64_layout *l, const char *class, enum cub_bus want, uint64_t len,
		 struct cub_region *out, char *err, size_t errlen)
{
	*out = (struct cub_region){ .want = want, .class = class, .len = len, .io = io_nop };
	return a64_layout_place(l, out, err, errlen);
}

/* A machine like the e2e one: 2 vCPUs, 256 MiB, a UART, the boot-timer,
 * two virtio-mmio disks, a test device and a class with no binding. */
static void sample_layout(struct a64_layout *l)
{
	static const struct { const char *class; uint64_t len; } devs[] = {
		{ "uart", 8 }, { "boot-timer", 0x1000 }, { "virtio-mmio", 0x200 },
		{ "virtio-mmio", 0x200 }, { "testdev", 0x10 }, { "frobnicator", 0x100 },
	};
	struct cub_region r;
	char err[256];

	memset(l, 0, sizeof(*l));
	for (unsigned i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
		CU_ASSERT_EQUAL_FATAL(place(l, devs[i].class, CUB_BUS_ANY, devs[i].len, &r, err,
					    sizeof(err)), 0);
}

static struct mem_bank bank = { .gpa = A64_RAM_BASE, .size = 256 * MiB };

static void sample_desc(struct a64_fdt_desc *d, const struct a64_layout *l, unsigned gic)
{
	static const uint8_t seed[32] = { 1, 2, 3 };

	memset(d, 0, sizeof(*d));
	d->banks = &bank;
	d->n_banks = 1;
	d->n_cpus = 2;
	d->gic_version = gic;
	d->gic_dist_base = A64_GIC_DIST_BASE;
	if (gic == 3) {
		d->gic_dist_size = A64_GICV3_DIST_SIZE;
		d->gic_redist_base = A64_GICV3_REDIST_BASE;
		d->gic_redist_size = 2 * A64_GICV3_REDIST_SIZE;
	} else {
		d->gic_dist_size = A64_GICV2_DIST_SIZE;
		d->gic_cpu_base = A64_GICV2_CPU_BASE;
		d->gic_cpu_size = A64_GICV2_CPU_SIZE;
	}
	d->bootargs = "console=ttyS0 reboot=panic_warm panic=-1 quiet";
	d->initrd_start = 0x4f000000;
	d->initrd_end = 0x4f123456;
	d->devs = l->dev;
	d->n_devs = l->n_dev;
	d->rng_seed = seed;
	d->rng_seed_len = sizeof(seed);
	d->kaslr_seed = 0x1234;
}

static uint32_t cell(const void *p, int i)
{
	return fdt32_to_cpu(((const fdt32_t *)p)[i]);
}

static uint64_t cell64(const void *p, int i)
{
	return (uint64_t)cell(p, 2 * i) << 32 | cell(p, 2 * i + 1);
}

static const void *prop(const void *fdt, const char *path, const char *name, int *len)
{
	int off = fdt_path_offset(fdt, path);

	CU_ASSERT(off >= 0);
	if (off < 0)
		return NULL;
	return fdt_getprop(fdt, off, name, len);
}

static void test_fdt_gicv3(void)
{
	struct a64_layout l;
	struct a64_fdt_desc d;
	void *fdt = calloc(1, FDT_CAP);
	const char *s;
	const void *p;
	int len, off, n, size;

	sample_layout(&l);
	sample_desc(&d, &l, 3);
	size = a64_fdt_build(fdt, FDT_CAP, &d);
	CU_ASSERT_FATAL(size > 0);
	CU_ASSERT_EQUAL(fdt_check_header(fdt), 0);
	CU_ASSERT_EQUAL((int)fdt_totalsize(fdt), size);

	/* root */
	p = prop(fdt, "/", "#address-cells", &len);
	CU_ASSERT(p && len == 4 && cell(p, 0) == 2);
	p = prop(fdt, "/", "interrupt-parent", &len);
	CU_ASSERT(p && cell(p, 0) == A64_FDT_GIC_PHANDLE);

	/* chosen */
	s = prop(fdt, "/chosen", "bootargs", &len);
	CU_ASSERT(s && !strcmp(s, d.bootargs));
	p = prop(fdt, "/chosen", "linux,initrd-start", &len);
	CU_ASSERT(p && len == 8 && cell64(p, 0) == 0x4f000000);
	p = prop(fdt, "/chosen", "linux,initrd-end", &len);
	CU_ASSERT(p && len == 8 && cell64(p, 0) == 0x4f123456);
	s = prop(fdt, "/chosen", "stdout-path", &len);
	CU_ASSERT(s && !strcmp(s, "/serial@9000000"));
	CU_ASSERT(s && fdt_path_offset(fdt, s) >= 0);
	p = prop(fdt, "/chosen", "rng-seed", &len);
	CU_ASSERT(p && len == 32);
	p = prop(fdt, "/chosen", "kaslr-seed", &len);
	CU_ASSERT(p && len == 8 && cell64(p, 0) == 0x1234);
	s = prop(fdt, "/aliases", "serial0", &len);
	CU_ASSERT(s && !strcmp(s, "/serial@9000000"));

	/* memory */
	s = prop(fdt, "/memory@40000000", "device_type", &len);
	CU_ASSERT(s && !strcmp(s, "memory"));
	p = prop(fdt, "/memory@40000000", "reg", &len);
	CU_ASSERT(p && len == 16 && cell64(p, 0) == A64_RAM_BASE && cell64(p, 1) == 256 * MiB);

	/* cpus: KVM's default MPIDRs 0 and 1 */
	n = 0;
	off = fdt_path_offset(fdt, "/cpus");
	CU_ASSERT_FATAL(off >= 0);
	for (int c = fdt_first_subnode(fdt, off); c >= 0; c = fdt_next_subnode(fdt, c)) {
		p = fdt_getprop(fdt, c, "reg", &len);
		CU_ASSERT(p && len == 4 && cell(p, 0) == (uint32_t)n);
		s = fdt_getprop(fdt, c, "enable-method", &len);
		CU_ASSERT(s && !strcmp(s, "psci"));
		s = fdt_getprop(fdt, c, "device_type", &len);
		CU_ASSERT(s && !strcmp(s, "cpu"));
		n++;
	}
	CU_ASSERT_EQUAL(n, 2);

	/* psci */
	off = fdt_path_offset(fdt, "/psci");
	CU_ASSERT(fdt_node_check_compatible(fdt, off, "arm,psci-0.2") == 0);
	CU_ASSERT(fdt_node_check_compatible(fdt, off, "arm,psci-1.0") == 0);
	s = prop(fdt, "/psci", "method", &len);
	CU_ASSERT(s && !strcmp(s, "hvc"));

	/* the GIC, found by its phandle */
	off = fdt_node_offset_by_phandle(fdt, A64_FDT_GIC_PHANDLE);
	CU_ASSERT_FATAL(off >= 0);
	CU_ASSERT_EQUAL(off, fdt_path_offset(fdt, "/intc@8000000"));
	CU_ASSERT(fdt_node_check_compatible(fdt, off, "arm,gic-v3") == 0);
	CU_ASSERT(fdt_getprop(fdt, off, "interrupt-controller", &len) != NULL);
	p = fdt_getprop(fdt, off, "#interrupt-cells", &len);
	CU_ASSERT(p && cell(p, 0) == 3);
	p = fdt_getprop(fdt, off, "reg", &len);
	CU_ASSERT(p && len == 32 && cell64(p, 0) == A64_GIC_DIST_BASE &&
		  cell64(p, 1) == A64_GICV3_DIST_SIZE && cell64(p, 2) == A64_GICV3_REDIST_BASE &&
		  cell64(p, 3) == 2 * A64_GICV3_REDIST_SIZE);

	/* timer: 4 PPIs, no CPU mask on GICv3 */
	p = prop(fdt, "/timer", "interrupts", &len);
	CU_ASSERT(p && len == 48 && cell(p, 0) == 1 && cell(p, 1) == 13 && cell(p, 2) == 8 &&
		  cell(p, 7) == 11 && cell(p, 10) == 10);
	CU_ASSERT(prop(fdt, "/timer", "always-on", &len) != NULL);

	/* the UART */
	off = fdt_path_offset(fdt, "/serial@9000000");
	CU_ASSERT(fdt_node_check_compatible(fdt, off, "ns16550a") == 0);
	p = prop(fdt, "/serial@9000000", "interrupts", &len);
	CU_ASSERT(p && len == 12 && cell(p, 0) == 0 && cell(p, 1) == 0 && cell(p, 2) == 4);
	p = prop(fdt, "/serial@9000000", "reg", &len);
	CU_ASSERT(p && cell64(p, 0) == A64_UART_BASE && cell64(p, 1) == 8);
	p = prop(fdt, "/serial@9000000", "reg-shift", &len);
	CU_ASSERT(p && cell(p, 0) == 0);
	p = prop(fdt, "/serial@9000000", "reg-io-width", &len);
	CU_ASSERT(p && cell(p, 0) == 1);
	p = prop(fdt, "/serial@9000000", "clock-frequency", &len);
	CU_ASSERT(p && cell(p, 0) == A64_UART_CLOCK_HZ);

	/* virtio-mmio: SPI 16 and 17, level-high, coherent */
	n = 0;
	for (off = fdt_node_offset_by_compatible(fdt, -1, "virtio,mmio"); off >= 0;
	     off = fdt_node_offset_by_compatible(fdt, off, "virtio,mmio")) {
		p = fdt_getprop(fdt, off, "reg", &len);
		CU_ASSERT(p && cell64(p, 0) == A64_MMIO_SLOTS_BASE + 0x1000 * (unsigned)n &&
			  cell64(p, 1) == 0x200);
		p = fdt_getprop(fdt, off, "interrupts", &len);
		CU_ASSERT(p && cell(p, 0) == 0 && cell(p, 1) == 16 + (unsigned)n && cell(p, 2) == 4);
		CU_ASSERT(fdt_getprop(fdt, off, "dma-coherent", &len) != NULL);
		n++;
	}
	CU_ASSERT_EQUAL(n, 2);

	/* boot-timer and testdev as plain nodes; the unknown class has none */
	CU_ASSERT(fdt_path_offset(fdt, "/boot-timer@9010000") >= 0);
	CU_ASSERT(fdt_getprop(fdt, fdt_path_offset(fdt, "/boot-timer@9010000"), "interrupts",
			      &len) == NULL);
	CU_ASSERT(fdt_path_offset(fdt, "/testdev@9020000") >= 0);
	CU_ASSERT(fdt_path_offset(fdt, "/virtio_mmio@a002000") < 0);
	free(fdt);
}

static void test_fdt_gicv2(void)
{
	struct a64_layout l;
	struct a64_fdt_desc d;
	void *fdt = calloc(1, FDT_CAP);
	const void *p;
	int len, off;

	sample_layout(&l);
	sample_desc(&d, &l, 2);
	CU_ASSERT_FATAL(a64_fdt_build(fdt, FDT_CAP, &d) > 0);
	off = fdt_node_offset_by_phandle(fdt, A64_FDT_GIC_PHANDLE);
	CU_ASSERT(fdt_node_check_compatible(fdt, off, "arm,cortex-a15-gic") == 0);
	p = fdt_getprop(fdt, off, "reg", &len);
	CU_ASSERT(p && len == 32 && cell64(p, 2) == A64_GICV2_CPU_BASE &&
		  cell64(p, 3) == A64_GICV2_CPU_SIZE);
	/* GICv2 PPIs name their CPUs: two of them, bits 8-9 */
	p = prop(fdt, "/timer", "interrupts", &len);
	CU_ASSERT(p && cell(p, 2) == (8 | 0x300));
	/* more than 8 CPUs cannot be a GICv2 */
	d.n_cpus = 9;
	CU_ASSERT_EQUAL(a64_fdt_build(fdt, FDT_CAP, &d), -EINVAL);
	d.n_cpus = 2;
	d.gic_version = 4;
	CU_ASSERT_EQUAL(a64_fdt_build(fdt, FDT_CAP, &d), -EINVAL);
	free(fdt);
}

static void test_fdt_mpidr_and_space(void)
{
	uint64_t mpidr[3] = { a64_mpidr_default(0), a64_mpidr_default(16), 0x80000001ULL };
	struct a64_layout l = { 0 };
	struct a64_fdt_desc d;
	void *fdt = calloc(1, FDT_CAP);
	const void *p;
	int len;

	CU_ASSERT_EQUAL(a64_mpidr_default(0), 0x80000000ULL);
	CU_ASSERT_EQUAL(a64_mpidr_default(16), 0x80000100ULL);
	CU_ASSERT_EQUAL(a64_mpidr_default(0x1234), 0x80012304ULL);
	sample_desc(&d, &l, 3);
	d.n_cpus = 3;
	d.mpidr = mpidr;
	d.bootargs = NULL;
	d.initrd_start = d.initrd_end = 0;
	CU_ASSERT_FATAL(a64_fdt_build(fdt, FDT_CAP, &d) > 0);
	p = prop(fdt, "/cpus/cpu@100", "reg", &len);
	CU_ASSERT(p && len == 4 && cell(p, 0) == 0x100);
	CU_ASSERT(fdt_path_offset(fdt, "/cpus/cpu@1") >= 0); /* bit 31 is not affinity */
	CU_ASSERT(prop(fdt, "/chosen", "bootargs", &len) == NULL);
	CU_ASSERT(prop(fdt, "/chosen", "linux,initrd-start", &len) == NULL);
	CU_ASSERT(prop(fdt, "/chosen", "stdout-path", &len) == NULL); /* no UART */

	/* Aff3 needs two address cells */
	mpidr[2] = 1ULL << 32 | 1ULL << 31;
	CU_ASSERT_FATAL(a64_fdt_build(fdt, FDT_CAP, &d) > 0);
	p = prop(fdt, "/cpus", "#address-cells", &len);
	CU_ASSERT(p && cell(p, 0) == 2);
	p = prop(fdt, "/cpus/cpu@100000000", "reg", &len);
	CU_ASSERT(p && len == 8 && cell64(p, 0) == 1ULL << 32);

	CU_ASSERT_EQUAL(a64_fdt_build(fdt, 256, &d), -ENOSPC);
	CU_ASSERT_EQUAL(a64_fdt_build(NULL, FDT_CAP, &d), -EINVAL);
	d.n_banks = 0;
	CU_ASSERT_EQUAL(a64_fdt_build(fdt, FDT_CAP, &d), -EINVAL);
	free(fdt);
}

/* dtc, when installed (Debian's device-tree-compiler), must decode the
 * blob without a warning. */
static void test_fdt_dtc(void)
{
	char blob[] = "/tmp/cubicle-fdt-XXXXXX", cmd[512], line[512];
	struct a64_layout l;
	struct a64_fdt_desc d;
	void *fdt = calloc(1, FDT_CAP);
	bool saw_gic = false, warned = false;
	int size, fd, status;
	FILE *f;

	if (system("command -v dtc >/dev/null 2>&1") != 0) {
		printf("\n  dtc not installed (apt-get install device-tree-compiler): skipped ");
		free(fdt);
		return;
	}
	sample_layout(&l);
	sample_desc(&d, &l, 3);
	size = a64_fdt_build(fdt, FDT_CAP, &d);
	CU_ASSERT_FATAL(size > 0);
	fd = mkstemp(blob);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, fdt, (size_t)size) == size);
	close(fd);
	snprintf(cmd, sizeof(cmd), "dtc -I dtb -O dts %s 2>&1", blob);
	f = popen(cmd, "r");
	CU_ASSERT_FATAL(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		saw_gic |= strstr(line, "compatible = \"arm,gic-v3\";") != NULL;
		if (strstr(line, "Warning") || strstr(line, "ERROR")) {
			warned = true;
			printf("\n  dtc: %s", line);
		}
	}
	status = pclose(f);
	unlink(blob);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CU_ASSERT(saw_gic);
	CU_ASSERT(!warned);
	free(fdt);
}

/* A 64-byte Image header: text_offset 0, 4 KiB pages, anywhere in RAM. */
static void fake_image(uint8_t *h, uint64_t text_offset, uint64_t image_size, uint64_t flags)
{
	memset(h, 0, A64_IMAGE_HDR_LEN);
	h[0] = 'M';
	h[1] = 'Z';
	for (int i = 0; i < 8; i++) {
		h[8 + i] = (uint8_t)(text_offset >> (8 * i));
		h[16 + i] = (uint8_t)(image_size >> (8 * i));
		h[24 + i] = (uint8_t)(flags >> (8 * i));
	}
	memcpy(h + A64_IMAGE_MAGIC_OFF, "ARM\x64", 4);
}

static void test_image_header(void)
{
	uint8_t h[4096];
	struct a64_image_info ii;
	char err[256];

	fake_image(h, 0, 30 * MiB, 0xa);
	CU_ASSERT_EQUAL_FATAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(ii.text_offset, 0);
	CU_ASSERT_EQUAL(ii.image_size, 30 * MiB);
	CU_ASSERT_EQUAL(ii.page_kib, 4);
	CU_ASSERT(ii.phys_anywhere);
	fake_image(h, 0x80000, 20 * MiB, 0x6); /* pre-5.8 text_offset, 64 KiB pages */
	CU_ASSERT_EQUAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(ii.text_offset, 0x80000);
	CU_ASSERT_EQUAL(ii.page_kib, 64);
	CU_ASSERT(!ii.phys_anywhere);

	fake_image(h, 0, 30 * MiB, 0xa);
	h[A64_IMAGE_MAGIC_OFF + 3] = 0x65;
	CU_ASSERT_EQUAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT(strstr(err, "not an arm64 Image") != NULL);
	fake_image(h, 0, 30 * MiB, 0xb);
	CU_ASSERT_EQUAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT(strstr(err, "big-endian") != NULL);
	fake_image(h, 0, 30 * MiB, 0xa);
	CU_ASSERT_EQUAL(a64_image_parse(h, 63, &ii, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT(strstr(err, "truncated") != NULL);
	fake_image(h, 0, 0, 0);
	CU_ASSERT_EQUAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT(strstr(err, "3.17") != NULL);
	fake_image(h, 0x80001, 30 * MiB, 0);
	CU_ASSERT_EQUAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT(strstr(err, "text_offset") != NULL);
	memcpy(h, "\x1f\x8b\x08\x00", 4);
	CU_ASSERT_EQUAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT(strstr(err, "gzip") != NULL);
	memcpy(h, "MZ\0\0zimg", 8);
	CU_ASSERT_EQUAL(a64_image_parse(h, sizeof(h), &ii, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT(strstr(err, "zboot") != NULL);
	CU_ASSERT_EQUAL(a64_image_parse(NULL, 64, &ii, err, sizeof(err)), -EINVAL);
}

static void test_boot_plan(void)
{
	struct a64_boot_plan p = {
		.ram_base = A64_RAM_BASE, .ram_size = 256 * MiB, .text_offset = 0,
		.kernel_span = 30 * MiB + 123, .initrd_size = 5 * MiB + 1,
	};
	char err[256];
	uint64_t slot;

	CU_ASSERT_EQUAL_FATAL(a64_boot_plan(&p, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(p.kernel_gpa, A64_RAM_BASE);
	CU_ASSERT_EQUAL(p.kernel_end, A64_RAM_BASE + 30 * MiB + 0x1000);
	CU_ASSERT_EQUAL(p.fdt_gpa, A64_RAM_BASE + 254 * MiB);
	CU_ASSERT_EQUAL(p.initrd_gpa % 0x1000, 0);
	CU_ASSERT(p.initrd_gpa >= p.kernel_end);
	CU_ASSERT(p.initrd_gpa + p.initrd_size <= p.fdt_gpa);
	CU_ASSERT(p.fdt_gpa - (p.initrd_gpa + p.initrd_size) < 0x1000);

	/* an odd RAM size: the FDT slot stays 2 MiB-aligned and inside RAM */
	p.ram_size = 255 * MiB + 0x1000;
	CU_ASSERT_EQUAL(a64_boot_plan(&p, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(p.fdt_gpa, A64_RAM_BASE + 252 * MiB);
	p.text_offset = 0x80000;
	CU_ASSERT_EQUAL(a64_boot_plan(&p, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(p.kernel_gpa, A64_RAM_BASE + 0x80000);

	/* no room */
	p.ram_size = 32 * MiB;
	CU_ASSERT_EQUAL(a64_boot_plan(&p, err, sizeof(err)), -ENOSPC);
	CU_ASSERT(strstr(err, "machine.memory_mib") != NULL);
	p.ram_size = 40 * MiB;
	p.initrd_size = 16 * MiB;
	CU_ASSERT_EQUAL(a64_boot_plan(&p, err, sizeof(err)), -ENOSPC);
	CU_ASSERT(strstr(err, "initrd") != NULL);
	p.initrd_size = 0;
	CU_ASSERT_EQUAL(a64_boot_plan(&p, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(p.initrd_gpa, 0);
	p.ram_base = A64_RAM_BASE + 0x1000;
	CU_ASSERT_EQUAL(a64_boot_plan(&p, err, sizeof(err)), -EINVAL);

	/* the initrd stays inside the kernel's 32 GiB window */
	p = (struct a64_boot_plan){ .ram_base = A64_RAM_BASE, .ram_size = 64 * GiB,
				    .kernel_span = 30 * MiB, .initrd_size = 100 * MiB };
	CU_ASSERT_EQUAL(a64_boot_plan(&p, err, sizeof(err)), 0);
	CU_ASSERT(p.initrd_gpa + p.initrd_size <= A64_RAM_BASE + 32 * GiB);

	CU_ASSERT_EQUAL(a64_fdt_slot(A64_RAM_BASE, 1 * MiB, &slot), -ENOSPC);
	CU_ASSERT_EQUAL(a64_fdt_slot(A64_RAM_BASE, 2 * MiB, &slot), 0);
	CU_ASSERT_EQUAL(slot, A64_RAM_BASE);
}

static void test_layout(void)
{
	struct a64_layout l = { 0 };
	struct mem_bank b[2];
	struct cub_region r;
	char err[256];

	CU_ASSERT_EQUAL(a64_mem_layout(256 * MiB, b, 2), 1);
	CU_ASSERT(b[0].gpa == A64_RAM_BASE && b[0].size == 256 * MiB);
	CU_ASSERT_EQUAL(a64_mem_layout(0, b, 2), -EINVAL);
	CU_ASSERT_EQUAL(a64_mem_layout(256 * MiB + 1, b, 2), -EINVAL);
	CU_ASSERT_EQUAL(a64_mem_layout(1024 * GiB, b, 2), -EINVAL);
	CU_ASSERT_EQUAL(a64_mem_layout(1023 * GiB, b, 2), 1);

	/* no port I/O, for any class */
	CU_ASSERT_EQUAL(place(&l, "uart", CUB_BUS_PIO, 8, &r, err, sizeof(err)), -EINVAL);
	CU_ASSERT(strstr(err, "ARM64 has no port I/O") != NULL);
	CU_ASSERT_EQUAL(place(&l, "testdev", CUB_BUS_PIO, 16, &r, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(l.n_dev, 0);

	/* UARTs: four fixed slots, SPIs 0-3 */
	for (unsigned i = 0; i < A64_UART_SLOTS; i++) {
		CU_ASSERT_EQUAL(place(&l, "uart", CUB_BUS_ANY, 8, &r, err, sizeof(err)), 0);
		CU_ASSERT(r.bus == CUB_BUS_MMIO && r.base == A64_UART_BASE + 0x1000 * i &&
			  r.irq == (int)i);
	}
	CU_ASSERT_EQUAL(place(&l, "uart", CUB_BUS_ANY, 8, &r, err, sizeof(err)), -ENOSPC);
	CU_ASSERT_EQUAL(place(&l, "uart", CUB_BUS_ANY, 0x2000, &r, err, sizeof(err)), -EINVAL);

	/* the boot-timer: one fixed window, no interrupt */
	CU_ASSERT_EQUAL(place(&l, "boot-timer", CUB_BUS_ANY, 0x1000, &r, err, sizeof(err)), 0);
	CU_ASSERT(r.bus == CUB_BUS_MMIO && r.base == 0x09010000 && r.irq == -1);
	CU_ASSERT_EQUAL(place(&l, "boot-timer", CUB_BUS_ANY, 0x1000, &r, err, sizeof(err)),
			-ENOSPC);

	/* testdev: MMIO whether asked for "any" or "mmio" */
	CU_ASSERT_EQUAL(place(&l, "testdev", CUB_BUS_ANY, 16, &r, err, sizeof(err)), 0);
	CU_ASSERT(r.bus == CUB_BUS_MMIO && r.base == A64_TESTDEV_BASE && r.irq == -1);
	CU_ASSERT_EQUAL(place(&l, "testdev", CUB_BUS_MMIO, 16, &r, err, sizeof(err)), 0);
	CU_ASSERT(r.base == A64_TESTDEV_BASE + 0x1000);

	/* virtio-mmio and other classes: 4 KiB slots, SPIs from 16 */
	CU_ASSERT_EQUAL(place(&l, "virtio-mmio", CUB_BUS_MMIO, 0x200, &r, err, sizeof(err)), 0);
	CU_ASSERT(r.base == A64_MMIO_SLOTS_BASE && r.irq == 16);
	CU_ASSERT_EQUAL(place(&l, "virtio-mmio", CUB_BUS_MMIO, 0x200, &r, err, sizeof(err)), 0);
	CU_ASSERT(r.base == A64_MMIO_SLOTS_BASE + 0x1000 && r.irq == 17);
	CU_ASSERT_EQUAL(place(&l, "widget", CUB_BUS_ANY, 0x1001, &r, err, sizeof(err)), 0);
	CU_ASSERT(r.base == A64_MMIO_SLOTS_BASE + 0x2000 && r.irq == 18);
	CU_ASSERT_EQUAL(place(&l, "virtio-mmio", CUB_BUS_MMIO, 0x200, &r, err, sizeof(err)), 0);
	CU_ASSERT(r.base == A64_MMIO_SLOTS_BASE + 0x4000 && r.irq == 19);
	CU_ASSERT_EQUAL(place(&l, "", CUB_BUS_ANY, 8, &r, err, sizeof(err)), -ENOENT);

	/* every placement is remembered, in order, for the FDT */
	CU_ASSERT_EQUAL(l.n_dev, 4 + 1 + 2 + 4);
	CU_ASSERT(l.dev[4].kind == A64_DEV_BOOT_TIMER && l.dev[4].base == A64_BOOT_TIMER_BASE);
	CU_ASSERT(l.dev[7].kind == A64_DEV_VIRTIO_MMIO && l.dev[7].spi == 16 &&
		  l.dev[7].len == 0x200);
	CU_ASSERT(l.dev[9].kind == A64_DEV_OTHER);

	/* SPIs run out before the MMIO window does */
	while (!place(&l, "virtio-mmio", CUB_BUS_ANY, 0x200, &r, err, sizeof(err)))
		CU_ASSERT(r.irq < A64_NR_SPIS);
	CU_ASSERT(strstr(err, "no interrupt left") != NULL);
	CU_ASSERT_EQUAL(l.n_spi, A64_NR_SPIS - A64_SPI_GENERIC_FIRST);

	/* KVM_IRQ_LINE: type SPI (1) in bits 24-27, INTID 32 + n */
	CU_ASSERT_EQUAL(a64_irq_line_spi(0), 0x01000020u);
	CU_ASSERT_EQUAL(a64_irq_line_spi(16), 0x01000030u);
	CU_ASSERT(a64_gicv3_fits(64));
	CU_ASSERT(!a64_gicv3_fits(121));
	CU_ASSERT(!a64_gicv3_fits(0));
}

/* The VM generation ID: its node and the reservation of its page. */
static void test_fdt_vmgenid(void)
{
	struct a64_layout l;
	struct a64_fdt_desc d;
	void *fdt = calloc(1, FDT_CAP);
	const char *s;
	const void *p;
	uint64_t addr = 0, size = 0;
	int len;

	CU_ASSERT_PTR_NOT_NULL_FATAL(fdt);
	sample_layout(&l);
	sample_desc(&d, &l, 3);
	CU_ASSERT_EQUAL(a64_fdt_build(fdt, FDT_CAP, &d) > 0, 1);
	CU_ASSERT(fdt_path_offset(fdt, "/vmgenid@4f7ff000") < 0); /* none asked for */
	CU_ASSERT_EQUAL(fdt_num_mem_rsv(fdt), 0);
	d.vmgenid_gpa = 0x4f7ff000;
	d.vmgenid_spi = A64_SPI_VMGENID;
	CU_ASSERT_EQUAL_FATAL(a64_fdt_build(fdt, FDT_CAP, &d) > 0, 1);
	s = prop(fdt, "/vmgenid@4f7ff000", "compatible", &len);
	CU_ASSERT(s && !strcmp(s, "microsoft,vmgenid"));
	p = prop(fdt, "/vmgenid@4f7ff000", "reg", &len);
	CU_ASSERT(p && len == 16 && cell64(p, 0) == 0x4f7ff000 && cell64(p, 1) == 16);
	p = prop(fdt, "/vmgenid@4f7ff000", "interrupts", &len);
	/* <GIC_SPI 15 IRQ_TYPE_EDGE_RISING> */
	CU_ASSERT(p && len == 12 && cell(p, 0) == 0 && cell(p, 1) == A64_SPI_VMGENID &&
		  cell(p, 2) == 1);
	CU_ASSERT_EQUAL_FATAL(fdt_num_mem_rsv(fdt), 1);
	CU_ASSERT_EQUAL(fdt_get_mem_rsv(fdt, 0, &addr, &size), 0);
	CU_ASSERT(addr == 0x4f7ff000 && size == 0x1000);
	/* refused: unaligned, or an SPI past the GIC's */
	d.vmgenid_gpa = 0x4f7ff004;
	CU_ASSERT_EQUAL(a64_fdt_build(fdt, FDT_CAP, &d), -EINVAL);
	d.vmgenid_gpa = 0x4f7ff000;
	d.vmgenid_spi = A64_NR_SPIS;
	CU_ASSERT_EQUAL(a64_fdt_build(fdt, FDT_CAP, &d), -EINVAL);
	free(fdt);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "fdt: GICv3 machine reads back", test_fdt_gicv3 },
		{ "fdt: GICv2 machine", test_fdt_gicv2 },
		{ "fdt: MPIDRs, optional nodes, space", test_fdt_mpidr_and_space },
		{ "fdt: dtc decodes it", test_fdt_dtc },
		{ "fdt: the VM generation ID", test_fdt_vmgenid },
		{ "Image header", test_image_header },
		{ "boot plan: kernel, initrd, FDT", test_boot_plan },
		{ "layout: RAM, placement, SPIs", test_layout },
		{ NULL, NULL },
	};

	return cu_run("arm64 boot", tests);
}
