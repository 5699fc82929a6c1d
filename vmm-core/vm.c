/* SPDX-License-Identifier: Apache-2.0 */
/* One VM: open KVM, create the VM and its RAM, own the vCPUs and the exit
 * request every thread may raise. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "cnode.h"
#include "plan.h"
#include "log.h"
#include "uffd.h"
#include "vm.h"

static int kvm_preopened = -1;

static int open_kvm(char *err, size_t errlen)
{
	int fd = kvm_preopened >= 0 ? fcntl(kvm_preopened, F_DUPFD_CLOEXEC, 0)
				    : open("/dev/kvm", O_RDWR | O_CLOEXEC);
	int ver;

	if (fd < 0) {
		int e = errno;

		if (e == ENOENT && !access("/sys/module/kvm_pvm", F_OK))
			snprintf(err, errlen,
				 "/dev/kvm: not found: the kvm_pvm module is loaded but made none (it does not bind where this kernel is itself a PVM guest); run cubicle where KVM is, e.g. in the nested harness (tests/e2e/nested/run-nested.sh, scripts/quickstart.sh)");
		else if (e == ENOENT)
			snprintf(err, errlen,
				 "/dev/kvm: not found: this host has no KVM (enable virtualization and load kvm_intel or kvm_amd)");
		else if (e == EACCES)
			snprintf(err, errlen,
				 "/dev/kvm: permission denied: add this user to the 'kvm' group");
		else
			snprintf(err, errlen, "/dev/kvm: %s", strerror(e));
		return -e;
	}
	ver = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (ver != KVM_API_VERSION) {
		snprintf(err, errlen, "/dev/kvm: KVM API version %d, cubicle needs %d", ver,
			 KVM_API_VERSION);
		close(fd);
		return -ENOTSUP;
	}
	if (ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_USER_MEMORY) <= 0) {
		snprintf(err, errlen, "/dev/kvm: KVM_CAP_USER_MEMORY missing");
		close(fd);
		return -ENOTSUP;
	}
	return fd;
}

int vm_kvm_preopen(char *err, size_t errlen)
{
	int fd = open_kvm(err, errlen);

	if (fd < 0)
		return fd;
	if (kvm_preopened >= 0)
		close(kvm_preopened);
	kvm_preopened = fd;
	return 0;
}

void vm_kvm_preload(void)
{
	if (kvm_preopened >= 0)
		arch_preload(kvm_preopened);
}

void vm_kvm_prefetch(void)
{
	char err[256];

	if (kvm_preopened < 0 && vm_kvm_preopen(err, sizeof(err)))
		return; /* vm_create says why */
	arch_prefetch(kvm_preopened);
}

/* RAM: a new memfd, or (ram_fd >= 0, which this takes) a private mapping
 * of a snapshot's memory file. */
static int map_ram(struct vm *vm, int ram_fd, char *err, size_t errlen)
{
	struct mem_bank banks[MEM_MAX_BANKS];
	uint64_t size = vm->cfg->memory_mib << 20;
	int n = arch_mem_layout(size, banks, MEM_MAX_BANKS);
	int ret;

	if (n <= 0) {
		if (ram_fd >= 0)
			close(ram_fd);
		snprintf(err, errlen, "%s: machine.memory_mib = %" PRIu64 " cannot be laid out on %s",
			 vm->cfg->path, vm->cfg->memory_mib, arch_name);
		return n < 0 ? n : -EINVAL;
	}
	if (ram_fd >= 0)
		ret = mem_create_file(&vm->mem, ram_fd, size, banks, (unsigned)n);
	else if (vm->cfg->thp)
		ret = mem_create_thp(&vm->mem, size, banks, (unsigned)n);
	else
		ret = mem_create(&vm->mem, size, banks, (unsigned)n);
	if (ret) {
		snprintf(err, errlen, "guest RAM (%" PRIu64 " MiB): %s", vm->cfg->memory_mib,
			 strerror(-ret));
		return ret;
	}
	for (unsigned i = 0; i < vm->mem.n_banks; i++) {
		const struct mem_bank *b = &vm->mem.bank[i];
		struct kvm_userspace_memory_region r = {
			.slot = i,
			.flags = vm->cfg->track_dirty ? KVM_MEM_LOG_DIRTY_PAGES : 0,
			.guest_phys_addr = b->gpa,
			.memory_size = b->size,
			.userspace_addr = (uintptr_t)(vm->mem.host + b->off),
		};

		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
			ret = -errno;
			snprintf(err, errlen, "KVM_SET_USER_MEMORY_REGION 0x%" PRIx64 "+0x%" PRIx64 ": %s",
				 b->gpa, b->size, strerror(errno));
			return ret;
		}
	}
	return 0;
}

