/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail's processes (jail.c enters the jail with them). The caller of
 * jail_enter starts two children in a new pid namespace, both sharing its
 * memory (CLONE_VM): pid 1, the namespace's init (jail_init, confined to
 * waiting at once), and pid 2, the VMM, which takes over the caller's stack
 * and address space as they are (arch_clone_vm_split) and sets the jail up
 * for itself (jail.c); the caller then leaves that memory to the VMM by
 * exec'ing cubicle again as the supervisor outside (`cubicle
 * __jail-supervise`: it forwards signals, waits and removes the cgroup).
 * No copy of the address space is made, so the VMM's first touch of each
 * of its pages costs nothing more than it would unjailed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "bpfcache.h"
#include "cnode.h"
#include "cubicle-build.h"
#include "confine.h"
#include "jail.h"
#include "jail_proc.h"
#include "log.h"
#include "vm.h"

/* The signals the supervisor forwards to the VMM (and SIGCHLD): blocked,
 * waited for with sigwaitinfo. */
void jail_sigs(sigset_t *s)
{
	sigemptyset(s);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGHUP);
	sigaddset(s, SIGCHLD);
}

/*
 * pid 1 of the jail's namespace. The kernel gives a namespace's init only
 * the signals it has handlers for, from inside and from outside alike, so
 * a VMM there would ignore a SIGABRT sent to it and could not die of its
 * own abort(): the VMM is pid 2, with the usual signal semantics, and pid
 * 1 is this small init. It is a CLONE_VM child of the caller, on a stack
 * of its own: a process of its own (its own pid, fds, credentials,
 * seccomp filter) that shares the memory which becomes the VMM's instead
 * of copying it; with no thread-local storage of its own it calls no libc
 * function, only the kernel (arch_raw_syscall). It closes every fd and
 * loads its seccomp filter (compiled before it was started) at once:
 * waiting and reaping only, anything else ends the process, so that what
 * the VMM's memory may come to hold cannot make it do more, although it
 * stays root (the VMM, another uid, can neither trace it nor signal it);
 * the VMM checks that the filter is in place before the guest's first
 * instruction (jail_alone). It is born in the VMM's cgroup
 * (jail_spawn_init). It then reaps whatever is orphaned in the namespace until the
 * supervisor kills it after the VMM, or dies with the supervisor
 * (PR_SET_PDEATHSIG); the kernel then ends what is left in the namespace.
 */
static char jail_init_stack[16 << 10] __attribute__((aligned(16)));

#define RAW(nr, a, b, c, d, e) \
	arch_raw_syscall((nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

static __attribute__((no_sanitize("address", "undefined"))) int jail_init(void *arg)
{
	struct jail_init_arg *ia = arg;
	uint64_t all = ~0ull, chld = 1ull << (SIGCHLD - 1); /* the kernel's sigset_t */
	siginfo_t si;

	RAW(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	RAW(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, sizeof(all), 0);
	RAW(SYS_close_range, 0, ~0u, 0, 0, 0);
	RAW(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	ia->loaded = RAW(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &ia->prog, 0, 0);
	for (;;)
		if (RAW(SYS_rt_sigtimedwait, &chld, &si, NULL, sizeof(chld), 0) == SIGCHLD)
			while (RAW(SYS_wait4, -1, NULL, WNOHANG | __WALL, NULL, 0) > 0)
				;
	return 0;
}

/*
 * The init's filter, into @ia: what jail_init calls after loading it (and
 * the kernel's restart of an interrupted wait). From root's cache of
 * compiled filters when it holds this list (bpfcache.h: compiling it costs
 * 0.2-0.6 ms of a jailed start on this project's PVM test host), else
 * compiled and kept there. -errno if it cannot be made: the jail is then
 * not entered.
 */
int jail_init_filter(struct jail_init_arg *ia)
{
	static const char *const ok[] = { "rt_sigtimedwait", "wait4", "restart_syscall",
					   "exit", "exit_group" };
	const struct scmp_version *v = seccomp_version();
	struct sock_filter *prog;
	scmp_filter_ctx ctx;
	unsigned short n;
	char desc[512];
	int len, ret;

	/* what the program depends on: the list, libseccomp, its API level
	 * and the architecture (as confine_describe_list's) */
	len = snprintf(desc, sizeof(desc),
		       "cubicle %s jail init list 1\nlibseccomp %u.%u.%u api %u\narch %u\nkill-process\n",
		       PACKAGE_VERSION, v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0,
		       seccomp_api_get(), (unsigned)seccomp_arch_native());
	for (unsigned i = 0; i < sizeof(ok) / sizeof(*ok) && len > 0 && (size_t)len < sizeof(desc); i++)
		len += snprintf(desc + len, sizeof(desc) - (size_t)len, "%s\n", ok[i]);
	if (len > 0 && (size_t)len < sizeof(desc) && (prog = bpfcache_load(desc, (size_t)len, &n))) {
		ia->prog.filter = prog;
		ia->prog.len = n;
		return 0;
	}
	ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	ret = ctx ? 0 : -ENOMEM;
	for (unsigned i = 0; !ret && i < sizeof(ok) / sizeof(*ok); i++)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name(ok[i]), 0);
	if (!ret && !(ret = confine_export(ctx, &prog, &n))) {
		ia->prog.filter = prog;
		ia->prog.len = n;
		if (len > 0 && (size_t)len < sizeof(desc))
			bpfcache_store(desc, (size_t)len, prog, n);
	}
	seccomp_release(ctx);
	return ret;
}

/*
 * The end of the caller's time on the VMM's memory: its exec closes
 * @exec_fd's other end (O_CLOEXEC) only once its new address space is in
 * place. And the init's filter, in place. Both before the guest's first
 * instruction (jail_seal): until then the VMM's memory holds nothing the
 * guest wrote. 0, or -errno after a message; @exec_fd is closed.
 */
int jail_alone(int exec_fd, struct jail_init_arg *ia, char *err, size_t errlen)
{
	ssize_t n;
	char b;

	do
		n = read(exec_fd, &b, 1);
	while (n < 0 && errno == EINTR);
	close(exec_fd);
	if (n != 0)
		return errf(err, errlen, -ECHILD,
			    "jail: the supervisor did not start (cubicle could not exec itself: see the line before)");
	for (int i = 0; ia->loaded == JAIL_INIT_PENDING && i < 20000; i++)
		usleep(50);
	if (ia->loaded)
		return errf(err, errlen, ia->loaded == JAIL_INIT_PENDING ? -ETIMEDOUT : (int)ia->loaded,
			    "jail: the namespace's init could not load its seccomp filter: %s",
			    ia->loaded == JAIL_INIT_PENDING ? "it did not run" : strerror((int)-ia->loaded));
	return 0;
}

static char jail_handoff_stack[16 << 10] __attribute__((aligned(16)));

/*
 * The caller off its CPU, so that the VMM runs now: the new process is
 * queued where its parent runs, and the scheduler moves no task that ran
 * in the last half millisecond (cache-hot) to an idle CPU, so the VMM sat
 * behind the caller's network namespace and exec (0.50-0.65 ms of a jailed
 * start to its first instruction on this project's 2-CPU PVM host; 0.04-0.07
 * ms once the caller steps aside). Allowing every CPU but this one moves
 * the caller at once; allowing every one again lifts the limit, not the
 * move. Best effort: on one CPU, or if a call fails, nothing changes.
 */
static __attribute__((no_sanitize("address", "undefined"))) void step_aside(void)
{
	unsigned long all[16], others[16];
	unsigned cpu = 0;
	/* the bytes the kernel wrote: whole words of its CPU mask */
	long n = RAW(SYS_sched_getaffinity, 0, sizeof(all), all, 0, 0);
	bool any = false;

	if (n <= 0 || RAW(SYS_getcpu, &cpu, NULL, NULL, 0, 0) < 0 || cpu >= 8 * (unsigned long)n)
		return;
	for (unsigned i = 0; i < (unsigned long)n / sizeof(*all); i++) {
		others[i] = all[i];
		if (i == cpu / (8 * sizeof(*all)))
			others[i] &= ~(1ul << (cpu % (8 * sizeof(*all))));
		any |= others[i] != 0;
	}
	if (any && RAW(SYS_sched_setaffinity, 0, n, others, 0, 0) == 0)
		RAW(SYS_sched_setaffinity, 0, n, all, 0, 0);
}

/*
 * The caller, on its own small stack once the VMM (pid @vmm) has its
 * memory: off the VMM's CPU (step_aside), the network namespace, then exec
 * of this program as the supervisor (jail_supervise_main), which gives the
 * caller an address space of its own. If that fails: both children killed,
 * the cgroup removed, a line on stderr, exit.
 */
static __attribute__((noreturn, no_sanitize("address", "undefined"))) void jail_handoff(void *arg,
											 long vmm)
{
	struct jail_handoff *h = arg;
	long v = vmm;
	char t[24];
	int n = 0, e;

	/* glibc set this thread's clear_child_tid to its thread id's word in
	 * the memory the VMM now has: the exec would zero that word there */
	RAW(SYS_set_tid_address, NULL, 0, 0, 0, 0);
	step_aside();
	if (h->pool_entry[0]) { /* taken: out of the pool before the lock goes */
		RAW(SYS_umount2, h->pool_entry, MNT_DETACH, 0, 0, 0);
		RAW(SYS_unlinkat, AT_FDCWD, h->pool_entry, 0, 0, 0);
	}
	if (h->net_wfd >= 0) {
		e = (int)-RAW(SYS_unshare, CLONE_NEWNET, 0, 0, 0, 0);
		RAW(SYS_write, h->net_wfd, &e, sizeof(e), 0, 0);
		RAW(SYS_close, h->net_wfd, 0, 0, 0, 0);
	}
	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < (int)sizeof(t) - 1);
	for (int i = 0; i < n; i++)
		h->vmm[i] = t[n - 1 - i];
	h->vmm[n] = '\0';
	RAW(SYS_execve, "/proc/self/exe", h->argv, h->envp_copy, 0, 0);
	RAW(SYS_kill, vmm, SIGKILL, 0, 0, 0);
	RAW(SYS_kill, h->init, SIGKILL, 0, 0, 0);
	RAW(SYS_wait4, vmm, NULL, __WALL, NULL, 0);
	RAW(SYS_wait4, h->init, NULL, __WALL, NULL, 0);
	RAW(SYS_unlinkat, AT_FDCWD, h->cg, AT_REMOVEDIR, 0, 0);
	RAW(SYS_write, 2, h->fail, h->fail_len, 0, 0);
	for (;;)
		RAW(SYS_exit_group, VM_EXIT_ERROR, 0, 0, 0, 0);
}

/* The number of this process's threads (0 if unknown). */
static int threads(void)
{
	char buf[4096], *t;
	ssize_t n;
	int fd;

	if ((fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return (t = strstr(buf, "\nThreads:")) ? atoi(t + 9) : 0;
}

/*
 * Whether this process has one thread now. glibc's flag stays false once
 * a thread was made, even after it ended: then the kernel is asked, a few
 * times, since a thread just joined clears its id, which pthread_join
 * waits for, a moment before it leaves the process.
 */
static bool one_thread(void)
{
	int n = 0;

	if (__libc_single_threaded)
		return true;
	for (int i = 0; i < 200 && (n = threads()) > 1; i++)
		usleep(50);
	return n == 1;
}

/*
 * The namespace's init (jail_init, on jail_init_stack, sharing this
 * memory), born in the cgroup @cg with the VMM that follows it: both share
 * the memory whose pages the cgroup is charged for (the kernel charges an
 * address space's pages to the cgroup of its owner, which becomes one of
 * them when the caller execs), and a process is born there, with clone3's
 * CLONE_INTO_CGROUP (Linux 5.7), so that it never migrates: a write to
 * cgroup.procs takes the cgroup core's write lock, which waits for an RCU
 * grace period (~10 ms a start on a 6.18 host). *@cgfd: the cgroup's fd for
 * the VMM's clone, or -1 where it cannot be used (the VMM then moves both
 * in, join_cgroup). The init's pid, or -errno (-EBUSY: threads run, which
 * the split that follows cannot have).
 */
long jail_spawn_init(const char *cg, struct jail_init_arg *ia, int *cgfd)
{
	struct clone_args ca = { .flags = CLONE_VM | CLONE_INTO_CGROUP, .exit_signal = SIGCHLD,
				 .stack = (uint64_t)(uintptr_t)jail_init_stack,
				 .stack_size = sizeof(jail_init_stack) };
	long pid = -EBADF;
	int fd;

	*cgfd = -1;
	if (!one_thread())
		return -EBUSY;
	fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		ca.cgroup = (uint64_t)fd;
		pid = arch_clone3_fn(&ca, sizeof(ca), jail_init, ia);
		if (pid > 0) {
			*cgfd = fd;
			return pid;
		}
		close(fd);
	}
	log_debug("jail: clone3 into the cgroup: %s; the VMM moves itself and the init in",
		  strerror((int)-pid));
	ca.flags = CLONE_VM;
	ca.cgroup = 0;
	return arch_clone3_fn(&ca, sizeof(ca), jail_init, ia);
}

/*
 * The VMM's process: a CLONE_VM child that goes on from here on the
 * caller's stack with the caller's memory (arch_clone_vm_split), while the
 * caller moves to jail_handoff. Born in the cgroup @cgfd names (clone3's
 * CLONE_INTO_CGROUP, Linux 5.7; -1: not) so that it never migrates (see
 * jail_spawn_init). Returns 0 in the child, or -errno in the caller when no
 * child was made.
 *
 * The child is glibc's main thread as the caller left it: its thread-local
 * storage, its heap, its stdio (flushed before). The kernel gives it no
 * robust-futex list and, for a CLONE_VM child, no rseq area: rseq is
 * registered again here (glibc's sched_getcpu reads it); glibc's cached
 * thread id stays the caller's, which is sound for what the VMM's main
 * thread does with it, which is nothing: it takes no robust or
 * priority-inheriting mutex, nothing signals it by its pthread_t (glibc's
 * raise and abort ask the kernel for the id), and every thread it starts
 * gets its own id from the kernel. The caller has one thread
 * (jail_spawn_init checked).
 */
long jail_clone_vmm(int cgfd, struct jail_handoff *h)
{
	struct clone_args ca = { .flags = CLONE_VM | (cgfd >= 0 ? CLONE_INTO_CGROUP : 0),
				 .exit_signal = SIGCHLD, .cgroup = cgfd >= 0 ? (uint64_t)cgfd : 0 };
	long pid;

	pid = arch_clone_vm_split(&ca, sizeof(ca), jail_handoff_stack + sizeof(jail_handoff_stack),
				  jail_handoff, h);
	if (pid < 0)
		return pid;
	/* glibc registered its area with the kernel's original size (32
	 * bytes, the least the kernel takes); __rseq_size says how much of it
	 * is in use (20 in glibc 2.36) */
	if (__rseq_size > 0 &&
	    syscall(SYS_rseq, (char *)arch_thread_pointer() + __rseq_offset,
		    __rseq_size > 32 ? __rseq_size : 32, 0, RSEQ_SIG) < 0)
		log_debug("jail: the VMM's rseq area: %s", strerror(errno));
	return 0;
}

/*
 * The supervisor's next children in its own pid namespace again, not in
 * the jail's (unshare(CLONE_NEWPID) set that for them, and an exec keeps
 * it): what it may start later, a sanitizer's leak check at exit, could
 * not be started there once the jail's init is gone. /proc/self/ns/pid is
 * the namespace it is in.
 */
void jail_own_pid_ns(void)
{
	int fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || setns(fd, CLONE_NEWPID) < 0)
		log_debug("jail: back to the supervisor's pid namespace: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

static int not_for_users(void)
{
	fprintf(stderr, "cubicle: __jail-supervise is cubicle --jail's own supervisor, for its own children\n");
	return 2;
}

/* Whether @pid is a child of this process that has not been reaped. */
static bool my_child(pid_t pid)
{
	siginfo_t si = { 0 };

	return pid > 0 && waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) == 0;
}

/*
 * `cubicle __jail-supervise VMM INIT CGROUP LEVEL POOL SIZE -- ARGS`, what
 * jail_enter's caller execs itself as (jail_handoff): forward SIGINT,
 * SIGTERM and SIGHUP to the VMM, wait for it, end the init (and with it
 * whatever the VMM left in the namespace), remove the cgroup, exit as the
 * VMM did (128 + the signal that ended it, as a shell gives it). With a
 * network namespace pool (POOL not "-"), fill it to SIZE once the VMM has
 * run for FILL_AFTER_MS (out of the way of its start, on a host with few
 * CPUs), or when it ends if that is sooner. The signals were blocked before
 * the exec, which keeps them so. Only for jail_enter: VMM and INIT must be
 * this process's children and CGROUP its own (".../vm-PID").
 */
#define FILL_AFTER_MS 50
int jail_supervise_main(int argc, char **argv)
{
	struct timespec fill_at = { FILL_AFTER_MS / 1000, FILL_AFTER_MS % 1000 * 1000000L };
	const char *pool;
	unsigned pool_size;
	pid_t vmm, init;
	bool init_gone = false;
	int status = 0, code = -1;
	char own[32];
	const char *cg, *base;
	siginfo_t si;
	sigset_t s;

	prctl(PR_SET_NAME, "cubicle");
	if (argc < 8 || (argc > 8 && strcmp(argv[8], "--")))
		return not_for_users();
	pool = strcmp(argv[6], "-") ? argv[6] : NULL;
	pool_size = (unsigned)atoi(argv[7]);
	vmm = (pid_t)atoi(argv[2]);
	init = (pid_t)atoi(argv[3]);
	cg = argv[4];
	base = strrchr(cg, '/');
	snprintf(own, sizeof(own), "/vm-%d", (int)getpid());
	if (!my_child(vmm) || !my_child(init) || !base || strcmp(base, own))
		return not_for_users();
	log_set_level(atoi(argv[5]));
	jail_own_pid_ns();
	/* the caller blocked every signal; the supervisor waits for these */
	jail_sigs(&s);
	sigprocmask(SIG_SETMASK, &s, NULL);
	while (code < 0) {
		int sig = pool ? sigtimedwait(&s, &si, &fill_at) : sigwaitinfo(&s, &si);
		pid_t w;

		if (sig < 0 && pool && errno == EAGAIN) {
			jail_netns_fill(pool, pool_size);
			pool = NULL;
		}
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(vmm, sig);
			continue;
		}
		while (code < 0 && (w = waitpid(-1, &status, WNOHANG | __WALL)) > 0)
			if (w == init)
				init_gone = true;
			else if (w == vmm)
				code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	}
	if (!init_gone) {
		kill(init, SIGKILL);
		waitpid(init, NULL, __WALL);
	}
	/* The cgroup empties as the pid namespace's last tasks are reaped. */
	for (int i = 0; i < 200 && rmdir(cg) < 0 && errno == EBUSY; i++)
		usleep(10000);
	if (access(cg, F_OK) == 0)
		log_warn("jail: cannot remove the cgroup %s: %s", cg, strerror(errno));
	else
		log_debug("jail: cgroup %s removed", cg);
	if (pool)
		jail_netns_fill(pool, pool_size);
	return code;
}

void jail_handoff_free(struct jail_handoff *h)
{
	free(h->argv);
	free(h->cmdline);
	free(h->envp_copy);
	h->argv = h->envp_copy = NULL;
	h->cmdline = NULL;
}

/*
 * jail_handoff's arguments, made while libc may still be called: the
 * supervisor's command line (the VMM's pid is written in by jail_handoff),
 * ending with this process's own after "--", so that ps and pgrep show the
 * supervisor as the command it runs; and a copy of the environment's
 * pointers (the VMM owns environ from the split on).
 */
int jail_handoff_prepare(struct jail_handoff *h, const char *cg, const char *pool,
			 unsigned pool_size, char *err, size_t errlen)
{
	size_t n = 0, len = 0, cap = 4096, nargs = 0, k = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC), l;
	ssize_t got = 0;

	h->cmdline = malloc(cap + 1);
	while (fd >= 0 && h->cmdline && (got = read(fd, h->cmdline + len, cap - len)) > 0) {
		len += (size_t)got;
		if (len == cap) {
			char *more = realloc(h->cmdline, 2 * cap + 1);

			if (!more)
				break;
			h->cmdline = more;
			cap *= 2;
		}
	}
	if (fd >= 0)
		close(fd);
	if (h->cmdline) {
		if (len && h->cmdline[len - 1])
			h->cmdline[len++] = '\0';
		for (size_t i = 0; i < len; i++)
			nargs += !h->cmdline[i];
	}
	while (environ && environ[n])
		n++;
	h->argv = calloc(10 + nargs, sizeof(char *));
	h->envp_copy = calloc(n + 1, sizeof(char *));
	if (!h->argv || !h->envp_copy || !h->cmdline) {
		jail_handoff_free(h);
		return errf(err, errlen, -ENOMEM, "--jail: out of memory");
	}
	for (size_t i = 0; i < n; i++)
		h->envp_copy[i] = environ[i];
	snprintf(h->cg, sizeof(h->cg), "%s", cg);
	snprintf(h->level, sizeof(h->level), "%d", log_get_level());
	h->argv[k++] = (char *)"cubicle";
	h->argv[k++] = (char *)"__jail-supervise";
	h->argv[k++] = h->vmm;
	h->argv[k++] = h->init_s;
	h->argv[k++] = h->cg;
	h->argv[k++] = h->level;
	h->argv[k++] = (char *)(pool ? pool : "-");
	snprintf(h->pool_size, sizeof(h->pool_size), "%u", pool_size ? pool_size : 4);
	h->argv[k++] = h->pool_size;
	h->argv[k++] = (char *)"--";
	for (size_t i = 0; i < len; i += strlen(h->cmdline + i) + 1)
		h->argv[k++] = h->cmdline + i;
	h->argv[k] = NULL;
	l = snprintf(h->fail, sizeof(h->fail),
		     "cubicle: error: --jail: cannot exec /proc/self/exe as the jail's supervisor; the VMM was stopped\n");
	h->fail_len = l > 0 && (size_t)l < sizeof(h->fail) ? (size_t)l : 0;
	return 0;
}

