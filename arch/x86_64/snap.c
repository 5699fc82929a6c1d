/* SPDX-License-Identifier: Apache-2.0 */
/* x86 snapshot state: the in-kernel PIC, IOAPIC and PIT (or cubicle's own
 * IOAPIC of a split irqchip), the platform
 * devices, the guest's clock, and each vCPU's registers, FPU/XSAVE, XCRs,
 * MSRs (every one KVM lists, kvmclock's and the TSC among them), LAPIC,
 * pending events, debug registers and MP state, as KVM's own structs. */
#include <cpuid.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "arch.h"
#include "cnode.h"
#include "snap/genid.h"
#include "snap/state.h"
#include "x86.h"

#define MSR_IA32_TSC 0x10
#define MSRS_MAX 1024 /* KVM lists a few dozen to a few hundred */
#define V1 SNAP_VER(1, 0)

void arch_cpu_id(char *buf, size_t len)
{
	unsigned a, b, c, d, fam, model;
	char vendor[13];

	if (!__get_cpuid(0, &a, &b, &c, &d)) {
		snprintf(buf, len, "unknown");
		return;
	}
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = '\0';
	__get_cpuid(1, &a, &b, &c, &d);
	fam = (a >> 8) & 0xf;
	model = (a >> 4) & 0xf;
	if (fam == 0xf)
		fam += (a >> 20) & 0xff;
	if (fam >= 6)
		model |= ((a >> 16) & 0xf) << 4;
	snprintf(buf, len, "%s family %u model %u", vendor, fam, model);
}

/* One vCPU state struct: its section name, size, and get/set ioctls. */
struct vstate {
	const char *name;
	size_t size;
	unsigned long get, set;
	long cap; /* KVM_CAP_* it needs, 0: always there */
};

/* In the order a restore sets them (the LAPIC before the MSRs: the TSC
 * deadline lives in both; events last). */
static const struct vstate vstates[] = {
	{ "mpstate", sizeof(struct kvm_mp_state), KVM_GET_MP_STATE, KVM_SET_MP_STATE, 0 },
	{ "regs", sizeof(struct kvm_regs), KVM_GET_REGS, KVM_SET_REGS, 0 },
	{ "sregs", sizeof(struct kvm_sregs), KVM_GET_SREGS, KVM_SET_SREGS, 0 },
	{ "xsave", sizeof(struct kvm_xsave), KVM_GET_XSAVE, KVM_SET_XSAVE, KVM_CAP_XSAVE },
	{ "fpu", sizeof(struct kvm_fpu), KVM_GET_FPU, KVM_SET_FPU, -KVM_CAP_XSAVE },
	{ "xcrs", sizeof(struct kvm_xcrs), KVM_GET_XCRS, KVM_SET_XCRS, KVM_CAP_XCRS },
	{ "debugregs", sizeof(struct kvm_debugregs), KVM_GET_DEBUGREGS, KVM_SET_DEBUGREGS,
	  KVM_CAP_DEBUGREGS },
	{ "lapic", sizeof(struct kvm_lapic_state), KVM_GET_LAPIC, KVM_SET_LAPIC, 0 },
	{ "events", sizeof(struct kvm_vcpu_events), KVM_GET_VCPU_EVENTS, KVM_SET_VCPU_EVENTS,
	  KVM_CAP_VCPU_EVENTS },
};

/* Is this state part of this host's snapshots? A negative cap: only
 * without that capability (the legacy FPU without XSAVE). */
static bool vstate_here(const struct vm *vm, const struct vstate *s)
{
	if (!s->cap)
		return true;
	if (s->cap < 0)
		return ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, -s->cap) <= 0;
	return ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, s->cap) > 0;
}

/* The MSRs KVM saves and restores (KVM_GET_MSR_INDEX_LIST). */
static struct kvm_msrs *msr_list(const struct vm *vm)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *l;
	struct kvm_msrs *m;

	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) == 0 || errno != E2BIG ||
	    !probe.nmsrs || probe.nmsrs > MSRS_MAX)
		return NULL;
	l = calloc(1, sizeof(*l) + probe.nmsrs * sizeof(l->indices[0]));
	m = calloc(1, sizeof(*m) + probe.nmsrs * sizeof(m->entries[0]));
	if (!l || !m || (l->nmsrs = probe.nmsrs, ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, l) < 0)) {
		free(l);
		free(m);
		return NULL;
	}
	m->nmsrs = l->nmsrs;
	for (unsigned i = 0; i < l->nmsrs; i++)
		m->entries[i].index = l->indices[i];
	free(l);
	return m;
}

