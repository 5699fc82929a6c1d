/* SPDX-License-Identifier: Apache-2.0 */
/* arm64 machine and vCPU state for snapshots (arch.h): every register
 * KVM lists for each vCPU (core, FP/SIMD, system, timer, PSCI firmware
 * registers), its MP state, and the GICv3's distributor, redistributors,
 * CPU interfaces and line levels. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "a64.h"
#include "arch.h"
#include "cnode.h"
#include "snap/genid.h"
#include "snap/state.h"

#define V1 SNAP_VER(1, 0)
#define REG_MAX_BYTES 256 /* an SVE Z register (2048 bits), the largest */

/* ---- vCPUs: every one-reg, as [u64 id][value, padded to 8 bytes]... ---- */

static size_t reg_bytes(uint64_t id)
{
	return (size_t)1 << ((id & KVM_REG_SIZE_MASK) >> KVM_REG_SIZE_SHIFT);
}

static int save_vcpu(struct vcpu *v, struct snap_w *w, char *err, size_t errlen)
{
	struct kvm_reg_list probe = { .n = 0 }, *list;
	struct kvm_mp_state mp;
	uint8_t *buf = NULL;
	size_t len = 0;
	int ret = 0;

	if (ioctl(v->fd, KVM_GET_REG_LIST, &probe) < 0 && errno != E2BIG)
		return errf(err, errlen, -errno, "vCPU %u: KVM_GET_REG_LIST: %s", v->id,
			    strerror(errno));
	list = calloc(1, sizeof(*list) + probe.n * sizeof(list->reg[0]));
	buf = malloc((size_t)probe.n * (8 + REG_MAX_BYTES));
	if (!list || !buf) {
		free(list);
		free(buf);
		return errf(err, errlen, -ENOMEM, "out of memory");
	}
	list->n = probe.n;
	if (ioctl(v->fd, KVM_GET_REG_LIST, list) < 0) {
		ret = errf(err, errlen, -errno, "vCPU %u: KVM_GET_REG_LIST: %s", v->id,
			   strerror(errno));
		goto out;
	}
	for (uint64_t i = 0; i < list->n; i++) {
		uint64_t id = list->reg[i];
		size_t n = reg_bytes(id);
		struct kvm_one_reg r = { .id = id, .addr = (uintptr_t)(buf + len + 8) };

		if (n > REG_MAX_BYTES) {
			ret = errf(err, errlen, -EINVAL, "vCPU %u: register 0x%" PRIx64 " has %zu bytes",
				   v->id, id, n);
			goto out;
		}
		memcpy(buf + len, &id, 8);
		memset(buf + len + 8, 0, (n + 7) & ~(size_t)7);
		if (ioctl(v->fd, KVM_GET_ONE_REG, &r) < 0) {
			ret = errf(err, errlen, -errno, "vCPU %u: reading register 0x%" PRIx64 ": %s",
				   v->id, id, strerror(errno));
			goto out;
		}
		len += 8 + ((n + 7) & ~(size_t)7);
	}
	if (ioctl(v->fd, KVM_GET_MP_STATE, &mp) < 0) {
		ret = errf(err, errlen, -errno, "vCPU %u: KVM_GET_MP_STATE: %s", v->id,
			   strerror(errno));
		goto out;
	}
	snap_w_put(w, SNAP_K_VCPU, "one-regs", v->id, V1, buf, len);
	snap_w_put(w, SNAP_K_VCPU, "mpstate", v->id, V1, &mp, sizeof(mp));
	if (w->err)
		ret = errf(err, errlen, w->err, "state: %s", strerror(-w->err));
out:
	free(list);
	free(buf);
	return ret;
}

