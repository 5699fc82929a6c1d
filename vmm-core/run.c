/* SPDX-License-Identifier: Apache-2.0 */
/* One run of one VM: signals, the event loop, the VM made from a plan or a
 * snapshot, the control API's hooks into it, the wait for its end and the
 * teardown. main.c decides what to run. */
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "config.h"
#include "confine.h"
#include "devices.h"
#include "event.h"
#include "jail.h"
#include "loader.h"
#include "log.h"
#include "resident.h"
#include "run.h"
#include "snap/snapshot.h"
#include "thread.h"

/* End the run with status: the VM's exit once it runs, else the wait for
 * InstanceStart's. */
static void run_exit(struct run_ctx *r, int status, const char *reason)
{
	pthread_mutex_lock(&r->lock);
	if (r->vm_live) {
		pthread_mutex_unlock(&r->lock);
		vm_request_exit(&r->vm, status, "%s", reason);
		return;
	}
	if (!r->pre_exit) {
		r->pre_exit = true;
		r->pre_status = status;
		snprintf(r->pre_reason, sizeof(r->pre_reason), "%s", reason);
		clock_gettime(CLOCK_MONOTONIC, &r->pre_at);
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
}

/*
 * Termination signals are taken by a thread of their own, not the event
 * loop: a guest that keeps a device busy delays the loop's callbacks, never
 * the exit request (issue 10). Every other thread has them blocked.
 */
static void *signal_thread(void *arg)
{
	struct run_ctx *r = arg;
	siginfo_t si;
	bool ok;

	pthread_setname_np(pthread_self(), "signals");
	/* It compiles (or loads) every kind's filter, beside the setup
	 * (signals stay pending meanwhile; thread_start_beside: not in the
	 * setup's place), confines itself and tells run_seal, which lets no
	 * guest instruction run before. */
	confine_build();
	ok = !confine_thread(CONFINE_SIGNALS, "signals");
	pthread_mutex_lock(&r->sig_lock);
	r->sig_confined = true;
	r->sig_failed = !ok;
	pthread_cond_broadcast(&r->sig_cond);
	pthread_mutex_unlock(&r->sig_lock);
	if (!ok)
		run_exit(r, VM_EXIT_ERROR, "the signal thread could not be confined");
	for (;;) {
		int sig = sigwaitinfo(&r->sigs, &si);
		char why[64];

		/* the teardown's SIGTERM to this thread, or any signal once it
		 * has begun: the VM is going already */
		if (atomic_load(&r->sig_quit))
			break;
		if (sig < 0)
			continue; /* EINTR */
		snprintf(why, sizeof(why), "stopped by signal %s", strsignal(sig));
		run_exit(r, 128 + sig, why);
	}
	return NULL;
}

/* Signals to their thread (blocked here, before any other thread exists to
 * inherit them: they never interrupt a vCPU) and the event loop. */
int run_prepare(struct run_ctx *r, char *err, size_t errlen)
{
	int ret;

	vm_kvm_prefetch();
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	pthread_mutex_init(&r->sig_lock, NULL);
	pthread_cond_init(&r->sig_cond, NULL);
	/* The filters, before any thread: compiled beside the VM's setup by
	 * the signal thread, each thread confined as its setup ends (run_seal;
	 * the signal thread as soon as they are ready). */
	ret = confine_start((enum confine_mode)r->seccomp, &r->reg, err, errlen);
	if (ret)
		return ret;
	if (r->seccomp != CONFINE_OFF)
		log_debug("seccomp: %s", confine_mode_name((enum confine_mode)r->seccomp));
	sigemptyset(&r->sigs);
	sigaddset(&r->sigs, SIGINT);
	sigaddset(&r->sigs, SIGTERM);
	sigaddset(&r->sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &r->sigs, NULL);
	ret = thread_start_beside(&r->sig_thread, signal_thread, r);
	if (ret) {
		confine_build(); /* no thread to do it: the teardown waits for it */
		snprintf(err, errlen, "signal thread: %s", strerror(ret));
		return -ret;
	}
	r->have_sig_thread = true;
	r->ev = event_new();
	if (!r->ev) {
		snprintf(err, errlen, "cannot create the event loop: %s", strerror(errno));
		return -ENOMEM;
	}
	return 0;
}

/* Microseconds from *t (CLOCK_MONOTONIC) to now. */
static long us_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - t->tv_sec) * 1000000 + (now.tv_nsec - t->tv_nsec) / 1000;
}