/* Read every listed MSR KVM will give; one it refuses is dropped (KVM
 * stops at the first, and returns how many it read). */
static int msrs_get(struct vcpu *v, struct kvm_msrs *m)
{
	for (;;) {
		int n = ioctl(v->fd, KVM_GET_MSRS, m);

		if (n < 0)
			return -errno;
		if ((unsigned)n >= m->nmsrs)
			return 0;
		memmove(&m->entries[n], &m->entries[n + 1],
			(m->nmsrs - n - 1) * sizeof(m->entries[0]));
		m->nmsrs--;
	}
}

static int save_vcpu(struct vcpu *v, struct kvm_msrs *m, unsigned n_msrs, uint64_t tsc,
		     struct snap_w *w, char *err, size_t errlen)
{
	union {
		struct kvm_regs regs;
		struct kvm_sregs sregs;
		struct kvm_xsave xsave;
		struct kvm_fpu fpu;
		struct kvm_xcrs xcrs;
		struct kvm_lapic_state lapic;
		struct kvm_vcpu_events ev;
		struct kvm_debugregs dr;
		struct kvm_mp_state mp;
	} u;
	int ret;

	for (unsigned i = 0; i < sizeof(vstates) / sizeof(vstates[0]); i++) {
		const struct vstate *s = &vstates[i];

		if (!vstate_here(v->vm, s))
			continue;
		memset(&u, 0, sizeof(u));
		if (ioctl(v->fd, s->get, &u) < 0)
			return errf(err, errlen, -errno, "vCPU %u: reading %s: %s", v->id, s->name,
				    strerror(errno));
		ret = snap_w_put(w, SNAP_K_VCPU, s->name, v->id, V1, &u, s->size);
		if (ret)
			return errf(err, errlen, ret, "state: %s", strerror(-ret));
	}
	m->nmsrs = n_msrs;
	ret = msrs_get(v, m);
	if (ret)
		return errf(err, errlen, ret, "vCPU %u: KVM_GET_MSRS: %s", v->id, strerror(-ret));
	/* The TSC as it was at the pause, as for the clock. */
	for (unsigned i = 0; i < m->nmsrs; i++)
		if (m->entries[i].index == MSR_IA32_TSC)
			m->entries[i].data = tsc;
	ret = snap_w_put(w, SNAP_K_VCPU, "msrs", v->id, V1, m->entries,
			 m->nmsrs * sizeof(m->entries[0]));
	return ret ? errf(err, errlen, ret, "state: %s", strerror(-ret)) : 0;
}

/* The i8042, CMOS and PM registers: fixed-width fields, little-endian. */
struct platform_state {
	uint8_t ctr, outport, out, out_full, out_aux, pending, last_cmd, cmos_index;
	uint8_t cmos[128];
	uint16_t pm_enable, pm_control;
	uint16_t gpe_sts, gpe_en; /* 0 in snapshots made before GPE0 existed */
};

static void platform_save(struct x86_vm *xv, struct platform_state *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_lock(&xv->i8042.lock);
	p->ctr = xv->i8042.ctr, p->outport = xv->i8042.outport, p->out = xv->i8042.out;
	p->out_full = xv->i8042.out_full, p->out_aux = xv->i8042.out_aux;
	p->pending = xv->i8042.pending, p->last_cmd = xv->i8042.last_cmd;
	pthread_mutex_unlock(&xv->i8042.lock);
	pthread_mutex_lock(&xv->cmos.lock);
	p->cmos_index = xv->cmos.index;
	memcpy(p->cmos, xv->cmos.ram, sizeof(p->cmos));
	pthread_mutex_unlock(&xv->cmos.lock);
	pthread_mutex_lock(&xv->pm.lock);
	p->pm_enable = xv->pm.enable, p->pm_control = xv->pm.control;
	p->gpe_sts = xv->pm.gpe_sts, p->gpe_en = xv->pm.gpe_en;
	pthread_mutex_unlock(&xv->pm.lock);
}