static int load_vcpu(struct vcpu *v, const struct snap_r *r, char *err, size_t errlen)
{
	const struct snap_sec *s = snap_r_find(r, SNAP_K_VCPU, "one-regs", v->id);
	const struct snap_sec *m = snap_r_find(r, SNAP_K_VCPU, "mpstate", v->id);
	struct kvm_mp_state mp;
	size_t off = 0;

	if (!s || !m || m->len != sizeof(mp))
		return errf(err, errlen, -EINVAL, "vCPU %u: its registers or MP state are missing",
			    v->id);
	while (off < s->len) {
		uint64_t id;
		size_t n;
		struct kvm_one_reg one;

		if (s->len - off < 8)
			return errf(err, errlen, -EINVAL, "vCPU %u: its register list is truncated",
				    v->id);
		memcpy(&id, s->data + off, 8);
		n = reg_bytes(id);
		if (n > REG_MAX_BYTES || s->len - off - 8 < ((n + 7) & ~(size_t)7))
			return errf(err, errlen, -EINVAL,
				    "vCPU %u: register 0x%" PRIx64 " is truncated or too large", v->id,
				    id);
		one = (struct kvm_one_reg){ .id = id, .addr = (uintptr_t)(s->data + off + 8) };
		if (ioctl(v->fd, KVM_SET_ONE_REG, &one) < 0)
			return errf(err, errlen, -errno,
				    "vCPU %u: KVM refused register 0x%" PRIx64 ": %s", v->id, id,
				    strerror(errno));
		off += 8 + ((n + 7) & ~(size_t)7);
	}
	memcpy(&mp, m->data, sizeof(mp));
	if (ioctl(v->fd, KVM_SET_MP_STATE, &mp) < 0)
		return errf(err, errlen, -errno, "vCPU %u: KVM refused its MP state %u: %s", v->id,
			    mp.mp_state, strerror(errno));
	return 0;
}

/* ---- the GICv3: a replay list of device attributes ----
 * Saved in the order a load writes them back (that of QEMU's and the
 * architecture's constraints: the distributor's control first, then each
 * redistributor, the distributor's SPIs, the CPU interfaces); each
 * set-register (ISENABLER, ISPENDR, ISACTIVER) is preceded by its clear
 * register written with all ones, so a rollback starts from nothing. */

struct gic_attr {
	uint32_t group, pad;
	uint64_t attr;
	uint64_t val;
};

struct gic_list {
	struct gic_attr *a;
	size_t n, cap;
};

#define GICD_CTLR       0x0000
#define GICD_IGROUPR    0x0080
#define GICD_ISENABLER  0x0100
#define GICD_ICENABLER  0x0180
#define GICD_ISPENDR    0x0200
#define GICD_ICPENDR    0x0280
#define GICD_ISACTIVER  0x0300
#define GICD_ICACTIVER  0x0380
#define GICD_IPRIORITYR 0x0400
#define GICD_ICFGR      0x0c00
#define GICD_IGRPMODR   0x0d00
#define GICD_IROUTER    0x6000
#define GICR_SGI        0x10000 /* the SGI frame: the private interrupts' registers */

/* ICC_*_EL1 as the vGIC's CPU_SYSREGS attribute: op0, op1, CRn, CRm, op2. */
#define ICC(op1, crn, crm, op2) \
	((3u << 14) | ((op1) << 11) | ((crn) << 7) | ((crm) << 3) | (op2))
#define ICC_SRE_EL1     ICC(0, 12, 12, 5)
#define ICC_CTLR_EL1    ICC(0, 12, 12, 4)
#define ICC_PMR_EL1     ICC(0, 4, 6, 0)
#define ICC_BPR0_EL1    ICC(0, 12, 8, 3)
#define ICC_BPR1_EL1    ICC(0, 12, 12, 3)
#define ICC_AP0R_EL1(n) ICC(0, 12, 8, 4 + (n))
#define ICC_AP1R_EL1(n) ICC(0, 12, 9, (n))
#define ICC_IGRPEN0_EL1 ICC(0, 12, 12, 6)
#define ICC_IGRPEN1_EL1 ICC(0, 12, 12, 7)

