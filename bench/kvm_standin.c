/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/kvm_standin.so: KVM's first answers, for bench/jail_setup on a host
 * with or without KVM. Preloaded into cubicle (LD_PRELOAD), with /dev/null
 * bound over /dev/kvm in the bench's own mount namespace, it answers the
 * KVM ioctls a start makes before its VM (the API version, extensions, the
 * vCPU area's size; CPUID is refused, which cubicle takes as "ask later"),
 * and at KVM_CREATE_VM writes "kvm-standin: create-vm NS" to stderr (the
 * CLOCK_MONOTONIC nanoseconds) and refuses it: the start ends there, with
 * everything a jail adds behind it. Any other ioctl goes to the kernel.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

int ioctl(int fd, unsigned long req, ...);

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	struct stat st;
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (_IOC_TYPE(req) == KVMIO && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) &&
	    major(st.st_rdev) == 1 && minor(st.st_rdev) == 3) { /* /dev/null: the stand-in */
		struct timespec t;
		char line[64];
		int n;

		switch (req) {
		case KVM_GET_API_VERSION: return KVM_API_VERSION;
		case KVM_CHECK_EXTENSION: return 1;
		case KVM_GET_VCPU_MMAP_SIZE: return 4096;
		case KVM_CREATE_VM:
			clock_gettime(CLOCK_MONOTONIC, &t);
			n = snprintf(line, sizeof(line), "kvm-standin: create-vm %lld\n",
				     (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
			if (write(2, line, (size_t)n) != n)
				break;
			break;
		default: break;
		}
		errno = ENOTTY;
		return -1;
	}
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "ioctl");
	return real ? real(fd, req, arg) : (errno = ENOSYS, -1);
}
