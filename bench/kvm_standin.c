/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/kvm_standin.so: a KVM that runs no guest, for bench/jail_setup on a
 * host with or without KVM. Preloaded into cubicle or bench/floor
 * (LD_PRELOAD), with /dev/null bound over /dev/kvm in the bench's own mount
 * namespace, it answers every KVM ioctl a start makes, in user space:
 * /dev/kvm's (the API version, extensions, the vCPU area's size, the CPUID
 * this CPU reports, a few MSRs), the VM's and the vCPUs' (a VM or a vCPU is
 * a memfd, a vCPU's kvm_run area the memfd's pages; a SET is taken, a GET
 * answers zeros, a KVM_SET_MSRS sets all). It writes to stderr
 * "kvm-standin: create-vm NS" at KVM_CREATE_VM and "kvm-standin: run NS"
 * at the first KVM_RUN (CLOCK_MONOTONIC nanoseconds), which ends the guest
 * at once: a KVM_EXIT_SYSTEM_EVENT, shutdown (the guest powered off).
 *
 * So what a start does in user space up to its guest's first instruction,
 * with everything KVM itself does in the kernel left out (the floor pays
 * that too, on a real KVM). The CPUID answer is the host CPU's, not KVM's:
 * it is given only when CUBICLE_CPUID_CACHE is set (the bench points it at
 * a folder of its own), else refused ("ask later"), so that no start under
 * the stand-in can leave it in the user's cache of KVM's answers. Any
 * other ioctl goes to the kernel.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define RUN_SIZE (3 * 4096)
#define MAX_FD   4096

enum kind { NONE, VM, VCPU };

static unsigned char kinds[MAX_FD];
static struct kvm_run *runs[MAX_FD];

int ioctl(int fd, unsigned long req, ...);

static void stamp(const char *what)
{
	struct timespec t;
	char line[80];
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t);
	n = snprintf(line, sizeof(line), "kvm-standin: %s %lld\n", what,
		     (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
	if (write(2, line, (size_t)n) != n)
		return;
}

/* A VM's or a vCPU's fd: a memfd of @size bytes. */
static int object(enum kind k, size_t size)
{
	int fd = memfd_create(k == VM ? "kvm-standin-vm" : "kvm-standin-vcpu", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fd >= MAX_FD || (size && ftruncate(fd, (off_t)size))) {
		close(fd);
		errno = EMFILE;
		return -1;
	}
	if (k == VCPU) {
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED) {
			close(fd);
			return -1;
		}
		runs[fd] = p;
	}
	kinds[fd] = (unsigned char)k;
	return fd;
}

/* The leaves this CPU reports, as KVM_GET_SUPPORTED_CPUID lists them. */
static int supported_cpuid(struct kvm_cpuid2 *c)
{
	static const unsigned bases[] = { 0, 0x80000000u };
	unsigned n = 0;

	for (unsigned b = 0; b < 2; b++) {
		unsigned max = __get_cpuid_max(bases[b], NULL);

		for (unsigned leaf = bases[b]; leaf <= max && leaf - bases[b] < 0x40; leaf++) {
			int indexed = leaf == 4 || leaf == 7 || leaf == 0xb || leaf == 0xd ||
				      leaf == 0x1f;

			for (unsigned sub = 0; sub < (indexed ? 4u : 1u); sub++) {
				struct kvm_cpuid_entry2 *e;

				if (n >= c->nent) {
					errno = E2BIG;
					return -1;
				}
				e = &c->entries[n++];
				memset(e, 0, sizeof(*e));
				e->function = leaf;
				e->index = sub;
				e->flags = indexed ? KVM_CPUID_FLAG_SIGNIFCANT_INDEX : 0;
				__cpuid_count(leaf, sub, e->eax, e->ebx, e->ecx, e->edx);
			}
		}
	}
	c->nent = n;
	return 0;
}

static int msr_index_list(struct kvm_msr_list *l)
{
	static const uint32_t msrs[] = { 0x10, 0x174, 0x175, 0x176, 0x1a0, 0x6e0,
					 0xc0000080, 0xc0000081, 0xc0000082, 0xc0000083,
					 0xc0000084, 0xc0000100, 0xc0000101, 0xc0000102 };
	uint32_t have = l->nmsrs;

	l->nmsrs = sizeof(msrs) / sizeof(*msrs);
	if (have < l->nmsrs) {
		errno = E2BIG;
		return -1;
	}
	memcpy(l->indices, msrs, sizeof(msrs));
	return 0;
}

static int system_ioctl(unsigned long req, void *arg)
{
	const char *cache = getenv("CUBICLE_CPUID_CACHE");

	switch (req) {
	case KVM_GET_API_VERSION: return KVM_API_VERSION;
	case KVM_CHECK_EXTENSION:
		switch ((unsigned long)arg) {
		case KVM_CAP_NR_MEMSLOTS: return 509;
		case KVM_CAP_MAX_VCPUS: return 288;
		default: return 1;
		}
	case KVM_GET_VCPU_MMAP_SIZE: return RUN_SIZE;
	case KVM_GET_SUPPORTED_CPUID:
		if (cache && *cache)
			return supported_cpuid(arg);
		break;
	case KVM_GET_MSR_INDEX_LIST: return msr_index_list(arg);
	case KVM_CREATE_VM: stamp("create-vm"); return object(VM, 0);
	default: break;
	}
	errno = ENOTTY;
	return -1;
}

static int vm_ioctl(unsigned long req, void *arg)
{
	switch (req) {
	case KVM_CREATE_VCPU: return object(VCPU, RUN_SIZE);
	case KVM_CHECK_EXTENSION: return system_ioctl(req, arg);
	case KVM_SIGNAL_MSI: return 1;
	default: break;
	}
	/* a SET is taken; a GET (output only) answers zeros */
	if (_IOC_DIR(req) == _IOC_READ && arg)
		memset(arg, 0, _IOC_SIZE(req));
	return 0;
}

static int vcpu_ioctl(int fd, unsigned long req, void *arg)
{
	static int ran;

	switch (req) {
	case KVM_RUN:
		if (!__atomic_exchange_n(&ran, 1, __ATOMIC_ACQ_REL))
			stamp("run");
		runs[fd]->exit_reason = KVM_EXIT_SYSTEM_EVENT;
		runs[fd]->system_event.type = KVM_SYSTEM_EVENT_SHUTDOWN;
		return 0;
	case KVM_GET_MSRS:
	case KVM_SET_MSRS: return (int)((struct kvm_msrs *)arg)->nmsrs;
	default: break;
	}
	if (_IOC_DIR(req) == _IOC_READ && arg)
		memset(arg, 0, _IOC_SIZE(req));
	return 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	struct stat st;
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (_IOC_TYPE(req) == KVMIO && fd >= 0 && fd < MAX_FD && kinds[fd] == VM)
		return vm_ioctl(req, arg);
	if (_IOC_TYPE(req) == KVMIO && fd >= 0 && fd < MAX_FD && kinds[fd] == VCPU)
		return vcpu_ioctl(fd, req, arg);
	if (_IOC_TYPE(req) == KVMIO && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
	    major(st.st_rdev) == 1 && minor(st.st_rdev) == 3) /* /dev/null: the stand-in */
		return system_ioctl(req, arg);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "ioctl");
	return real ? real(fd, req, arg) : (errno = ENOSYS, -1);
}