static int create(struct vm *vm, const struct plan *cfg, int ram_fd, bool uffd, char *err,
		  size_t errlen)
{
	int ret;

	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->vm_fd = -1;
	vm->mem.fd = -1;
	vm->cfg = cfg;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->cond, NULL);
	bus_init(&vm->pio, "pio");
	bus_init(&vm->mmio, "mmio");

	vm->restored = vm->paused = ram_fd >= 0;
	ret = open_kvm(err, errlen);
	if (ret < 0) {
		if (ram_fd >= 0)
			close(ram_fd);
		return ret;
	}
	vm->kvm_fd = ret;
	vm->run_mmap_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->run_mmap_size < (int)sizeof(struct kvm_run)) {
		snprintf(err, errlen, "KVM_GET_VCPU_MMAP_SIZE: %s", strerror(errno));
		return -EINVAL;
	}
	do
		vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	while (vm->vm_fd < 0 && errno == EINTR);
	if (vm->vm_fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "KVM_CREATE_VM: %s", strerror(errno));
		if (ram_fd >= 0)
			close(ram_fd);
		return ret;
	}
	fcntl(vm->vm_fd, F_SETFD, FD_CLOEXEC);
	/* RAM before the irqchip. Registering the irqchip's devices on KVM's
	 * I/O buses leaves an SRCU grace period pending (Linux 6.18: the old
	 * bus is freed by call_srcu), and a memslot change after it waits for
	 * that period to end: 6-7 ms on the PVM host measured, where the whole
	 * start is 3. The VM's close waits for it instead when the VM dies
	 * that young (make bench's floor + irqchip row shows KVM's own cost). */
	ret = map_ram(vm, ram_fd, err, errlen);
	if (!ret && uffd)
		ret = uffd_start(vm, err, errlen);
	if (ret)
		return ret;
	if (cfg->track_dirty && mem_dirty_enable(&vm->mem))
		return errf(err, errlen, -ENOMEM, "dirty-page bitmap: out of memory");
	return arch_vm_setup(vm, err, errlen);
}

int vm_create(struct vm *vm, const struct plan *cfg, char *err, size_t errlen)
{
	return create(vm, cfg, -1, false, err, errlen);
}

int vm_create_restored(struct vm *vm, const struct plan *cfg, int ram_fd, bool uffd, char *err,
		       size_t errlen)
{
	return create(vm, cfg, ram_fd, uffd, err, errlen);
}

