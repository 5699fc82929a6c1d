/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail: namespaces, a root of bind mounts, a cgroup, rlimits and an
 * unprivileged uid, entered after the plan is checked and before any thread
 * starts. The calling process stays outside as a small supervisor (it
 * forwards signals, waits and removes the cgroup); it starts two children
 * in a new pid namespace: pid 1, the namespace's init (jail_init, sharing
 * its memory), and pid 2, the VMM, which sets the jail up for itself. The
 * paths it holds are named in jail_paths.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/sched.h>
#include <net/if.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "confine.h"
#include "jail.h"
#include "log.h"
#include "plan.h"
#include "vm.h"

/*
 * A jail that keeps the host's network (a tap) keeps a few capabilities
 * until the VM is sealed: making the tap (TUNSETIFF), loading its eBPF
 * policy and attaching it (clsact) need CAP_NET_ADMIN, CAP_BPF and
 * CAP_PERFMON (the verifier checks a program loaded with it as root's) in
 * the host's namespaces, so that jail has no user namespace of its own;
 * opening /dev/net/tun needs CAP_DAC_OVERRIDE too on a host without udev
 * (the node stays root's 0600 there). The VMM runs as the jail's uid from
 * the start, its saved uid still 0 and only those capabilities in its
 * permitted and bounding sets; jail_seal then sets every id to the jail's
 * uid, in every thread (glibc runs setresuid in each), and the kernel
 * clears every capability: before the guest's first instruction. The maps
 * stay reachable through their fds (Linux 5.19 and later allow map calls
 * on an fd without CAP_BPF).
 */
static struct {
	bool pending;
	uid_t uid;
} seal_state;

static uint64_t keep_caps(void)
{
	/* before Linux 5.8 CAP_SYS_ADMIN stood for CAP_BPF and CAP_PERFMON
	 * (which the verifier wants to let the program spill pointers, as it
	 * does for root) */
	bool bpf = prctl(PR_CAPBSET_READ, CAP_BPF, 0, 0, 0) >= 0;
	uint64_t caps = (1ull << CAP_NET_ADMIN) |
			(bpf ? (1ull << CAP_BPF) | (1ull << CAP_PERFMON) : 1ull << CAP_SYS_ADMIN);
	struct stat st;

	/* udev makes /dev/net/tun 0666; without udev it stays root's 0600 */
	if (!stat("/dev/net/tun", &st) && (st.st_mode & 0006) != 0006)
		caps |= 1ull << CAP_DAC_OVERRIDE;
	return caps;
}

static int caps_set(uint64_t caps)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	d[0].effective = d[0].permitted = (uint32_t)caps;
	d[1].effective = d[1].permitted = (uint32_t)(caps >> 32);
	return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

/* The calling thread's effective and permitted capabilities, or-ed. */
static int caps_held(uint64_t *caps)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	*caps = (d[0].effective | d[0].permitted) |
		((uint64_t)(d[1].effective | d[1].permitted) << 32);
	return 0;
}

