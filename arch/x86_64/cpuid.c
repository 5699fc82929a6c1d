/* SPDX-License-Identifier: Apache-2.0 */
/* The CPUID each vCPU sees: KVM's supported table with this vCPU's APIC id,
 * a topology of n_vcpus single-thread cores in one socket, and the bits
 * that only exist because KVM emulates them (hypervisor, x2APIC,
 * TSC-deadline, ARAT). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cachefile.h"
#include "log.h"
#include "thread.h"
#include "x86.h"

#define CPUID_1_ECX_X2APIC       (1u << 21)
#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)
#define CPUID_1_ECX_HYPERVISOR   (1u << 31)
#define CPUID_1_EDX_HTT          (1u << 28)
#define CPUID_6_EAX_ARAT         (1u << 2)
#define VENDOR_AMD_EBX           0x68747541 /* "Auth" */
#define VENDOR_HYGON_EBX         0x6f677948 /* "Hygo" */
#define TOPO_SMT                 1 /* leaf 0xB/0x1F level types */
#define TOPO_CORE                2

struct kvm_cpuid2 *x86_cpuid_supported(int kvm_fd)
{
	unsigned n = 128;

	for (;;) {
		struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + n * sizeof(c->entries[0]));
		int e;

		if (!c)
			return NULL;
		c->nent = n;
		if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0)
			return c;
		e = errno;
		free(c);
		/* E2BIG: the table has more entries than we offered. */
		if (e != E2BIG || n >= 4096) {
			errno = e;
			return NULL;
		}
		n *= 2;
	}
}

/*
 * KVM's answer kept between starts (cachefile.h), in the folder "cpuid"
 * (CUBICLE_CPUID_CACHE names another, or "off"). The answer depends on
 * the host's CPU and microcode as KVM saw them when its modules loaded,
 * their parameters and the kernel: the key is this boot (boot_id), the
 * kernel's release and version, and each loaded KVM module's sysfs folder
 * (its inode: a module loaded again, with other parameters maybe, gets a
 * new one). What differs by the host CPU that ran the ioctl (APIC ids)
 * x86_cpuid_for_vcpu sets anyway.
 */
static const struct cachefile_kind cpuid_files = {
	.folder = "cpuid",
	.env = "CUBICLE_CPUID_CACHE",
	.magic = "CUBCPU2\n",
	.suffix = ".cpuid",
	.what = "cpuid",
	.elem = sizeof(struct kvm_cpuid_entry2),
	.max_n = 4096,
};

/* The key as text in @buf, its length; 0 when part of it is unknown (no
 * boot id, no KVM module folder): nothing is kept then. */
static size_t cpuid_key(char *buf, size_t size)
{
	static const char *const mods[] = { "kvm", "kvm_intel", "kvm_amd", "kvm_pvm" };
	char boot[64], path[64];
	struct utsname u;
	struct stat st;
	ssize_t got;
	size_t n;
	int fd, m, found = 0;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	got = read(fd, boot, sizeof(boot) - 1);
	close(fd);
	if (got < 32 || uname(&u))
		return 0;
	boot[got] = '\0';
	boot[strcspn(boot, "\n")] = '\0';
	m = snprintf(buf, size, "KVM_GET_SUPPORTED_CPUID\nboot %s\nkernel %s %s %s\n", boot,
		     u.release, u.version, u.machine);
	if (m < 0 || (size_t)m >= size)
		return 0;
	n = (size_t)m;
	for (unsigned i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
		snprintf(path, sizeof(path), "/sys/module/%s", mods[i]);
		if (stat(path, &st))
			continue;
		m = snprintf(buf + n, size - n, "module %s %llu %lld.%09ld\n", mods[i],
			     (unsigned long long)st.st_ino, (long long)st.st_ctim.tv_sec,
			     st.st_ctim.tv_nsec);
		if (m < 0 || (size_t)m >= size - n)
			return 0;
		n += (size_t)m;
		found++;
	}
	return found ? n : 0;
}