static int gic_get(int fd, uint32_t group, uint64_t attr, uint64_t *val)
{
	uint32_t v32 = 0;
	bool wide = group == KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS;
	struct kvm_device_attr a = { .group = group, .attr = attr,
				     .addr = wide ? (uintptr_t)val : (uintptr_t)&v32 };

	if (ioctl(fd, KVM_GET_DEVICE_ATTR, &a) < 0)
		return -errno;
	if (!wide)
		*val = v32;
	return 0;
}

static int gic_set(int fd, const struct gic_attr *g)
{
	uint32_t v32 = (uint32_t)g->val;
	uint64_t v64 = g->val;
	bool wide = g->group == KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS;
	struct kvm_device_attr a = { .group = g->group, .attr = g->attr,
				     .addr = wide ? (uintptr_t)&v64 : (uintptr_t)&v32 };

	return ioctl(fd, KVM_SET_DEVICE_ATTR, &a) < 0 ? -errno : 0;
}

static int push(struct gic_list *l, uint32_t group, uint64_t attr, uint64_t val)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 512;
		struct gic_attr *a = realloc(l->a, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		l->a = a;
		l->cap = cap;
	}
	l->a[l->n++] = (struct gic_attr){ .group = group, .attr = attr, .val = val };
	return 0;
}

/* Read @attr and push it (after @clear_attr = all ones when not 0). */
static int keep(struct gic_list *l, int fd, uint32_t group, uint64_t attr, uint64_t clear_attr,
		char *err, size_t errlen)
{
	uint64_t v = 0;
	int ret = gic_get(fd, group, attr, &v);

	if (ret)
		return errf(err, errlen, ret, "GICv3: reading group %u attribute 0x%" PRIx64 ": %s",
			    group, attr, strerror(-ret));
	if (clear_attr && push(l, group, clear_attr, 0xffffffffu))
		return errf(err, errlen, -ENOMEM, "out of memory");
	return push(l, group, attr, v) ? errf(err, errlen, -ENOMEM, "out of memory") : 0;
}

/* The redistributor / CPU interface selector of vCPU @i: its MPIDR's
 * affinity fields, Aff3.Aff2.Aff1.Aff0, in bits 63..32. */
static uint64_t mpidr_field(const struct a64_vm *av, unsigned i)
{
	uint64_t m = av->mpidr[i];

	return (((m >> 32) & 0xff) << 24 | (m & 0xffffff)) << 32;
}

