/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of guest RAM: bank layout and bounds-checked translation. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cunit_main.h"
#include "mem.h"

static void test_two_banks(void)
{
	struct mem_bank banks[2] = { { 0, 0x100000, 0 }, { 0x100000000ull, 0x200000, 0 } };
	struct guest_mem m;
	uint8_t *lo, *hi;
	uint32_t v = 0xdeadbeef, r = 0;

	CU_ASSERT_EQUAL_FATAL(mem_create(&m, 0x300000, banks, 2), 0);
	lo = mem_map(&m, 0, 1);
	hi = mem_map(&m, 0x100000000ull, 1);
	CU_ASSERT_PTR_NOT_NULL(lo);
	CU_ASSERT_PTR_EQUAL(hi, lo + 0x100000); /* contiguous in the memfd */
	CU_ASSERT_PTR_NOT_NULL(mem_map(&m, 0xfffff, 1));
	CU_ASSERT_PTR_NULL(mem_map(&m, 0xfffff, 2));   /* runs off bank 0 */
	CU_ASSERT_PTR_NULL(mem_map(&m, 0x100000, 1));  /* the hole */
	CU_ASSERT_PTR_NULL(mem_map(&m, 0xffffffffull, 2));
	CU_ASSERT_PTR_NULL(mem_map(&m, 0x100000000ull + 0x200000, 1));
	CU_ASSERT_PTR_NULL(mem_map(&m, 0, 0));
	CU_ASSERT_PTR_NULL(mem_map(&m, UINT64_MAX, 2)); /* wraps */
	CU_ASSERT_PTR_NULL(mem_map(&m, 0x100000000ull, UINT64_MAX));
	CU_ASSERT_EQUAL(mem_write(&m, 0x100000000ull + 0x1ffffc, &v, 4), 0);
	CU_ASSERT_EQUAL(mem_read(&m, 0x100000000ull + 0x1ffffc, &r, 4), 0);
	CU_ASSERT_EQUAL(r, v);
	CU_ASSERT_EQUAL(mem_write(&m, 0x100000000ull + 0x1ffffd, &v, 4), -EFAULT);
	CU_ASSERT_EQUAL(mem_end(&m), 0x100200000ull);
	mem_destroy(&m);
}

/* Whether the mapping holding @p is advised huge pages ("hg" in smaps'
 * VmFlags): 1, 0, or -1 when smaps cannot be read. */
static int advised_huge(const void *p)
{
	char line[512];
	int in = 0, hg = -1;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, ' ') &&
		    line[strcspn(line, " ") - 1] != ':')
			in = (uintptr_t)p >= a && (uintptr_t)p < b;
		else if (in && !strncmp(line, "VmFlags:", 8))
			hg = strstr(line, " hg") != NULL;
	}
	fclose(f);
	return hg;
}

/* Whether smaps shows this process's MADV_HUGEPAGE at all (qemu-user takes
 * the advice as a no-op, and its smaps is the emulator's). */
static bool advice_shows(void)
{
	size_t len = 4u << 20;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool shows;

	if (p == MAP_FAILED)
		return false;
	shows = !madvise(p, len, MADV_HUGEPAGE) && advised_huge(p) == 1;
	munmap(p, len);
	return shows;
}

/* machine.thp: private anonymous RAM at a 2 MiB boundary, advised huge
 * pages, the same layout and checks as the memfd's; a snapshot's file
 * mapped over it makes it a private file mapping. (A kernel without THP
 * refuses the advice: the memfd then, which is all this can check.) */
