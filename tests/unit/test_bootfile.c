/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of boot files (vmm-core/bootfile.c): the head read at open,
 * ranges read straight into guest RAM, and the refusals, each naming the
 * file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootfile.h"
#include "cunit_main.h"
#include "mem.h"

#define FILE_LEN (3 * BOOTFILE_HEAD + 123)

static char dir[] = "/tmp/cubicle-bootfile-XXXXXX";

/* DIR/@name holding @len bytes of a pattern (byte i is i * 7 + 3). */
static const char *make_file(const char *name, size_t len, char *path, size_t pathlen)
{
	uint8_t *buf = malloc(len ? len : 1);
	int fd;

	snprintf(path, pathlen, "%s/%s", dir, name);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(buf);
	return path;
}

static bool pattern_at(const uint8_t *p, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)((off + i) * 7 + 3))
			return false;
	return true;
}

static void test_head_and_copy(void)
{
	struct mem_bank bank = { 0, 0x100000, 0 };
	struct guest_mem m;
	struct bootfile f;
	char path[256], err[512];
	uint8_t *ram;

	make_file("kernel", FILE_LEN, path, sizeof(path));
	CU_ASSERT_EQUAL_FATAL(mem_create(&m, 0x100000, &bank, 1), 0);
	ram = mem_map(&m, 0, 0x100000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ram);

	/* the head only, then the rest straight into RAM */
	CU_ASSERT_EQUAL_FATAL(bootfile_open(&f, path, 0x100000, "guest RAM", BOOTFILE_HEAD, err,
					    sizeof(err)), 0);
	CU_ASSERT_EQUAL(f.size, FILE_LEN);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f.map);
	CU_ASSERT_TRUE(pattern_at(f.map, 0, BOOTFILE_HEAD));
	CU_ASSERT_EQUAL(bootfile_copy(&f, &m, 0x2000, 1000, FILE_LEN - 1000, err, sizeof(err)), 0);
	CU_ASSERT_TRUE(pattern_at(ram + 0x2000, 1000, FILE_LEN - 1000));
	CU_ASSERT_EQUAL(bootfile_read_to(&f, &m, 0x80000, err, sizeof(err)), 0);
	CU_ASSERT_TRUE(pattern_at(ram + 0x80000, 0, FILE_LEN));
	/* all of it as the head (an ELF kernel) */
	CU_ASSERT_EQUAL(bootfile_head(&f, f.size, err, sizeof(err)), 0);
	CU_ASSERT_TRUE(pattern_at(f.map, 0, FILE_LEN));

	/* ranges outside the file or RAM: refused, named */
	CU_ASSERT_EQUAL(bootfile_copy(&f, &m, 0, 1, FILE_LEN, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
	CU_ASSERT_EQUAL(bootfile_copy(&f, &m, 0, FILE_LEN + 1, 0, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(bootfile_copy(&f, &m, 0x100000 - 16, 0, 32, err, sizeof(err)), -EFAULT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not in guest RAM"));

	/* a file cut short after the open: a message, not garbage */
	CU_ASSERT_EQUAL(truncate(path, 100), 0);
	CU_ASSERT_EQUAL(bootfile_copy(&f, &m, 0, 0, FILE_LEN, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "file shrank while loading"));
	bootfile_close(&f);
	CU_ASSERT_EQUAL(f.fd, -1);
	bootfile_close(&f); /* twice is fine */

	/* no head asked: nothing read at open */
	make_file("initrd", 5000, path, sizeof(path));
	CU_ASSERT_EQUAL_FATAL(bootfile_open(&f, path, 0x100000, "guest RAM", 0, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NULL(f.map);
	CU_ASSERT_EQUAL(bootfile_read_to(&f, &m, 0, err, sizeof(err)), 0);
	CU_ASSERT_TRUE(pattern_at(ram, 0, 5000));
	bootfile_close(&f);
	/* a head larger than the file: the file */
	CU_ASSERT_EQUAL_FATAL(bootfile_open(&f, path, 0x100000, "guest RAM", BOOTFILE_HEAD * 4,
					    err, sizeof(err)), 0);
	CU_ASSERT_TRUE(pattern_at(f.map, 0, 5000));
	bootfile_close(&f);
	mem_destroy(&m);
}

static void test_refusals(void)
{
	struct bootfile f;
	char path[256], err[512];

	make_file("empty", 0, path, sizeof(path));
	CU_ASSERT_EQUAL(bootfile_open(&f, path, 1 << 20, "guest RAM", BOOTFILE_HEAD, err,
				      sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "empty file"));
	CU_ASSERT_EQUAL(f.fd, -1);
	make_file("big", 3 << 20, path, sizeof(path));
	CU_ASSERT_EQUAL(bootfile_open(&f, path, 2 << 20, "low guest RAM", BOOTFILE_HEAD, err,
				      sizeof(err)), -EFBIG);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "do not fit in 2 MiB of low guest RAM"));
	CU_ASSERT_EQUAL(bootfile_open(&f, dir, 1 << 20, "guest RAM", 0, err, sizeof(err)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
	snprintf(path, sizeof(path), "%s/none", dir);
	CU_ASSERT_EQUAL(bootfile_open(&f, path, 1 << 20, "guest RAM", 0, err, sizeof(err)),
			-ENOENT);
	CU_ASSERT_EQUAL(strncmp(err, path, strlen(path)), 0);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "the head at open, ranges straight into RAM", test_head_and_copy },
		{ "empty, too big, a folder, missing", test_refusals },
		{ NULL, NULL },
	};
	static const char *const files[] = { "kernel", "initrd", "empty", "big" };
	char path[256];
	int ret;

	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	ret = cu_run("bootfile", tests);
	for (unsigned i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
	return ret;
}
