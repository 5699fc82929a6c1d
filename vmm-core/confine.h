/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Confinement: seccomp filters (libseccomp), one allow-list per kind of
 * thread, each thread installing its own once its setup is done. The
 * filters are compiled once (confine_init) and loaded per thread as plain
 * BPF, so a thread pays a single seccomp(2) call.
 */
#ifndef CUBICLE_CONFINE_H
#define CUBICLE_CONFINE_H

#include <stdbool.h>
#include <stddef.h>

struct registry;

enum confine_mode {
	CONFINE_ENFORCE = 0, /* a forbidden call: one log line, exit 159 */
	CONFINE_LOG,         /* allowed, and the kernel logs it (audit) */
	CONFINE_OFF,         /* no filter */
};

enum confine_kind {
	CONFINE_CONTROL = 0, /* the event loop (devices' fds, the API) and the main thread */
	CONFINE_VCPU,        /* vCPU threads: KVM_RUN and the devices' I/O handlers */
	CONFINE_WORKER,      /* helper threads: the devices' I/O workers, Uffd */
	CONFINE_SIGNALS,     /* the signal thread */
	CONFINE_KINDS,
};

/* The exit status after a forbidden system call (128 + SIGSYS). */
#define CONFINE_EXIT_STATUS 159

/* Parse "enforce", "log" or "off": the mode, or -1. */
int confine_mode_parse(const char *s);
const char *confine_mode_name(enum confine_mode m);
/* enforce; log in a sanitizer build (LeakSanitizer ptraces the process at
 * exit). */
enum confine_mode confine_default_mode(void);

/*
 * Compile the filters of every kind in @mode, adding the system calls the
 * plugins of @reg declare (may be NULL) to every kind but the signal
 * thread's, and install the SIGSYS handler. Main thread, before any other
 * thread starts. 0, or -errno with a message in @err.
 */
int confine_init(enum confine_mode mode, const struct registry *reg, char *err, size_t errlen);

/*
 * confine_init with the compiling left to the next confine_build call, on
 * a thread the caller starts anyway (cubicle's signal thread, beside the
 * VM's setup: off the critical path on a host with a spare CPU).
 * confine_ready waits for it and says whether the filters compiled (0, or
 * -errno with the message in @err); confine_thread waits for it too: the
 * caller must make sure confine_build runs (on that thread, or on its own
 * if it cannot start it). confine_build does nothing when there is
 * nothing left to compile.
 */
int confine_start(enum confine_mode mode, const struct registry *reg, char *err, size_t errlen);
int confine_ready(char *err, size_t errlen);
void confine_build(void);

/*
 * Before a jail (main thread, as root, no other thread): load each kind's
 * program for @mode and @reg from the cache, compiling and storing the
 * missing ones, for the jailed process's confine_start to take instead of
 * compiling (it cannot reach the cache). Best effort: what fails here is
 * compiled there. confine_preloaded: how many programs the last
 * confine_init or confine_start took from it.
 */
void confine_preload(enum confine_mode mode, const struct registry *reg);
unsigned confine_preloaded(void);

/*
 * Confine the calling thread with @kind's filter and call it @name in the
 * line a forbidden call writes (NULL: its own name). Once per thread and
 * kind; filters stack, so a thread started by a confined thread keeps its
 * parent's filter as well. A no-op before confine_init, with mode off, and
 * in a thread already holding @kind's filter. 0, or -errno (logged): a
 * failure to confine is fatal to the caller's plan (the VM is not
 * started).
 */
int confine_thread(enum confine_kind kind, const char *name);

/*
 * Landlock for the control threads (where the kernel has it, in enforce
 * mode): after confine_init and before they are confined, each call lets
 * them reach @path by name — a folder: what is beneath it, to read, and
 * with @write also to write, make (files, folders, sockets, FIFOs,
 * symlinks), remove and rename; a file: to read it, and with @write to
 * write it. Nothing else is reached by path once they are confined. 0 (also
 * when nothing is fenced, or @path does not exist), or -errno.
 */
int confine_allow(const char *path, bool write);
/* Whether the control threads' paths are fenced (confine_allow matters). */
bool confine_paths_fenced(void);

/* For a message about a path that failed with errno @err (either sign):
 * why, when it is the control threads' Landlock fence (EACCES in a
 * confined control thread); else "". */
const char *confine_hint(int err);

/* Is the calling thread under @kind's filter? */
bool confine_thread_has(enum confine_kind kind);

/* Free the compiled filters (threads keep theirs). */
void confine_free(void);

/* A libseccomp filter (@ctx, a scmp_filter_ctx) exported to BPF in memory:
 * *@prog (malloc'd, *@n instructions) for seccomp(2) without libseccomp.
 * 0 or -errno. */
struct sock_filter;
int confine_export(void *ctx, struct sock_filter **prog, unsigned short *n);

#endif