static void test_thp(void)
{
	struct mem_bank banks[2] = { { 0, 0x400000, 0 }, { 0x100000000ull, 0x200000, 0 } };
	struct guest_mem m;
	uint32_t v = 0x5a5aa5a5, r = 0;
	uint8_t *lo, *hi;
	int fd;

	CU_ASSERT_EQUAL_FATAL(mem_create_thp(&m, 0x600000, banks, 2), 0);
	lo = mem_map(&m, 0, 1);
	hi = mem_map(&m, 0x100000000ull, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lo);
	CU_ASSERT_PTR_EQUAL(hi, lo + 0x400000);
	CU_ASSERT_PTR_NULL(mem_map(&m, 0x400000, 1)); /* the hole */
	CU_ASSERT_EQUAL(mem_write(&m, 0x100000000ull + 0x1ffffc, &v, 4), 0);
	CU_ASSERT_EQUAL(mem_read(&m, 0x100000000ull + 0x1ffffc, &r, 4), 0);
	CU_ASSERT_EQUAL(r, v);
	CU_ASSERT_EQUAL(mem_write(&m, 0x100000000ull + 0x1ffffd, &v, 4), -EFAULT);
	if (m.anon) {
		CU_ASSERT_EQUAL(m.fd, -1);
		CU_ASSERT_EQUAL((uintptr_t)m.host & ((2u << 20) - 1), 0);
		if (advice_shows()) {
			CU_ASSERT_EQUAL(advised_huge(m.host), 1);
			CU_ASSERT_EQUAL(advised_huge(m.host + m.size - 1), 1);
			/* nothing else of the test's is advised so */
			CU_ASSERT_NOT_EQUAL(advised_huge(&v), 1);
		} else {
			printf("(smaps does not show MADV_HUGEPAGE here (qemu-user?): the advice is not checked) ");
		}
	} else {
		CU_ASSERT(m.fd >= 0);
	}
	/* a snapshot's memory file over it, in place */
	fd = memfd_create("test-thp-snapshot", MFD_CLOEXEC);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL_FATAL(ftruncate(fd, 0x600000), 0);
	CU_ASSERT_EQUAL(pwrite(fd, &v, 4, 0x10), 4);
	CU_ASSERT_EQUAL_FATAL(mem_remap_file(&m, fd), 0);
	CU_ASSERT_FALSE(m.anon);
	CU_ASSERT(m.private_file);
	CU_ASSERT_EQUAL(m.fd, fd);
	CU_ASSERT_PTR_EQUAL(mem_map(&m, 0, 1), lo);
	CU_ASSERT_EQUAL(mem_read(&m, 0x10, &r, 4), 0);
	CU_ASSERT_EQUAL(r, v);
	mem_destroy(&m);
}

static void test_bad_layouts(void)
{
	struct mem_bank overlap[2] = { { 0, 0x2000, 0 }, { 0x1000, 0x1000, 0 } };
	struct mem_bank one = { 0, 0x1000, 0 };
	struct guest_mem m;

	CU_ASSERT_EQUAL(mem_create(&m, 0x3000, overlap, 2), -EINVAL);
	CU_ASSERT_EQUAL(mem_create(&m, 0x2000, &one, 1), -EINVAL); /* sizes disagree */
	CU_ASSERT_EQUAL(mem_create(&m, 0x1000, &one, 0), -EINVAL);
	CU_ASSERT_EQUAL(mem_create(&m, 0x1000, &one, MEM_MAX_BANKS + 1), -EINVAL);
}

/* The host's dirty bitmap (Diff snapshots): marks by range, taken once,
 * given back, nothing outside RAM, nothing when tracking is off. */
static void test_dirty(void)
{
	struct mem_bank banks[2] = { { 0, 0x100000, 0 }, { 0x100000000ull, 0x100000, 0 } };
	struct guest_mem m;
	uint64_t bits[(0x200000 / MEM_PAGE + 63) / 64] = { 0 }, none[8] = { 0 };
	uint8_t *lo, *hi;

	CU_ASSERT_EQUAL_FATAL(mem_create(&m, 0x200000, banks, 2), 0);
	lo = mem_map(&m, 0, 1);
	hi = mem_map(&m, 0x100000000ull, 1);
	mem_mark_dirty(&m, lo, 4096); /* tracking off: nothing */
	CU_ASSERT_EQUAL_FATAL(mem_dirty_enable(&m), 0);
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(memcmp(bits, none, sizeof(none)), 0);
	mem_mark_dirty(&m, lo + 4095, 2);       /* pages 0 and 1 */
	mem_mark_dirty(&m, hi + 64 * 4096, 1);  /* page 256 + 64 of the mapping */
	mem_mark_dirty(&m, lo - 1, 2);          /* starts outside RAM: ignored */
	mem_mark_dirty(&m, hi + 0xfffff, 2);    /* runs past the end: ignored */
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(bits[0], 3);
	CU_ASSERT_EQUAL(bits[5], 1);            /* page 320 */
	CU_ASSERT_EQUAL(bits[1] | bits[2] | bits[3] | bits[4] | bits[6] | bits[7], 0);
	memset(bits, 0, sizeof(bits));
	mem_take_dirty(&m, bits);               /* taken: cleared */
	CU_ASSERT_EQUAL(bits[0] | bits[5], 0);
	bits[0] = 8;
	mem_put_dirty(&m, bits);                /* a failed snapshot gives them back */
	bits[0] = 0;
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(bits[0], 8);
	mem_mark_all_dirty(&m);
	memset(bits, 0, sizeof(bits));
	mem_take_dirty(&m, bits);
	CU_ASSERT_EQUAL(bits[0], UINT64_MAX);
	CU_ASSERT_EQUAL(bits[7], UINT64_MAX);
	mem_destroy(&m);
}

