/* SPDX-License-Identifier: Apache-2.0 */
/* One run of one VM (run.c), as the command line drives it. */
#ifndef CUBICLE_RUN_H
#define CUBICLE_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "api/api.h"
#include "loader.h"
#include "plan.h"
#include "vm.h"

struct run_ctx {
	struct plan cfg;
	struct vm vm;
	struct registry reg;
	struct cub_inst **insts;
	unsigned n_insts;
	sigset_t sigs;
	pthread_t sig_thread;
	/* The signal thread loaded its filter (or failed to): run_seal waits
	 * for it (a lock of its own: the API's builds hold lock). */
	pthread_mutex_t sig_lock;
	pthread_cond_t sig_cond;
	bool sig_confined, sig_failed;
	/* The teardown asks the signal thread to end: set, then a SIGTERM to
	 * that thread alone (no pthread_cancel, which loads libgcc_s). */
	_Atomic bool sig_quit;
	struct event_loop *ev;
	bool have_vm, have_sig_thread, ev_started;
	bool host_check;
	int seccomp; /* enum confine_mode (confine.h): enforce unless said */
	/* The control API (--api-sock), and what it sees of the VM. */
	struct api *api;
	struct api_vm avm;
	/* Before the VM runs (the API waits for InstanceStart), an exit request
	 * is kept here; once it runs, vm_request_exit takes it. lock also keeps
	 * a signal out while the API builds the VM. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool vm_live, pre_exit, start_failed;
	int pre_status;
	char pre_reason[160];
	struct timespec pre_at;
	/* Overrides a restore applies to the snapshot's description. */
	char *const *sets;
	unsigned n_sets;
	bool mem_uffd; /* a restore's RAM through the Uffd backend (uffd.h) */
	/* What the control threads may still reach by path once confined
	 * (run_allow_paths): the API socket, a restore's snapshot folder. */
	const char *api_sock, *snap_dir;
	/* The setup's trim, handed to the event loop (run_settle_soon). */
	int settle_fd;
	bool settle_armed;
};

/* Signals to their own thread (before any other thread exists), the event
 * loop. 0 or -errno with err. */
int run_prepare(struct run_ctx *r, char *err, size_t errlen);
/* Create and boot the VM r->cfg plans. */
int run_setup(struct run_ctx *r, char *err, size_t errlen);
/* Create the VM from the snapshot in @dir; paused unless @resume. */
int run_restore(struct run_ctx *r, const char *dir, bool resume, char *err, size_t errlen);
/* The VM exists: the API sees it; the wait in run_finish ends. r->lock held. */
void run_mark_live(struct run_ctx *r);
/* Serve the control API on @sock (and, with @json, apply Firecracker's
 * JSON VM description first); @preboot: the API may create the VM. */
int run_api(struct run_ctx *r, const char *sock, const char *id, bool preboot, const char *json,
	    char *err, size_t errlen);
/* Wait for the VM's end (or a signal before it exists), tear down, log how
 * it ended; the process's exit status. */
int run_finish(struct run_ctx *r);
void run_teardown(struct run_ctx *r);

#endif
