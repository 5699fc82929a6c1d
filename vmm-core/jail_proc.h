/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail's processes (jail_proc.c), for jail.c: the namespace's init, the
 * split by which the VMM keeps its caller's memory and stack while the
 * caller execs itself as the supervisor outside, and that supervisor.
 */
#ifndef CUBICLE_JAIL_PROC_H
#define CUBICLE_JAIL_PROC_H

#include <limits.h>
#include <linux/filter.h>
#include <signal.h>
#include <stddef.h>

/* The init's own (jail_init): its filter, and what loading it answered. */
#define JAIL_INIT_PENDING 1L
struct jail_init_arg {
	struct sock_fprog prog;  /* its seccomp filter */
	volatile long loaded;    /* JAIL_INIT_PENDING, then what seccomp(2) answered */
};

/*
 * What the caller needs once the VMM runs on its memory (jail_handoff),
 * made before: from then on it may call no libc function.
 */
struct jail_handoff {
	int net_wfd;       /* the network namespace's pipe (net_handoff), or -1 */
	char pool_entry[PATH_MAX]; /* the pool's entry taken, unmounted and removed; "" none */
	char pool_size[16];
	pid_t init;
	char cg[PATH_MAX];
	char **argv;       /* cubicle __jail-supervise VMM INIT CGROUP LEVEL POOL SIZE -- ARGS */
	char vmm[24], init_s[24], level[16];
	char *cmdline;     /* ARGS: this process's own, read from /proc/self/cmdline */
	char **envp_copy;
	char fail[200];
	size_t fail_len;
};

/* The init's filter, into @ia: 0, or -errno (the jail is then not entered). */
int jail_init_filter(struct jail_init_arg *ia);
/* The namespace's init, born in the cgroup @cg: its pid or -errno (-EBUSY:
 * threads run); *@cgfd the cgroup's fd for jail_clone_vmm, or -1 (the VMM
 * then moves both in). */
long jail_spawn_init(const char *cg, struct jail_init_arg *ia, int *cgfd);
/* @h made, while libc may be called (@pool: the network namespace pool
 * the supervisor fills, or NULL); freed again if the jail is not entered. */
int jail_handoff_prepare(struct jail_handoff *h, const char *cg, const char *pool,
			 unsigned pool_size, char *err, size_t errlen);
void jail_handoff_free(struct jail_handoff *h);
/* The VMM's process: 0 in it, -errno in the caller when none was made; the
 * caller, on success, never returns (it execs the supervisor). */
long jail_clone_vmm(int cgfd, struct jail_handoff *h);
/* Before the guest's first instruction: the caller's exec is done (EOF on
 * @exec_fd, closed here) and the init has its filter. 0, or -errno. */
int jail_alone(int exec_fd, struct jail_init_arg *ia, char *err, size_t errlen);
/* SIGINT, SIGTERM, SIGHUP and SIGCHLD: what the supervisor waits for. */
void jail_sigs(sigset_t *s);
/* The calling process's next children in its own pid namespace again. */
void jail_own_pid_ns(void);

#endif