/* Keep only @keep in the bounding set (as root, before the uid changes). */
static int bound_caps(uint64_t keep)
{
	for (int c = 0; c < 64 && prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (!(keep & (1ull << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			return -errno;
	return 0;
}

bool jail_seal_pending(uid_t *uid)
{
	if (seal_state.pending && uid)
		*uid = seal_state.uid;
	return seal_state.pending;
}

int jail_seal(char *err, size_t errlen)
{
	uid_t u = seal_state.uid;
	uint64_t caps = 0;
	int ret;

	if (!seal_state.pending)
		return 0;
	if (setresuid(u, u, u) < 0)
		return errf(err, errlen, -errno, "jail: dropping the tap's capabilities (setresuid %u): %s",
			    (unsigned)u, strerror(errno));
	if ((ret = caps_held(&caps)) || caps)
		return errf(err, errlen, ret ? ret : -EPERM,
			    "jail: capabilities %#llx still held after setresuid %u",
			    (unsigned long long)caps, (unsigned)u);
	seal_state.pending = false;
	log_info("jail: the tap is set up; every id is now %u, no capability is left", (unsigned)u);
	return 0;
}

/* mkdir -p @path, new folders owned by uid:gid. */
static int mkdirs(const char *path, uid_t uid, gid_t gid)
{
	char p[PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, path, n + 1);
	for (char *s = p + 1;; s++) {
		if (*s == '/' || !*s) {
			char c = *s;

			*s = '\0';
			if (mkdir(p, 0755) == 0) {
				if (chown(p, uid, gid) < 0)
					return -errno;
			} else if (errno != EEXIST) {
				return -errno;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;
	size_t n = strlen(text);
	ssize_t w;

	if (fd < 0)
		return -errno;
	w = write(fd, text, n);
	if (w != (ssize_t)n)
		ret = w < 0 ? -errno : -EIO;
	close(fd);
	return ret;
}

/* Whether the controller list @list (cgroup.controllers' form) has @name. */
static bool has_controller(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
			return true;
	return false;
}

/* The cgroup folder @dir's own cgroup.@name into @buf ("" if unread). */
static void read_cgroup_file(const char *dir, const char *name, char *buf, size_t len)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/cgroup.%s", dir, name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

/*
 * Enable the controllers the jail's limits use (cpu, memory, pids, io) for
 * @dir's children: those @dir has and has not enabled yet. Read first: a
 * write to cgroup.subtree_control, one that changes nothing too, takes the
 * cgroup core's mutex (every jail's cgroup creation and removal takes it:
 * a busy serve's other starts and stops), and where v1 holds a controller
 * (a hybrid host) the write fails on every start. Four reads instead of
 * eight writes a start.
 */
static void enable_controllers(const char *dir)
{
	static const char *const ctls[] = { "cpu", "memory", "pids", "io" };
	char have[512], can[512], p[PATH_MAX], plus[16];

	read_cgroup_file(dir, "subtree_control", have, sizeof(have));
	read_cgroup_file(dir, "controllers", can, sizeof(can));
	snprintf(p, sizeof(p), "%s/cgroup.subtree_control", dir);
	for (unsigned i = 0; i < sizeof(ctls) / sizeof(*ctls); i++)
		if (has_controller(can, ctls[i]) && !has_controller(have, ctls[i])) {
			snprintf(plus, sizeof(plus), "+%s", ctls[i]);
			write_file(p, plus);
		}
}

/* The calling child joins the cgroup @cg unless it was @born there
 * (jail_fork): 0 or -errno. */
static int join_cgroup(const char *cg, bool born)
{
	char p[PATH_MAX];

	if (born)
		return 0;
	snprintf(p, sizeof(p), "%s/cgroup.procs", cg);
	return write_file(p, "0");
}

/* What the jailed process sees (--jail-probe, for tests): one line. */
static void probe(const struct jail_cfg *j)
{
	char roots[512] = "", procs[256] = "", ifs[256] = "";
	struct if_nameindex *ni;
	struct statvfs sv;
	struct dirent *e;
	DIR *d;
	unsigned n = 0, n_ro = 0, ro = 0;

	if ((d = opendir("/"))) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				snprintf(roots + strlen(roots), sizeof(roots) - strlen(roots), " %s",
					 e->d_name);
		closedir(d);
	}
	if ((d = opendir("/proc"))) {
		while ((e = readdir(d)))
			if (e->d_name[0] >= '0' && e->d_name[0] <= '9') {
				n++;
				snprintf(procs + strlen(procs), sizeof(procs) - strlen(procs), " %s",
					 e->d_name);
			}
		closedir(d);
	}
	if ((ni = if_nameindex())) {
		for (struct if_nameindex *i = ni; i->if_index; i++)
			snprintf(ifs + strlen(ifs), sizeof(ifs) - strlen(ifs), " %s", i->if_name);
		if_freenameindex(ni);
	}
	for (unsigned i = 0; i < j->n_paths; i++)
		if (j->read_only[i]) {
			n_ro++;
			ro += !statvfs(j->paths[i], &sv) && (sv.f_flag & ST_RDONLY);
		}
	log_info("jail probe: pid %d uid %u gid %u; / holds:%s; %u processes:%s; network interfaces:%s; read-only binds: %u of %u",
		 (int)getpid(), (unsigned)getuid(), (unsigned)getgid(), roots, n, procs, ifs, ro, n_ro);
}

/* The signals the supervisor forwards to the VMM (and SIGCHLD): blocked,
 * waited for with sigwaitinfo. */
static void jail_sigs(sigset_t *s)
{
	sigemptyset(s);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGHUP);
	sigaddset(s, SIGCHLD);
}

/* Close fds @from to @to (~0u: every one from @from up). */
static void close_fds(unsigned from, unsigned to)
{
	if (from > to || syscall(SYS_close_range, from, to, 0) == 0)
		return;
	for (unsigned fd = from; fd <= to && fd < 1024; fd++)
		close((int)fd);
}

/*
 * pid 1 of the jail's namespace. The kernel gives a namespace's init only
 * the signals it has handlers for, from inside and from outside alike, so
 * a VMM there would ignore a SIGABRT sent to it and could not die of its
 * own abort(): the VMM is pid 2, with the usual signal semantics, and pid
 * 1 is this small init. It is a CLONE_VM child of the supervisor, on a
 * stack of its own: a process of its own (its own pid, fds, credentials,
 * seccomp filter) that shares the supervisor's memory instead of copying
 * it, so a jailed start pays one copy of the supervisor's address space
 * (the VMM's) and not two; with no thread-local storage of its own it
 * calls no libc function, only the kernel (arch_raw_syscall). It closes
 * every fd, waits for its seccomp filter (compiled by the supervisor
 * beside the VMM's setup, handed over through @go), loads it (waiting and
 * reaping only: anything else ends the process), then reaps whatever is
 * orphaned in the namespace until the supervisor kills it after the VMM,
 * or dies with the supervisor (PR_SET_PDEATHSIG); the kernel then ends
 * what is left in the namespace. It stays root: the VMM, another uid,
 * cannot trace it or signal it.
 */
struct jail_init_arg {
	int go;                  /* read end of a pipe: a byte once prog is set */
	struct sock_fprog prog;  /* its seccomp filter; len 0: none could be made */
	volatile long loaded;    /* what the init's seccomp(2) answered */
};

static char jail_init_stack[64 << 10] __attribute__((aligned(16)));

#define RAW(nr, a, b, c, d, e) \
	arch_raw_syscall((nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

static __attribute__((no_sanitize("address", "undefined"))) int jail_init(void *arg)
{
	struct jail_init_arg *ia = arg;
	uint64_t all = ~0ull, chld = 1ull << (SIGCHLD - 1); /* the kernel's sigset_t */
	siginfo_t si;
	char b;

	RAW(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	RAW(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, sizeof(all), 0);
	if (ia->go > 0)
		RAW(SYS_close_range, 0, ia->go - 1, 0, 0, 0);
	RAW(SYS_close_range, ia->go + 1, ~0u, 0, 0, 0);
	while (RAW(SYS_read, ia->go, &b, 1, 0, 0) == -EINTR)
		;
	RAW(SYS_close, ia->go, 0, 0, 0, 0);
	RAW(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	ia->loaded = ia->prog.len ? RAW(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &ia->prog, 0, 0)
				  : -ENOSYS;
	for (;;)
		if (RAW(SYS_rt_sigtimedwait, &chld, &si, NULL, sizeof(chld), 0) == SIGCHLD)
			while (RAW(SYS_wait4, -1, NULL, WNOHANG | __WALL, NULL, 0) > 0)
				;
	return 0;
}

/* The init's filter, into @ia: what jail_init calls after loading it (and
 * the kernel's restart of an interrupted wait). Left empty (the init then
 * runs without one, and the supervisor says so) if it cannot be made. */
static void jail_init_filter(struct jail_init_arg *ia)
{
	static const char *const ok[] = { "rt_sigtimedwait", "wait4", "restart_syscall",
					   "exit", "exit_group" };
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	struct sock_filter *prog;
	unsigned short n;
	int ret = ctx ? 0 : -ENOMEM;

	for (unsigned i = 0; !ret && i < sizeof(ok) / sizeof(*ok); i++)
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name(ok[i]), 0);
	if (!ret && !(ret = confine_export(ctx, &prog, &n))) {
		ia->prog.filter = prog;
		ia->prog.len = n;
	}
	seccomp_release(ctx);
}

/*
 * The jail's network namespace, made by the supervisor beside the child's
 * mounts (a new one costs 0.3-0.45 ms of the kernel's setup of every
 * network subsystem, on a host with two CPUs the other one's time): the
 * supervisor unshares it for itself, says so on a pipe, and the child
 * joins it through the host's /proc before the pivot hides that. The
 * supervisor uses no network; the namespace is owned by the host's user
 * namespace as one the child unshared would be.
 */
struct net_handoff {
	int fd;      /* the pipe's read end, in the child; -1: none */
	pid_t owner; /* the supervisor, as the host's /proc numbers it */
};

/* The supervisor's half: 0, or a positive errno, on the pipe. */
static void net_give(int wfd)
{
	int e = unshare(CLONE_NEWNET) < 0 ? errno : 0;

	if (write(wfd, &e, sizeof(e)) != sizeof(e))
		log_debug("jail: the network namespace's pipe: %s", strerror(errno));
	close(wfd);
}

/* The child's half: wait for the supervisor's namespace and enter it. */
static int net_take(struct net_handoff *h, char *err, size_t errlen)
{
	uint64_t t0 = clock_since_start_us();
	char path[64];
	int e = EPIPE, fd;
	ssize_t n;

	do
		n = read(h->fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	log_debug("jail: waited %llu us for the network namespace",
		  (unsigned long long)(clock_since_start_us() - t0));
	close(h->fd);
	h->fd = -1;
	if (n != sizeof(e))
		e = EPIPE; /* the supervisor died before it said */
	if (e)
		return errf(err, errlen, -e, "jail: a network namespace: %s", strerror(e));
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)h->owner);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		e = errno;
		if (fd >= 0)
			close(fd);
		return errf(err, errlen, -e, "jail: entering the network namespace (%s): %s", path,
			    strerror(e));
	}
	close(fd);
	return 0;
}

/* The child: everything after the fork. 0, or -errno after a message. */
static int jail_child(struct jail_cfg *j, const char *cg, bool born_in_cg, struct net_handoff *net,
		      char *err, size_t errlen)
{
	static const char *const devs[] = { "/dev/null", "/dev/zero", "/dev/urandom",
					     "/dev/random", "/dev/net/tun" };
	char cwd[PATH_MAX], map[64];
	uint64_t keep;
	struct rlimit rl;
	int ret, root;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* No fd but stdin, stdout and stderr crosses into the jail (the
	 * network namespace's pipe is closed before the pivot). */
	if (net->fd >= 3) {
		close_fds(3, (unsigned)net->fd - 1);
		close_fds((unsigned)net->fd + 1, ~0u);
	} else {
		close_fds(3, ~0u);
	}
	/* KVM, opened while root and the host's /dev is there: the jail
	 * holds no /dev/kvm. */
	if ((ret = vm_kvm_preopen(err, errlen)))
		return ret;
	if ((ret = join_cgroup(cg, born_in_cg)))
		return errf(err, errlen, ret, "jail: joining the cgroup %s: %s", cg, strerror(-ret));
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
		    (j->new_net && net->fd < 0 ? CLONE_NEWNET : 0)) < 0)
		return errf(err, errlen, -errno, "jail: unshare: %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount(j->dir, j->dir, NULL, MS_BIND | MS_REC, NULL) < 0)
		return errf(err, errlen, -errno, "jail: mounts: %s", strerror(errno));
	/* the folder as the bind made it: everything below is made from here,
	 * following no link (jail_root.c) */
	if ((root = open(j->dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return errf(err, errlen, -errno, "jail: %s: %s", j->dir, strerror(errno));
	ret = 0;
	for (unsigned i = 0; !ret && i < j->n_paths; i++)
		ret = jail_bind(root, j->dir, j->paths[i], j->skip && !strcmp(j->paths[i], j->skip),
				j->read_only[i], j->uid, j->gid, j->untrusted[i] ? j : NULL, err,
				errlen);
	/* (the last, the tun device, for a tap's jail only) */
	for (unsigned i = 0; !ret && i < sizeof(devs) / sizeof(*devs) - j->new_net; i++)
		ret = jail_bind(root, j->dir, devs[i], false, false, 0, 0, NULL, err, errlen);
	if (!ret)
		ret = jail_mount_proc(root, j->dir, err, errlen);
	if (!ret)
		ret = jail_make_dir(root, j->dir, cwd, j->uid, j->gid, err, errlen);
	close(root);
	if (ret)
		return ret;
	/* beside the supervisor's network namespace: work the child would
	 * otherwise wait through, or that would come before the fork */
	if (j->before_pivot)
		j->before_pivot(j->before_pivot_arg);
	if (net->fd >= 0 && (ret = net_take(net, err, errlen)))
		return ret;
	/*
	 * The old root stacked on the new one, then detached (pivot_root(2),
	 * new_root and put_old the same): no folder for it to make in DIR and
	 * remove again (a mkdir there took 0.1-1 ms of a jailed start).
	 */
	if (chdir(j->dir) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return errf(err, errlen, -errno, "jail: pivot_root into %s: %s", j->dir,
			    strerror(errno));
	if (chdir(cwd) < 0)
		return errf(err, errlen, -errno, "jail: chdir %s: %s", cwd, strerror(errno));
	if (sethostname("cubicle-jail", 12) < 0)
		log_warn("jail: sethostname: %s", strerror(errno));
	rl.rlim_cur = rl.rlim_max = j->nofile ? j->nofile : 4096;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return errf(err, errlen, -errno, "jail: RLIMIT_NOFILE %llu: %s",
			    (unsigned long long)rl.rlim_cur, strerror(errno));
	if (j->fsize) {
		rl.rlim_cur = rl.rlim_max = j->fsize;
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			return errf(err, errlen, -errno, "jail: RLIMIT_FSIZE: %s", strerror(errno));
	}
	keep = j->new_net ? 0 : keep_caps();
	if (keep && (ret = bound_caps(keep)))
		return errf(err, errlen, ret, "jail: the capability bounding set: %s",
			    strerror(-ret));
	/* a tap's jail keeps saved uid 0 until jail_seal, see seal_state */
	if (setgroups(0, NULL) < 0 || setresgid(j->gid, j->gid, j->gid) < 0 ||
	    setresuid(j->uid, j->uid, j->new_net ? j->uid : 0) < 0)
		return errf(err, errlen, -errno, "jail: dropping to uid %u gid %u: %s",
			    (unsigned)j->uid, (unsigned)j->gid, strerror(errno));
	if (getuid() != j->uid || geteuid() != j->uid)
		return errf(err, errlen, -EPERM, "jail: still uid %u after setresuid",
			    (unsigned)geteuid());
	if (!j->new_net) {
		if ((ret = caps_set(keep)))
			return errf(err, errlen, ret, "jail: keeping the tap's capabilities (%#llx): %s",
				    (unsigned long long)keep,
				    strerror(-ret));
		seal_state.pending = true;
		seal_state.uid = j->uid;
		log_debug("jail: the host's network namespace (a tap): no user namespace; capabilities %#llx kept until the VM is sealed",
			  (unsigned long long)keep);
	} else if (unshare(CLONE_NEWUSER) == 0) {
		/*
		 * A user namespace of its own: the uid maps to itself only.
		 * The drop from root left the process undumpable, so its
		 * /proc/self files belong to root and newer kernels (6.18)
		 * refuse to open the maps for writing (EACCES); dumpable for
		 * the three writes only, before any guest code exists.
		 */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		if ((ret = write_file("/proc/self/setgroups", "deny")) ||
		    (snprintf(map, sizeof(map), "%u %u 1", (unsigned)j->uid, (unsigned)j->uid),
		     (ret = write_file("/proc/self/uid_map", map))) ||
		    (snprintf(map, sizeof(map), "%u %u 1", (unsigned)j->gid, (unsigned)j->gid),
		     (ret = write_file("/proc/self/gid_map", map))))
			return errf(err, errlen, ret, "jail: writing the user namespace's maps: %s",
				    strerror(-ret));
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	} else {
		log_warn("jail: no user namespace (%s): this kernel refuses unprivileged ones",
			 strerror(errno));
	}
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	log_info("jailed in %s as uid %u gid %u, cgroup %s", j->dir, (unsigned)j->uid,
		 (unsigned)j->gid, cg);
	if (j->probe)
		probe(j);
	return 0;
}

/*
 * The VMM's process, born in the cgroup @cg (clone3's CLONE_INTO_CGROUP,
 * Linux 5.7; *@born true) so that it never migrates: a write to
 * cgroup.procs takes the cgroup core's write lock, which waits for an RCU
 * grace period (~10 ms a start on a 6.18 host). A raw clone3 runs no fork
 * handlers, registers no robust-futex list and leaves glibc's cached thread
 * id of the main thread the parent's (glibc's fork sets both anew): sound
 * while the process has one thread (checked: no lock is held across it) and
 * for what the VMM's main thread does with that id, which is nothing: it
 * takes no robust or priority-inheriting mutex, nothing signals it by its
 * pthread_t (glibc's raise and abort ask the kernel for the id), and every
 * thread it starts gets its own id from the kernel. Else, or on a kernel
 * without it: fork, and the child joins by itself.
 */
static pid_t jail_fork(const char *cg, bool *born)
{
	struct clone_args ca = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD };
	int fd = __libc_single_threaded ? open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	long pid;
	int e;

	*born = false;
	if (fd >= 0) {
		ca.cgroup = (uint64_t)fd;
		pid = syscall(SYS_clone3, &ca, sizeof(ca));
		e = errno;
		close(fd);
		if (pid >= 0) {
			*born = true;
			return (pid_t)pid;
		}
		log_debug("jail: clone3 into the cgroup: %s; fork", strerror(e));
	} else {
		log_debug("jail: %s; fork",
			  __libc_single_threaded ? "cannot open the cgroup" : "threads exist");
	}
	return fork();
}

/*
 * The supervisor's next children in its own pid namespace again, not in
 * the jail's (unshare(CLONE_NEWPID) set that for them): what it may start
 * later, a sanitizer's leak check at exit, could not be started there once
 * the jail's init is gone. /proc/self/ns/pid is the namespace it is in.
 */
static void own_pid_ns(void)
{
	int fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || setns(fd, CLONE_NEWPID) < 0)
		log_debug("jail: back to the supervisor's pid namespace: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

/*
 * The supervisor: hand the init its filter, forward SIGINT, SIGTERM and
 * SIGHUP to the VMM, wait for it, end the init (and with it whatever the
 * VMM left in the namespace), remove the cgroup, exit as the VMM did (128 +
 * the signal that ended it, as a shell gives it). The signals are blocked.
 */
static void supervise(pid_t vmm, pid_t init, struct jail_init_arg *ia, int go, const char *cg)
{
	bool init_gone = false;
	int status = 0, code = -1;
	siginfo_t si;
	sigset_t s;

	jail_init_filter(ia);
	if (write(go, "", 1) != 1)
		log_debug("jail: the init's pipe: %s", strerror(errno));
	close(go);
	jail_sigs(&s);
	while (code < 0) {
		int sig = sigwaitinfo(&s, &si);
		pid_t w;

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
	if (ia->loaded)
		log_warn("jail: the namespace's init ran without its seccomp filter (%s)",
			 strerror((int)-ia->loaded));
	/* The cgroup empties as the pid namespace's last tasks are reaped. */
	for (int i = 0; i < 200 && rmdir(cg) < 0 && errno == EBUSY; i++)
		usleep(10000);
	if (access(cg, F_OK) == 0)
		log_warn("jail: cannot remove the cgroup %s: %s", cg, strerror(errno));
	else
		log_debug("jail: cgroup %s removed", cg);
	exit(code);
}

int jail_enter(struct jail_cfg *j, char *err, size_t errlen)
{
	/* cgroup v2 alone, or beside v1 at unified/ (a hybrid host) */
	const char *base = j->cgroup ? j->cgroup
			   : access("/sys/fs/cgroup/cgroup.controllers", F_OK) &&
					   !access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK)
				   ? "/sys/fs/cgroup/unified/cubicle"
				   : "/sys/fs/cgroup/cubicle";
	const struct { const char *file, *val; } lim[] = {
		{ "cpu.max", j->cpu_max }, { "memory.max", j->memory_max },
		{ "pids.max", j->pids_max }, { "io.max", j->io_max },
	};
	char cg[PATH_MAX], p[PATH_MAX], top[PATH_MAX], *slash;
	static struct jail_init_arg ia; /* the init reads it: not on this stack */
	struct net_handoff net = { .fd = -1 };
	int pipefd[2], gop[2];
	struct stat st;
	bool born;
	sigset_t s;
	pid_t init, pid;
	int ret;

	if (geteuid() != 0)
		return errf(err, errlen, -EPERM,
			    "--jail needs root: it makes namespaces and a cgroup, then drops to the jail's uid");
	if ((ret = mkdirs(j->dir, 0, 0)) || stat(j->dir, &st) < 0)
		return errf(err, errlen, ret ? ret : -errno, "--jail %s: %s", j->dir,
			    strerror(ret ? -ret : errno));
	if (!j->have_uid)
		j->uid = st.st_uid;
	if (!j->have_gid)
		j->gid = st.st_gid;
	if (j->uid == 0 || j->gid == 0)
		return errf(err, errlen, -EINVAL,
			    "--jail %s: the jail would run as root (uid %u gid %u): chown the folder to the uid and gid cubicle should run as, or pass --jail-uid and --jail-gid",
			    j->dir, (unsigned)j->uid, (unsigned)j->gid);
	if ((ret = jail_check_untrusted(j, err, errlen)))
		return ret;
	/* The cgroup: BASE/vm-PID, with the controllers the limits need. */
	snprintf(top, sizeof(top), "%s", base);
	slash = strrchr(top, '/');
	if (slash)
		*slash = '\0';
	snprintf(p, sizeof(p), "%s/cgroup.controllers", top);
	if (access(p, F_OK) < 0)
		return errf(err, errlen, -ENOTSUP,
			    "--jail: %s is not in a cgroup v2 hierarchy (mount -t cgroup2 none /sys/fs/cgroup, or name another folder with --jail-cgroup)",
			    top);
	if ((ret = mkdirs(base, 0, 0)))
		return errf(err, errlen, ret, "--jail: cgroup %s: %s", base, strerror(-ret));
	/* best effort: a limit whose controller is missing says so */
	enable_controllers(top);
	enable_controllers(base);
	snprintf(cg, sizeof(cg), "%s/vm-%d", base, (int)getpid());
	if (mkdir(cg, 0755) < 0)
		return errf(err, errlen, -errno, "--jail: cgroup %s: %s", cg, strerror(errno));
	for (unsigned i = 0; i < sizeof(lim) / sizeof(*lim); i++) {
		if (!lim[i].val)
			continue;
		snprintf(p, sizeof(p), "%s/%s", cg, lim[i].file);
		if ((ret = write_file(p, lim[i].val))) {
			rmdir(cg);
			return errf(err, errlen, ret, "--jail: %s = \"%s\": %s%s", p, lim[i].val,
				    strerror(-ret),
				    ret == -ENOENT ? " (the controller is not enabled for this cgroup)" : "");
		}
	}
	/* The network namespace, made by the supervisor (see net_handoff);
	 * without the pipe the child unshares its own. */
	if (j->new_net && pipe2(pipefd, O_CLOEXEC) == 0) {
		net.fd = pipefd[0];
		net.owner = getpid();
	}
	/* A new pid namespace for the children: the first, pid 1, is its
	 * init (sharing this process's memory, not in the cgroup); the
	 * second, pid 2, the VMM. */
	if (pipe2(gop, O_CLOEXEC) < 0) {
		ret = errf(err, errlen, -errno, "--jail: pipe: %s", strerror(errno));
		goto undo_net;
	}
	ia.go = gop[0];
	jail_sigs(&s);
	sigprocmask(SIG_BLOCK, &s, NULL);
	fflush(NULL);
	init = unshare(CLONE_NEWPID) < 0 ? -1
	       : clone(jail_init, jail_init_stack + sizeof(jail_init_stack), CLONE_VM | SIGCHLD, &ia);
	pid = init < 0 ? -1 : jail_fork(cg, &born);
	ret = pid < 0 ? -errno : 0;
	if (pid != 0)
		own_pid_ns();
	if (pid < 0) {
		ret = errf(err, errlen, ret, "--jail: a process in a new pid namespace: %s",
			   strerror(-ret));
		if (init > 0) {
			kill(init, SIGKILL);
			waitpid(init, NULL, __WALL);
		}
		close(gop[0]);
		close(gop[1]);
		sigprocmask(SIG_UNBLOCK, &s, NULL);
		goto undo_net;
	}
	if (pid > 0) {
		close(gop[0]);
		if (net.fd >= 0) {
			close(pipefd[0]);
			net_give(pipefd[1]);
		}
		supervise(pid, init, &ia, gop[1], cg); /* never returns */
	}
	close(gop[0]);
	close(gop[1]);
	if (net.fd >= 0)
		close(pipefd[1]);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	ret = jail_child(j, cg, born, &net, err, errlen);
	if (ret) {
		log_err("%s", err);
		_exit(VM_EXIT_ERROR);
	}
	return 0;
undo_net:
	if (net.fd >= 0) {
		close(pipefd[0]);
		close(pipefd[1]);
	}
	rmdir(cg);
	return ret;
}