static int platform_load(struct x86_vm *xv, const struct platform_state *p, char *err,
			 size_t errlen)
{
	if (p->out_full > 1 || p->out_aux > 1 || p->last_cmd > 1 || p->cmos_index > 127)
		return errf(err, errlen, -EINVAL, "platform: a flag or the CMOS index is out of range");
	pthread_mutex_lock(&xv->i8042.lock);
	xv->i8042.ctr = p->ctr, xv->i8042.outport = p->outport, xv->i8042.out = p->out;
	xv->i8042.out_full = p->out_full, xv->i8042.out_aux = p->out_aux;
	xv->i8042.pending = p->pending, xv->i8042.last_cmd = p->last_cmd;
	pthread_mutex_unlock(&xv->i8042.lock);
	pthread_mutex_lock(&xv->cmos.lock);
	xv->cmos.index = p->cmos_index;
	memcpy(xv->cmos.ram, p->cmos, sizeof(p->cmos));
	pthread_mutex_unlock(&xv->cmos.lock);
	pthread_mutex_lock(&xv->pm.lock);
	xv->pm.enable = p->pm_enable, xv->pm.control = p->pm_control;
	xv->pm.gpe_sts = p->gpe_sts, xv->pm.gpe_en = p->gpe_en;
	pthread_mutex_unlock(&xv->pm.lock);
	return 0;
}

static const uint32_t chips[] = { KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE,
				  KVM_IRQCHIP_IOAPIC };
static const char *const chip_names[] = { "pic0", "pic1", "ioapic" };

int arch_snap_save(struct vm *vm, struct snap_w *w, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	struct kvm_pit_state2 pit;
	struct platform_state ps;
	struct kvm_msrs *m;
	unsigned n_msrs;
	int ret;

	if (!xv->pause_tsc)
		return errf(err, errlen, -EINVAL, "the VM is not paused");
	if (xv->split) { /* machine.irqchip = "split": the IOAPIC is ours */
		struct x86_ioapic_state st;

		x86_ioapic_get(&xv->ioapic, &st);
		ret = snap_w_put(w, SNAP_K_MACHINE, "ioapic-user", 0, V1, &st, sizeof(st));
		if (ret)
			return errf(err, errlen, ret, "state: %s", strerror(-ret));
	}
	for (unsigned i = 0; i < 3 && !xv->split; i++) {
		struct kvm_irqchip c = { .chip_id = chips[i] };

		if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &c) < 0)
			return errf(err, errlen, -errno, "reading the %s: %s", chip_names[i],
				    strerror(errno));
		ret = snap_w_put(w, SNAP_K_MACHINE, chip_names[i], 0, V1, &c, sizeof(c));
		if (ret)
			return errf(err, errlen, ret, "state: %s", strerror(-ret));
	}
	memset(&pit, 0, sizeof(pit));
	if (!vm->cfg->no_pit && ioctl(vm->vm_fd, KVM_GET_PIT2, &pit) < 0)
		return errf(err, errlen, -errno, "reading the PIT: %s", strerror(errno));
	platform_save(xv, &ps);
	if (!vm->cfg->no_pit) /* (machine.pit = false: the config says so, no record) */
		snap_w_put(w, SNAP_K_MACHINE, "pit2", 0, V1, &pit, sizeof(pit));
	snap_w_put(w, SNAP_K_MACHINE, "platform", 0, V1, &ps, sizeof(ps));
	snap_w_put(w, SNAP_K_MACHINE, "clock", 0, V1, &xv->pause_clock, sizeof(xv->pause_clock));
	genid_save(w, xv->vmgenid_gpa);
	if (w->err)
		return errf(err, errlen, w->err, "state: %s", strerror(-w->err));
	m = msr_list(vm);
	if (!m)
		return errf(err, errlen, -EIO, "KVM_GET_MSR_INDEX_LIST failed");
	n_msrs = m->nmsrs;
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		ret = save_vcpu(&vm->vcpus[i], m, n_msrs, xv->pause_tsc[i], w, err, errlen);
		if (ret)
			break;
	}
	free(m);
	return ret;
}

