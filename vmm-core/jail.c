/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail: namespaces, a root of bind mounts, a cgroup, rlimits and an
 * unprivileged uid, entered after the plan is checked and before any thread
 * starts. The processes it takes (the namespace's init, the VMM keeping the
 * caller's memory, the supervisor outside) are jail_proc.c's; the paths the
 * jail holds are named in jail_paths.c and made in jail_root.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"
#include "jail_proc.h"
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
	int exec_fd;                  /* jail_alone's, until jail_seal; -1: none */
	struct jail_init_arg *ia;
} seal_state = { .exec_fd = -1 };

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
	int ret, fd = seal_state.exec_fd;

	seal_state.exec_fd = -1;
	if (fd >= 0 && (ret = jail_alone(fd, seal_state.ia, err, errlen)))
		return ret;
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

/* mkdir -p @path (the cgroup's, in root's cgroup file system). */
static int mkdirs(const char *path)
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
			if (mkdir(p, 0755) < 0 && errno != EEXIST)
				return -errno;
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

/*
 * The jail folder @j->dir (made if missing, root's 0755), on a path only
 * root can change: every folder above it root's and writable by no one
 * else, and the one that holds it not even sticky (the jail's uid owns
 * the folder: in a sticky /tmp it could rename it and put a link, to any
 * host folder, in its place between this check and the bind). Its owner
 * into @st. A relative @j->dir is made absolute here (from the working
 * folder): everything after names it by this path, which only root can
 * change. 0, or -errno after a message.
 */
static int jail_dir(struct jail_cfg *j, struct stat *st, char *err, size_t errlen)
{
	static char abs_dir[PATH_MAX];
	char cwd[PATH_MAX];
	int fd, ret;

	if (j->dir[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)) ||
		    snprintf(abs_dir, sizeof(abs_dir), "%s/%s", cwd, j->dir) >= (int)sizeof(abs_dir))
			return errf(err, errlen, -ENAMETOOLONG, "--jail %s: %s", j->dir,
				    strerror(ENAMETOOLONG));
		j->dir = abs_dir;
	}
	fd = jail_open_root_path(j->dir, O_PATH, true, 0755, true, "--jail", "jail folder", err,
				 errlen);
	if (fd < 0) /* (-ENOENT: made when missing; a folder above it gone meanwhile) */
		return fd == -ENOENT ? errf(err, errlen, fd, "--jail %s: %s", j->dir, strerror(ENOENT))
				     : fd;
	ret = fstat(fd, st) < 0 ? -errno : 0;
	close(fd);
	return ret ? errf(err, errlen, ret, "--jail %s: %s", j->dir, strerror(-ret)) : 0;
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

/* The calling child, and the namespace's init (@init), join the cgroup
 * @cg unless they were @born there (jail_clone_vmm): 0 or -errno. */
static int join_cgroup(const char *cg, bool born, pid_t init)
{
	char p[PATH_MAX], pid[16];
	int ret;

	if (born)
		return 0;
	snprintf(p, sizeof(p), "%s/cgroup.procs", cg);
	snprintf(pid, sizeof(pid), "%d", (int)init);
	if ((ret = write_file(p, pid)))
		return ret;
	return write_file(p, "0");
}