static int gic_collect(struct a64_vm *av, unsigned n_vcpus, struct gic_list *l, char *err,
		       size_t errlen)
{
	const uint32_t D = KVM_DEV_ARM_VGIC_GRP_DIST_REGS, R = KVM_DEV_ARM_VGIC_GRP_REDIST_REGS,
		       C = KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS, L = KVM_DEV_ARM_VGIC_GRP_LEVEL_INFO;
	const unsigned nr = A64_NR_IRQS;
	int fd = av->gic_fd, ret;

	ret = keep(l, fd, D, GICD_CTLR, 0, err, errlen);
	for (unsigned c = 0; !ret && c < n_vcpus; c++) {
		uint64_t m = mpidr_field(av, c);

		ret = keep(l, fd, R, m | (GICR_SGI + GICD_IGROUPR), 0, err, errlen);
		ret = ret ?: keep(l, fd, R, m | (GICR_SGI + GICD_IGRPMODR), 0, err, errlen);
		ret = ret ?: keep(l, fd, R, m | (GICR_SGI + GICD_ICFGR), 0, err, errlen);
		ret = ret ?: keep(l, fd, R, m | (GICR_SGI + GICD_ICFGR + 4), 0, err, errlen);
		for (unsigned i = 0; !ret && i < 8; i++)
			ret = keep(l, fd, R, m | (GICR_SGI + GICD_IPRIORITYR + 4 * i), 0, err, errlen);
		ret = ret ?: keep(l, fd, R, m | (GICR_SGI + GICD_ISENABLER),
				  m | (GICR_SGI + GICD_ICENABLER), err, errlen);
		ret = ret ?: keep(l, fd, R, m | (GICR_SGI + GICD_ISPENDR),
				  m | (GICR_SGI + GICD_ICPENDR), err, errlen);
		ret = ret ?: keep(l, fd, R, m | (GICR_SGI + GICD_ISACTIVER),
				  m | (GICR_SGI + GICD_ICACTIVER), err, errlen);
	}
	/* The SPIs (32 and up): one bit, two bits, a byte or 8 bytes each. */
	for (unsigned i = 32; !ret && i < nr; i += 32) {
		ret = keep(l, fd, D, GICD_IGROUPR + i / 8, 0, err, errlen);
		ret = ret ?: keep(l, fd, D, GICD_IGRPMODR + i / 8, 0, err, errlen);
	}
	for (unsigned i = 32; !ret && i < nr; i++) {
		ret = keep(l, fd, D, GICD_IROUTER + 8ull * i, 0, err, errlen);
		ret = ret ?: keep(l, fd, D, GICD_IROUTER + 8ull * i + 4, 0, err, errlen);
	}
	for (unsigned i = 32; !ret && i < nr; i += 16)
		ret = keep(l, fd, D, GICD_ICFGR + i / 4, 0, err, errlen);
	for (unsigned i = 32; !ret && i < nr; i += 4)
		ret = keep(l, fd, D, GICD_IPRIORITYR + i, 0, err, errlen);
	for (unsigned i = 32; !ret && i < nr; i += 32) {
		/* (the line levels of SPIs: any vCPU's MPIDR names the VM) */
		ret = keep(l, fd, L, mpidr_field(av, 0) | (uint64_t)VGIC_LEVEL_INFO_LINE_LEVEL <<
					     KVM_DEV_ARM_VGIC_LINE_LEVEL_INFO_SHIFT | i, 0, err,
			   errlen);
		ret = ret ?: keep(l, fd, D, GICD_ISENABLER + i / 8, GICD_ICENABLER + i / 8, err,
				  errlen);
		ret = ret ?: keep(l, fd, D, GICD_ISPENDR + i / 8, GICD_ICPENDR + i / 8, err, errlen);
		ret = ret ?: keep(l, fd, D, GICD_ISACTIVER + i / 8, GICD_ICACTIVER + i / 8, err,
				  errlen);
	}
	for (unsigned c = 0; !ret && c < n_vcpus; c++) {
		static const uint32_t regs[] = { ICC_SRE_EL1, ICC_CTLR_EL1, ICC_PMR_EL1, ICC_BPR0_EL1,
						 ICC_BPR1_EL1 };
		uint64_t m = mpidr_field(av, c), v;

		for (unsigned i = 0; !ret && i < sizeof(regs) / sizeof(regs[0]); i++)
			ret = keep(l, fd, C, m | regs[i], 0, err, errlen);
		/* Active-priority registers: as many as the priority bits need;
		 * those KVM does not have read as errors and are left out. */
		for (unsigned i = 0; !ret && i < 4; i++) {
			if (!gic_get(fd, C, m | ICC_AP0R_EL1(i), &v) && push(l, C, m | ICC_AP0R_EL1(i), v))
				ret = errf(err, errlen, -ENOMEM, "out of memory");
			if (!gic_get(fd, C, m | ICC_AP1R_EL1(i), &v) && push(l, C, m | ICC_AP1R_EL1(i), v))
				ret = errf(err, errlen, -ENOMEM, "out of memory");
		}
		ret = ret ?: keep(l, fd, C, m | ICC_IGRPEN0_EL1, 0, err, errlen);
		ret = ret ?: keep(l, fd, C, m | ICC_IGRPEN1_EL1, 0, err, errlen);
	}
	return ret;
}