/* A snapshot's memory file (a memfd: tmpfs, where a fault in a hole would
 * allocate the page in the file): its data reads back, its holes read as
 * zeros without growing the file, and writes stay private, also after a
 * remap in place. */
static void check_private_file(struct guest_mem *m, int fd, uint8_t tag)
{
	const uint64_t size = 64ull << 20; /* 16384 pages */
	struct stat st0, st1;
	uint8_t *p = mem_map(m, 0, size), z[MEM_PAGE] = { 0 };
	uint64_t zero_pages = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL_FATAL(fstat(fd, &st0), 0);
	CU_ASSERT_EQUAL(p[0], tag);
	CU_ASSERT_EQUAL(p[MEM_PAGE - 1], tag);
	CU_ASSERT_EQUAL(p[5000ull * MEM_PAGE + 7], tag + 1);
	CU_ASSERT_EQUAL(p[(16383ull + 1) * MEM_PAGE - 1], tag + 2);
	for (uint64_t pg = 0; pg < size / MEM_PAGE; pg++)
		zero_pages += !memcmp(p + pg * MEM_PAGE, z, MEM_PAGE);
	CU_ASSERT_EQUAL(zero_pages, size / MEM_PAGE - 3);
	memset(p + 3000ull * MEM_PAGE, 0x5a, 3 * MEM_PAGE); /* a write into a hole */
	p[5000ull * MEM_PAGE] = 0x77;                        /* and into data */
	CU_ASSERT_EQUAL_FATAL(fstat(fd, &st1), 0);
	/* The file neither grew nor changed (a hole fault would have added 16384 pages). */
	CU_ASSERT(st1.st_blocks <= st0.st_blocks);
	CU_ASSERT(st1.st_blocks * 512 < 1 << 20);
	{
		uint8_t b = 0;

		CU_ASSERT_EQUAL(pread(fd, &b, 1, 5000 * MEM_PAGE), 1);
		CU_ASSERT_EQUAL(b, 0);
		CU_ASSERT_EQUAL(pread(fd, &b, 1, 3000 * MEM_PAGE), 1);
		CU_ASSERT_EQUAL(b, 0);
	}
}

static int sparse_file(uint8_t tag)
{
	const uint64_t size = 64ull << 20;
	uint8_t pg[MEM_PAGE];
	int fd = memfd_create("test-snapshot-mem", MFD_CLOEXEC);

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		return -1;
	memset(pg, tag, sizeof(pg));
	if (pwrite(fd, pg, MEM_PAGE, 0) != MEM_PAGE)
		return -1;
	memset(pg, 0, sizeof(pg));
	pg[7] = (uint8_t)(tag + 1);
	if (pwrite(fd, pg, MEM_PAGE, 5000 * MEM_PAGE) != MEM_PAGE)
		return -1;
	pg[7] = 0;
	pg[MEM_PAGE - 1] = (uint8_t)(tag + 2);
	if (pwrite(fd, pg, MEM_PAGE, 16383ull * MEM_PAGE) != MEM_PAGE)
		return -1;
	return fd;
}

static void test_snapshot_file(void)
{
	struct mem_bank bank = { 0, 64ull << 20, 0 };
	struct guest_mem m;
	int fd = sparse_file(0x11), fd2 = sparse_file(0x21);

	CU_ASSERT_FATAL(fd >= 0 && fd2 >= 0);
	CU_ASSERT_EQUAL_FATAL(mem_create_file(&m, dup(fd), 64ull << 20, &bank, 1), 0);
	check_private_file(&m, fd, 0x11);
	CU_ASSERT_EQUAL_FATAL(mem_remap_file(&m, dup(fd2)), 0);
	check_private_file(&m, fd2, 0x21);
	mem_destroy(&m);
	close(fd);
	close(fd2);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "two banks around a hole", test_two_banks },
		{ "bad layouts", test_bad_layouts },
		{ "anonymous RAM on huge pages (machine.thp)", test_thp },
		{ "the host's dirty bitmap", test_dirty },
		{ "a snapshot's sparse memory file, private", test_snapshot_file },
		{ NULL, NULL },
	};

	return cu_run("mem", tests);
}
