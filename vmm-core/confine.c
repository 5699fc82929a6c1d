/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp allow-lists per kind of thread, built with libseccomp.
 *
 * Each list is compiled once to BPF (seccomp_export_bpf) and loaded by
 * each thread of its kind with one seccomp(2) call once the thread's setup
 * is done: vCPU threads before their first KVM_RUN, the event loop and the
 * main thread when the VM is made, helper threads as they start. Filters
 * stack, so a thread a confined thread starts is bound by both.
 *
 * The lists are what the code of that kind of thread does once the guest
 * runs; a plugin declares what its own code needs beyond them (struct
 * cub_syscall). Every list allows what glibc itself does under the calls
 * cubicle makes (malloc's mmap/brk, pthread's futex/clone/rseq, logging's
 * write), clone only for threads (clone3 answers ENOSYS, so glibc falls
 * back to clone, whose flags a filter can see), and mmap/mprotect with
 * PROT_EXEC only on the control thread (which may dlopen http-parser).
 * A forbidden call ends in SIGSYS (enforce): the handler writes
 * one line naming the call and the thread, then the process exits with
 * CONFINE_EXIT_STATUS.
 *
 * A list is first described (every rule, the mode, cubicle's and
 * libseccomp's versions, the architecture): a program compiled from the
 * same description on an earlier start is loaded from the cache instead
 * (bpfcache.h). The lists, their description and their compiling are in
 * confine_lists.c; here the programs are got (preloaded, cached or
 * compiled) and loaded per thread, beside Landlock's rulesets.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <malloc.h>
#include <sys/sysinfo.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bpfcache.h"
#include "cnode.h"
#include "confine.h"
#include "confine_lists.h"
#include "cubicle-build.h"
#include "jail.h"
#include "loader.h"
#include "log.h"
#include "sysnames.h"

static struct {
	enum confine_mode mode;
	bool ready;
	struct sock_fprog prog[CONFINE_KINDS];
	unsigned from_cache; /* programs bpfcache_load gave (the rest compiled) */
	unsigned preloaded;  /* programs confine_preload gave */
	int landlock;  /* a Landlock ruleset allowing no path, or -1 */
	int landlock_ctl; /* the control threads': what confine_allow added, or -1 */
	uint64_t handled; /* the rights both rulesets handle */
	unsigned allowed; /* rules in landlock_ctl */
	struct {
		dev_t dev;
		ino_t ino;
		uint64_t access;
	} given[32]; /* the first rules added, to add none twice */
} cf = { .landlock = -1, .landlock_ctl = -1 };

/* The build confine_start leaves to confine_build: every kind's list,
 * compiled beside the VM's setup. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	bool deferred;    /* for confine_build to run, on the caller's thread */
	bool done;        /* finished (ret and err say how) */
	bool untold;      /* the debug line about it not written yet */
	int ret;
	char err[256];
	const struct registry *reg;
	struct timespec t0; /* start, for the debug line */
} bg = { .lock = PTHREAD_MUTEX_INITIALIZER, .done_cond = PTHREAD_COND_INITIALIZER, .done = true };

static __thread unsigned t_kinds; /* bit per kind the thread holds */
static __thread char t_name[16];

int confine_mode_parse(const char *s)
{
	if (!strcmp(s, "enforce"))
		return CONFINE_ENFORCE;
	if (!strcmp(s, "log"))
		return CONFINE_LOG;
	if (!strcmp(s, "off"))
		return CONFINE_OFF;
	return -1;
}

enum confine_mode confine_default_mode(void)
{
#ifdef __SANITIZE_ADDRESS__
	return CONFINE_LOG;
#else
	return CONFINE_ENFORCE;
#endif
}

const char *confine_mode_name(enum confine_mode m)
{
	return m == CONFINE_ENFORCE ? "enforce" : m == CONFINE_LOG ? "log" : "off";
}

/*
 * SIGSYS from a filter (enforce). Only calls every list allows happen here
 * (write, exit_group), and nothing that takes a lock: the trapping thread
 * may hold malloc's (fork holds it around its clone, forbidden to most
 * threads), so the call's name comes from a table made at build time
 * (sysnames.h), not from libseccomp, whose lookup allocates.
 */
static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	const char *name = NULL;
	char line[256];
	int n;

	(void)sig, (void)uc;
	if (si->si_syscall >= 0 && (size_t)si->si_syscall < sizeof(sys_names) / sizeof(*sys_names))
		name = sys_names[si->si_syscall];
	n = snprintf(line, sizeof(line),
		     "cubicle: error: seccomp: thread %s made the forbidden system call %s (%d); stopping (exit status %d)\n",
		     t_name[0] ? t_name : "?", name ? name : "?", si->si_syscall,
		     CONFINE_EXIT_STATUS);
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		n = 0;
	_exit(CONFINE_EXIT_STATUS);
}