static const uint32_t gic_groups[] = { KVM_DEV_ARM_VGIC_GRP_DIST_REGS,
				       KVM_DEV_ARM_VGIC_GRP_REDIST_REGS,
				       KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS,
				       KVM_DEV_ARM_VGIC_GRP_LEVEL_INFO };

int arch_snap_save(struct vm *vm, struct snap_w *w, char *err, size_t errlen)
{
	struct a64_vm *av = a64_of(vm);
	struct gic_list l = { 0 };
	int ret;

	if (av->gic_version != 3)
		return errf(err, errlen, -ENOTSUP,
			    "snapshots of a VM with a GICv2 are not built (this host's KVM made one; GICv3 hosts can)");
	if (!av->gic_ready || vm->n_vcpus > av->n_mpidr)
		return errf(err, errlen, -EINVAL, "the VM's interrupt controller is not set up");
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		ret = save_vcpu(&vm->vcpus[i], w, err, errlen);
		if (ret)
			return ret;
	}
	ret = gic_collect(av, vm->n_vcpus, &l, err, errlen);
	if (!ret && (ret = snap_w_put(w, SNAP_K_MACHINE, "gicv3", 0, V1, l.a,
				      l.n * sizeof(*l.a))))
		errf(err, errlen, ret, "state: %s", strerror(-ret));
	if (!ret && (ret = genid_save(w, av->vmgenid_gpa)))
		errf(err, errlen, ret, "state: %s", strerror(-ret));
	free(l.a);
	return ret;
}

/* Restored or rolled back: a new VM generation ID, and the edge on its SPI
 * that makes the guest's driver re-read it and reseed its RNG. */
static int new_generation(struct vm *vm, const struct snap_r *r, char *err, size_t errlen)
{
	struct a64_vm *av = a64_of(vm);
	int ret = genid_renew(&vm->mem, r, &av->vmgenid_gpa, err, errlen);

	if (!ret && av->vmgenid_gpa) {
		irq_line(vm, A64_SPI_VMGENID, true);
		irq_line(vm, A64_SPI_VMGENID, false);
	}
	return ret;
}

int arch_snap_load(struct vm *vm, const struct snap_r *r, char *err, size_t errlen)
{
	struct a64_vm *av = a64_of(vm);
	const struct snap_sec *s = snap_r_find(r, SNAP_K_MACHINE, "gicv3", 0);
	size_t n;
	int ret;

	if (snap_r_find(r, SNAP_K_VCPU, "one-regs", vm->n_vcpus))
		return errf(err, errlen, -EINVAL, "it has more vCPUs than this VM's %u", vm->n_vcpus);
	if (!s || s->len % sizeof(struct gic_attr))
		return errf(err, errlen, -EINVAL, "its GICv3 state is missing or truncated");
	if (av->gic_version != 3 || !av->gic_ready)
		return errf(err, errlen, -ENOTSUP,
			    "the snapshot's VM had a GICv3; this one has a GICv%u", av->gic_version);
	/* vCPUs first: a redistributor is found by its vCPU's MPIDR. */
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		ret = load_vcpu(&vm->vcpus[i], r, err, errlen);
		if (ret)
			return ret;
	}
	n = s->len / sizeof(struct gic_attr);
	for (size_t i = 0; i < n; i++) {
		struct gic_attr g;
		bool known = false;

		memcpy(&g, s->data + i * sizeof(g), sizeof(g));
		for (unsigned k = 0; k < sizeof(gic_groups) / sizeof(gic_groups[0]); k++)
			known |= g.group == gic_groups[k];
		if (!known)
			return errf(err, errlen, -EINVAL, "GICv3 state: entry %zu: group %u", i,
				    g.group);
		ret = gic_set(av->gic_fd, &g);
		if (ret)
			return errf(err, errlen, ret,
				    "GICv3: KVM refused group %u attribute 0x%" PRIx64 " = 0x%" PRIx64 ": %s",
				    g.group, g.attr, g.val, strerror(-ret));
	}
	return new_generation(vm, r, err, errlen);
}
