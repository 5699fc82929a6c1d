/* SPDX-License-Identifier: Apache-2.0 */
/* vCPU threads: the common KVM_RUN loop. Port I/O and MMIO exits go to the
 * two buses on every arch; anything else goes to arch_exit(). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "confine.h"
#include "log.h"
#include "vm.h"

#define SIG_KICK (SIGRTMIN + 1)

static void kick_handler(int sig)
{
	/* Only here to make KVM_RUN return -EINTR. */
}

static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

static void install_kick(void)
{
	struct sigaction sa = { .sa_handler = kick_handler };

	sigemptyset(&sa.sa_mask);
	sigaction(SIG_KICK, &sa, NULL);
}

int vcpu_create(struct vm *vm, struct vcpu *v, unsigned id, char *err, size_t errlen)
{
	void *run;

	memset(v, 0, sizeof(*v));
	v->vm = vm;
	v->id = id;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)id);
	if (v->fd < 0) {
		int e = errno;

		snprintf(err, errlen, "KVM_CREATE_VCPU %u: %s", id, strerror(e));
		return -e;
	}
	run = mmap(NULL, (size_t)vm->run_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (run == MAP_FAILED) {
		int e = errno;

		snprintf(err, errlen, "vCPU %u: mmap kvm_run: %s", id, strerror(e));
		close(v->fd);
		v->fd = -1;
		return -e;
	}
	v->run = run;
	pthread_once(&kick_once, install_kick);
	return 0;
}

static bool exiting(const struct vm *vm)
{
	return __atomic_load_n(&vm->exiting, __ATOMIC_ACQUIRE);
}

static void unclaimed(struct vcpu *v, const char *bus, uint64_t addr, void *data, uint32_t len,
		      bool is_write)
{
	static struct ratelimit rl;

	if (!is_write)
		memset(data, 0xff, len); /* open bus */
	if (log_get_level() >= CUB_LOG_DEBUG && ratelimit_ok(&rl))
		log_debug("vCPU %u: unclaimed %s %s 0x%" PRIx64 " len %u", v->id, bus,
			  is_write ? "write" : "read", addr, len);
}

static void handle_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool out = run->io.direction == KVM_EXIT_IO_OUT;
	uint64_t total = (uint64_t)run->io.size * run->io.count;

	if (run->io.data_offset + total > (uint64_t)v->vm->run_mmap_size)
		return; /* cannot happen with a sane kernel; never read past the page */
	for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size)
		if (!bus_access(&v->vm->pio, run->io.port, data, run->io.size, out))
			unclaimed(v, "pio", run->io.port, data, run->io.size, out);
}

static void handle_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint32_t len = run->mmio.len;

	if (len > sizeof(run->mmio.data))
		len = sizeof(run->mmio.data);
	if (!bus_access(&v->vm->mmio, run->mmio.phys_addr, run->mmio.data, len, run->mmio.is_write))
		unclaimed(v, "mmio", run->mmio.phys_addr, run->mmio.data, len, run->mmio.is_write);
}

/* One more exit of this reason (the last slot counts every reason past it).
 * Only this vCPU's thread writes its counters, so a relaxed load and store
 * suffice (no locked add); the API thread reads them relaxed. */
static void count_exit(struct vcpu *v, uint32_t reason)
{
	uint64_t *c = &v->exits[reason < VCPU_EXIT_SLOTS ? reason : VCPU_EXIT_SLOTS - 1];

	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	sigset_t set;
	char name[16];

	snprintf(name, sizeof(name), "vcpu%u", v->id);
	pthread_setname_np(pthread_self(), name);
	sigfillset(&set);
	sigdelset(&set, SIG_KICK);
	sigdelset(&set, SIGSEGV);
	sigdelset(&set, SIGBUS);
	sigdelset(&set, SIGABRT);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	/* Before the guest's first instruction: from here on this thread runs
	 * the devices' handlers on the guest's behalf. */
	if (confine_thread(CONFINE_VCPU, name)) {
		vm_request_exit(vm, VM_EXIT_ERROR, "vCPU %u could not be confined", v->id);
		return NULL;
	}

	while (!exiting(vm)) {
		if (vm_paused(vm)) {
			vm_park(vm);
			continue;
		}
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				count_exit(v, KVM_EXIT_INTR);
				__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_RELAXED);
				continue;
			}
			vm_request_exit(vm, VM_EXIT_ERROR, "vCPU %u: KVM_RUN: %s", v->id,
					strerror(errno));
			break;
		}
		count_exit(v, v->run->exit_reason);
		switch (v->run->exit_reason) {
		case KVM_EXIT_IO:
			handle_io(v);
			break;
		case KVM_EXIT_MMIO:
			handle_mmio(v);
			break;
		case KVM_EXIT_INTR:
			break;
		default:
			if (arch_exit(v))
				return NULL;
		}
	}
	return NULL;
}

int vcpu_start(struct vcpu *v)
{
	int err = pthread_create(&v->thread, NULL, vcpu_thread, v);

	if (err)
		return -err;
	v->started = true;
	return 0;
}

void vcpu_kick(struct vcpu *v)
{
	if (!v->run)
		return;
	/* immediate_exit covers a vCPU that is between KVM_RUN calls. */
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_RELEASE);
	if (v->started)
		pthread_kill(v->thread, SIG_KICK);
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->run)
		munmap(v->run, (size_t)v->vm->run_mmap_size);
	if (v->fd >= 0)
		close(v->fd);
	v->run = NULL;
	v->fd = -1;
}