/* The event loop's thread, once. */
static int run_loop_start(struct run_ctx *r, char *err, size_t errlen)
{
	int ret;

	if (r->ev_started)
		return 0;
	ret = event_start(r->ev);
	if (ret)
		return errf(err, errlen, ret, "event loop thread: %s", strerror(-ret));
	r->ev_started = true;
	return 0;
}

static int confine_loop(void *arg)
{
	(void)arg;
	return confine_thread(CONFINE_CONTROL, "event-loop");
}

/* Let the control threads reach @path's folder (a relative path: the
 * working folder's). */
static int allow_folder(const char *path, bool write)
{
	char dir[PATH_MAX];
	size_t n;

	if (!path || !*path)
		return 0;
	n = path_dir_len(path);
	if (!n)
		return confine_allow(".", write);
	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = '\0';
	return confine_allow(dir, write);
}

/* The folder of every path parameter (CUB_P_PATH) of @pi and its backends:
 * disks and their snapshot copies, sockets, console files. */
static int allow_inst(const struct plan_inst *pi)
{
	const struct plugin *pl = pi->plugin;
	int ret = 0;

	for (unsigned i = 0; pl && pi->cfg && !ret && i < pl->d->n_params; i++)
		if (pl->params[i].type == CUB_P_PATH)
			ret = allow_folder(*(const char *const *)((const char *)pi->cfg +
								   pl->params[i].offset),
					   true);
	for (unsigned b = 0; !ret && b < pi->n_backends; b++)
		ret = allow_inst(&pi->backends[b].inst);
	return ret;
}

static int loaded_folder(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (info->dlpi_name && strchr(info->dlpi_name, '/'))
		*(int *)arg = *(int *)arg ?: allow_folder(info->dlpi_name, false);
	return 0;
}

/*
 * What the control threads (the API's) may reach by path once confined,
 * where Landlock fences them: the boot files; the folder of every file the
 * plan names, the API socket's and api.paths; the restored snapshot's
 * and its parents' (read only); the folders libraries were loaded from, to load more
 * (http-parser); /proc/self (metrics, dirty pages); the CPU lists in
 * /sys/devices/system/cpu. Nothing else.
 */
static int run_allow_paths(struct run_ctx *r)
{
	char *paths, *save = NULL;
	int ret = 0;

	if (!confine_paths_fenced())
		return 0;
	ret = confine_allow(r->cfg.boot.kernel, false);
	if (!ret)
		ret = confine_allow(r->cfg.boot.initrd, false);
	for (unsigned i = 0; !ret && i < r->cfg.n_devs; i++)
		ret = allow_inst(&r->cfg.devs[i]);
	if (!ret)
		ret = allow_folder(r->api_sock, true);
	if (!ret && r->snap_dir) {
		/* a Diff's parents too: a rollback to it reads them again */
		char **chain = snap_chain_dirs(r->snap_dir); /* it first, when readable */

		ret = chain ? 0 : confine_allow(r->snap_dir, false);
		for (char **d = chain; d && *d && !ret; d++)
			ret = confine_allow(*d, false);
		strv_free(chain);
	}
	if (!ret && r->cfg.api_paths) {
		paths = strdup(r->cfg.api_paths);
		if (!paths)
			return -ENOMEM;
		for (char *p = strtok_r(paths, ":", &save); p && !ret; p = strtok_r(NULL, ":", &save))
			ret = confine_allow(p, true);
		free(paths);
	}
	if (!ret)
		dl_iterate_phdr(loaded_folder, &ret);
	if (!ret)
		ret = confine_allow("/etc/ld.so.cache", false);
	if (!ret)
		ret = confine_allow("/proc/self", false);
	/* the CPU lists (glibc's get_nprocs, libbpf's per-CPU counters at exit) */
	if (!ret)
		ret = confine_allow("/sys/devices/system/cpu", false);
	return ret;
}