/*
 * A jailed VMM cannot reach the cache (the jail holds no cache folder, and
 * one inside it would be the jailed uid's to rewrite for the next start):
 * its lists were compiled on every start, beside the setup but 1.1-1.4 ms
 * of waiting on a 6.18 PVM host. confine_preload, called as root before
 * the jail, loads each kind's program from root's cache (compiling and
 * storing it there when missing), and the jailed process inherits them in
 * memory. build takes one only for the very list it describes (compared
 * byte for byte): a tap's jail, whose lists allow jail_seal's setresuid,
 * still compiles its own.
 */
static struct {
	char *desc;
	size_t len;
	struct sock_filter *prog;
	unsigned short n;
} pre[CONFINE_KINDS];

static struct sock_filter *take_preloaded(const struct sink *d, unsigned short *n)
{
	for (int k = 0; k < CONFINE_KINDS; k++) {
		struct sock_filter *p = pre[k].prog;

		if (p && pre[k].len == d->len && !memcmp(pre[k].desc, d->desc, d->len)) {
			*n = pre[k].n;
			free(pre[k].desc);
			pre[k].desc = NULL;
			pre[k].prog = NULL;
			return p;
		}
	}
	return NULL;
}

/* Kind @k's program for the list @d describes: from the cache (1), else
 * compiled and kept there (0), or -errno with a message. */
static int cached_or_compiled(enum confine_kind k, const struct registry *reg,
			      const struct sink *d, struct sock_filter **prog, unsigned short *n,
			      char *err, size_t errlen)
{
	int ret;

	if ((*prog = bpfcache_load(d->desc, d->len, n)))
		return 1;
	ret = confine_compile(k, cf.mode, reg, prog, n, err, errlen);
	if (!ret)
		bpfcache_store(d->desc, d->len, *prog, *n);
	return ret;
}

/* Compile one kind's list into cf.prog[k], or take it from what was
 * preloaded, or load it from the cache. */
static int build(enum confine_kind k, const struct registry *reg, char *err, size_t errlen)
{
	struct sink d = { 0 };
	unsigned short n = 0;
	struct sock_filter *prog;
	int ret;

	ret = confine_describe_list(k, cf.mode, reg, &d, err, errlen);
	if (ret) {
		free(d.desc);
		return ret;
	}
	prog = take_preloaded(&d, &n);
	if (prog)
		cf.preloaded++;
	else if ((ret = cached_or_compiled(k, reg, &d, &prog, &n, err, errlen)) > 0)
		cf.from_cache++;
	if (ret >= 0) {
		ret = 0;
		cf.prog[k].len = n;
		cf.prog[k].filter = prog;
	}
	free(d.desc);
	return ret;
}

/*
 * Landlock, where the kernel has it: a ruleset that handles every file
 * access right and grants none, for the threads that run the guest's side
 * of the devices (vCPUs, helpers) and the signal thread. Files they were
 * handed stay usable; no path reaches a file, a folder, a new node. The
 * control threads (the event loop, which serves the API, and the main
 * thread) get a second ruleset handling the same rights and granting what
 * confine_allow adds: the plan's files and folders (run.c).
 */
#define LL_DIR_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_DIR_WRITE                                                                              \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                          \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | \
	 LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM |  \
	 LANDLOCK_ACCESS_FS_REFER)

static void landlock_init(void)
{
	struct landlock_ruleset_attr a = { 0 };
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	if (abi < 1) {
		log_debug("landlock: not available here (%s): seccomp alone fences file access",
			  strerror(errno));
		return;
	}
	a.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
			      LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
			      LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
			      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
			      LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
			      LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
			      LANDLOCK_ACCESS_FS_MAKE_SYM;
	if (abi >= 2)
		a.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
	cf.handled = a.handled_access_fs;
	cf.landlock = (int)syscall(__NR_landlock_create_ruleset, &a, sizeof(a), 0);
	if (cf.landlock < 0) {
		log_warn("landlock: cannot make a ruleset: %s", strerror(errno));
		return;
	}
	fcntl(cf.landlock, F_SETFD, FD_CLOEXEC);
	cf.landlock_ctl = (int)syscall(__NR_landlock_create_ruleset, &a, sizeof(a), 0);
	if (cf.landlock_ctl < 0)
		log_warn("landlock: cannot make the control threads' ruleset: %s", strerror(errno));
	else
		fcntl(cf.landlock_ctl, F_SETFD, FD_CLOEXEC);
}

bool confine_paths_fenced(void)
{
	return cf.landlock_ctl >= 0;
}

