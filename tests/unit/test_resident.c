/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of resident_trim (vmm-core/resident.c): the read-only segments of the loaded ELF
 * objects leave this process's page tables, what was written stays, and everything still runs. */
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cunit_main.h"
#include "resident.h"

static int pagemap = -1;

/* Pages of [start, end) this process has mapped (pagemap bit 63), read
 * with the raw system call so that nothing else of libc is run. */
static long present(uintptr_t start, uintptr_t end)
{
	static uint64_t e[512];
	long n = 0, page = sysconf(_SC_PAGESIZE);

	for (uintptr_t a = start; a < end; a += 512 * (uintptr_t)page) {
		size_t cnt = (end - a) / (uintptr_t)page;

		if (cnt > 512)
			cnt = 512;
		if (syscall(SYS_pread64, pagemap, e, cnt * 8, (off_t)(a / (uintptr_t)page * 8)) !=
		    (long)(cnt * 8))
			return -1;
		for (size_t i = 0; i < cnt; i++)
			n += (long)(e[i] >> 63);
	}
	return n;
}

struct seg {
	uintptr_t start, end;
};

/* libc's executable segment */
static int find_libc(struct dl_phdr_info *info, size_t size, void *data)
{
	struct seg *s = data;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libc.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
			s->start = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + pg - 1) & ~(pg - 1);
			s->end = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr + info->dlpi_phdr[i].p_memsz) &
				 ~(pg - 1);
			return 1;
		}
	return 0;
}

static char written[3 * 4096] = { 1 }; /* .data: a writable segment's private pages */

static int cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void test_drops_text_keeps_data(void)
{
	struct seg libc = { 0 };
	char *heap = malloc(64 << 10), buf[64];
	int v[] = { 3, 1, 2 };
	long before, after, pages;
	size_t kib;

	CU_ASSERT_FATAL(heap != NULL);
	memset(heap, 0x5a, 64 << 10);
	memset(written, 0xa5, sizeof(written));
	dl_iterate_phdr(find_libc, &libc);
	CU_ASSERT_FATAL(libc.end > libc.start);
	pages = (long)((libc.end - libc.start) / (uintptr_t)sysconf(_SC_PAGESIZE));
	/* run much of libc: its text is then mostly mapped (fault-around) */
	for (int i = 0; i < 200; i++)
		snprintf(buf, sizeof(buf), "%g %s %d", strtod("2.5", NULL) * i, "x", i);
	before = present(libc.start, libc.end);
	kib = resident_trim();
	after = present(libc.start, libc.end);
	printf("\n  libc text: %ld of %ld pages mapped before, %ld after; %zu KiB dropped\n", before,
	       pages, after, kib);
	CU_ASSERT(kib >= (size_t)(libc.end - libc.start) >> 10);
	CU_ASSERT(after >= 0 && after < pages / 4);
	/* what this process wrote is still there; libc still runs */
	for (size_t i = 0; i < sizeof(written); i++)
		if (written[i] != (char)0xa5) {
			CU_FAIL("a writable segment lost its contents");
			break;
		}
	for (int i = 0; i < 64 << 10; i++)
		if (heap[i] != 0x5a) {
			CU_FAIL("the heap lost its contents");
			break;
		}
	qsort(v, 3, sizeof(*v), cmp);
	CU_ASSERT(v[0] == 1 && v[1] == 2 && v[2] == 3);
	snprintf(buf, sizeof(buf), "%g", strtod("2.5", NULL) * 3);
	CU_ASSERT_STRING_EQUAL(buf, "7.5");
	free(heap);
}

/* Does MADV_DONTNEED drop a private file mapping's page here? (Under
 * qemu-user it does not, and pagemap is the emulator's.) */
static int dontneed_works(void)
{
	char path[] = "/tmp/cubicle-resident-XXXXXX";
	int fd = mkstemp(path), ok = 0;
	char page[4096] = { 7 };
	volatile char *p;

	if (fd < 0)
		return 0;
	unlink(path);
	if (write(fd, page, sizeof(page)) == (ssize_t)sizeof(page)) {
		p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p != MAP_FAILED) {
			(void)p[0];
			ok = present((uintptr_t)p, (uintptr_t)p + 4096) == 1 &&
			     !madvise((void *)p, 4096, MADV_DONTNEED) &&
			     present((uintptr_t)p, (uintptr_t)p + 4096) == 0 && p[0] == 7;
			munmap((void *)p, 4096);
		}
	}
	close(fd);
	return ok;
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "read-only ELF segments dropped, written pages kept, libc still runs",
		  test_drops_text_keeps_data },
		{ NULL, NULL },
	};

	pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pagemap < 0 || !dontneed_works()) {
		printf("SKIP: /proc/self/pagemap or MADV_DONTNEED on a file mapping does not work here (qemu-user?)\n");
		return 77;
	}
	return cu_run("resident", tests);
}
