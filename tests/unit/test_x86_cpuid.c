/* SPDX-License-Identifier: Apache-2.0 */
/* KVM's supported CPUID asked ahead on a thread (arch_prefetch), and kept
 * between starts (CUBICLE_CPUID_CACHE, cachefile.h): what a kept file
 * holds is what a start uses, a damaged or foreign one is not, "off"
 * keeps nothing, and the jail's preload asks and keeps. Needs /dev/kvm
 * (each test says "skipped" without it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../arch/x86_64/x86.h"
#include "cachefile.h"
#include "cunit_main.h"

#define HDR 24 /* cachefile.c's header: magic, description length, count, sum */

/* What KVM's table takes from the CPU that ran the ioctl (its APIC id in
 * leaf 1 EBX 31:24, leaves 0xb and 0x1f EDX, AMD's leaf 0x8000001e EAX and
 * EBX 7:0; x86_cpuid_for_vcpu sets each per vCPU): cleared, so that tables
 * asked on two CPUs compare equal. */
static void cpu_neutral(struct kvm_cpuid2 *c)
{
	for (unsigned i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function == 1)
			e->ebx &= 0x00ffffffu;
		else if (e->function == 0xb || e->function == 0x1f)
			e->edx = 0;
		else if (e->function == 0x8000001e)
			e->eax = 0, e->ebx &= ~0xffu;
	}
}

/* KVM's supported CPUID asked ahead on a thread (arch_prefetch), on a
 * duplicate of the fd: the table asked directly, taken once. Needs
 * /dev/kvm. (The thread may run on the other CPU: compared CPU-neutral.) */
static void test_cpuid_ahead(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	struct kvm_cpuid2 *direct, *ahead, *again;

	if (fd < 0) {
		printf("no /dev/kvm (%s): skipped ", strerror(errno));
		return;
	}
	direct = x86_cpuid_supported(fd);
	x86_cpuid_ask_ahead(fd);
	close(fd); /* the thread asks on its own duplicate */
	ahead = x86_cpuid_supported_once(fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(direct);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ahead);
	CU_ASSERT_EQUAL_FATAL(ahead->nent, direct->nent);
	cpu_neutral(ahead);
	cpu_neutral(direct);
	CU_ASSERT_EQUAL(memcmp(ahead->entries, direct->entries,
			       direct->nent * sizeof(direct->entries[0])), 0);
	/* taken once: the next call asks KVM itself, here on the closed fd */
	again = x86_cpuid_supported_once(fd);
	CU_ASSERT_PTR_NULL(again);
	CU_ASSERT_EQUAL(errno, EBADF);
	free(again);
	free(ahead);
	free(direct);
}

static int open_kvm(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		printf("no /dev/kvm (%s): skipped ", strerror(errno));
	return fd;
}

/* The one file in @dir (its path in @path): its bytes, their count in *len. */
static uint8_t *only_file(const char *dir, char *path, size_t size, size_t *len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint8_t *b = NULL;
	unsigned n = 0;
	struct stat st;
	int fd;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && ++n == 1)
			snprintf(path, size, "%s/%s", dir, e->d_name);
	if (d)
		closedir(d);
	if (n != 1 || stat(path, &st) || !(b = malloc((size_t)st.st_size)))
		return NULL;
	fd = open(path, O_RDONLY);
	*len = fd >= 0 && read(fd, b, (size_t)st.st_size) == st.st_size ? (size_t)st.st_size : 0;
	if (fd >= 0)
		close(fd);
	return b;
}

static void put_file(const char *path, const uint8_t *b, size_t len)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, b, len), (ssize_t)len);
	close(fd);
}

/* Asked ahead with a closed fd: only a kept table can answer (CPU-neutral). */
static struct kvm_cpuid2 *from_cache_only(int closed)
{
	struct kvm_cpuid2 *c;

	x86_cpuid_ask_ahead(closed);
	c = x86_cpuid_supported_once(closed);
	if (c)
		cpu_neutral(c);
	return c;
}