const char *confine_hint(int err)
{
	if (err < 0)
		err = -err;
	if (err != EACCES || !(t_kinds & (1u << CONFINE_CONTROL)) || cf.landlock_ctl < 0)
		return "";
	return " (not in a folder this VM may reach by path: add it to api.paths, see cubicle(1), SECCOMP)";
}

int confine_allow(const char *path, bool write)
{
	struct landlock_path_beneath_attr pb = { 0 };
	struct stat st;
	int fd, e = 0;

	if (cf.landlock_ctl < 0 || !path || !*path)
		return 0;
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* nothing there to reach */
	if (fstat(fd, &st) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	pb.parent_fd = fd;
	if (S_ISDIR(st.st_mode))
		pb.allowed_access = LL_DIR_READ | (write ? LL_DIR_WRITE : 0);
	else
		pb.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | (write ? LANDLOCK_ACCESS_FS_WRITE_FILE : 0);
	pb.allowed_access &= cf.handled;
	/* the same folder again (every library's, the disks'): nothing new */
	for (unsigned i = 0; i < cf.allowed && i < CUB_ARRAY_SIZE(cf.given); i++)
		if (cf.given[i].dev == st.st_dev && cf.given[i].ino == st.st_ino &&
		    !(pb.allowed_access & ~cf.given[i].access)) {
			close(fd);
			return 0;
		}
	if (syscall(__NR_landlock_add_rule, cf.landlock_ctl, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
		e = -errno;
	} else {
		if (cf.allowed < CUB_ARRAY_SIZE(cf.given)) {
			cf.given[cf.allowed].dev = st.st_dev;
			cf.given[cf.allowed].ino = st.st_ino;
			cf.given[cf.allowed].access = pb.allowed_access;
		}
		cf.allowed++;
	}
	close(fd);
	if (!e)
		log_debug("landlock: the control threads may %s %s", write ? "read and write" : "read", path);
	return e;
}

/* The kind whose compiled program kind @k loads: the first with the same
 * list (vCPUs and workers share one; the signal thread's has its own rule). */
static int list_of(int k)
{
	for (int j = 0; j < k; j++)
		if (k != CONFINE_SIGNALS && j != CONFINE_SIGNALS &&
		    confine_kinds[j].plugin_calls == confine_kinds[k].plugin_calls &&
		    confine_kinds[j].io == confine_kinds[k].io &&
		    confine_kinds[j].control == confine_kinds[k].control)
			return j;
	return k;
}

static void *bg_build(void *arg)
{
	char err[sizeof(bg.err)] = "";
	int ret = 0;

	(void)arg;
	for (int k = 0; !ret && k < CONFINE_KINDS; k++)
		if (list_of(k) == k)
			ret = build((enum confine_kind)k, bg.reg, err, sizeof(err));
	pthread_mutex_lock(&bg.lock);
	bg.ret = ret;
	memcpy(bg.err, err, sizeof(err));
	bg.done = true;
	pthread_cond_broadcast(&bg.done_cond);
	pthread_mutex_unlock(&bg.lock);
	return NULL;
}

static long us_between(const struct timespec *a, const struct timespec *b)
{
	return (long)(b->tv_sec - a->tv_sec) * 1000000 + (b->tv_nsec - a->tv_nsec) / 1000;
}

/* The build finished: 0, or its -errno with the message in @err. */
static int bg_wait(char *err, size_t errlen)
{
	struct timespec w0, t;
	bool tell;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &w0);
	pthread_mutex_lock(&bg.lock);
	while (!bg.done)
		pthread_cond_wait(&bg.done_cond, &bg.lock);
	tell = bg.untold;
	bg.untold = false;
	ret = bg.ret;
	if (ret && err)
		snprintf(err, errlen, "%s", bg.err);
	pthread_mutex_unlock(&bg.lock);
	if (tell) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		log_debug("seccomp: filters ready beside the setup (%u of them from the cache, %u read before the jail); asked for after %ld us, waited %ld us",
			  cf.from_cache, cf.preloaded, us_between(&bg.t0, &w0), us_between(&w0, &t));
	}
	return ret;
}