/* What the jailed process sees (--jail-probe, for tests): one line. */
static void probe(const struct jail_cfg *j)
{
	char roots[512] = "", procs[256] = "", ifs[256] = "";
	struct if_nameindex *ni;
	struct statvfs sv;
	struct stat ns;
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
	if (stat("/proc/self/ns/net", &ns) < 0)
		ns.st_ino = 0;
	log_info("jail probe: pid %d uid %u gid %u; / holds:%s; %u processes:%s; network interfaces:%s; read-only binds: %u of %u; network namespace %llu",
		 (int)getpid(), (unsigned)getuid(), (unsigned)getgid(), roots, n, procs, ifs, ro, n_ro,
		 (unsigned long long)ns.st_ino);
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
 * The jail's network namespace, made by the caller beside the child's
 * mounts (a new one costs 0.3-0.45 ms of the kernel's setup of every
 * network subsystem, on a host with two CPUs the other one's time): on
 * its way to becoming the supervisor (jail_handoff) it unshares one for
 * itself, says so on a pipe, and the child joins it through the host's
 * /proc before the pivot hides that. The supervisor uses no network; the
 * namespace is owned by the host's user namespace as one the child
 * unshared would be. With --jail-netns-pool, one made ahead is taken
 * instead (jail_netns.c) and the child joins it at once.
 */
struct net_handoff {
	int fd;      /* the pipe's read end, or the pool's namespace, in the child; -1: none */
	bool pooled; /* @fd is the pool's namespace */
	pid_t owner; /* the supervisor, as the host's /proc numbers it */
};

/* The child's half: wait for the supervisor's namespace and enter it. */
static int net_take(struct net_handoff *h, char *err, size_t errlen)
{
	uint64_t t0 = clock_since_start_us();
	char path[64];
	int e = EPIPE, fd;
	ssize_t n;

	if (h->pooled) {
		e = setns(h->fd, CLONE_NEWNET) < 0 ? errno : 0;
		close(h->fd);
		h->fd = -1;
		if (e)
			return errf(err, errlen, -e, "jail: entering the pool's network namespace: %s",
				    strerror(e));
		return 0;
	}
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

/* Close every fd from 3 up but @keep_a and @keep_b (-1: none). */
static void close_fds_but(int keep_a, int keep_b)
{
	int lo = keep_a < keep_b ? keep_a : keep_b, hi = keep_a < keep_b ? keep_b : keep_a;
	unsigned from = 3;

	if (lo >= 3) {
		close_fds(from, (unsigned)lo - 1);
		from = (unsigned)lo + 1;
	}
	if (hi >= 3 && hi != lo) {
		close_fds(from, (unsigned)hi - 1);
		from = (unsigned)hi + 1;
	}
	close_fds(from, ~0u);
}

/* The VMM's process: everything after the split. 0, or -errno after a message. */
static int jail_child(struct jail_cfg *j, const char *cg, bool born_in_cg, pid_t init,
		      struct net_handoff *net, int exec_fd, struct jail_init_arg *ia, char *err,
		      size_t errlen)
{
	static const char *const devs[] = { "/dev/null", "/dev/zero", "/dev/urandom",
					     "/dev/random", "/dev/net/tun" };
	char cwd[PATH_MAX], map[64];
	uint64_t keep;
	struct rlimit rl;
	int ret, root, cwd_fd = -1;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* No fd but stdin, stdout and stderr crosses into the jail (the
	 * network namespace's pipe and @exec_fd are closed before the pivot). */
	close_fds_but(net->fd, exec_fd);
	/* KVM, opened while root and the host's /dev is there: the jail
	 * holds no /dev/kvm. */
	if ((ret = vm_kvm_preopen(err, errlen)))
		return ret;
	if ((ret = join_cgroup(cg, born_in_cg, init)))
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
				j->read_only[i], j->uid, j->gid, j, j->untrusted[i], err, errlen);
	/* (the last, the tun device, for a tap's jail only) */
	for (unsigned i = 0; !ret && i < sizeof(devs) / sizeof(*devs) - j->new_net; i++)
		ret = jail_bind(root, j->dir, devs[i], false, false, 0, 0, NULL, false, err, errlen);
	if (!ret)
		ret = jail_mount_proc(root, j->dir, err, errlen);
	/* the working folder, held as the fd checked there: by its name after
	 * the pivot, a folder the jail's uid owns on the way could have been
	 * swapped for a link (to /proc/1/root, the host's) while this process
	 * is still root */
	if (!ret && (cwd_fd = jail_make_dir(root, j->dir, cwd, j->uid, j->gid, err, errlen)) < 0)
		ret = cwd_fd;
	if (ret) {
		close(root);
		return ret;
	}
	/* beside the caller's making of the network namespace: work the
	 * child would otherwise wait through, or that would come before the
	 * split */
	if (j->before_pivot)
		j->before_pivot(j->before_pivot_arg);
	if (net->fd >= 0 && (ret = net_take(net, err, errlen)))
		return ret;
	/* checked before the guest's first instruction (jail_seal), by when
	 * the caller's exec is long done */
	seal_state.exec_fd = exec_fd;
	seal_state.ia = ia;
	/*
	 * The old root stacked on the new one, then detached (pivot_root(2),
	 * new_root and put_old the same): no folder for it to make in DIR and
	 * remove again (a mkdir there took 0.1-1 ms of a jailed start).
	 */
	ret = fchdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
			      umount2(".", MNT_DETACH) < 0 || chdir("/") < 0 ? -errno : 0;
	close(root);
	if (ret) {
		close(cwd_fd);
		return errf(err, errlen, ret, "jail: pivot_root into %s: %s", j->dir,
			    strerror(-ret));
	}
	ret = fchdir(cwd_fd) < 0 ? -errno : 0;
	close(cwd_fd);
	if (ret)
		return errf(err, errlen, ret, "jail: chdir %s: %s", cwd, strerror(-ret));
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
	/* the init and the caller's last steps read these: not on this stack */
	static struct jail_init_arg ia;
	static struct jail_handoff h;
	struct net_handoff net = { .fd = -1 };
	struct jail_netns pool;
	int pipefd[2], execp[2];
	struct stat st;
	bool born;
	sigset_t s, old;
	long init, pid;
	int ret, cgfd = -1;

	if (geteuid() != 0)
		return errf(err, errlen, -EPERM,
			    "--jail needs root: it makes namespaces and a cgroup, then drops to the jail's uid");
	if ((ret = jail_dir(j, &st, err, errlen)))
		return ret;
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
	if ((ret = mkdirs(base)))
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
	/* The network namespace: the pool's, or made by the caller on its way
	 * to being the supervisor (see net_handoff); without the pipe the
	 * child unshares its own. */
	h.net_wfd = -1;
	h.pool_entry[0] = '\0';
	pool.ns = pool.dir = -1;
	if (j->new_net && j->netns_pool) {
		ret = jail_netns_take(j->netns_pool, &pool, err, errlen);
		if (ret && ret != -ENOENT) {
			rmdir(cg);
			return ret;
		}
		if (!ret) {
			log_debug("jail: the network namespace %s, from the pool", pool.path);
			net.fd = pool.ns;
			net.pooled = true;
			/* unmounted and removed by the caller before its exec */
			snprintf(h.pool_entry, sizeof(h.pool_entry), "%s", pool.entry);
		} else {
			log_debug("jail: the network namespace pool %s is empty", j->netns_pool);
		}
	}
	if (j->new_net && !net.pooled && pipe2(pipefd, O_CLOEXEC) == 0) {
		net.fd = pipefd[0];
		net.owner = getpid();
		h.net_wfd = pipefd[1];
	}
	ia.loaded = JAIL_INIT_PENDING;
	if ((ret = jail_init_filter(&ia))) {
		ret = errf(err, errlen, ret, "--jail: the seccomp filter of the namespace's init: %s",
			   strerror(-ret));
		goto undo_net;
	}
	/* The end of the caller's exec (jail_alone) and what it execs. */
	if (pipe2(execp, O_CLOEXEC) < 0) {
		ret = errf(err, errlen, -errno, "--jail: pipe: %s", strerror(errno));
		goto undo_net;
	}
	if ((ret = jail_handoff_prepare(&h, cg, j->new_net ? j->netns_pool : NULL,
					j->netns_pool_size, err, errlen)))
		goto undo_exec;
	/*
	 * A new pid namespace for the children, both born in the cgroup: the
	 * first, pid 1, is its init; the second, pid 2, the VMM. Every signal
	 * blocked across: a handler run in the init, or in the caller before
	 * it has left the VMM's stack, would write a frame where the other
	 * runs. The VMM gets the mask back; the supervisor sets its own.
	 */
	sigfillset(&s);
	sigprocmask(SIG_SETMASK, &s, &old);
	fflush(NULL);
	if (unshare(CLONE_NEWPID) < 0) {
		ret = errf(err, errlen, -errno, "--jail: a new pid namespace: %s", strerror(errno));
		goto undo_mask;
	}
	init = jail_spawn_init(cg, &ia, &cgfd);
	if (init < 0) {
		ret = errf(err, errlen, (int)init, "--jail: the pid namespace's init: %s",
			   init == -EBUSY ? "threads run (a bug: the jail comes before any thread)"
					  : strerror((int)-init));
		jail_own_pid_ns();
		goto undo_mask;
	}
	h.init = init;
	snprintf(h.init_s, sizeof(h.init_s), "%d", (int)init);
	born = cgfd >= 0;
	pid = jail_clone_vmm(cgfd, &h);
	if (cgfd >= 0)
		close(cgfd);
	if (pid < 0) {
		ret = errf(err, errlen, (int)pid, "--jail: the VMM's process: %s",
			   strerror((int)-pid));
		kill(init, SIGKILL);
		waitpid(init, NULL, __WALL);
		jail_own_pid_ns();
		goto undo_mask;
	}
	/* The VMM's process, pid 2; the caller is on its way to exec. */
	close(execp[1]);
	if (net.fd >= 0 && !net.pooled)
		close(pipefd[1]);
	sigprocmask(SIG_SETMASK, &old, NULL);
	ret = jail_child(j, cg, born, init, &net, execp[0], &ia, err, errlen);
	if (ret) {
		log_err("%s", err);
		_exit(VM_EXIT_ERROR);
	}
	return 0;
undo_mask:
	sigprocmask(SIG_SETMASK, &old, NULL);
	jail_handoff_free(&h);
undo_exec:
	close(execp[0]);
	close(execp[1]);
undo_net:
	if (net.pooled) {
		jail_netns_drop(&pool); /* nothing entered it: it stays in the pool */
	} else if (net.fd >= 0) {
		close(pipefd[0]);
		close(pipefd[1]);
	}
	free((void *)ia.prog.filter);
	ia.prog.filter = NULL;
	rmdir(cg);
	return ret;
}
