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
#include <sys/ioctl.h>
#include <unistd.h>

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
 * KVM_GET_SUPPORTED_CPUID asked ahead (arch_prefetch), on a thread of its
 * own with a duplicate of the /dev/kvm fd: KVM answers it leaf by leaf
 * from the host's cpuid, trapped under a paravirtual KVM such as PVM
 * (0.4 ms a call there), which the rest of the setup then hides.
 */
static struct {
	pthread_t thread;
	bool running;
	int fd;
	struct kvm_cpuid2 *table;
} ahead = { .fd = -1 };

static void *ask_ahead(void *arg)
{
	(void)arg;
	ahead.table = x86_cpuid_supported(ahead.fd);
	return NULL;
}

void x86_cpuid_ask_ahead(int kvm_fd)
{
	if (ahead.running || ahead.table)
		return;
	ahead.fd = fcntl(kvm_fd, F_DUPFD_CLOEXEC, 0);
	if (ahead.fd < 0)
		return;
	ahead.running = !pthread_create(&ahead.thread, NULL, ask_ahead, NULL);
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