/* The table kept for @key, or NULL. */
static struct kvm_cpuid2 *cpuid_cached(const char *key, size_t len)
{
	uint32_t n;
	struct kvm_cpuid_entry2 *e = len ? cachefile_load(&cpuid_files, key, len, &n) : NULL;
	struct kvm_cpuid2 *c = e ? malloc(sizeof(*c) + n * sizeof(*e)) : NULL;

	if (c) {
		memset(c, 0, sizeof(*c));
		c->nent = n;
		memcpy(c->entries, e, n * sizeof(*e));
	}
	free(e);
	return c;
}

/*
 * KVM_GET_SUPPORTED_CPUID asked ahead (arch_prefetch): from the file kept
 * by an earlier start, else on a thread of its own with a duplicate of the
 * /dev/kvm fd, which keeps the answer for the next. KVM answers it leaf by
 * leaf from the host's cpuid, trapped under a paravirtual KVM such as PVM
 * or a nested one (0.4 ms a call there).
 */
static struct {
	pthread_t thread;
	bool running;
	int fd;
	struct kvm_cpuid2 *table;
	char key[512];
	size_t key_len;
} ahead = { .fd = -1 };

/* KVM's answer, kept under the key when there is one. */
static struct kvm_cpuid2 *ask_and_keep(int kvm_fd)
{
	struct kvm_cpuid2 *c = x86_cpuid_supported(kvm_fd);

	if (c && ahead.key_len)
		cachefile_store(&cpuid_files, ahead.key, ahead.key_len, c->entries, c->nent);
	return c;
}

static void *ask_ahead(void *arg)
{
	(void)arg;
	ahead.table = ask_and_keep(ahead.fd);
	return NULL;
}

/* The kept table, when there is one: true. */
static bool from_cache(void)
{
	ahead.key_len = cpuid_key(ahead.key, sizeof(ahead.key));
	ahead.table = cpuid_cached(ahead.key, ahead.key_len);
	if (ahead.table)
		log_debug("cpuid: KVM's supported table (%u entries) from the cache", ahead.table->nent);
	return ahead.table;
}

void x86_cpuid_preload(int kvm_fd)
{
	if (!ahead.running && !ahead.table && !from_cache() && ahead.key_len)
		ahead.table = ask_and_keep(kvm_fd);
}

void x86_cpuid_ask_ahead(int kvm_fd)
{
	if (ahead.running || ahead.table || from_cache())
		return;
	ahead.fd = fcntl(kvm_fd, F_DUPFD_CLOEXEC, 0);
	if (ahead.fd < 0)
		return;
	ahead.running = !thread_start_beside(&ahead.thread, ask_ahead, NULL);
	if (!ahead.running) {
		close(ahead.fd);
		ahead.fd = -1;
	}
}

struct kvm_cpuid2 *x86_cpuid_supported_once(int kvm_fd)
{
	struct kvm_cpuid2 *c;

	if (ahead.running) {
		pthread_join(ahead.thread, NULL);
		ahead.running = false;
		close(ahead.fd);
		ahead.fd = -1;
	}
	c = ahead.table;
	ahead.table = NULL;
	return c ? c : x86_cpuid_supported(kvm_fd); /* not asked ahead, or it failed */
}

struct kvm_cpuid_entry2 *x86_cpuid_find(struct kvm_cpuid2 *c, uint32_t fn, uint32_t idx)
{
	for (uint32_t i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function == fn &&
		    (!(e->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) || e->index == idx))
			return e;
	}
	return NULL;
}

/* Bits needed to number n things: 1 -> 0, 2 -> 1, 3..4 -> 2, 64 -> 6. */
static unsigned order(unsigned n)
{
	unsigned s = 0;

	while ((1u << s) < n)
		s++;
	return s;
}

/* Extended topology (leaf 0xB and its successor 0x1F): SMT level of one
 * thread, core level of n_vcpus cores, then the invalid level that ends
 * the list. EDX is always the x2APIC id. */