/* The section (kind, name, inst) of exactly @size bytes, or NULL with err. */
static const void *need(const struct snap_r *r, enum snap_kind k, const char *name, uint32_t inst,
			size_t size, char *err, size_t errlen)
{
	const struct snap_sec *s = snap_r_find(r, k, name, inst);

	if (!s) {
		if (k == SNAP_K_VCPU)
			snprintf(err, errlen, "vCPU %u: no '%s' section", inst, name);
		else
			snprintf(err, errlen, "no '%s' section", name);
		return NULL;
	}
	if (SNAP_VER_MAJOR(s->ver) != 1 || s->len != size) {
		errf(err, errlen, -EINVAL, "%s %u: version %u.%u, %zu bytes; expected 1.x, %zu bytes",
		     name, inst, SNAP_VER_MAJOR(s->ver), SNAP_VER_MINOR(s->ver), s->len, size);
		return NULL;
	}
	return s->data;
}

static int load_vcpu(struct vcpu *v, const struct snap_r *r, uint64_t *tsc, char *err,
		     size_t errlen)
{
	const struct snap_sec *ms;
	struct kvm_msrs *m;
	size_t n;
	int ret;

	for (unsigned i = 0; i < sizeof(vstates) / sizeof(vstates[0]); i++) {
		const struct vstate *s = &vstates[i];
		const void *d;
		void *copy;

		if (!vstate_here(v->vm, s))
			continue;
		d = need(r, SNAP_K_VCPU, s->name, v->id, s->size, err, errlen);
		if (!d)
			return -EINVAL;
		/* KVM's structs want their own alignment; the file gives 8. */
		copy = malloc(s->size);
		if (!copy)
			return errf(err, errlen, -ENOMEM, "out of memory");
		memcpy(copy, d, s->size);
		ret = ioctl(v->fd, s->set, copy) < 0 ? -errno : 0;
		free(copy);
		if (ret)
			return errf(err, errlen, ret, "vCPU %u: KVM refused its %s: %s", v->id, s->name,
				    strerror(-ret));
		if (!strcmp(s->name, "lapic")) { /* the MSRs come right after the LAPIC */
			ms = snap_r_find(r, SNAP_K_VCPU, "msrs", v->id);
			if (!ms || ms->len % sizeof(struct kvm_msr_entry) ||
			    ms->len / sizeof(struct kvm_msr_entry) > MSRS_MAX)
				return errf(err, errlen, -EINVAL, "vCPU %u: msrs: missing or bad length",
					    v->id);
			n = ms->len / sizeof(struct kvm_msr_entry);
			m = calloc(1, sizeof(*m) + ms->len);
			if (!m)
				return errf(err, errlen, -ENOMEM, "out of memory");
			m->nmsrs = (uint32_t)n;
			memcpy(m->entries, ms->data, ms->len);
			for (size_t j = 0; j < n; j++) {
				m->entries[j].reserved = 0;
				if (m->entries[j].index == MSR_IA32_TSC)
					*tsc = m->entries[j].data;
			}
			ret = ioctl(v->fd, KVM_SET_MSRS, m);
			if (ret >= 0 && (size_t)ret < n)
				ret = errf(err, errlen, -EINVAL, "vCPU %u: KVM refused MSR 0x%x (value 0x%llx)",
					   v->id, m->entries[ret].index,
					   (unsigned long long)m->entries[ret].data);
			else if (ret < 0)
				ret = errf(err, errlen, -errno, "vCPU %u: KVM_SET_MSRS: %s", v->id,
					   strerror(errno));
			else
				ret = 0;
			free(m);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * Restored or rolled back, the guest runs a second time from one instant:
 * a clone among many. Its VM generation ID (when its tables have one) gets
 * new random bytes and the GPE that makes the guest's driver re-read them
 * and reseed its RNG is raised; the SCI follows the loaded GPE registers.
 */
static int new_generation(struct vm *vm, const struct snap_r *r, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	int ret = genid_renew(&vm->mem, r, &xv->vmgenid_gpa, err, errlen);

	if (ret)
		return ret;
	if (xv->vmgenid_gpa)
		x86_gpe_raise(xv, X86_GPE_VMGENID);
	else
		x86_gpe_sync(xv);
	return 0;
}

int arch_snap_load(struct vm *vm, const struct snap_r *r, char *err, size_t errlen)
{
	struct x86_vm *xv = x86_of(vm);
	struct kvm_pit_state2 pit;
	struct platform_state ps;
	const void *d;
	int ret;

	if (snap_r_find(r, SNAP_K_VCPU, "regs", vm->n_vcpus))
		return errf(err, errlen, -EINVAL, "it has more vCPUs than this VM's %u", vm->n_vcpus);
	if (!xv->pause_tsc)
		xv->pause_tsc = calloc(vm->n_vcpus, sizeof(*xv->pause_tsc));
	if (!xv->pause_tsc)
		return errf(err, errlen, -ENOMEM, "out of memory");
	if (xv->split != (snap_r_find(r, SNAP_K_MACHINE, "ioapic-user", 0) != NULL))
		return errf(err, errlen, -EINVAL, xv->split ?
			    "the snapshot's VM has KVM's PIC and IOAPIC (machine.irqchip = \"kernel\") and this restore asks for \"split\": restore it with its irqchip" :
			    "the snapshot's VM has a split irqchip (machine.irqchip = \"split\") and this restore asks for KVM's PIC and IOAPIC: restore it with its irqchip");
	if (xv->split) {
		struct x86_ioapic_state st;

		d = need(r, SNAP_K_MACHINE, "ioapic-user", 0, sizeof(st), err, errlen);
		if (!d)
			return -EINVAL;
		memcpy(&st, d, sizeof(st));
		ret = x86_ioapic_set(&xv->ioapic, &st, err, errlen);
		if (ret)
			return ret;
	}
	for (unsigned i = 0; i < 3 && !xv->split; i++) {
		struct kvm_irqchip c;

		d = need(r, SNAP_K_MACHINE, chip_names[i], 0, sizeof(c), err, errlen);
		if (!d)
			return -EINVAL;
		memcpy(&c, d, sizeof(c));
		if (c.chip_id != chips[i])
			return errf(err, errlen, -EINVAL, "%s: chip id %u, expected %u", chip_names[i],
				    c.chip_id, chips[i]);
		if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &c) < 0)
			return errf(err, errlen, -errno, "KVM refused the %s: %s", chip_names[i],
				    strerror(errno));
	}
	if (vm->cfg->no_pit) {
		if (snap_r_find(r, SNAP_K_MACHINE, "pit2", 0))
			return errf(err, errlen, -EINVAL,
				    "the snapshot's VM has a PIT and machine.pit is false: restore it with its PIT");
	} else {
		if (!snap_r_find(r, SNAP_K_MACHINE, "pit2", 0))
			return errf(err, errlen, -EINVAL,
				    "the snapshot's VM has no PIT (machine.pit = false) and this restore asks for one");
		d = need(r, SNAP_K_MACHINE, "pit2", 0, sizeof(pit), err, errlen);
		if (!d)
			return -EINVAL;
		memcpy(&pit, d, sizeof(pit));
		if (ioctl(vm->vm_fd, KVM_SET_PIT2, &pit) < 0)
			return errf(err, errlen, -errno, "KVM refused the PIT: %s", strerror(errno));
	}
	d = need(r, SNAP_K_MACHINE, "platform", 0, sizeof(ps), err, errlen);
	if (!d)
		return -EINVAL;
	memcpy(&ps, d, sizeof(ps));
	ret = platform_load(xv, &ps, err, errlen);
	if (ret)
		return ret;
	d = need(r, SNAP_K_MACHINE, "clock", 0, sizeof(xv->pause_clock), err, errlen);
	if (!d)
		return -EINVAL;
	memcpy(&xv->pause_clock, d, sizeof(xv->pause_clock));
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		ret = load_vcpu(&vm->vcpus[i], r, &xv->pause_tsc[i], err, errlen);
		if (ret)
			return ret;
	}
	return new_generation(vm, r, err, errlen);
}