/* The control threads (run_seal_start): the event loop, the calling
 * thread and the signal thread, each with its filter. */
static int run_seal(struct run_ctx *r, char *err, size_t errlen)
{
	int ret = run_allow_paths(r);

	if (ret)
		return errf(err, errlen, ret, "landlock: cannot let the control threads reach the VM's files: %s",
			    strerror(-ret));
	/* the event loop confines itself while this thread does */
	ret = event_call_begin(r->ev, confine_loop, NULL);
	if (!ret) {
		int mine = event_on_loop(r->ev) ? 0 : confine_thread(CONFINE_CONTROL, NULL);

		ret = event_call_end(r->ev);
		ret = ret ? ret : mine;
	}
	if (ret)
		return errf(err, errlen, ret, "seccomp: cannot confine the VMM's threads: %s",
			    strerror(-ret));
	/* the signal thread's own, before any guest instruction */
	pthread_mutex_lock(&r->sig_lock);
	while (r->have_sig_thread && !r->sig_confined)
		pthread_cond_wait(&r->sig_cond, &r->sig_lock);
	ret = r->sig_failed ? -EPERM : 0;
	pthread_mutex_unlock(&r->sig_lock);
	if (ret)
		return errf(err, errlen, ret, "seccomp: cannot confine the signal thread (its error is above)");
	return 0;
}

/* The setup is over: what it alone used leaves the resident set
 * (resident.h). */
static void run_settled(void)
{
	size_t kib = resident_trim();

	log_debug("setup over: %zu KiB of read-only ELF mappings dropped", kib);
}

static void run_settle_cb(void *arg)
{
	struct run_ctx *r = arg;

	event_unwatch(r->ev, r->settle_fd);
	close(r->settle_fd);
	r->settle_armed = false;
	/* a VM already ending (stopped at its first instruction) would only
	 * wait for it */
	if (!__atomic_load_n(&r->vm.exiting, __ATOMIC_ACQUIRE))
		run_settled();
}

/*
 * The trim (run_settled), as the guest starts: handed to the event loop,
 * which runs it beside the vCPUs' first instructions, not in front of
 * them (its unmapping and TLB flushes were 0.45-0.95 ms of the start on a
 * PVM host, where each page-table change is the hypervisor's), and before
 * anything asked of it later. False when the caller is to run it once the
 * vCPUs run: it is the loop's thread (the API made the VM), or no loop
 * takes it.
 */