static void add_topology(struct kvm_cpuid2 *c, uint32_t fn, unsigned id, unsigned n)
{
	static const uint32_t type[3] = { TOPO_SMT, TOPO_CORE, 0 };

	for (uint32_t sub = 0; sub < 3; sub++) {
		struct kvm_cpuid_entry2 *e = &c->entries[c->nent++];

		memset(e, 0, sizeof(*e));
		e->function = fn;
		e->index = sub;
		e->flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
		e->eax = sub == 1 ? order(n) : 0;
		e->ebx = sub == 0 ? 1 : sub == 1 ? n : 0;
		e->ecx = (type[sub] << 8) | sub;
		e->edx = id;
	}
}

static void fix_entry(struct kvm_cpuid_entry2 *e, unsigned id, unsigned n, bool amd,
		      bool tsc_deadline)
{
	unsigned ids = 1u << order(n);

	switch (e->function) {
	case 1:
		/* EBX[31:24] initial APIC id, [23:16] addressable ids. */
		e->ebx = (e->ebx & 0xffff) | (id << 24) | ((ids > 255 ? 255 : ids) << 16);
		e->ecx |= CPUID_1_ECX_HYPERVISOR | CPUID_1_ECX_X2APIC;
		if (tsc_deadline)
			e->ecx |= CPUID_1_ECX_TSC_DEADLINE;
		if (n > 1)
			e->edx |= CPUID_1_EDX_HTT;
		else
			e->edx &= ~CPUID_1_EDX_HTT;
		break;
	case 4:
		/* EAX[31:26] cores per package - 1; [25:14] ids sharing this
		 * cache - 1: private L1/L2, one L3 for the socket. */
		if (!(e->eax & 0x1f))
			break;
		e->eax &= 0x3fff;
		e->eax |= (ids - 1) << 26;
		if (((e->eax >> 5) & 7) == 3)
			e->eax |= (ids - 1) << 14;
		break;
	case 6:
		/* The emulated LAPIC timer keeps running in deep C-states. */
		e->eax |= CPUID_6_EAX_ARAT;
		break;
	case 0x80000008:
		/* AMD: ECX[7:0] cores - 1, [15:12] APIC id bits for the core. */
		if (amd)
			e->ecx = (e->ecx & ~0xf0ffu) | (order(n) << 12) | (n - 1);
		break;
	case 0x8000001e:
		/* AMD: extended APIC id, compute unit = core, one thread. */
		if (amd) {
			e->eax = id;
			e->ebx = (e->ebx & ~0xff00ffu) | (id & 0xff);
			e->ecx &= ~0x7ffu;
		}
		break;
	}
}

struct kvm_cpuid2 *x86_cpuid_for_vcpu(const struct kvm_cpuid2 *sup, unsigned id,
				      unsigned n_vcpus, bool tsc_deadline)
{
	struct kvm_cpuid2 *c;
	uint32_t max_basic = 0, vendor = 0;
	bool had_1f = false, amd;

	if (!n_vcpus)
		n_vcpus = 1;
	c = calloc(1, sizeof(*c) + (sup->nent + 6) * sizeof(c->entries[0]));
	if (!c)
		return NULL;
	for (uint32_t i = 0; i < sup->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &sup->entries[i];

		if (e->function == 0) {
			max_basic = e->eax;
			vendor = e->ebx;
		}
		/* Rebuilt below: KVM reports the host's topology. */
		if (e->function == 0xb || e->function == 0x1f) {
			had_1f |= e->function == 0x1f;
			continue;
		}
		c->entries[c->nent++] = *e;
	}
	amd = vendor == VENDOR_AMD_EBX || vendor == VENDOR_HYGON_EBX;
	for (uint32_t i = 0; i < c->nent; i++)
		fix_entry(&c->entries[i], id, n_vcpus, amd, tsc_deadline);
	if (max_basic >= 0xb)
		add_topology(c, 0xb, id, n_vcpus);
	if (max_basic >= 0x1f && had_1f)
		add_topology(c, 0x1f, id, n_vcpus);
	return c;
}