/* With @deferred, the build is left to confine_build; else done here. */
static int init(enum confine_mode mode, const struct registry *reg, bool deferred, char *err,
		size_t errlen)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	int ret;

	confine_free();
	cf.mode = mode;
	if (mode == CONFINE_OFF)
		return 0;
	/* malloc sizes its arena limit from the CPU count the first time a
	 * thread needs an arena of its own, reading /sys (openat) on whatever
	 * thread that is: set the same limit (8 per CPU) now, while open
	 * is allowed. */
	mallopt(M_ARENA_MAX, 8 * get_nprocs());
	/* The first localtime() (the CMOS clock's, on a vCPU) reads
	 * /etc/localtime: read it now. */
	tzset();
	if (mode == CONFINE_ENFORCE) /* log lets everything through */
		landlock_init();
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0) {
		ret = errf(err, errlen, -errno, "seccomp: SIGSYS handler: %s", strerror(errno));
		confine_free();
		return ret;
	}
	bg.reg = reg;
	bg.ret = 0;
	bg.err[0] = '\0';
	bg.done = false;
	bg.untold = deferred;
	clock_gettime(CLOCK_MONOTONIC, &bg.t0);
	bg.deferred = deferred;
	if (!deferred)
		bg_build(NULL);
	cf.ready = true;
	if (deferred)
		return 0;
	ret = bg_wait(err, errlen);
	if (ret)
		confine_free();
	return ret;
}

int confine_init(enum confine_mode mode, const struct registry *reg, char *err, size_t errlen)
{
	return init(mode, reg, false, err, errlen);
}

int confine_start(enum confine_mode mode, const struct registry *reg, char *err, size_t errlen)
{
	return init(mode, reg, true, err, errlen);
}

void confine_build(void)
{
	bool run;

	pthread_mutex_lock(&bg.lock);
	run = bg.deferred;
	bg.deferred = false;
	pthread_mutex_unlock(&bg.lock);
	if (run)
		bg_build(NULL);
}

void confine_preload(enum confine_mode mode, const struct registry *reg)
{
	char err[256];

	if (mode == CONFINE_OFF)
		return;
	cf.mode = mode; /* the lists name it; init sets it again */
	for (int k = 0; k < CONFINE_KINDS; k++) {
		struct sink d = { 0 };
		unsigned short n = 0;
		struct sock_filter *prog;

		free(pre[k].desc);
		free(pre[k].prog);
		pre[k].desc = NULL;
		pre[k].prog = NULL;
		/* what fails here the jailed start compiles, and says why */
		if (list_of(k) != k ||
		    confine_describe_list((enum confine_kind)k, cf.mode, reg, &d, err, sizeof(err)) ||
		    cached_or_compiled((enum confine_kind)k, reg, &d, &prog, &n, err, sizeof(err)) < 0) {
			free(d.desc);
			continue;
		}
		pre[k].desc = d.desc;
		pre[k].len = d.len;
		pre[k].prog = prog;
		pre[k].n = n;
	}
}

unsigned confine_preloaded(void)
{
	return cf.preloaded;
}

int confine_ready(char *err, size_t errlen)
{
	return cf.ready ? bg_wait(err, errlen) : 0;
}

int confine_thread(enum confine_kind kind, const char *name)
{
	char err[sizeof(bg.err)];
	sigset_t sys;
	int ret;

	if (name)
		snprintf(t_name, sizeof(t_name), "%s", name);
	else if (!t_name[0] && prctl(PR_GET_NAME, t_name) < 0)
		t_name[0] = '\0';
	if (!cf.ready || (t_kinds & (1u << kind)))
		return 0;
	ret = bg_wait(err, sizeof(err));
	if (ret) {
		log_err("seccomp: cannot confine thread %s (%s): %s", t_name, confine_kinds[kind].name,
			err);
		return ret;
	}
	/* SIGSYS must reach the handler, not kill silently */
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    (confine_kinds[kind].no_paths && cf.landlock >= 0 &&
	     syscall(__NR_landlock_restrict_self, cf.landlock, 0) < 0) ||
	    (kind == CONFINE_CONTROL && cf.landlock_ctl >= 0 &&
	     syscall(__NR_landlock_restrict_self, cf.landlock_ctl, 0) < 0) ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &cf.prog[list_of(kind)]) < 0) {
		int e = errno;

		log_err("seccomp: cannot confine thread %s (%s): %s", t_name, confine_kinds[kind].name,
			strerror(e));
		return -e;
	}
	t_kinds |= 1u << kind;
	return 0;
}

bool confine_thread_has(enum confine_kind kind)
{
	return t_kinds & (1u << kind);
}

void confine_free(void)
{
	bg_wait(NULL, 0);
	cf.ready = false;
	if (cf.landlock >= 0)
		close(cf.landlock);
	if (cf.landlock_ctl >= 0)
		close(cf.landlock_ctl);
	cf.landlock = cf.landlock_ctl = -1;
	cf.handled = 0;
	cf.allowed = 0;
	cf.from_cache = cf.preloaded = 0;
	for (int k = 0; k < CONFINE_KINDS; k++) {
		free(cf.prog[k].filter);
		cf.prog[k].filter = NULL;
		cf.prog[k].len = 0;
	}
}