static bool run_settle_soon(struct run_ctx *r)
{
	uint64_t one = 1;
	int fd;

	if (!r->ev || event_on_loop(r->ev))
		return false;
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0 || event_watch_control(r->ev, fd, EPOLLIN, run_settle_cb, r) < 0) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	r->settle_fd = fd;
	r->settle_armed = true;
	if (write(fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		log_warn("the setup's trim: eventfd: %s", strerror(errno)); /* stays armed: freed at the end */
	return true;
}

/*
 * The VM is made: the filters are ready and a tap's jail gives up its
 * capabilities (jail_seal: its setresuid reaches every thread, which the
 * vCPUs' filters would refuse), then the vCPU threads start held: each
 * confines itself while the event loop, the calling thread (main, or the
 * loop itself when the API makes the VM) and the signal thread are
 * confined here, and only then do they run the guest's first
 * instruction. A restored VM stays paused (vm_resume lets it run). The
 * main thread of an API-made VM confines itself in run_finish.
 */
static int run_seal_start(struct run_ctx *r, char *err, size_t errlen)
{
	/* the filters compiled beside the setup (before jail_seal: they
	 * read whether it has work) */
	int ret = r->seccomp == CONFINE_OFF ? 0 : confine_ready(err, errlen);
	bool hold = !vm_paused(&r->vm), trim_here = false;

	if (!ret)
		ret = jail_seal(err, errlen);
	if (ret)
		return ret;
	if (hold)
		vm_hold(&r->vm);
	ret = vm_start(&r->vm, err, errlen);
	if (!ret && r->seccomp != CONFINE_OFF)
		ret = run_seal(r, err, errlen);
	/* handed to the loop before the guest can answer anything: a request
	 * that follows the guest's first output finds the trim done */
	if (!ret)
		trim_here = !run_settle_soon(r);
	if (!ret && hold)
		vm_release(&r->vm);
	if (!ret && trim_here)
		run_settled();
	return ret; /* on failure the teardown's exit request frees held vCPUs */
}

int run_setup(struct run_ctx *r, char *err, size_t errlen)
{
	const struct boot_cfg *b = &r->cfg.boot;
	int ret;

	log_debug("config loaded, %u plugins found", r->reg.n);
	if (r->host_check && r->cfg.host_check && b->format != BOOT_FLAT &&
	    !arch_host_can_boot_linux(err, errlen)) {
		snprintf(err + strlen(err), errlen - strlen(err),
			 " (or pass --no-host-check to try anyway)");
		return -ENODEV;
	}
	ret = vm_create(&r->vm, &r->cfg, err, errlen);
	r->have_vm = true;
	r->vm.ev = r->ev;
	if (ret)
		return ret;
	log_debug("VM created with %" PRIu64 " MiB of RAM", r->cfg.memory_mib);
	ret = devices_create_all(&r->vm, &r->cfg, &r->insts, &r->n_insts, err, errlen);
	if (ret)
		return ret;
	log_debug("%u devices created", r->n_insts);
	ret = arch_boot_load(&r->vm, b, err, errlen);
	if (ret)
		return ret;
	ret = vm_create_vcpus(&r->vm, err, errlen);
	if (ret)
		return ret;
	log_debug("%u vCPUs set up", r->cfg.vcpus);
	/* After the vCPUs: arm64's FDT needs their MPIDRs, its vGIC all of them. */
	ret = arch_describe(&r->vm, err, errlen);
	if (ret)
		return ret;
	ret = run_loop_start(r, err, errlen);
	if (ret)
		return ret;
	log_info("booting %s: %u vCPU%s, %" PRIu64 " MiB, %u device%s", b->kernel, r->cfg.vcpus,
		 r->cfg.vcpus == 1 ? "" : "s", r->cfg.memory_mib, r->n_insts,
		 r->n_insts == 1 ? "" : "s");
	if (b->format != BOOT_FLAT)
		log_info("kernel command line: %s", b->cmdline);
	return run_seal_start(r, err, errlen);
}

static struct snap_vm run_snap_vm(struct run_ctx *r)
{
	return (struct snap_vm){ .vm = &r->vm, .insts = r->insts, .n_insts = r->n_insts,
				 .plan = &r->cfg };
}

/*
 * Restore (cubicle restore, PUT /snapshot/load): the VM the snapshot in
 * @dir describes, its RAM a private mapping of the snapshot's memory (so
 * nothing is read until the guest touches it, and clones share the page
 * cache), its devices' and vCPUs' state the snapshot's. Paused, unless
 * @resume.
 */
int run_restore(struct run_ctx *r, const char *dir, bool resume, char *err, size_t errlen)
{
	struct snap_image im;
	struct snap_disks_made disks = { 0 };
	struct snap_vm sv;
	struct timespec t0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	r->snap_dir = dir;
	ret = snap_open(&im, dir, err, errlen);
	if (!ret)
		ret = snap_plan(&im, &r->cfg, &r->reg, r->sets, r->n_sets, err, errlen);
	if (!ret)
		ret = snap_disks_restore(&im, &r->cfg, &disks, err, errlen);
	if (ret)
		goto out;
	ret = vm_create_restored(&r->vm, &r->cfg, snap_take_mem_fd(&im), r->mem_uffd, err, errlen);
	r->have_vm = true;
	r->vm.ev = r->ev;
	if (!ret)
		ret = snap_apply_diffs(&im, &r->vm.mem, err, errlen);
	if (!ret)
		ret = devices_create_all(&r->vm, &r->cfg, &r->insts, &r->n_insts, err, errlen);
	if (!ret)
		ret = vm_create_vcpus(&r->vm, err, errlen);
	if (!ret)
		ret = arch_describe(&r->vm, err, errlen);
	sv = run_snap_vm(r);
	if (!ret)
		ret = snap_load_state(&sv, &im, err, errlen);
	if (!ret)
		ret = run_loop_start(r, err, errlen);
	if (ret)
		goto out;
	event_pause(r->ev, true);
	ret = run_seal_start(r, err, errlen);
	if (!ret && resume) {
		ret = vm_resume(&r->vm, err, errlen);
		event_pause(r->ev, false);
	}
	if (!ret)
		log_info("restored %s: %u vCPU%s, %" PRIu64 " MiB, %u device%s in %ld us%s", dir,
			 r->cfg.vcpus, r->cfg.vcpus == 1 ? "" : "s", r->cfg.memory_mib, r->n_insts,
			 r->n_insts == 1 ? "" : "s", us_since(&t0), resume ? "" : "; paused");
out:
	if (ret) /* the disks this restore made are of no use to anyone */
		snap_disks_undo(&disks);
	snap_disks_free(&disks);
	snap_close(&im);
	return ret;
}

void run_teardown(struct run_ctx *r)
{
	if (r->have_sig_thread) {
		/* Not pthread_cancel: glibc would load libgcc_s to unwind the
		 * thread, a library and its relocations on every VM's exit. */
		atomic_store(&r->sig_quit, true);
		pthread_kill(r->sig_thread, SIGTERM); /* blocked everywhere: it waits for it */
		pthread_join(r->sig_thread, NULL);
	}
	if (r->have_vm)
		vm_stop_vcpus(&r->vm);
	if (r->ev)
		event_stop(r->ev);
	if (r->settle_armed)
		close(r->settle_fd); /* the loop stopped before it trimmed */
	r->settle_armed = false;
	api_close(r->api); /* the loop is stopped: no request is being served */
	devices_destroy_all(r->insts, r->n_insts);
	devices_tty_restore();
	if (r->ev)
		event_free(r->ev);
	if (r->have_vm)
		vm_destroy(&r->vm);
	plan_free(&r->cfg);
	/* A start that failed early may leave the filters still compiling,
	 * from the plugins' descriptors: wait before unloading them. */
	confine_ready(NULL, 0);
	registry_free(&r->reg);
}

/*
 * InstanceStart (the API, on the event-loop thread): plan the tree the API
 * built, then create and boot the VM as `cubicle run` does. A plan error
 * changes nothing (the client may fix its objects and start again); a
 * failure after that leaves a VM half made, so later starts are refused.
 */
/* The VM exists and runs (or waits, paused): the API sees it. r->lock held. */
void run_mark_live(struct run_ctx *r)
{
	r->vm_live = true;
	r->avm.insts = r->insts;
	r->avm.n_insts = r->n_insts;
	r->avm.machine = &r->vm;
	clock_gettime(CLOCK_MONOTONIC, &r->avm.live);
	r->avm.running = true;
	r->avm.paused = vm_paused(&r->vm);
	pthread_cond_broadcast(&r->cond);
}

/*
 * Make the VM for the API (on the event-loop thread): @make plans and
 * creates it (InstanceStart, PUT /snapshot/load). A plan error changes
 * nothing (the client may fix its objects and try again); a failure after
 * that leaves a VM half made, so later attempts are refused.
 */
static int api_make(struct run_ctx *r, const char *what,
		    int (*make)(struct run_ctx *r, const void *arg, char *err, size_t errlen),
		    const void *arg, char *err, size_t errlen)
{
	int ret;

	pthread_mutex_lock(&r->lock);
	if (r->start_failed || r->pre_exit || r->vm_live) {
		pthread_mutex_unlock(&r->lock);
		return errf(err, errlen, -EBUSY, "%s",
			    r->pre_exit ? "cubicle is stopping"
			    : r->vm_live ? "the VM already exists"
					 : "an earlier InstanceStart or snapshot load failed part way; start a new cubicle");
	}
	ret = make(r, arg, err, errlen);
	if (ret) {
		r->start_failed = r->have_vm; /* else nothing was made: try again */
		if (!r->have_vm) {
			/* The arena keeps the failed tree until exit; a retry
			 * builds anew beside it. */
			memset(&r->cfg.boot, 0, sizeof(r->cfg.boot));
			r->cfg.devs = NULL;
			r->cfg.n_devs = 0;
		}
		pthread_mutex_unlock(&r->lock);
		log_err("%s: %s", what, err);
		return ret;
	}
	run_mark_live(r);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int make_started(struct run_ctx *r, const void *root, char *err, size_t errlen)
{
	int ret = plan_build(&r->cfg, root, "", NULL, &r->reg, err, errlen);

	return ret ? ret : run_setup(r, err, errlen);
}

/* InstanceStart: plan the tree the API built, then create and boot the VM
 * as `cubicle run` does. */
static int api_start(void *ctx, const struct cnode *root, char *err, size_t errlen)
{
	return api_make(ctx, "InstanceStart", make_started, root, err, errlen);
}

struct load_arg {
	const char *dir;
	bool resume;
};

static int make_loaded(struct run_ctx *r, const void *arg, char *err, size_t errlen)
{
	const struct load_arg *l = arg;

	return run_restore(r, l->dir, l->resume, err, errlen);
}

static int api_load(void *ctx, const char *dir, bool resume, bool uffd, char *const *sets,
		    unsigned n_sets, char *err, size_t errlen)
{
	struct run_ctx *r = ctx;
	struct load_arg l = { dir, resume };
	int ret;

	r->sets = sets;
	r->n_sets = n_sets;
	r->mem_uffd = uffd;
	ret = api_make(ctx, "snapshot load", make_loaded, &l, err, errlen);
	r->sets = NULL;
	r->n_sets = 0;
	return ret;
}

static int api_snapshot(void *ctx, const char *dir, bool diff, bool release,
			struct snap_stats *st, char *err, size_t errlen)
{
	struct run_ctx *r = ctx;
	struct snap_vm sv;
	int ret;

	if (!r->vm_live)
		return errf(err, errlen, -EINVAL, "no VM is running");
	if (!vm_paused(&r->vm))
		return errf(err, errlen, -EINVAL,
			    "the VM is running: pause it first (PATCH /vm {\"state\": \"Paused\"})");
	if (diff && release)
		return errf(err, errlen, -EINVAL,
			    "release_memory needs a Full snapshot (a Diff's memory holds only what changed)");
	sv = run_snap_vm(r);
	ret = snap_create(&sv, dir, diff, st, err, errlen);
	if (!ret)
		log_info("%s snapshot %s: %" PRIu64 " MiB of RAM (%" PRIu64 " KiB written), %" PRIu64
			 " bytes of state, in %" PRIu64 " us", diff ? "Diff" : "Full",
			 dir, st->mem_bytes >> 20, st->mem_written >> 10, st->state_bytes, st->us_total);
	if (!ret && release) {
		ret = snap_release_memory(&sv, dir, err, errlen);
		if (!ret)
			log_info("guest RAM released: it maps %s/memory until the guest writes", dir);
	}
	return ret;
}

static int api_set_paused(void *ctx, bool on, char *err, size_t errlen);

/* Rollback in place: pause if running, load, resume if it was running. A
 * failure once the state has begun to change leaves the VM paused. */
static int api_rollback(void *ctx, const char *dir, struct snap_stats *st, char *err,
			size_t errlen)
{
	struct run_ctx *r = ctx;
	struct snap_vm sv;
	bool running;
	int ret;

	if (!r->vm_live)
		return errf(err, errlen, -EINVAL, "no VM is running");
	running = !vm_paused(&r->vm);
	if (running && (ret = api_set_paused(r, true, err, errlen)))
		return ret;
	sv = run_snap_vm(r);
	ret = snap_rollback(&sv, dir, st, err, errlen);
	if (!ret && running)
		ret = api_set_paused(r, false, err, errlen);
	r->avm.paused = vm_paused(&r->vm);
	if (!ret)
		log_info("rolled back to %s in %" PRIu64 " us", dir, st->us_total);
	else if (r->avm.paused)
		snprintf(err + strlen(err), errlen - strlen(err), " (the VM is paused)");
	return ret;
}

static int api_set_paused(void *ctx, bool on, char *err, size_t errlen)
{
	struct run_ctx *r = ctx;
	int ret;

	if (!r->vm_live)
		return errf(err, errlen, -EINVAL, "no VM is running");
	if (!on) {
		ret = vm_resume(&r->vm, err, errlen);
		event_pause(r->ev, false);
		if (!ret)
			log_info("resumed through the API");
		return ret;
	}
	ret = vm_pause(&r->vm, err, errlen);
	if (ret)
		return ret;
	event_pause(r->ev, true);
	log_info("paused through the API");
	return 0;
}

static void api_stop(void *ctx, int status)
{
	run_exit(ctx, status, "stopped through the API");
}

/*
 * The control API: with json (Firecracker's --config-file), its sections
 * are applied and the VM started first; then, with sock, the API is served
 * there (the loop starts now if no VM started it). Without sock the API
 * serves nothing (--no-api) and exists only for the JSON file.
 */
int run_api(struct run_ctx *r, const char *sock, const char *id, bool preboot,
		   const char *json, char *err, size_t errlen)
{
	int ret;

	r->avm.reg = &r->reg;
	r->avm.ar = &r->cfg.ar;
	r->avm.start = preboot ? api_start : NULL;
	r->avm.stop = api_stop;
	r->avm.set_paused = api_set_paused;
	r->avm.snapshot = api_snapshot;
	r->avm.load = preboot ? api_load : NULL;
	r->avm.rollback = api_rollback;
	r->avm.ctx = r;
	r->avm.id = id;
	r->api_sock = sock;
	clock_gettime(CLOCK_MONOTONIC, &r->avm.started);
	r->api = api_new_detached(&r->avm);
	if (!r->api)
		return errf(err, errlen, -ENOMEM, "API: out of memory");
	api_set_loop(r->api, r->ev); /* PUT /metrics' timer, before or after it serves */
	if (json) {
		ret = api_load_fc_json(r->api, json, err, errlen);
		if (ret)
			return ret;
	}
	if (!sock)
		return 0;
	ret = run_loop_start(r, err, errlen);
	if (ret)
		return ret;
	return api_listen(r->api, sock, r->ev, err, errlen);
}

/* Milliseconds from *t (CLOCK_MONOTONIC) to now. */
static long ms_since(const struct timespec *t)
{
	return us_since(t) / 1000;
}


/* Wait for the end of the run, tear it down, and say how it ended. */
int run_finish(struct run_ctx *r)
{
	char exit_reason[sizeof(r->vm.exit_reason)];
	struct timespec exit_at;
	int status;

	/* A signal before the VM ran is kept as pre_exit; after, the VM's. */
	pthread_mutex_lock(&r->lock);
	while (!r->vm_live && !r->pre_exit)
		pthread_cond_wait(&r->cond, &r->lock);
	if (r->vm_live && r->pre_exit)
		vm_request_exit(&r->vm, r->pre_status, "%s", r->pre_reason);
	pthread_mutex_unlock(&r->lock);
	/* An API-made VM: the main thread only waits and tears down now. */
	if (r->vm_live && confine_thread(CONFINE_CONTROL, NULL))
		vm_request_exit(&r->vm, VM_EXIT_ERROR, "the main thread could not be confined");
	if (r->vm_live) {
		status = vm_wait(&r->vm);
		snprintf(exit_reason, sizeof(exit_reason), "%s", r->vm.exit_reason);
		exit_at = r->vm.exit_at;
	} else {
		status = r->pre_status;
		snprintf(exit_reason, sizeof(exit_reason), "%s", r->pre_reason);
		exit_at = r->pre_at;
	}
	run_teardown(r);
	/* After the teardown, so that the line tells how long stopping took:
	 * from the request (a signal, the guest, a device) to every vCPU
	 * joined and every device destroyed. */
	/* A warning only when something went wrong: a status a device chose
	 * (a test device's verdict, Ctrl-A x) is news, not trouble. */
	log_msg(status == VM_EXIT_ERROR || status == VM_EXIT_PANIC || status == VM_EXIT_CRASH ||
			status == CONFINE_EXIT_STATUS ? CUB_LOG_WARN : CUB_LOG_INFO,
		NULL, "%s: exit status %d (stopped in %ld ms)", exit_reason, status,
		ms_since(&exit_at));
	return status;
}