int vm_create_vcpus(struct vm *vm, char *err, size_t errlen)
{
	int ret;

	vm->vcpus = calloc(vm->cfg->vcpus, sizeof(*vm->vcpus));
	if (!vm->vcpus)
		return -ENOMEM;
	for (unsigned i = 0; i < vm->cfg->vcpus; i++) {
		ret = vcpu_create(vm, &vm->vcpus[i], i, err, errlen);
		if (ret)
			return ret;
		vm->n_vcpus++;
		ret = arch_vcpu_setup(&vm->vcpus[i], err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

int vm_start(struct vm *vm, char *err, size_t errlen)
{
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		int ret = vcpu_start(&vm->vcpus[i]);

		if (ret) {
			snprintf(err, errlen, "vCPU %u: cannot start thread: %s", i, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

void vm_request_exit(struct vm *vm, int status, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&vm->lock);
	if (!vm->exiting) {
		__atomic_store_n(&vm->exiting, true, __ATOMIC_RELEASE);
		vm->exit_status = status;
		clock_gettime(CLOCK_MONOTONIC, &vm->exit_at);
		va_start(ap, fmt);
		vsnprintf(vm->exit_reason, sizeof(vm->exit_reason), fmt, ap);
		va_end(ap);
		pthread_cond_broadcast(&vm->cond);
	}
	pthread_mutex_unlock(&vm->lock);
	/* Kick outside the lock: vCPU threads never take it while running. */
	for (unsigned i = 0; i < vm->n_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
}

bool vm_paused(struct vm *vm)
{
	return __atomic_load_n(&vm->paused, __ATOMIC_ACQUIRE);
}

int vm_pause(struct vm *vm, char *err, size_t errlen)
{
	struct timespec until;
	unsigned want = 0;
	int ret = 0;

	for (unsigned i = 0; i < vm->n_vcpus; i++)
		want += vm->vcpus[i].started;
	pthread_mutex_lock(&vm->lock);
	if (vm->paused) {
		pthread_mutex_unlock(&vm->lock);
		return -EALREADY;
	}
	__atomic_store_n(&vm->paused, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&vm->lock);
	for (unsigned i = 0; i < vm->n_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&vm->lock);
	while (vm->n_parked < want && !vm->exiting && !ret)
		ret = pthread_cond_timedwait(&vm->cond, &vm->lock, &until);
	if (vm->n_parked < want || vm->exiting) {
		__atomic_store_n(&vm->paused, false, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&vm->cond);
		pthread_mutex_unlock(&vm->lock);
		if (vm->exiting)
			return errf(err, errlen, -ESHUTDOWN, "the VM is stopping");
		return errf(err, errlen, -ETIMEDOUT, "%u of %u vCPUs did not stop within 5 s",
			    want - vm->n_parked, want);
	}
	pthread_mutex_unlock(&vm->lock);
	ret = arch_vm_pause(vm, err, errlen);
	if (ret) {
		vm_release(vm); /* the arch saved nothing */
		return ret;
	}
	return 0;
}

int vm_resume(struct vm *vm, char *err, size_t errlen)
{
	int ret;

	if (!vm_paused(vm))
		return -EALREADY;
	ret = arch_vm_resume(vm, err, errlen);
	vm_release(vm);
	return ret;
}

void vm_hold(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	__atomic_store_n(&vm->paused, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&vm->lock);
}

void vm_release(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	__atomic_store_n(&vm->paused, false, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

/* A vCPU's side of vm_pause: wait here until resumed or exiting. */
void vm_park(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	vm->n_parked++;
	pthread_cond_broadcast(&vm->cond);
	while (vm->paused && !vm->exiting)
		pthread_cond_wait(&vm->cond, &vm->lock);
	vm->n_parked--;
	pthread_mutex_unlock(&vm->lock);
}

int vm_wait(struct vm *vm)
{
	int status;

	pthread_mutex_lock(&vm->lock);
	while (!vm->exiting)
		pthread_cond_wait(&vm->cond, &vm->lock);
	status = vm->exit_status;
	pthread_mutex_unlock(&vm->lock);
	return status;
}

void vm_stop_vcpus(struct vm *vm)
{
	for (unsigned i = 0; i < vm->n_vcpus; i++)
		vcpu_kick(&vm->vcpus[i]);
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		if (vm->vcpus[i].started) {
			pthread_join(vm->vcpus[i].thread, NULL);
			vm->vcpus[i].started = false;
		}
	}
}

void vm_destroy(struct vm *vm)
{
	vm_stop_vcpus(vm);
	for (unsigned i = 0; i < vm->n_vcpus; i++) {
		arch_vcpu_destroy(&vm->vcpus[i]);
		vcpu_destroy(&vm->vcpus[i]);
	}
	free(vm->vcpus);
	vm->vcpus = NULL;
	vm->n_vcpus = 0;
	arch_vm_destroy(vm);
	uffd_stop(vm);
	mem_destroy(&vm->mem);
	free(vm->snap_last);
	vm->snap_last = NULL;
	bus_free(&vm->pio);
	bus_free(&vm->mmio);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	vm->vm_fd = vm->kvm_fd = -1;
	pthread_cond_destroy(&vm->cond);
	pthread_mutex_destroy(&vm->lock);
}

int vm_take_dirty(struct vm *vm, uint64_t *bitmap, char *err, size_t errlen)
{
	struct guest_mem *m = &vm->mem;
	uint64_t *slot = NULL;
	int ret = 0;

	if (!m->dirty)
		return errf(err, errlen, -EINVAL,
			    "dirty pages are not tracked: set machine.track_dirty_pages (Firecracker: track_dirty_pages)");
	for (unsigned i = 0; i < m->n_banks && !ret; i++) {
		const struct mem_bank *b = &m->bank[i];
		uint64_t pages = b->size / MEM_PAGE, words = (pages + 63) / 64, base = b->off / MEM_PAGE;
		struct kvm_dirty_log log = { .slot = i };

		free(slot);
		slot = calloc(words, sizeof(*slot));
		if (!slot)
			return errf(err, errlen, -ENOMEM, "out of memory");
		log.dirty_bitmap = slot;
		if (ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &log) < 0) {
			ret = errf(err, errlen, -errno, "KVM_GET_DIRTY_LOG (slot %u): %s", i,
				   strerror(errno));
			break;
		}
		for (uint64_t w = 0; w < words; w++)
			for (uint64_t bits = slot[w]; bits; bits &= bits - 1) {
				uint64_t p = base + w * 64 + (uint64_t)__builtin_ctzll(bits);

				bitmap[p / 64] |= 1ull << (p % 64);
			}
	}
	free(slot);
	mem_take_dirty(m, bitmap);
	return ret;
}
