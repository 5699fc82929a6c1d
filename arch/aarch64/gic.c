/* SPDX-License-Identifier: Apache-2.0 */
/* The in-kernel interrupt controller: a GICv3 (or GICv2) created through
 * KVM's device API at the addresses layout.h reserves for it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "a64.h"

static int set_attr(int fd, uint32_t group, uint64_t attr, const void *val)
{
	struct kvm_device_attr a = { .group = group, .attr = attr, .addr = (uintptr_t)val };

	return ioctl(fd, KVM_SET_DEVICE_ATTR, &a) < 0 ? -errno : 0;
}

static int create(int vm_fd, uint32_t type, uint32_t flags)
{
	struct kvm_create_device cd = { .type = type, .flags = flags };

	if (ioctl(vm_fd, KVM_CREATE_DEVICE, &cd) < 0)
		return -errno;
	return flags & KVM_CREATE_DEVICE_TEST ? 0 : (int)cd.fd;
}

unsigned a64_gic_probe(int vm_fd)
{
	unsigned v = 0;

	if (!create(vm_fd, KVM_DEV_TYPE_ARM_VGIC_V3, KVM_CREATE_DEVICE_TEST))
		v |= 1u << 3;
	if (!create(vm_fd, KVM_DEV_TYPE_ARM_VGIC_V2, KVM_CREATE_DEVICE_TEST))
		v |= 1u << 2;
	return v;
}

static int setup_v3(struct a64_vm *av, char *err, size_t errlen)
{
	uint64_t dist = A64_GIC_DIST_BASE, redist = A64_GICV3_REDIST_BASE;
	int ret;

	/* Redistributors: one contiguous run of 128 KiB frames, one per vCPU
	 * in vCPU-id order; KVM sizes it from the vCPU count at init. */
	ret = set_attr(av->gic_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_DIST, &dist);
	if (!ret)
		ret = set_attr(av->gic_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_REDIST,
			       &redist);
	if (ret)
		snprintf(err, errlen, "GICv3: setting its addresses: %s", strerror(-ret));
	return ret;
}

static int setup_v2(struct a64_vm *av, char *err, size_t errlen)
{
	uint64_t dist = A64_GIC_DIST_BASE, cpu = A64_GICV2_CPU_BASE;
	int ret;

	ret = set_attr(av->gic_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V2_ADDR_TYPE_DIST, &dist);
	if (!ret)
		ret = set_attr(av->gic_fd, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V2_ADDR_TYPE_CPU, &cpu);
	if (ret)
		snprintf(err, errlen, "GICv2: setting its addresses: %s", strerror(-ret));
	return ret;
}

int a64_gic_create(struct a64_vm *av, unsigned n_vcpus, char *err, size_t errlen)
{
	int vm_fd = av->vm->vm_fd, fd, e3;
	uint32_t nr = A64_NR_IRQS;
	int ret;

	/* GICv3 first: no 8-CPU limit, and system-register CPU interface. A
	 * host without it (a GICv2 machine) answers ENODEV. */
	fd = a64_gicv3_fits(n_vcpus) ? create(vm_fd, KVM_DEV_TYPE_ARM_VGIC_V3, 0) : -E2BIG;
	e3 = fd;
	if (fd >= 0) {
		av->gic_fd = fd;
		av->gic_version = 3;
		ret = setup_v3(av, err, errlen);
	} else {
		if (n_vcpus > A64_GICV2_MAX_CPUS) {
			snprintf(err, errlen,
				 "this host's KVM cannot create a GICv3 (%s) and a GICv2 serves at most %d vCPUs; machine.vcpus is %u",
				 strerror(-e3), A64_GICV2_MAX_CPUS, n_vcpus);
			return -EINVAL;
		}
		fd = create(vm_fd, KVM_DEV_TYPE_ARM_VGIC_V2, 0);
		if (fd < 0) {
			snprintf(err, errlen,
				 "KVM_CREATE_DEVICE: this host's KVM can create neither a GICv3 (%s) nor a GICv2 (%s)",
				 strerror(-e3), strerror(-fd));
			return fd;
		}
		av->gic_fd = fd;
		av->gic_version = 2;
		ret = setup_v2(av, err, errlen);
	}
	if (ret)
		return ret;
	/* Private interrupts included; a multiple of 32. */
	ret = set_attr(av->gic_fd, KVM_DEV_ARM_VGIC_GRP_NR_IRQS, 0, &nr);
	if (ret)
		snprintf(err, errlen, "GICv%u: setting %u interrupts: %s", av->gic_version, nr,
			 strerror(-ret));
	return ret;
}

int a64_gic_init(struct a64_vm *av, char *err, size_t errlen)
{
	int ret;

	if (av->gic_ready)
		return 0;
	ret = set_attr(av->gic_fd, KVM_DEV_ARM_VGIC_GRP_CTRL, KVM_DEV_ARM_VGIC_CTRL_INIT, NULL);
	if (ret) {
		snprintf(err, errlen, "GICv%u: KVM_DEV_ARM_VGIC_CTRL_INIT: %s", av->gic_version,
			 strerror(-ret));
		return ret;
	}
	av->gic_ready = true;
	return 0;
}

void a64_gic_destroy(struct a64_vm *av)
{
	if (av->gic_fd >= 0)
		close(av->gic_fd);
	av->gic_fd = -1;
}
