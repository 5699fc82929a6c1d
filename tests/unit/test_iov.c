/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugins/lib/iov.c: iovec slices and the full I/O loops, on a memfd and on a pipe. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cunit_main.h"
#include "iov.h"

#define FILE_LEN 4096

static int fd_with_pattern(void)
{
	uint8_t buf[FILE_LEN];
	int fd = memfd_create("test-iov", MFD_CLOEXEC);

	for (unsigned i = 0; i < FILE_LEN; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	CU_ASSERT_EQUAL_FATAL(fullio_pwrite(fd, buf, sizeof(buf), 0), 0);
	return fd;
}

static void test_total_and_copy(void)
{
	uint8_t a[3] = { 1, 2, 3 }, b[0], c[4] = { 4, 5, 6, 7 }, flat[8] = { 0 };
	struct iovec v[3] = { { a, 3 }, { b, 0 }, { c, 4 } };
	struct iovec huge[2] = { { a, SIZE_MAX }, { c, 2 } };
	bool over;

	CU_ASSERT_EQUAL(iov_total(v, 3, &over), 7);
	CU_ASSERT_FALSE(over);
	iov_total(huge, 2, &over);
	CU_ASSERT_TRUE(over);
	iov_total(v, -1, &over);
	CU_ASSERT_TRUE(over);
	CU_ASSERT_EQUAL(iov_to_buf(v, 3, 2, flat, 8), 5); /* stops where the iov ends */
	CU_ASSERT_EQUAL(memcmp(flat, (uint8_t[]){ 3, 4, 5, 6, 7 }, 5), 0);
	CU_ASSERT_EQUAL(iov_from_buf(v, 3, 1, (uint8_t[]){ 9, 9, 9 }, 3), 3);
	CU_ASSERT_EQUAL(memcmp(a, (uint8_t[]){ 1, 9, 9 }, 3), 0);
	CU_ASSERT_EQUAL(c[0], 9);
	CU_ASSERT_EQUAL(c[1], 5);
}

/* A slice [pos, pos+len) of a many-entry iov (more than IOV_MAX) reads right. */
static void test_slices(void)
{
	enum { N = IOV_MAX + 100 };
	int fd = fd_with_pattern();
	struct iovec *v = calloc(N, sizeof(*v));
	uint8_t *dst = calloc(N, 2), want[FILE_LEN];

	CU_ASSERT_EQUAL_FATAL(fullio_pread(fd, want, sizeof(want), 0), 0);
	for (int i = 0; i < N; i++) {
		v[i].iov_base = dst + 2 * i;
		v[i].iov_len = i % 3 ? 2 : 0; /* empty entries in between */
	}
	/* Whole iov from file offset 100. */
	CU_ASSERT_EQUAL(fullio_iov(fd, false, 100, v, N, 0, SIZE_MAX), iov_total(v, N, &(bool){ 0 }));
	for (int i = 0, k = 0; i < N; i++)
		for (size_t j = 0; j < v[i].iov_len; j++, k++)
			CU_ASSERT_EQUAL(dst[2 * i + j], want[100 + k]);
	/* A slice starting inside an entry, ending inside another. */
	memset(dst, 0, (size_t)N * 2);
	CU_ASSERT_EQUAL(fullio_iov(fd, false, 10, v, N, 3, 5), 5);
	CU_ASSERT_EQUAL(dst[2 * 2 + 1], want[10]); /* byte 3 of the iov: entry 2, offset 1 */
	CU_ASSERT_EQUAL(dst[2 * 4], want[11]);
	CU_ASSERT_EQUAL(dst[2 * 5 + 1], want[14]);
	CU_ASSERT_EQUAL(dst[2 * 7], 0);
	/* A read past end of file is short; a write is not. */
	CU_ASSERT_EQUAL(fullio_iov(fd, false, FILE_LEN - 3, v, N, 0, SIZE_MAX), 3);
	CU_ASSERT_EQUAL(fullio_iov(fd, true, FILE_LEN - 3, v, N, 0, 10), 10);
	CU_ASSERT_EQUAL(fullio_iov(fd, false, (uint64_t)INT64_MAX + 1, v, N, 0, 1), -EINVAL);
	free(v);
	free(dst);
	close(fd);
}

/* The whole of a short iov (the disk's hot path: one call, no slice): the
 * bytes land right, a read across end of file is short and carries on
 * into the next entries' bytes no further, errors come back as -errno. */
static void test_whole(void)
{
	int fd = fd_with_pattern();
	uint8_t want[FILE_LEN], a[5], b[0], c[7], one[9];
	struct iovec v[3] = { { a, sizeof(a) }, { b, 0 }, { c, sizeof(c) } };
	struct iovec w[1] = { { one, sizeof(one) } };

	CU_ASSERT_EQUAL_FATAL(fullio_pread(fd, want, sizeof(want), 0), 0);
	CU_ASSERT_EQUAL(fullio_iov(fd, false, 200, v, 3, 0, SIZE_MAX), 12);
	CU_ASSERT_EQUAL(memcmp(a, want + 200, 5), 0);
	CU_ASSERT_EQUAL(memcmp(c, want + 205, 7), 0);
	CU_ASSERT_EQUAL(fullio_iov(fd, false, 300, w, 1, 0, SIZE_MAX), 9);
	CU_ASSERT_EQUAL(memcmp(one, want + 300, 9), 0);
	/* across end of file: 8 bytes are left, the first entry and 3 of c */
	memset(c, 0, sizeof(c));
	CU_ASSERT_EQUAL(fullio_iov(fd, false, FILE_LEN - 8, v, 3, 0, SIZE_MAX), 8);
	CU_ASSERT_EQUAL(memcmp(c, want + FILE_LEN - 3, 3), 0);
	CU_ASSERT_EQUAL(c[3], 0);
	CU_ASSERT_EQUAL(fullio_iov(fd, false, FILE_LEN, w, 1, 0, SIZE_MAX), 0);
	CU_ASSERT_EQUAL(fullio_iov(fd, false, FILE_LEN - 4, w, 1, 0, SIZE_MAX), 4);
	/* a write grows the file; then a read sees it */
	memset(one, 0xab, sizeof(one));
	CU_ASSERT_EQUAL(fullio_iov(fd, true, FILE_LEN - 2, w, 1, 0, SIZE_MAX), 9);
	memset(one, 0, sizeof(one));
	CU_ASSERT_EQUAL(fullio_iov(fd, false, FILE_LEN + 6, w, 1, 0, SIZE_MAX), 1);
	CU_ASSERT_EQUAL(one[0], 0xab);
	CU_ASSERT_EQUAL(fullio_iov(-1, false, 0, v, 3, 0, SIZE_MAX), -EBADF);
	CU_ASSERT_EQUAL(fullio_iov(-1, true, 0, w, 1, 0, SIZE_MAX), -EBADF);
	CU_ASSERT_EQUAL(fullio_iov(fd, false, (uint64_t)INT64_MAX + 1, w, 1, 0, SIZE_MAX), -EINVAL);
	close(fd);
}

static void test_flat(void)
{
	int fd = fd_with_pattern(), p[2];
	uint8_t buf[64];

	CU_ASSERT_EQUAL(fullio_pread(fd, buf, 64, FILE_LEN - 64), 0);
	CU_ASSERT_EQUAL(fullio_pread(fd, buf, 64, FILE_LEN - 10), -EIO);
	CU_ASSERT_EQUAL(fullio_pread_upto(fd, buf, 64, FILE_LEN - 10), 10);
	CU_ASSERT_EQUAL(fullio_datasync(fd), 0);
	CU_ASSERT_EQUAL(fullio_pread(-1, buf, 1, 0), -EBADF);
	CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
	CU_ASSERT_EQUAL(fullio_write(p[1], "hello", 5), 0);
	CU_ASSERT_EQUAL(read(p[0], buf, sizeof(buf)), 5);
	close(p[0]);
	close(p[1]);
	close(fd);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "iov_total, iov_to_buf, iov_from_buf", test_total_and_copy },
		{ "fullio_iov slices, more than IOV_MAX entries, end of file", test_slices },
		{ "fullio_iov of a whole short iov: data, end of file, errors", test_whole },
		{ "fullio_pread/pwrite/pread_upto/write/datasync", test_flat },
		{ NULL, NULL },
	};

	return cu_run("iov", tests);
}