static void test_cpuid_kept(void)
{
	char dir[] = "/tmp/cubicle-test-cpuid-XXXXXX", path[600], old[600];
	int fd = open_kvm(), closed;
	struct kvm_cpuid2 *direct, *c;
	uint8_t *b, *copy;
	uint32_t desc_len, n;
	size_t len;
	uint64_t sum;
	const char *env = getenv("CUBICLE_CPUID_CACHE");

	if (fd < 0)
		return;
	snprintf(old, sizeof(old), "%s", env ? env : "");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	setenv("CUBICLE_CPUID_CACHE", dir, 1);
	closed = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(closed);
	direct = x86_cpuid_supported(fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(direct);
	cpu_neutral(direct);
	/* nothing kept: a closed fd gets no table */
	CU_ASSERT_PTR_NULL(from_cache_only(closed));
	/* asked ahead on a thread, then kept: KVM's answer */
	x86_cpuid_ask_ahead(fd);
	c = x86_cpuid_supported_once(fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	free(c);
	b = only_file(dir, path, sizeof(path), &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL_FATAL(memcmp(b, "CUBCPU2\n", 8), 0);
	memcpy(&desc_len, b + 8, 4);
	memcpy(&n, b + 12, 4);
	CU_ASSERT_EQUAL_FATAL(len, HDR + desc_len + n * sizeof(struct kvm_cpuid_entry2));
	/* the key: this boot and the KVM module, as text */
	CU_ASSERT_PTR_NOT_NULL(memmem(b + HDR, desc_len, "\nboot ", 6));
	CU_ASSERT_PTR_NOT_NULL(memmem(b + HDR, desc_len, "\nmodule kvm ", 12));
	/* the next start takes it without asking KVM */
	c = from_cache_only(closed);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL_FATAL(c->nent, direct->nent);
	CU_ASSERT_EQUAL(memcmp(c->entries, direct->entries, n * sizeof(c->entries[0])), 0);
	free(c);
	/* what an intact file holds is what loads: leaf 0's EBX changed */
	copy = malloc(len);
	memcpy(copy, b, len);
	for (uint32_t i = 0; i < n; i++) {
		struct kvm_cpuid_entry2 e;

		memcpy(&e, copy + HDR + desc_len + i * sizeof(e), sizeof(e));
		if (e.function == 0) {
			e.ebx = 0x12345678;
			memcpy(copy + HDR + desc_len + i * sizeof(e), &e, sizeof(e));
		}
	}
	sum = cachefile_sum((const char *)copy + HDR, desc_len, copy + HDR + desc_len,
			    n * sizeof(struct kvm_cpuid_entry2));
	memcpy(copy + 16, &sum, 8);
	put_file(path, copy, len);
	c = from_cache_only(closed);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(x86_cpuid_find(c, 0, 0)->ebx, 0x12345678);
	free(c);
	/* damaged (a byte of the table, the sum left): not used */
	copy[len - 1] ^= 0xff;
	put_file(path, copy, len);
	CU_ASSERT_PTR_NULL(from_cache_only(closed));
	/* another boot's or module's (the key differs): not used */
	memcpy(copy, b, len);
	copy[HDR + desc_len - 2] ^= 1;
	sum = cachefile_sum((const char *)copy + HDR, desc_len, copy + HDR + desc_len,
			    n * sizeof(struct kvm_cpuid_entry2));
	memcpy(copy + 16, &sum, 8);
	put_file(path, copy, len);
	CU_ASSERT_PTR_NULL(from_cache_only(closed));
	/* a file others may write: not used */
	put_file(path, b, len);
	CU_ASSERT_EQUAL(chmod(path, 0666), 0);
	CU_ASSERT_PTR_NULL(from_cache_only(closed));
	/* "off": nothing read, nothing kept */
	CU_ASSERT_EQUAL(unlink(path), 0);
	setenv("CUBICLE_CPUID_CACHE", "off", 1);
	x86_cpuid_ask_ahead(fd);
	free(x86_cpuid_supported_once(fd));
	CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
	/* the jail's preload: asked here and now, kept at once */
	setenv("CUBICLE_CPUID_CACHE", dir, 1);
	x86_cpuid_preload(fd);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	c = from_cache_only(closed); /* the preloaded table, taken once */
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(memcmp(c->entries, direct->entries, n * sizeof(c->entries[0])), 0);
	free(c);
	c = from_cache_only(closed); /* then the kept file */
	CU_ASSERT_PTR_NOT_NULL(c);
	free(c);
	unlink(path);
	rmdir(dir);
	if (*old)
		setenv("CUBICLE_CPUID_CACHE", old, 1);
	else
		unsetenv("CUBICLE_CPUID_CACHE");
	free(copy);
	free(b);
	free(direct);
	close(fd);
}

int main(void)
{
	static const struct cu_test tests[] = {
		{ "supported CPUID asked ahead", test_cpuid_ahead },
		{ "supported CPUID kept between starts", test_cpuid_kept },
		{ NULL, NULL },
	};

	/* the first test asks KVM itself, whatever the user's cache holds */
	setenv("CUBICLE_CPUID_CACHE", "off", 1);
	return cu_run("x86 CPUID", tests);
}
