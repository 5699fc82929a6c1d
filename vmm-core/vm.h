/* SPDX-License-Identifier: Apache-2.0 */
/* One VM: the KVM fds, guest RAM, both buses, the vCPUs and the exit state. */
#ifndef CUBICLE_VM_H
#define CUBICLE_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "bus.h"
#include "mem.h"

struct event_loop;
struct pci_bus;
struct plan;

/* Process exit statuses of `cubicle run`. */
enum {
	VM_EXIT_OK = 0,        /* guest rebooted or powered off */
	VM_EXIT_ERROR = 1,     /* the VMM failed: config, host, setup, I/O */
	VM_EXIT_USAGE = 2,     /* bad command line */
	VM_EXIT_PANIC = 3,     /* guest kernel panicked (panic=-1 reboot with panic flag) */
	VM_EXIT_CRASH = 4,     /* guest triple-faulted or KVM could not run it */
};

/* KVM_RUN returns counted by exit_reason (KVM_EXIT_*; larger ones in the
 * last slot). A signal's EINTR counts as KVM_EXIT_INTR. */
#define VCPU_EXIT_SLOTS 64

struct vcpu {
	struct vm *vm;
	unsigned id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;
	void *arch; /* arch-private */
	uint64_t exits[VCPU_EXIT_SLOTS]; /* by KVM exit reason: written by the vCPU thread only, read relaxed */
};

struct vm {
	int kvm_fd, vm_fd;
	int run_mmap_size;
	struct guest_mem mem;
	struct bus pio, mmio;
	unsigned n_vcpus;
	struct vcpu *vcpus;
	struct event_loop *ev;
	struct pci_bus *pci; /* pci.c: bus 0, NULL on a machine without PCI */
	/* An interrupt controller of the arch's own (x86's "split" irqchip):
	 * irq_line gives it the lines; NULL: KVM_IRQ_LINE. */
	int (*irq_line_hook)(struct vm *vm, unsigned gsi, bool level);
	const struct plan *cfg;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool exiting;
	int exit_status;
	char exit_reason[160];
	struct timespec exit_at; /* CLOCK_MONOTONIC, when the exit was requested */
	bool paused;             /* vm_pause: vCPUs park at their next exit */
	bool restored;           /* RAM and state from a snapshot (vm_create_restored) */
	char *snap_last;         /* the snapshot RAM last equalled (made, restored, rolled
				  * back to): a Diff's parent; malloc'd, NULL if none */
	unsigned n_parked;       /* vCPUs parked now (under lock) */
	struct uffd *uffd;       /* the Uffd memory backend's handler (uffd.h), or NULL */

	void *arch; /* arch-private: boot entry state, layout cursor */
};

/* Open /dev/kvm, create the VM, its RAM and irqchip (arch_vm_setup). */
int vm_create(struct vm *vm, const struct plan *cfg, char *err, size_t errlen);
/* The same with RAM a private mapping of @ram_fd (a snapshot's memory
 * file, cfg->memory_mib long): pages fault in from the file as the guest
 * touches them, guest writes stay in this process. The VM starts paused
 * (vm->paused) and restored: its state is loaded before vm_resume. Takes
 * @ram_fd (closed by vm_destroy, or here on failure). With @uffd, RAM is
 * anonymous instead, filled from @ram_fd page by page on first touch (the
 * Uffd memory backend, uffd.h). */
int vm_create_restored(struct vm *vm, const struct plan *cfg, int ram_fd, bool uffd, char *err,
		       size_t errlen);
/*
 * Pause: every started vCPU leaves KVM_RUN and parks, then the arch saves
 * the guest's clocks (arch_vm_pause); 0, -EALREADY when paused, or
 * -ETIMEDOUT (err says so) when a vCPU did not park within 5 s (the VM
 * then runs on). Resume: the arch puts the clocks back as they were at the
 * pause, so the guest sees no time pass, and the vCPUs run; -EALREADY when
 * not paused. Any thread but a vCPU's; an exit request wakes parked vCPUs.
 */
int vm_pause(struct vm *vm, char *err, size_t errlen);
int vm_resume(struct vm *vm, char *err, size_t errlen);
bool vm_paused(struct vm *vm);
void vm_park(struct vm *vm); /* vcpu.c */
/* Create the vCPU fds and run arch_vcpu_setup on each. */
int vm_create_vcpus(struct vm *vm, char *err, size_t errlen);
/* Start the vCPU threads. */
int vm_start(struct vm *vm, char *err, size_t errlen);
/*
 * Hold (before vm_start): the vCPU threads start, set themselves up
 * (confine.h) and park before the guest's first instruction, until
 * vm_release: the rest of the setup overlaps theirs. vm_resume releases
 * too, after the arch's part.
 */
void vm_hold(struct vm *vm);
void vm_release(struct vm *vm);
/* Block until something requests an exit; returns the status. */
int vm_wait(struct vm *vm);
/* Ask every thread to stop; the first request's status and reason win. */
void vm_request_exit(struct vm *vm, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Dirty tracking (machine.track_dirty_pages): OR into @bitmap (one bit per
 * 4 KiB page of the RAM mapping) the pages the guest (KVM's log) and the
 * host (mem_mark_dirty) wrote since the last call, and start both logs
 * afresh. The VM is paused. 0 or -errno with err. */
int vm_take_dirty(struct vm *vm, uint64_t *bitmap, char *err, size_t errlen);
/* Kick and join vCPU threads. */
void vm_stop_vcpus(struct vm *vm);
void vm_destroy(struct vm *vm);

/* vcpu.c */
int vcpu_create(struct vm *vm, struct vcpu *v, unsigned id, char *err, size_t errlen);
int vcpu_start(struct vcpu *v);
void vcpu_kick(struct vcpu *v);
void vcpu_destroy(struct vcpu *v);

/* irq.c: drive a GSI line of the in-kernel irqchip; 0 or -errno. */
int irq_line(struct vm *vm, unsigned gsi, bool level);
/* Attach an eventfd to a GSI (irqfd); 0 or -errno. */
int irq_fd_attach(struct vm *vm, int efd, unsigned gsi);
int irq_fd_detach(struct vm *vm, int efd, unsigned gsi);
/* Send one message-signalled interrupt (KVM_SIGNAL_MSI); 0 or -errno. */
int irq_msi(struct vm *vm, uint64_t addr, uint32_t data);

/* Open /dev/kvm now (the jail, before it drops privileges): every later VM
 * uses a duplicate of this fd. 0, or -errno with a message. */
int vm_kvm_preopen(char *err, size_t errlen);
/* The same where not done yet (errors left for vm_create), then
 * arch_prefetch: what the VM's setup asks the host is asked beside it. */
void vm_kvm_prefetch(void);
/* arch_preload on the fd vm_kvm_preopen opened (none: nothing), before a
 * jail hides the host's files. */
void vm_kvm_preload(void);

#endif
